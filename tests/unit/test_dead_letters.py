"""Dead letters by hand (logic/queries.py, against the fakes): a hand retry removes the job's dead letter before it
sends the job, and stands when the removal fails; a discard marks the job and leaves it FAILED."""

from __future__ import annotations

from datetime import timedelta

import pytest

from offpath.domain.errors import DeadLetterNotFoundError, JobConflictError
from offpath.domain.job import AttemptRecord, JobStatus
from offpath.domain.ports import JobMessage, Ports
from offpath.logic import queries
from offpath_tools.fakes import InMemoryJobQueue, InMemoryJobStore, RecordingMetrics
from tests.unit.conftest import START, TENANT, a_job

GRACE = timedelta(minutes=2)


def failed_with_dead_letter(store: InMemoryJobStore, queue: InMemoryJobQueue, n: int = 0) -> str:
    last = AttemptRecord(attempt=3, started_at=START, finished_at=START, outcome="FAILED", error="broken")
    job = store.put(a_job(JobStatus.FAILED, job_id=f"{n:032x}", error="broken", attempt=3, attempt_history=(last,)))
    queue.send_to_dlq("default", JobMessage.of(job), reason="broken")
    return job.job_id


def test_a_hand_retry_removes_the_jobs_dead_letter_and_only_its_own(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, metrics: RecordingMetrics
) -> None:
    other = failed_with_dead_letter(store, queue, 1)
    job_id = failed_with_dead_letter(store, queue, 2)

    job = queries.retry_job(job_id, tenant=TENANT, ports=ports, sweep_grace=GRACE)

    assert job.status is JobStatus.QUEUED
    assert [d.message.job_id for d in queue.dead_letters] == [other]
    assert [s.message.job_id for s in queue.sent] == [job_id]
    assert metrics.counts["DeadLettersRemoved"] == 1


def test_a_hand_retry_stands_when_its_dead_letter_cannot_be_removed(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, metrics: RecordingMetrics
) -> None:
    job_id = failed_with_dead_letter(store, queue)
    queue.failing_dead_letter_removals = True

    job = queries.retry_job(job_id, tenant=TENANT, ports=ports, sweep_grace=GRACE)

    assert (job.status, store.get(job_id, tenant=TENANT).status) == (JobStatus.QUEUED, JobStatus.QUEUED)  # type: ignore[union-attr]
    assert [s.message.job_id for s in queue.sent] == [job_id], "the job is sent all the same"
    assert len(queue.dead_letters) == 1
    assert metrics.counts["DeadLetterRemovalFailed"] == 1


def test_a_retried_cancelled_job_does_not_search_the_dlq(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, metrics: RecordingMetrics
) -> None:
    job_id = store.put(a_job(JobStatus.CANCELLED)).job_id
    queue.failing_dead_letter_removals = True  # a search would be counted as a failed removal

    job = queries.retry_job(job_id, tenant=TENANT, ports=ports, sweep_grace=GRACE)

    assert job.status is JobStatus.QUEUED
    assert "DeadLetterRemovalFailed" not in metrics.counts


def test_a_discard_removes_the_dead_letter_and_marks_the_job_which_stays_failed(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue
) -> None:
    job_id = failed_with_dead_letter(store, queue)

    job = queries.discard_dead_letter("default", job_id, ports=ports)

    assert (job.status, job.discarded_at, job.error) == (JobStatus.FAILED, START, "broken")
    assert queue.dead_letters == []
    assert queue.sent == []


def test_a_discard_without_a_dead_letter_changes_nothing(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue
) -> None:
    job_id = store.put(a_job(JobStatus.FAILED, error="broken")).job_id

    with pytest.raises(DeadLetterNotFoundError):
        queries.discard_dead_letter("default", job_id, ports=ports)
    assert store.get(job_id, tenant=TENANT).discarded_at is None  # type: ignore[union-attr]


def test_a_stale_dead_letter_of_a_job_no_longer_failed_is_removed_and_the_discard_refused(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue
) -> None:
    job = store.put(a_job(JobStatus.SUCCEEDED))
    queue.send_to_dlq("default", JobMessage.of(job), reason="an earlier failure")

    with pytest.raises(JobConflictError):
        queries.discard_dead_letter("default", job.job_id, ports=ports)
    assert queue.dead_letters == []
    assert store.get(job.job_id, tenant=TENANT).discarded_at is None  # type: ignore[union-attr]


def test_a_hand_retry_clears_the_discard_mark(ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue) -> None:
    job_id = failed_with_dead_letter(store, queue)
    queries.discard_dead_letter("default", job_id, ports=ports)

    job = queries.retry_job(job_id, tenant=TENANT, ports=ports, sweep_grace=GRACE)

    assert (job.status, job.discarded_at) == (JobStatus.QUEUED, None)
