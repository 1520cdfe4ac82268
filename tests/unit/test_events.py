"""Which change of a job is which event (offpath.domain.events), and the ids a receiver deduplicates by."""

from __future__ import annotations

from datetime import timedelta

import pytest

from offpath.domain.events import EventType, events_of_change
from offpath.domain.job import JobStatus, Progress
from tests.unit.conftest import START, a_job


def types(old, new) -> list[str]:  # type: ignore[no-untyped-def]
    return [event.type.value for event in events_of_change(old, new)]


@pytest.mark.parametrize(
    ("status", "expected"),
    [(JobStatus.QUEUED, ["job.queued"]), (JobStatus.SCHEDULED, ["job.scheduled"])],
)
def test_a_new_job_is_queued_or_scheduled(status: JobStatus, expected: list[str]) -> None:
    assert types(None, a_job(status)) == expected


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (JobStatus.QUEUED, JobStatus.RUNNING, ["job.started"]),
        (JobStatus.RUNNING, JobStatus.RETRYING, ["job.retrying"]),
        (JobStatus.RETRYING, JobStatus.RUNNING, ["job.started"]),
        (JobStatus.RUNNING, JobStatus.SUCCEEDED, ["job.succeeded"]),
        (JobStatus.RUNNING, JobStatus.FAILED, ["job.failed", "job.dead_lettered"]),
        (JobStatus.QUEUED, JobStatus.CANCELLED, ["job.cancelled"]),
        (JobStatus.FAILED, JobStatus.QUEUED, ["job.queued"]),
        (JobStatus.SCHEDULED, JobStatus.QUEUED, ["job.queued"]),
    ],
)
def test_a_status_change_is_the_event_of_the_state_entered(
    before: JobStatus, after: JobStatus, expected: list[str]
) -> None:
    later = START + timedelta(seconds=1)
    assert types(a_job(before), a_job(after, updated_at=later)) == expected


def test_a_write_that_changes_no_state_is_no_event() -> None:
    job = a_job(JobStatus.QUEUED)
    assert types(job, job.replace(sweep_at=START + timedelta(minutes=5), resends=1)) == []
    assert types(a_job(JobStatus.SUCCEEDED), None) == []  # TTL expiry


def test_a_second_attempt_that_starts_from_an_expired_lease_is_started_again() -> None:
    running = a_job(JobStatus.RUNNING, attempt=1)
    assert types(running, running.replace(attempt=2, updated_at=START + timedelta(minutes=1))) == ["job.started"]


def test_progress_is_coalesced_to_one_event_a_second() -> None:
    running = a_job(JobStatus.RUNNING, attempt=1, updated_at=START)
    first = running.replace(progress=Progress(0.1), updated_at=START + timedelta(milliseconds=100))
    same_second = first.replace(progress=Progress(0.2), updated_at=START + timedelta(milliseconds=600))
    next_second = same_second.replace(progress=Progress(0.3), updated_at=START + timedelta(milliseconds=1100))
    assert types(running, first) == ["job.progress"]
    assert types(first, same_second) == []
    assert types(same_second, next_second) == ["job.progress"]


def test_an_event_id_is_stable_for_its_change_and_differs_between_changes() -> None:
    queued, running = a_job(JobStatus.QUEUED), a_job(JobStatus.RUNNING, attempt=1, updated_at=START)
    succeeded = running.replace(status=JobStatus.SUCCEEDED, updated_at=START + timedelta(seconds=2))
    again = events_of_change(running, succeeded)[0]
    assert again.id == events_of_change(running, succeeded)[0].id
    assert again.id != events_of_change(queued, running)[0].id
    assert again.type is EventType.SUCCEEDED and again.tenant == succeeded.tenant and again.job is succeeded
    failed = running.replace(status=JobStatus.FAILED, updated_at=START + timedelta(seconds=2))
    failed_ids = {event.id for event in events_of_change(running, failed)}
    assert len(failed_ids) == 2


def test_only_a_running_jobs_new_progress_is_a_progress_event() -> None:
    later = START + timedelta(seconds=5)
    running = a_job(JobStatus.RUNNING, attempt=1, updated_at=START)
    assert types(running, running.replace(lease_until=later, updated_at=later)) == []  # a lease renewed
    done = a_job(JobStatus.SUCCEEDED, progress=Progress(1.0), updated_at=START)
    assert types(done, done.replace(progress=None, updated_at=later)) == []


def test_an_event_is_named_by_a_32_hex_digest_and_dated_by_its_write() -> None:
    running = a_job(JobStatus.RUNNING, attempt=1, updated_at=START)
    succeeded = running.replace(status=JobStatus.SUCCEEDED, updated_at=START + timedelta(seconds=2))

    event = events_of_change(running, succeeded)[0]

    assert event.id.startswith("evt_") and len(event.id) == 4 + 32
    assert int(event.id[4:], 16) >= 0
    assert event.time == START + timedelta(seconds=2)
