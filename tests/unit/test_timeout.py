"""A job function runs within its timeout: SIGALRM on Lambda's main thread, a watched thread elsewhere."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from offpath.domain.timeout import JobTimeout, run_with_timeout
from offpath.observability import JsonFormatter, bound_job_id

SHORT_S = 0.05


def in_a_thread(call: Callable[[], Any]) -> Any:
    """Run `call` on a thread that is not the main thread; return its value or raise its error."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:
            outcome["error"] = error

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def boom() -> None:
    raise ValueError("job failed")


# -- the main thread (Lambda) -------------------------------------------------------------------


@pytest.fixture
def main_thread() -> None:
    assert threading.current_thread() is threading.main_thread()


def test_on_the_main_thread_the_functions_value_is_returned(main_thread: None) -> None:
    assert run_with_timeout(lambda: 42, 5) == 42


def test_on_the_main_thread_a_slow_function_is_interrupted_at_its_timeout(main_thread: None) -> None:
    with pytest.raises(JobTimeout, match=r"timeout of 0\.05 s"):
        run_with_timeout(lambda: time.sleep(30), SHORT_S)


def test_on_the_main_thread_the_functions_error_is_raised(main_thread: None) -> None:
    with pytest.raises(ValueError, match="job failed"):
        run_with_timeout(boom, 5)


def test_on_the_main_thread_the_alarm_is_cleared_and_the_old_handler_restored(main_thread: None) -> None:
    before = signal.getsignal(signal.SIGALRM)

    with pytest.raises(JobTimeout):
        run_with_timeout(lambda: time.sleep(30), SHORT_S)

    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_the_timeout_is_not_an_exception_so_except_exception_cannot_swallow_it() -> None:
    assert issubclass(JobTimeout, BaseException)
    assert not issubclass(JobTimeout, Exception)


def test_on_the_main_thread_a_function_catching_exception_still_times_out(main_thread: None) -> None:
    def careless() -> str:
        try:
            time.sleep(30)
        except Exception:
            return "carried on"
        return "slept"

    with pytest.raises(JobTimeout, match=r"timeout of 0\.05 s"):
        run_with_timeout(careless, SHORT_S)


def test_on_the_main_thread_a_function_that_swallows_the_timeout_and_returns_still_timed_out(
    main_thread: None,
) -> None:
    def swallows_everything() -> str:
        with contextlib.suppress(BaseException):  # what a job must not do, and still cannot get away with
            time.sleep(30)
        return "carried on"

    with pytest.raises(JobTimeout):
        run_with_timeout(swallows_everything, SHORT_S)


def test_on_the_main_thread_an_error_raised_after_the_deadline_is_a_timeout(main_thread: None) -> None:
    def swallows_then_fails() -> None:
        with contextlib.suppress(BaseException):
            time.sleep(30)
        raise ValueError("cleanup failed")

    with pytest.raises(JobTimeout):
        run_with_timeout(swallows_then_fails, SHORT_S)


# -- other threads (the local runtime) ----------------------------------------------------------


def test_on_another_thread_the_functions_value_is_returned() -> None:
    assert in_a_thread(lambda: run_with_timeout(lambda: 42, 5)) == 42


def test_on_another_thread_the_functions_error_is_raised() -> None:
    with pytest.raises(ValueError, match="job failed"):
        in_a_thread(lambda: run_with_timeout(boom, 5))


def test_on_another_thread_a_slow_function_is_abandoned_at_its_timeout() -> None:
    release = threading.Event()
    try:
        with pytest.raises(JobTimeout):
            in_a_thread(lambda: run_with_timeout(lambda: release.wait(30), SHORT_S))
    finally:
        release.set()


def test_on_another_thread_the_functions_log_lines_carry_the_job_id() -> None:
    lines = io.StringIO()
    handler = logging.StreamHandler(lines)
    handler.setFormatter(JsonFormatter("worker"))
    job_logger = logging.getLogger("offpath.jobs.test")
    job_logger.addHandler(handler)
    job_logger.setLevel(logging.INFO)

    def job_logging_under_its_id() -> None:
        with bound_job_id("job-123"):
            run_with_timeout(lambda: job_logger.info("working"), 5)

    try:
        in_a_thread(job_logging_under_its_id)
    finally:
        job_logger.removeHandler(handler)

    assert json.loads(lines.getvalue())["job_id"] == "job-123"


# -- the deadline, on a clock the test moves ------------------------------------------------------------------------


class Moved:
    """`time` as offpath.domain.timeout sees it: a monotonic clock the job function moves itself."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def moved(monkeypatch: pytest.MonkeyPatch) -> Moved:
    import offpath.domain.timeout as timeout

    clock = Moved()
    monkeypatch.setattr(timeout, "time", clock)
    return clock


@pytest.mark.parametrize("where", ["main thread", "another thread"])
@pytest.mark.parametrize("past_s", [0.0, 1.0])
def test_a_function_that_returns_at_or_past_its_deadline_timed_out(moved: Moved, where: str, past_s: float) -> None:
    def late() -> str:
        moved.now += 5 + past_s  # the deadline is 5 s on: the alarm (real time) has not fired
        return "done"

    with pytest.raises(JobTimeout):
        if where == "main thread":
            run_with_timeout(late, 5)
        else:
            in_a_thread(lambda: run_with_timeout(late, 5))


@pytest.mark.parametrize("past_s", [0.0, 1.0])
def test_on_the_main_thread_an_error_at_or_past_the_deadline_is_a_timeout(
    main_thread: None, moved: Moved, past_s: float
) -> None:
    def fails_late() -> None:
        moved.now += 5 + past_s
        raise ValueError("cleanup failed")

    with pytest.raises(JobTimeout):
        run_with_timeout(fails_late, 5)


def test_on_the_main_thread_a_swallowed_alarm_is_a_timeout_whatever_the_clock_says(
    main_thread: None, moved: Moved
) -> None:
    def swallows_everything() -> str:
        with contextlib.suppress(BaseException):
            time.sleep(30)  # the real alarm interrupts it; the moved clock stays before the deadline
        return "carried on"

    with pytest.raises(JobTimeout):
        run_with_timeout(swallows_everything, SHORT_S)


def test_a_timeout_says_its_seconds_and_an_alarms_has_no_other_cause(main_thread: None) -> None:
    with pytest.raises(JobTimeout) as raised:
        run_with_timeout(lambda: time.sleep(30), SHORT_S)

    assert (raised.value.timeout_s, raised.value.__cause__, raised.value.__context__) == (SHORT_S, None, None)


def test_on_the_main_thread_the_function_runs_on_it_and_elsewhere_on_a_daemon_job_thread(main_thread: None) -> None:
    def where() -> tuple[str, bool]:
        thread = threading.current_thread()
        return thread.name, thread.daemon

    assert run_with_timeout(where, 5) == (threading.main_thread().name, False)
    assert in_a_thread(lambda: run_with_timeout(where, 5)) == ("offpath-job", True)
