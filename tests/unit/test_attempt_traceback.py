"""An attempt's error as the worker records it: the job code's frames of the traceback, offpath's own cut away,
bounded, and without the payload's values."""

from __future__ import annotations

from typing import Any

import pytest

from offpath.domain.timeout import run_with_timeout
from offpath.logic.process import TRACEBACK_BYTES, TRACEBACK_FRAMES, attempt_error


def _lookup(accounts: dict[str, Any], account: str) -> Any:
    balance = accounts[account]["balance"]
    if balance < 0:
        raise ValueError("account is overdrawn")
    return balance


def _charge_job(payload: dict[str, Any]) -> Any:
    secret_card = payload["card"]  # a local holding a payload value
    return _lookup(payload["accounts"], payload["account"]), secret_card


def _deep(n: int) -> None:
    if n == 0:
        raise RuntimeError("bottom")
    _deep(n - 1)


def _raised_through_the_worker(function: Any) -> BaseException:
    """The error as the worker sees it: raised by the job function inside offpath's timeout machinery."""
    with pytest.raises(Exception) as raised:
        run_with_timeout(function, 5)
    return raised.value


PAYLOAD = {"card": "4111-1111-1111-1111", "account": "acct-secret-77", "accounts": {"acct-secret-77": {"balance": -5}}}


def test_the_traceback_keeps_the_job_codes_frames_innermost_last() -> None:
    error = attempt_error(_raised_through_the_worker(lambda: _charge_job(PAYLOAD)))

    assert (error.type, error.message) == ("ValueError", "account is overdrawn")
    assert error.traceback is not None
    *_, caller, raiser = error.traceback.splitlines()
    here = "tests/unit/test_attempt_traceback.py"
    assert caller.endswith(f"{here}:{_charge_job.__code__.co_firstlineno + 2} in _charge_job")
    assert raiser.endswith(f"{here}:{_lookup.__code__.co_firstlineno + 3} in _lookup")


def test_the_traceback_drops_offpaths_own_frames() -> None:
    error = attempt_error(_raised_through_the_worker(lambda: _charge_job(PAYLOAD)))

    assert error.traceback is not None
    assert "offpath/domain/timeout.py" not in error.traceback
    assert "run_with_timeout" not in error.traceback


def test_the_traceback_has_none_of_the_payloads_values() -> None:
    error = attempt_error(_raised_through_the_worker(lambda: _charge_job(PAYLOAD)))

    assert error.traceback is not None
    for value in ("4111-1111-1111-1111", "acct-secret-77", "-5"):
        assert value not in error.traceback


def test_a_deep_traceback_keeps_its_innermost_frames_within_the_caps() -> None:
    error = attempt_error(_raised_through_the_worker(lambda: _deep(50)))

    assert error.traceback is not None
    frames = error.traceback.splitlines()
    assert 1 <= len(frames) <= TRACEBACK_FRAMES
    assert len(error.traceback.encode()) <= TRACEBACK_BYTES
    assert frames[-1].endswith(f":{_deep.__code__.co_firstlineno + 2} in _deep")


def test_a_frame_longer_than_the_cap_keeps_its_end() -> None:
    namespace: dict[str, Any] = {}
    name = "f" * 300
    exec(compile(f"def {name}():\n    raise KeyError('k')\n", "<job>", "exec"), namespace)

    error = attempt_error(_raised_through_the_worker(namespace[name]))

    assert error.traceback is not None
    assert len(error.traceback.encode()) <= TRACEBACK_BYTES
    assert error.traceback.endswith("f" * 10 + "\n")


def test_a_job_authors_long_message_is_kept_as_written() -> None:
    message = "x" * 5_000
    error = attempt_error(ValueError(message))

    assert (error.type, error.message, error.traceback) == ("ValueError", message, None)
