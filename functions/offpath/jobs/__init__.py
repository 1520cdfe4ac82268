"""Job types: one module per job type in this folder. Importing `load_job_types` registers them all."""

from __future__ import annotations

import importlib
import pkgutil

from offpath.domain.registry import REGISTRY, Registry


def load_job_types() -> Registry:
    """Import every module in this package once, so each `@job` decorator registers its type."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    return REGISTRY
