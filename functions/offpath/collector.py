"""The cyclic garbage collector during a Lambda function's init: paused while the init runs, then frozen.

An init imports a few hundred modules and makes ~75,000 objects that live as long as the execution environment
(modules, classes, pydantic's schemas, botocore's service models) and hardly any garbage cycles. Left to its
thresholds, CPython's collector scans them again and again while they are made: measured on a worker's cold
start (python 3.11), ~150 young, ~13 middle and one full collection, ~80 ms of its ~500 ms; and every later full
collection scans them once more (~40 ms each, on warm invocations too). Reference counting, not this collector,
frees nearly everything an init throws away.

On Lambda (`AWS_LAMBDA_FUNCTION_NAME` is set), importing `offpath.handlers` pauses the collector; `settle()`, at
the end of each handler module's import and of its `default_services()` (`during_init`), moves every object that
exists into the permanent generation (`gc.freeze`: no collection scans them again) and starts the collector
again. The price: a garbage cycle made during the init is never collected (a few hundred objects, once per
environment). Outside Lambda (tests, the local runtime, synth) nothing is paused.
"""

from __future__ import annotations

import functools
import gc
import os
from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")

_paused = False


def pause(environ: Mapping[str, str] = os.environ) -> bool:
    """Stop automatic collection until `settle`, on Lambda only; True when it is paused."""
    global _paused
    if not _paused and environ.get("AWS_LAMBDA_FUNCTION_NAME") and gc.isenabled():
        gc.disable()
        _paused = True
    return _paused


def settle() -> None:
    """If `pause` stopped it: freeze every object that exists and start automatic collection again."""
    global _paused
    if _paused:
        gc.freeze()
        gc.enable()
        _paused = False


def during_init(function: Callable[[], T]) -> Callable[[], T]:
    """A handler's `default_services`: run with the collector paused (on Lambda), then settled."""

    @functools.wraps(function)
    def run() -> T:
        pause()
        try:
            return function()
        finally:
            settle()

    return run
