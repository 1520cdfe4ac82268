"""Which change of a job is which event (offpath.domain.events), and the ids a receiver deduplicates by."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest

from offpath.domain.batch import Batch
from offpath.domain.events import EventType, batch_events, counted_in_batch, events_of_change
from offpath.domain.job import JobStatus, Progress
from tests.unit.conftest import START, TENANT, a_job


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


# -- batch events -----------------------------------------------------------------------------------------------


def test_a_batch_members_count_is_the_change_that_may_complete_its_batch() -> None:
    member = a_job(JobStatus.SUCCEEDED, batch_id="b-1")
    counted = member.replace(batch_counted=JobStatus.SUCCEEDED)

    assert counted_in_batch(member, counted) is True
    assert counted_in_batch(None, counted) is True  # a record whose old image is gone
    assert counted_in_batch(counted, counted.replace(updated_at=START + timedelta(seconds=1))) is False
    assert counted_in_batch(a_job(JobStatus.RUNNING, batch_id="b-1"), member) is False
    assert counted_in_batch(member, None) is False
    lone = a_job(JobStatus.SUCCEEDED)
    assert counted_in_batch(lone, lone.replace(batch_counted=JobStatus.SUCCEEDED)) is False


def a_batch(**changes: Any) -> Batch:
    """A sealed batch of three jobs."""
    fields = {"batch_id": "b-1", "tenant": TENANT, "created_at": START, "updated_at": START, "total": 3}
    return Batch(**{**fields, "sealed_at": START, **changes})


def test_a_complete_batch_is_one_batch_completed_event_about_the_member_counted_last() -> None:
    member = a_job(JobStatus.FAILED, batch_id="b-1", batch_counted=JobStatus.FAILED)
    batch = a_batch(counts={"SUCCEEDED": 2, "FAILED": 1}, updated_at=START + timedelta(seconds=9))

    [event] = batch_events(member, batch)

    assert (event.type, event.time, event.tenant, event.job, event.batch) == (
        EventType.BATCH_COMPLETED,
        START + timedelta(seconds=9),
        TENANT,
        member,
        batch,
    )
    assert re.fullmatch(r"evt_[0-9a-f]{32}", event.id)


def test_a_batch_whose_every_job_succeeded_is_both_events_each_with_an_id_of_the_batch_alone() -> None:
    member = a_job(JobStatus.SUCCEEDED, batch_id="b-1", batch_counted=JobStatus.SUCCEEDED)
    batch = a_batch(counts={"SUCCEEDED": 3})

    events = batch_events(member, batch)
    # The same batch read complete again, after another member's count handled late.
    again = batch_events(
        member.replace(job_id="1" * 32), a_batch(counts={"SUCCEEDED": 3}, updated_at=START + timedelta(seconds=5))
    )

    assert [e.type for e in events] == [EventType.BATCH_COMPLETED, EventType.BATCH_SUCCEEDED]
    assert [e.id for e in again] == [e.id for e in events]
    assert len({e.id for e in events}) == 2
    assert {e.id for e in batch_events(member, a_batch(batch_id="b-2", counts={"SUCCEEDED": 3}))}.isdisjoint(
        e.id for e in events
    )


def test_a_batch_not_complete_is_no_event() -> None:
    member = a_job(JobStatus.SUCCEEDED, batch_id="b-1", batch_counted=JobStatus.SUCCEEDED)

    assert batch_events(member, a_batch(counts={"SUCCEEDED": 2})) == []
    assert batch_events(member, a_batch(counts={"SUCCEEDED": 3}, sealed_at=None)) == []
