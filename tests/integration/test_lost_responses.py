"""A write lands, its response is lost, botocore sends it again: the retry meets the call's own write.

On DynamoDB a conditional write retried by the SDK after a timeout sees its own earlier write as a
failed condition. The store's writes that decide something must recognise their own write (found by the
fault ledger, tests/e2e/test_ledger.py: `ctx.once` returned False to the only run of a job, so its e-mail
was never sent; a claim met its own write and the job waited out its own lease, an attempt lost).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from offpath.adapters.dynamodb_store import DynamoDbJobStore
from offpath.domain.errors import JobConflictError
from offpath.domain.job import Job, JobStatus
from tests.integration.conftest import Pipeline

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
RETENTION = timedelta(days=30)
LEASE = timedelta(seconds=60)


def lose_the_first_response(client: Any, operation: str, *, writing: str = "") -> list[int]:
    """The first successful `operation` of `client` (whose request contains `writing`) is sent again
    at once, as after a lost response. Returns the list of attempts the client makes (one entry per
    attempt)."""
    lost: list[int] = []
    attempts: list[int] = []

    def retry_once(response: Any, request_dict: dict[str, Any], **kwargs: Any) -> int | None:
        body = request_dict.get("body", b"")
        sent = body.decode() if isinstance(body, bytes) else str(body)
        if not lost and response is not None and response[0].status_code == 200 and writing in sent:
            lost.append(1)
            return 0
        return None

    client.meta.events.register_first(f"needs-retry.dynamodb.{operation}", retry_once)
    client.meta.events.register(f"before-send.dynamodb.{operation}", lambda **kwargs: attempts.append(1))
    return attempts


def test_a_once_mark_whose_response_was_lost_is_still_the_first(store: DynamoDbJobStore) -> None:
    attempts = lose_the_first_response(store.client, "PutItem")

    first = store.mark_once("job-1", "welcome-email", now=T0, expires_at=T0 + RETENTION)
    again = store.mark_once("job-1", "welcome-email", now=T0, expires_at=T0 + RETENTION)

    assert len(attempts) == 3  # the mark, its retry, the second mark
    assert (first, again) == (True, False)


def queued_job(max_attempts: int = 1) -> Job:
    return Job(
        job_id=f"{7:032x}",
        tenant="tenant-a",
        type="demo.echo",
        queue="default",
        payload={},
        payload_hash="h",
        status=JobStatus.QUEUED,
        created_at=T0,
        updated_at=T0,
        max_attempts=max_attempts,
        submission_id="s1",
        sweep_at=T0 + timedelta(minutes=2),
    )


def test_a_claim_whose_response_was_lost_still_holds_the_job(store: DynamoDbJobStore) -> None:
    """Otherwise the job waits out a lease it holds itself, and with one attempt it ends FAILED
    ("lease expired") without ever running."""
    job = queued_job(max_attempts=1)
    store.create(job)
    attempts = lose_the_first_response(store.client, "UpdateItem")
    now = T0 + timedelta(seconds=1)

    claimed = store.claim(job.job_id, tenant=job.tenant, now=now, lease_until=now + LEASE)

    assert len(attempts) == 2
    assert (claimed.status, claimed.attempt, claimed.lease_until) == (JobStatus.RUNNING, 1, now + LEASE)


def test_a_claim_of_a_job_another_worker_holds_is_still_refused(store: DynamoDbJobStore) -> None:
    job = queued_job(max_attempts=3)
    store.create(job)
    now = T0 + timedelta(seconds=1)
    store.claim(job.job_id, tenant=job.tenant, now=now, lease_until=now + LEASE)
    attempts = lose_the_first_response(store.client, "UpdateItem")

    later = now + timedelta(seconds=1)
    with pytest.raises(JobConflictError):
        store.claim(job.job_id, tenant=job.tenant, now=later, lease_until=later + LEASE)
    assert len(attempts) == 1


def test_a_retry_whose_response_was_lost_is_still_recorded(store: DynamoDbJobStore) -> None:
    job = queued_job(max_attempts=3)
    store.create(job)
    now = T0 + timedelta(seconds=1)
    claimed = store.claim(job.job_id, tenant=job.tenant, now=now, lease_until=now + LEASE)
    attempts = lose_the_first_response(store.client, "UpdateItem")

    store.record_retry(claimed, error="boom", now=now, next_attempt_at=now + timedelta(seconds=4))

    waiting = store.get(job.job_id, tenant=job.tenant)
    assert len(attempts) == 2
    assert waiting is not None
    assert (waiting.status, waiting.attempt, waiting.error) == (JobStatus.RETRYING, 1, "boom")


def test_a_retry_whose_response_was_lost_keeps_the_message_for_the_next_attempt(pipeline: Pipeline) -> None:
    """Otherwise the worker takes the retry for a newer attempt's write and acknowledges the
    message: the job waits RETRYING until the sweeper sends it again."""
    status, job, _ = pipeline.submit("demo.flaky", {"fail_first": 1})
    assert status == 202, job
    messages = pipeline.receive()
    # The retry is the write that sets the next attempt's time.
    attempts = lose_the_first_response(pipeline.store.client, "UpdateItem", writing="next_attempt_at = :next")

    answer = pipeline.invoke_worker(messages)

    assert len(attempts) == 3  # the claim, the retry, the retry sent again
    assert answer == {"batchItemFailures": [{"itemIdentifier": messages[0]["MessageId"]}]}
    _, view, _ = pipeline.call("GET", f"/jobs/{job['job_id']}")
    assert (view["status"], view["attempts"]) == ("RETRYING", 1)


def test_an_outcome_of_an_older_attempt_is_still_refused(store: DynamoDbJobStore) -> None:
    job = queued_job(max_attempts=3)
    store.create(job)
    now = T0 + timedelta(seconds=1)
    older = store.claim(job.job_id, tenant=job.tenant, now=now, lease_until=now + LEASE)
    later = now + LEASE
    store.claim(job.job_id, tenant=job.tenant, now=later, lease_until=later + LEASE)
    attempts = lose_the_first_response(store.client, "UpdateItem")

    with pytest.raises(JobConflictError):
        store.record_retry(older, error="late", now=later, next_attempt_at=later + timedelta(seconds=4))
    assert len(attempts) == 1


def test_a_cancel_whose_response_was_lost_is_still_cancelled(store: DynamoDbJobStore) -> None:
    job = queued_job()
    store.create(job)
    attempts = lose_the_first_response(store.client, "UpdateItem")
    now = T0 + timedelta(seconds=1)

    cancelled = store.cancel(job.job_id, tenant=job.tenant, now=now, expires_at=now + RETENTION)

    assert len(attempts) == 2
    assert (cancelled.status, cancelled.finished_at) == (JobStatus.CANCELLED, now)


def test_a_cancel_whose_response_was_lost_answers_200_not_409(pipeline: Pipeline) -> None:
    status, job, _ = pipeline.submit("demo.echo", {})
    assert status == 202, job
    attempts = lose_the_first_response(pipeline.store.client, "UpdateItem")

    status, view, _ = pipeline.call("POST", f"/jobs/{job['job_id']}/cancel")

    assert len(attempts) == 2
    assert (status, view["status"]) == (200, "CANCELLED")


def test_a_second_cancel_is_still_a_conflict(store: DynamoDbJobStore) -> None:
    job = queued_job()
    store.create(job)
    now = T0 + timedelta(seconds=1)
    store.cancel(job.job_id, tenant=job.tenant, now=now, expires_at=now + RETENTION)
    attempts = lose_the_first_response(store.client, "UpdateItem")

    later = now + timedelta(seconds=1)
    with pytest.raises(JobConflictError, match="a CANCELLED job cannot be cancelled"):
        store.cancel(job.job_id, tenant=job.tenant, now=later, expires_at=later + RETENTION)
    assert len(attempts) == 1
