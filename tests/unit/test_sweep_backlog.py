"""The sweeper and a queue backlog (issue 13): a long but healthy backlog gets no storm of re-sends, while a job
whose send failed is still re-sent (TESTPLAN 10); and what the sweeper leaves in the store of each due job it meets.
"""

from __future__ import annotations

import io
import json
import logging
from datetime import timedelta
from typing import Any

import pytest

from offpath.domain.backoff import Backoff
from offpath.domain.errors import JobConflictError, StoreUnavailableError
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import Ports
from offpath.domain.registry import JobType, Registry
from offpath.logic.submit import SubmitPolicy, SubmitRequest, submit_batch
from offpath.logic.sweep import SweepPolicy, SweepReport, sweep
from offpath.observability import JsonFormatter
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import SCRIPTED_TYPE, AnyPayload, InMemoryJobQueue, InMemoryJobStore, RecordingMetrics
from tests.unit.conftest import START, TENANT, a_job, submitted

GRACE = SweepPolicy().grace


BULK_TYPE = "test.bulk"


def batch_of(ports: Ports, count: int, tag: str = "b", job_type: str = SCRIPTED_TYPE) -> list[Job]:
    """Jobs submitted in one POST /jobs/batch: written (each with its sweep time), then sent."""
    requests = [
        SubmitRequest(tenant=TENANT, type=job_type, payload={"n": n}, idempotency_key=f"{tag}-{n}")
        for n in range(count)
    ]
    results = submit_batch(requests, ports, SubmitPolicy())
    return [r.submitted.job for r in results if r.submitted is not None]


def lost_send(ports: Ports, queue: InMemoryJobQueue, key: str = "lost") -> Job:
    """A job whose send failed: written with its sweep time, nothing on the queue."""
    queue.fail_sends(1)
    job = submitted(ports, idempotency_key=key)
    assert job.job_id not in {s.message.job_id for s in queue.sent}
    return job


def resent_ids(queue: InMemoryJobQueue, before: int) -> list[str]:
    return [s.message.job_id for s in queue.sent[before:]]


def test_a_long_healthy_backlog_gets_no_storm_of_resends(
    ports: Ports, queue: InMemoryJobQueue, store: InMemoryJobStore, clock: ManualClock, registry: Registry
) -> None:
    """200 jobs of two batches wait 30 minutes on `bulk` (maximum concurrency 2; its oldest-age alarm at 1 h)."""
    registry.add_job_type(
        JobType(
            name=BULK_TYPE,
            function=lambda payload, ctx: None,
            payload_model=AnyPayload,
            queue="bulk",
            max_attempts=3,
            timeout_s=10,
            backoff=Backoff(),
        )
    )
    jobs = batch_of(ports, 100, "b1", BULK_TYPE) + batch_of(ports, 100, "b2", BULK_TYPE)
    queue.depths["bulk"] = 1_000  # the batches' messages and others, waiting for the workers
    sent = len(queue.sent)

    reports = []
    for _ in range(30):  # the sweeper's schedule: every minute
        clock.advance(60)
        reports.append(sweep(ports, SweepPolicy()))

    assert len(jobs) == 200
    assert resent_ids(queue, sent) == []
    assert sum(r.resent for r in reports) == 0
    # Each job deferred at 2, 4, 8 and 16 minutes (then due again at 32): 4 writes each, not one a sweep.
    assert sum(r.backlog for r in reports) == 4 * 200
    # One look at the queue per sweep that had overdue jobs, whatever their number.
    assert queue.depth_reads == ["bulk"] * 4
    assert {j.status for j in store.jobs()} == {JobStatus.QUEUED}


def test_a_lost_send_on_a_queue_without_a_backlog_is_resent(
    ports: Ports, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    job = lost_send(ports, queue)
    clock.advance(GRACE.total_seconds() + 1)

    report = sweep(ports, SweepPolicy())

    assert (report.resent, report.backlog) == (1, 0)
    assert resent_ids(queue, 0) == [job.job_id]


def test_a_queue_holding_fewer_messages_than_its_overdue_jobs_gets_the_youngest_resent(
    ports: Ports, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    """Three messages on the queue can be the three oldest jobs' at most: the two younger ones are missing."""
    jobs = []
    for n in range(5):
        jobs.append(lost_send(ports, queue, key=f"k-{n}"))
        clock.advance(1)
    queue.depths["default"] = 3
    clock.advance(GRACE.total_seconds())

    report = sweep(ports, SweepPolicy())

    assert (report.resent, report.backlog) == (2, 3)
    assert sorted(resent_ids(queue, 0)) == sorted(j.job_id for j in jobs[3:])


def test_a_lost_send_behind_a_backlog_is_resent_once_it_has_waited_its_queues_oldest_age_alarm(
    ports: Ports, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    job = lost_send(ports, queue)
    queue.depths["default"] = 50  # a backlog that does not drain
    alarm_s = ports.registry.queues["default"].oldest_age_alarm_s
    clock.advance(GRACE.total_seconds() + 1)

    deferred = sweep(ports, SweepPolicy())
    clock.advance(alarm_s - GRACE.total_seconds())
    resent = sweep(ports, SweepPolicy())

    assert (deferred.resent, deferred.backlog) == (0, 1)
    assert (resent.resent, resent.backlog) == (1, 0)
    assert resent_ids(queue, 0) == [job.job_id]


def test_a_queue_whose_size_cannot_be_read_defers_nothing(
    ports: Ports, queue: InMemoryJobQueue, clock: ManualClock, metrics: RecordingMetrics
) -> None:
    job = lost_send(ports, queue)
    queue.depths["default"] = 50
    queue.failing_depths.add("default")
    clock.advance(GRACE.total_seconds() + 1)

    report = sweep(ports, SweepPolicy())

    assert (report.resent, report.errors) == (1, 0)
    assert resent_ids(queue, 0) == [job.job_id]
    assert metrics.counts["QueueDepthUnread"] == 1


def test_only_queues_with_overdue_jobs_to_resend_are_looked_at(
    ports: Ports, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    clock.advance(GRACE.total_seconds() + 1)

    sweep(ports, SweepPolicy())
    lost_send(ports, queue)
    clock.advance(GRACE.total_seconds() + 1)
    sweep(ports, SweepPolicy())

    assert queue.depth_reads == ["default"]


# -- what the sweeper leaves of each due job ----------------------------------------------------------

NOW = START + timedelta(hours=1)
RETENTION = SweepPolicy().retention


def due(store: InMemoryJobStore, letter: str, status: JobStatus, ago_s: float = 600, **changes: Any) -> Job:
    """A job in the sweep index, due a second ago, last changed `ago_s` before NOW."""
    at = NOW - timedelta(seconds=ago_s)
    return store.put(a_job(status, job_id=letter * 32, sweep_at=NOW - timedelta(seconds=1), updated_at=at, **changes))


def stored(store: InMemoryJobStore, letter: str) -> Job:
    job = store.get(letter * 32, tenant=TENANT)
    assert job is not None
    return job


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "offpath.sweeper"]


def test_a_running_job_within_its_lease_is_looked_at_a_second_after_it_ends(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    clock.set(NOW)
    for letter, lease_s in (("a", 30), ("b", 60)):
        due(store, letter, JobStatus.RUNNING, attempt=1, lease_until=NOW + timedelta(seconds=lease_s))

    assert sweep(ports, SweepPolicy()) == SweepReport(deferred=2)
    assert [(stored(store, x).sweep_at, stored(store, x).resends) for x in "ab"] == [
        (NOW + timedelta(seconds=31), 0),
        (NOW + timedelta(seconds=61), 0),
    ]
    assert not queue.sent


def test_a_job_whose_lease_ran_out_is_queued_again_or_failed_on_its_last_attempt(
    ports: Ports,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    clock: ManualClock,
    metrics: RecordingMetrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock.set(NOW)
    ended = NOW - timedelta(seconds=1)
    for letter, attempt in (("a", 1), ("b", 2), ("c", 3), ("d", 3)):
        due(store, letter, JobStatus.RUNNING, attempt=attempt, lease_until=ended)

    with caplog.at_level(logging.INFO, logger="offpath.sweeper"):
        assert sweep(ports, SweepPolicy()) == SweepReport(requeued=2, failed=2)

    assert [(stored(store, x).status, stored(store, x).sweep_at) for x in "ab"] == [(JobStatus.QUEUED, NOW + GRACE)] * 2
    assert [stored(store, x).status for x in "cd"] == [JobStatus.FAILED] * 2
    assert {stored(store, x).expires_at for x in "cd"} == {NOW + RETENTION}
    assert [s.message.job_id for s in queue.sent] == ["a" * 32, "b" * 32]
    assert [(d.message.job_id, d.reason) for d in queue.dead_letters] == [
        ("c" * 32, "lease expired"),
        ("d" * 32, "lease expired"),
    ]
    assert metrics.dimensioned[("StuckJobsFound", "default", SCRIPTED_TYPE)] == 4
    assert messages(caplog)[:4] == [
        "lease expired; job requeued for attempt 2",
        "lease expired; job requeued for attempt 3",
        "lease expired on the last attempt; job failed",
        "lease expired on the last attempt; job failed",
    ]


@pytest.mark.parametrize("operation", ["requeue_expired_lease", "enqueue_scheduled"])
def test_a_job_whose_move_fails_is_left_due_after_the_grace(
    operation: str, ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    clock.set(NOW)
    due(store, "a", JobStatus.RUNNING, attempt=1, lease_until=NOW - timedelta(seconds=1))
    due(store, "b", JobStatus.SCHEDULED, run_at=NOW - timedelta(hours=1))
    store.fail_next(operation, StoreUnavailableError("DynamoDB ThrottlingException"))

    report = sweep(ports, SweepPolicy())

    assert report.errors == 0 and report.requeued + report.enqueued == 1
    left = stored(store, "a" if operation == "requeue_expired_lease" else "b")
    assert (left.status in (JobStatus.RUNNING, JobStatus.SCHEDULED), left.sweep_at, left.resends) == (
        True,
        NOW + GRACE,
        0,
    )


def test_a_scheduled_job_is_enqueued_once_its_run_at_and_the_grace_are_past(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    clock.set(NOW)
    for letter, run_in_s in (("a", 600), ("b", 1200), ("c", -GRACE.total_seconds()), ("d", -3600)):
        due(store, letter, JobStatus.SCHEDULED, run_at=NOW + timedelta(seconds=run_in_s))

    with caplog.at_level(logging.INFO, logger="offpath.sweeper"):
        assert sweep(ports, SweepPolicy()) == SweepReport(enqueued=2, deferred=2)

    assert [stored(store, x).sweep_at for x in "ab"] == [NOW + timedelta(seconds=s) + GRACE for s in (600, 1200)]
    assert [(stored(store, x).status, stored(store, x).sweep_at) for x in "cd"] == [(JobStatus.QUEUED, NOW + GRACE)] * 2
    assert sorted(s.message.job_id for s in queue.sent) == ["c" * 32, "d" * 32]
    assert messages(caplog)[:2] == ["scheduled job overdue (one-time schedule missing or late); enqueued"] * 2


def test_a_retrying_job_within_its_grace_is_looked_at_when_the_grace_ends(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    clock.set(NOW)
    for letter, ago_s in (("a", 60), ("b", 30)):
        due(store, letter, JobStatus.RETRYING, attempt=1, next_attempt_at=NOW - timedelta(seconds=ago_s))

    assert sweep(ports, SweepPolicy()) == SweepReport(deferred=2)
    assert [(stored(store, x).sweep_at, stored(store, x).resends) for x in "ab"] == [
        (NOW - timedelta(seconds=60) + GRACE, 0),
        (NOW - timedelta(seconds=30) + GRACE, 0),
    ]
    assert not queue.sent


def test_a_waiting_job_at_or_past_its_expiry_ends_expired(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    clock.set(NOW)
    due(store, "a", JobStatus.QUEUED, start_by=NOW)
    due(store, "b", JobStatus.QUEUED, start_by=NOW - timedelta(minutes=1))

    with caplog.at_level(logging.INFO, logger="offpath.sweeper"):
        assert sweep(ports, SweepPolicy()) == SweepReport(expired=2)

    assert [(stored(store, x).status, stored(store, x).expires_at) for x in "ab"] == [
        (JobStatus.EXPIRED, NOW + RETENTION)
    ] * 2
    assert messages(caplog) == ["job past its expiry; expired"] * 2 and not queue.sent


def test_a_queue_whose_size_cannot_be_read_is_logged_and_counted_by_its_name(
    ports: Ports,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    clock: ManualClock,
    metrics: RecordingMetrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock.set(NOW)
    due(store, "a", JobStatus.QUEUED, ago_s=60)
    queue.failing_depths.add("default")

    with caplog.at_level(logging.ERROR, logger="offpath.sweeper"):
        assert sweep(ports, SweepPolicy()).resent == 1

    assert messages(caplog) == ["the size of queue default could not be read; its overdue jobs are re-sent"]
    assert metrics.dimensioned[("QueueDepthUnread", "default", "unknown")] == 1
    assert metrics.dimensioned[("StuckJobsFound", "default", SCRIPTED_TYPE)] == 1


def test_overdue_jobs_rank_on_their_queue_by_when_they_went_on_it_and_running_ones_take_no_place(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    clock.set(NOW)
    due(store, "r", JobStatus.RETRYING, ago_s=60, attempt=1, next_attempt_at=NOW - timedelta(minutes=4))
    due(store, "q", JobStatus.QUEUED, ago_s=180)
    due(store, "x", JobStatus.RUNNING, ago_s=270, attempt=1, lease_until=NOW + timedelta(seconds=30))
    queue.depths["default"] = 1  # room for the oldest one's message: the retry's, on the queue since its end

    assert sweep(ports, SweepPolicy()) == SweepReport(resent=1, deferred=2, backlog=1)
    assert (stored(store, "r").resends, stored(store, "q").resends) == (0, 1)


def test_a_retrying_job_within_its_grace_takes_no_place_on_its_queue(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    clock.set(NOW)
    due(store, "r", JobStatus.RETRYING, ago_s=60, attempt=1, next_attempt_at=NOW - timedelta(minutes=4))
    due(store, "y", JobStatus.RETRYING, ago_s=60, attempt=1, next_attempt_at=NOW - timedelta(minutes=1))
    due(store, "q", JobStatus.QUEUED, ago_s=30)
    queue.depths["default"] = 2

    assert sweep(ports, SweepPolicy()) == SweepReport(deferred=3, backlog=2)


def test_a_retrying_job_at_the_end_of_its_grace_waits_behind_a_backlog_as_a_queued_one(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    clock.set(NOW)
    due(store, "r", JobStatus.RETRYING, ago_s=180, attempt=1, next_attempt_at=NOW - GRACE)
    queue.depths["default"] = 1

    assert sweep(ports, SweepPolicy()) == SweepReport(deferred=1, backlog=1)
    assert stored(store, "r").sweep_at == NOW + GRACE  # as long again as it has waited: the grace


def test_a_job_behind_a_backlog_is_resent_once_its_queues_oldest_age_alarm_time_has_passed(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    clock.set(NOW)
    alarm_s = ports.registry.queues["default"].oldest_age_alarm_s
    due(store, "a", JobStatus.QUEUED, ago_s=alarm_s)
    due(store, "b", JobStatus.QUEUED, ago_s=alarm_s - 0.5)
    queue.depths["default"] = 5

    assert sweep(ports, SweepPolicy()) == SweepReport(resent=1, deferred=1, backlog=1)
    assert stored(store, "a").resends == 1
    assert stored(store, "b").sweep_at == NOW + timedelta(seconds=1)  # its healthy time ends sooner: a second


def test_a_job_of_a_queue_the_registry_does_not_know_is_never_held_behind_a_backlog(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    clock.set(NOW)
    due(store, "a", JobStatus.QUEUED, ago_s=0.5, queue="retired")
    queue.depths["retired"] = 5

    assert sweep(ports, SweepPolicy()) == SweepReport(resent=1)
    assert [s.queue for s in queue.sent] == ["retired"]


# -- what one job, or the query, does to a sweep ---------------------------------------------------------


def test_a_failed_query_of_due_jobs_is_one_error_logged_and_counted(
    ports: Ports, store: InMemoryJobStore, metrics: RecordingMetrics, caplog: pytest.LogCaptureFixture
) -> None:
    store.fail_next("due_for_sweep", StoreUnavailableError("DynamoDB ThrottlingException"))

    with caplog.at_level(logging.INFO, logger="offpath.sweeper"):
        assert sweep(ports, SweepPolicy()) == SweepReport(errors=1)

    assert messages(caplog) == ["the query of due jobs failed; nothing is swept this time"]
    assert metrics.dimensioned[("SweepErrors", "unknown", "unknown")] == 1


def test_a_job_that_changed_or_whose_sweep_failed_or_raised_stays_due_and_the_sweep_goes_on(
    ports: Ports,
    store: InMemoryJobStore,
    clock: ManualClock,
    metrics: RecordingMetrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock.set(NOW)
    for letter in "abcde":
        due(store, letter, JobStatus.RUNNING, attempt=1, lease_until=NOW + timedelta(seconds=30))
    for error in (
        JobConflictError(None, "another sweep handled the job"),
        StoreUnavailableError("DynamoDB ThrottlingException"),
        RuntimeError("a bug"),
        RuntimeError("another bug"),
    ):
        store.fail_next("reschedule_sweep", error)

    with caplog.at_level(logging.INFO, logger="offpath.sweeper"):
        assert sweep(ports, SweepPolicy()) == SweepReport(deferred=1, errors=2)

    assert messages(caplog) == [
        "job changed while being swept; left to its new owner",
        "sweep of one job failed; it stays due and is tried next sweep",
        "sweep of one job raised; it stays due and the sweep goes on",
        "sweep of one job raised; it stays due and the sweep goes on",
    ]
    assert metrics.dimensioned[("SweepErrors", "default", SCRIPTED_TYPE)] == 2
    assert [stored(store, x).sweep_at for x in "abcd"] == [NOW - timedelta(seconds=1)] * 4


def test_every_job_type_reports_its_stuck_jobs_even_when_none_are(
    ports: Ports, metrics: RecordingMetrics, registry: Registry
) -> None:
    sweep(ports, SweepPolicy())

    assert {key: n for key, n in metrics.dimensioned.items() if key[0] == "StuckJobsFound"} == {
        ("StuckJobsFound", t.queue, t.name): 0 for t in registry.job_types.values()
    }


def test_a_sweep_that_found_stuck_jobs_says_how_many_of_each(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    clock.set(NOW)
    due(store, "a", JobStatus.QUEUED, ago_s=60)
    due(store, "b", JobStatus.RUNNING, attempt=1, lease_until=NOW - timedelta(seconds=1))

    with caplog.at_level(logging.WARNING, logger="offpath.sweeper"):
        sweep(ports, SweepPolicy())

    [found] = [r for r in caplog.records if r.getMessage() == "sweep found stuck jobs"]
    assert (found.__dict__["resent"], found.__dict__["requeued"], found.__dict__["failed"]) == (1, 1, 0)


def test_a_sweep_that_ignores_backlogs_resends_every_overdue_job(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    clock.set(NOW)
    due(store, "a", JobStatus.QUEUED, ago_s=60)
    queue.depths["default"] = 50

    assert sweep(ports, SweepPolicy(backlog_aware=False)) == SweepReport(resent=1)
    assert queue.depth_reads == []


def test_jobs_rank_among_those_of_their_own_queue(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    clock.set(NOW)
    due(store, "c", JobStatus.QUEUED, ago_s=100, queue="critical")
    due(store, "d", JobStatus.QUEUED, ago_s=30)
    queue.depths["default"] = 1

    assert sweep(ports, SweepPolicy()) == SweepReport(resent=1, deferred=1, backlog=1)
    assert stored(store, "d").resends == 0


def test_what_the_sweeper_logs_of_a_job_names_the_job(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    clock.set(NOW)
    due(store, "a", JobStatus.QUEUED, start_by=NOW)
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter("sweeper"))
    logger = logging.getLogger("offpath.sweeper")
    logger.addHandler(handler)
    try:
        with caplog.at_level(logging.INFO, logger="offpath.sweeper"):
            sweep(ports, SweepPolicy())
    finally:
        logger.removeHandler(handler)

    [line] = [json.loads(text) for text in out.getvalue().splitlines()]
    assert (line["message"], line["job_id"]) == ("job past its expiry; expired", "a" * 32)
