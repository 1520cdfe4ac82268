"""The submit answer's JSON, written without building JobView, is JobView's own dump for every job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from offpath.domain.job import AttemptRecord, Job, JobStatus, Progress
from offpath.handlers.api_models import Dumped, JobView
from offpath.handlers.http import dump_json
from offpath.handlers.job_json import job_document

times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
) | st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)).map(
    lambda when: when.astimezone(datetime.now().astimezone().tzinfo)
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)
records = st.builds(
    AttemptRecord,
    attempt=st.integers(1, 10),
    started_at=st.none() | times,
    finished_at=times,
    outcome=st.sampled_from(["SUCCEEDED", "RETRYING", "FAILED", "LEASE_EXPIRED"]),
    error=st.none() | st.text(max_size=20),
)
jobs = st.builds(
    Job,
    job_id=st.text("0123456789abcdef", min_size=32, max_size=32),
    tenant=st.just("tenant-a"),
    type=st.sampled_from(["demo.echo", "send_welcome_email"]),
    queue=st.sampled_from(["default", "bulk"]),
    payload=st.dictionaries(st.text(max_size=5), json_values, max_size=3),
    payload_hash=st.just("h"),
    status=st.sampled_from(list(JobStatus)),
    created_at=times,
    updated_at=times,
    max_attempts=st.integers(1, 10),
    attempt=st.integers(0, 10),
    idempotency_key=st.none() | st.text(max_size=10),
    run_at=st.none() | times,
    started_at=st.none() | times,
    finished_at=st.none() | times,
    next_attempt_at=st.none() | times,
    lease_until=st.none() | times,
    progress=st.none() | st.builds(Progress, fraction=st.integers(0, 1) | st.floats(0, 1), message=st.text(max_size=9)),
    result=json_values,
    error=st.none() | st.text(max_size=20),
    redrives=st.integers(0, 3),
    retries=st.integers(0, 3),
    retried_at=st.none() | times,
    attempt_history=st.lists(records, max_size=3).map(tuple),
)


@settings(max_examples=300, deadline=None)
@given(job=jobs, with_payload=st.booleans())
def test_the_dumped_answer_is_the_models_own_json(job: Job, with_payload: bool) -> None:
    assert dump_json(JobView.dumped(job, with_payload=with_payload)) == dump_json(
        JobView.of(job, with_payload=with_payload)
    )


def test_a_plain_submitted_job_is_dumped_without_building_the_model() -> None:
    now = datetime(2026, 12, 1, 9, tzinfo=UTC)
    job = Job("a" * 32, "tenant-a", "demo.echo", "default", {"x": 1}, "h", JobStatus.QUEUED, now, now, 3)
    answer = JobView.dumped(job)
    assert isinstance(answer, Dumped)
    assert answer.model_dump(mode="json")["created_at"] == "2026-12-01T09:00:00Z"


def test_a_result_pydantic_would_convert_is_answered_through_the_model() -> None:
    now = datetime(2026, 12, 1, 9, tzinfo=UTC)
    odd: Any = {"when": now + timedelta(seconds=1), "nan": float("nan")}
    job = Job("a" * 32, "tenant-a", "demo.echo", "default", {}, "h", JobStatus.SUCCEEDED, now, now, 3, result=odd)
    answer = JobView.dumped(job)
    assert isinstance(answer, JobView)
    assert '"nan":null' in dump_json(answer)


def test_the_lease_end_is_shown_while_running_and_not_after() -> None:
    """A claim's lease is answered as `lease_until`; the item may keep it after the attempt, the answer does not."""
    at = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
    running = Job(
        job_id="0" * 32, tenant="t", type="demo.echo", queue="default", payload={}, payload_hash="h",
        status=JobStatus.RUNNING, created_at=at, updated_at=at, max_attempts=3, attempt=1,
        lease_until=at + timedelta(minutes=12),
    )  # fmt: skip
    done = running.replace(status=JobStatus.SUCCEEDED)

    assert JobView.of(running).lease_until == at + timedelta(minutes=12)
    assert dump_json(JobView.dumped(running)).count('"lease_until":"2026-12-02T10:12:00') == 1
    assert JobView.of(done).lease_until is None


@settings(max_examples=200, deadline=None)
@given(job=jobs, with_payload=st.booleans())
def test_a_job_as_events_and_webhooks_show_it_is_the_models_own_json(job: Job, with_payload: bool) -> None:
    """The notifier renders jobs without building JobView when their values are plain JSON."""
    assert job_document(job, with_payload) == JobView.of(job, with_payload=with_payload).model_dump(mode="json")
