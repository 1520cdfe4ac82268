"""Job types: one module per job type in this folder. Importing `load_job_types` registers them all."""

from __future__ import annotations

import importlib
import pkgutil

from offpath.domain.registry import REGISTRY, JobType, Registry

# The demo job types (`demo.*`): deployed only when asked for (`OFFPATH_DEMO_JOBS`, the stack's
# `-c demo_jobs=true`, always on in the embedded runtime).
DEMO_MODULE = f"{__name__}.demo"


def load_job_types(*, demo: bool = False) -> Registry:
    """Import every module in this package once, so each `@job` decorator registers its type.

    `demo=False` answers a copy of the registry without the demo job types (and any schedule of them);
    `demo=True` answers the registry itself."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    if demo:
        return REGISTRY
    return REGISTRY.without(is_demo)


def is_demo(job_type: JobType) -> bool:
    return getattr(job_type.function, "__module__", None) == DEMO_MODULE
