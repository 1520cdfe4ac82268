"""Running a job function within its timeout."""

from __future__ import annotations

import contextvars
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class JobTimeout(BaseException):
    """A job function ran past its `timeout_s`. Retryable.

    A BaseException, like KeyboardInterrupt: a job function's `except Exception:` does not catch it,
    so the timeout cannot be swallowed by ordinary error handling.
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        super().__init__(f"job ran past its timeout of {timeout_s:g} s")


def run_with_timeout(function: Callable[[], T], timeout_s: float) -> T:
    """On the main thread (Lambda) a SIGALRM interrupts the function at its deadline. Elsewhere
    (threads of the local runtime) the function runs in a daemon thread that is abandoned when
    the deadline passes: Python cannot kill a thread, so the job's own code must not hold locks.

    Whatever the function does once its deadline has passed (it caught the timeout with a bare
    `except:` and returned, or raised something else), the outcome is a `JobTimeout`.
    """
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        return _with_alarm(function, timeout_s)
    return _with_thread(function, timeout_s)


def _with_alarm(function: Callable[[], T], timeout_s: float) -> T:
    fired = False

    def on_alarm(signum: int, frame: Any) -> None:
        nonlocal fired
        fired = True
        raise JobTimeout(timeout_s)

    deadline = time.monotonic() + timeout_s
    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        value = function()
    except JobTimeout:
        raise
    except Exception as error:
        if fired or time.monotonic() >= deadline:
            raise JobTimeout(timeout_s) from error
        raise
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if fired or time.monotonic() >= deadline:
        raise JobTimeout(timeout_s)
    return value


def _with_thread(function: Callable[[], T], timeout_s: float) -> T:
    outcome: dict[str, Any] = {}
    # A new thread starts with an empty context: carry the caller's (the job id bound for logs).
    context = contextvars.copy_context()

    def target() -> None:
        try:
            outcome["value"] = context.run(function)
        except BaseException as error:  # handed back to the caller's thread below
            outcome["error"] = error

    deadline = time.monotonic() + timeout_s
    worker = threading.Thread(target=target, name="offpath-job", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive() or time.monotonic() >= deadline:
        raise JobTimeout(timeout_s)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]
