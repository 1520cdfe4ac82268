"""Why a due job does not start (logic/holdups.py): admission's checks, read only, in admission's order."""

from __future__ import annotations

from datetime import timedelta

import pytest

from offpath.domain.backoff import Backoff
from offpath.domain.job import Job, JobStatus
from offpath.domain.limits import limits_of
from offpath.domain.pauses import Pause, Pauses
from offpath.domain.registry import JobType
from offpath.logic.holdups import Holdup, holdup
from offpath.logic.limits import scope_of
from offpath_tools.fakes import AnyPayload, InMemoryLimits
from tests.unit.conftest import START, a_job

S = 1_000_000
NOW_US = int(START.timestamp() * S)


def typed(
    *, concurrency_key: str | None = None, max_concurrency: int | None = None, rate_limit: str | None = None
) -> JobType:
    declared = limits_of(concurrency_key=concurrency_key, max_concurrency=max_concurrency, rate_limit=rate_limit)
    return JobType("test.limited", lambda p, c: None, AnyPayload, "default", 3, 10, Backoff(), limits=declared)


def job(n: int = 0, status: JobStatus = JobStatus.QUEUED, account: str = "a", **changes: object) -> Job:
    return a_job(status, job_id=f"{n:032d}", type="test.limited", payload={"account": account}, **changes)


def nothing_paused() -> Pauses:
    return Pauses()


def test_a_due_job_of_a_paused_queue_or_type_is_held_by_the_pause_with_its_reason() -> None:
    queue = Pauses(queues={"default": Pause("queue", "default", START, "db migration")})
    kind = Pauses(job_types={"test.limited": Pause("job_type", "test.limited", START)})

    held = holdup(job(), typed(max_concurrency=1), pauses=lambda: queue, limits=InMemoryLimits(), now=START)
    by_type = holdup(job(), typed(max_concurrency=1), pauses=lambda: kind, limits=None, now=START)

    assert held == Holdup("paused", "queue default is paused (db migration); it runs once resumed")
    assert by_type == Holdup("paused", "job type test.limited is paused; it runs once resumed")


def test_a_keyed_concurrency_limit_names_the_live_holders_of_the_jobs_key_only() -> None:
    job_type = typed(concurrency_key="account", max_concurrency=2)
    limits = InMemoryLimits()
    waiting = job(9)
    for n, until in ((1, NOW_US + 60 * S), (2, NOW_US + 60 * S)):
        assert (
            limits.acquire(
                scope_of(job_type, job(n)), job_id=job(n).job_id, attempt=1, until_us=until, now_us=NOW_US, limit=2
            )
            == 0
        )
    # Another account's slots are another key's.
    other = job(3, account="b")
    limits.acquire(
        scope_of(job_type, other), job_id=other.job_id, attempt=1, until_us=NOW_US + 60 * S, now_us=NOW_US, limit=2
    )

    held = holdup(waiting, job_type, pauses=nothing_paused, limits=limits, now=START)

    assert held == Holdup(
        "concurrency", "2 of the 2 allowed at once for its key are running", holders=(job(1).job_id, job(2).job_id)
    )
    assert holdup(other, job_type, pauses=nothing_paused, limits=limits, now=START) is None  # b holds 1 of 2


def test_a_holder_whose_time_is_up_holds_nothing_and_an_unkeyed_limit_names_no_holder() -> None:
    keyed = typed(concurrency_key="account", max_concurrency=2)
    unkeyed = typed(max_concurrency=1)
    limits = InMemoryLimits()
    scope = scope_of(keyed, job())
    limits.acquire(scope, job_id=job(1).job_id, attempt=1, until_us=NOW_US + 60 * S, now_us=NOW_US, limit=2)
    limits.acquire(scope, job_id=job(2).job_id, attempt=1, until_us=NOW_US - 1, now_us=NOW_US - 2 * S, limit=2)
    limits.acquire(
        scope_of(unkeyed, job()), job_id="someone-elses", attempt=1, until_us=NOW_US + S, now_us=NOW_US, limit=1
    )

    assert holdup(job(9), keyed, pauses=nothing_paused, limits=limits, now=START) is None  # one live of two
    assert holdup(job(9), unkeyed, pauses=nothing_paused, limits=limits, now=START) == Holdup(
        "concurrency", "1 of the 1 allowed at once are running"
    )


def test_an_empty_rate_bucket_says_when_the_next_start_is_free_and_a_full_one_holds_nothing() -> None:
    job_type = typed(concurrency_key="account", rate_limit="2/s")
    limits = InMemoryLimits()
    scope = scope_of(job_type, job())

    assert holdup(job(9), job_type, pauses=nothing_paused, limits=limits, now=START) is None
    taken = [limits.take(scope, per_s=2, bucket=2, now_us=NOW_US) for _ in range(2)]
    held = holdup(job(9), job_type, pauses=nothing_paused, limits=limits, now=START)

    assert taken == [0, 0]
    assert held == Holdup(
        "rate_limit", "rate limit 2/s for its key: the next start is free in 1 s", until=START + timedelta(seconds=0.5)
    )
    # Reading took nothing: the bucket's next start is still half a second away.
    assert limits.take(scope, per_s=2, bucket=2, now_us=NOW_US) == 0.5


def test_a_pause_comes_before_a_rate_limit_which_comes_before_concurrency_as_in_admission() -> None:
    job_type = typed(rate_limit="1/s", max_concurrency=1)
    limits = InMemoryLimits()
    limits.take(scope_of(job_type, job()), per_s=1, bucket=1, now_us=NOW_US)
    limits.acquire(
        scope_of(job_type, job()), job_id=job(1).job_id, attempt=1, until_us=NOW_US + S * 9, now_us=NOW_US, limit=1
    )
    paused = Pauses(queues={"default": Pause("queue", "default", START)})

    assert holdup(job(9), job_type, pauses=lambda: paused, limits=limits, now=START).reason == "paused"  # type: ignore[union-attr]
    assert holdup(job(9), job_type, pauses=nothing_paused, limits=limits, now=START).reason == "rate_limit"  # type: ignore[union-attr]
    later = START + timedelta(seconds=1)
    assert holdup(job(9), job_type, pauses=nothing_paused, limits=limits, now=later).reason == "concurrency"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("status", "changes"),
    [
        (JobStatus.SCHEDULED, {"run_at": START + timedelta(hours=1)}),
        (JobStatus.RETRYING, {"next_attempt_at": START + timedelta(seconds=30)}),
        (JobStatus.RUNNING, {}),
        (JobStatus.SUCCEEDED, {}),
        (JobStatus.CANCELLED, {}),
    ],
)
def test_a_job_that_is_not_due_has_no_holdup_and_nothing_is_read(status: JobStatus, changes: dict[str, object]) -> None:
    def no_read() -> Pauses:
        raise AssertionError("the pauses were read")

    assert holdup(job(9, status, **changes), typed(max_concurrency=1), pauses=no_read, limits=None, now=START) is None


def test_a_retrying_job_past_its_next_attempt_is_due_and_can_be_held() -> None:
    paused = Pauses(job_types={"test.limited": Pause("job_type", "test.limited", START)})
    retrying = job(9, JobStatus.RETRYING, next_attempt_at=START - timedelta(seconds=1))

    assert holdup(retrying, typed(max_concurrency=1), pauses=lambda: paused, limits=None, now=START) is not None


def test_a_retrying_job_whose_next_attempt_is_now_is_due() -> None:
    paused = Pauses(job_types={"test.limited": Pause("job_type", "test.limited", START)})
    retrying = job(9, JobStatus.RETRYING, next_attempt_at=START)

    assert holdup(retrying, typed(max_concurrency=1), pauses=lambda: paused, limits=None, now=START) is not None


def test_a_holder_whose_time_ends_now_holds_nothing() -> None:
    job_type = typed(max_concurrency=1)
    limits = InMemoryLimits()
    scope = scope_of(job_type, job())
    limits.acquire(scope, job_id=job(1).job_id, attempt=1, until_us=NOW_US, now_us=NOW_US - S, limit=1)

    assert holdup(job(9), job_type, pauses=nothing_paused, limits=limits, now=START) is None
