"""The sweeper and a queue backlog (issue 13): a long but healthy backlog gets no storm of re-sends, while a job
whose send failed is still re-sent (TESTPLAN 10)."""

from __future__ import annotations

from offpath.domain.backoff import Backoff
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import Ports
from offpath.domain.registry import JobType, Registry
from offpath.logic.submit import SubmitPolicy, SubmitRequest, submit_batch
from offpath.logic.sweep import SweepPolicy, sweep
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import SCRIPTED_TYPE, AnyPayload, InMemoryJobQueue, InMemoryJobStore, RecordingMetrics
from tests.unit.conftest import TENANT, submitted

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
