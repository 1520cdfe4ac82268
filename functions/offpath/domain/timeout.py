"""Running a job function within its timeout."""

from __future__ import annotations

import contextvars
import signal
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from offpath.domain.errors import JobTimeoutError

T = TypeVar("T")


def run_with_timeout(function: Callable[[], T], timeout_s: float) -> T:
    """On the main thread (Lambda) a SIGALRM interrupts the function at its deadline. Elsewhere
    (threads of the local runtime) the function runs in a daemon thread that is abandoned when
    the deadline passes: Python cannot kill a thread, so the job's own code must not hold locks.
    """
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        return _with_alarm(function, timeout_s)
    return _with_thread(function, timeout_s)


def _with_alarm(function: Callable[[], T], timeout_s: float) -> T:
    def on_alarm(signum: int, frame: Any) -> None:
        raise JobTimeoutError(f"job ran past its timeout of {timeout_s:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        return function()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _with_thread(function: Callable[[], T], timeout_s: float) -> T:
    outcome: dict[str, Any] = {}
    # A new thread starts with an empty context: carry the caller's (the job id bound for logs).
    context = contextvars.copy_context()

    def target() -> None:
        try:
            outcome["value"] = context.run(function)
        except BaseException as error:  # handed back to the caller's thread below
            outcome["error"] = error

    worker = threading.Thread(target=target, name="offpath-job", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise JobTimeoutError(f"job ran past its timeout of {timeout_s:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]
