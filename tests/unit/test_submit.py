"""Accepting jobs: validation, the idempotency decision, and a send that may fail without losing the job."""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from offpath.domain.chain import MAX_THEN_BYTES
from offpath.domain.errors import (
    IdempotencyConflictError,
    InvalidRequestError,
    JobTypeForbiddenError,
    PayloadTooLargeError,
    StoreUnavailableError,
)
from offpath.domain.job import JobStatus, payload_json
from offpath.domain.ports import JobMessage, key_record_extension
from offpath.domain.registry import Registry, Submitter
from offpath.logic.submit import (
    MAX_BATCH,
    Ports,
    SubmitPolicy,
    SubmitRequest,
    canonical_json,
    submit_batch,
    submit_job,
    submit_made,
)
from offpath_tools.fakes import (
    SCRIPTED_TYPE,
    STRICT_TYPE,
    InMemoryJobQueue,
    InMemoryJobStore,
    InMemoryScheduler,
    RecordingMetrics,
    Sent,
)
from tests.unit.conftest import START, TENANT, a_job

SNEAKY = "../$(rm -rf /)\"'\x00\x1b[31m"


def request(payload: dict[str, Any] | None = None, **changes: Any) -> SubmitRequest:
    fields: dict[str, Any] = {"tenant": TENANT, "type": SCRIPTED_TYPE, "payload": payload or {"n": 1}}
    fields.update(changes)
    return SubmitRequest(**fields)


# -- validation ---------------------------------------------------------------------------------


def test_an_unknown_type_is_rejected_naming_the_field_without_echoing_it(ports: Ports) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        submit_job(request(type=SNEAKY), ports, SubmitPolicy())

    assert (raised.value.field, raised.value.code) == ("type", "unknown_job_type")
    assert SNEAKY not in str(raised.value)


def test_a_payload_value_of_the_wrong_kind_is_rejected_naming_the_field_without_echoing_it(ports: Ports) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        submit_job(request({"name": SNEAKY * 3}, type=STRICT_TYPE), ports, SubmitPolicy())

    assert (raised.value.field, raised.value.code) == ("payload.name", "invalid_payload")
    assert SNEAKY not in str(raised.value)


def test_an_unexpected_payload_key_is_rejected_without_echoing_the_key(ports: Ports) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        submit_job(request({"name": "ok", SNEAKY: 1}, type=STRICT_TYPE), ports, SubmitPolicy())

    assert raised.value.field == "payload.?"
    assert SNEAKY not in str(raised.value)


def test_a_queue_other_than_the_job_types_is_rejected(ports: Ports) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        submit_job(request(queue="critical"), ports, SubmitPolicy())

    assert (raised.value.field, raised.value.code, raised.value.errors) == ("queue", "invalid_request", ())
    assert str(raised.value) == "this job type runs on queue 'default'"


@pytest.mark.parametrize(("submitted_by", "who"), [("admin", "admins only"), ("system", "schedules only")])
def test_a_job_type_above_the_callers_authority_is_refused_naming_who_submits_it(
    ports: Ports, registry: Registry, store: InMemoryJobStore, submitted_by: Submitter, who: str
) -> None:
    scripted = registry.job_types[SCRIPTED_TYPE]
    raised_type = dataclasses.replace(scripted, name="test.raised", submitted_by=submitted_by)
    mine = Registry(queues=dict(registry.queues), job_types={**registry.job_types, "test.raised": raised_type})

    with pytest.raises(JobTypeForbiddenError) as refused:
        submit_job(request(type="test.raised"), dataclasses.replace(ports, registry=mine), SubmitPolicy())

    assert (refused.value.job_type, refused.value.submitted_by) == ("test.raised", submitted_by)
    assert str(refused.value) == f"job type 'test.raised' is submitted by {who}"
    assert store.writes == []


@pytest.mark.parametrize("key", ["", "x" * 256, "tab\there", "line\nbreak"])
def test_an_idempotency_key_that_is_empty_too_long_or_unprintable_is_rejected(ports: Ports, key: str) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        submit_job(request(idempotency_key=key), ports, SubmitPolicy())

    assert raised.value.field == "Idempotency-Key"


def test_nothing_is_written_or_sent_for_a_rejected_request(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue
) -> None:
    with pytest.raises(InvalidRequestError):
        submit_job(request(type="no.such.type"), ports, SubmitPolicy())

    assert (store.writes, queue.sent) == ([], [])


# -- payload limit ------------------------------------------------------------------------------


def payload_of_size(size: int) -> dict[str, str]:
    """A payload whose compact canonical JSON is exactly `size` bytes."""
    payload = {"data": ""}
    payload["data"] = "x" * (size - len(canonical_json(payload).encode()))
    assert len(canonical_json(payload).encode()) == size
    return payload


def test_a_payload_at_the_limit_is_accepted(ports: Ports) -> None:
    job = submit_job(request(payload_of_size(1000)), ports, SubmitPolicy(payload_limit_bytes=1000)).job

    assert job.status is JobStatus.QUEUED


def test_a_payload_one_byte_over_the_limit_is_rejected_with_the_limit(ports: Ports) -> None:
    with pytest.raises(PayloadTooLargeError) as raised:
        submit_job(request(payload_of_size(1001)), ports, SubmitPolicy(payload_limit_bytes=1000))

    assert (raised.value.size, raised.value.limit) == (1001, 1000)
    assert str(raised.value) == "payload is 1001 bytes; the limit is 1000 bytes"


def test_the_limit_counts_utf8_bytes_not_characters(ports: Ports) -> None:
    payload = {"data": "é" * 500}  # 1000 bytes of text in 500 characters

    with pytest.raises(PayloadTooLargeError):
        submit_job(request(payload), ports, SubmitPolicy(payload_limit_bytes=1000))


# -- idempotency --------------------------------------------------------------------------------


def test_a_new_key_makes_a_new_job_and_sends_its_message(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue
) -> None:
    submitted = submit_job(request(idempotency_key="k-1"), ports, SubmitPolicy())

    assert not submitted.replayed
    record = store.key_record(TENANT, "k-1")  # the key's record names the job, before it was sent and written
    assert record is not None and (record.job_id, record.created_at) == (submitted.job.job_id, submitted.job.created_at)
    assert store.writes == ["record_key", "create"]
    assert [s.message for s in queue.sent] == [JobMessage.of(submitted.job)]


def test_the_same_key_and_payload_replays_the_first_job_and_its_second_message_names_that_job(
    ports: Ports, queue: InMemoryJobQueue, metrics: RecordingMetrics
) -> None:
    first = submit_job(request(idempotency_key="k-1"), ports, SubmitPolicy())

    again = submit_job(request(idempotency_key="k-1"), ports, SubmitPolicy())

    assert again.replayed
    assert again.job == first.job
    # The key's record tells a replay apart before anything is sent: no second message.
    assert [s.message for s in queue.sent] == [JobMessage.of(first.job)]
    assert metrics.counts["JobsDeduplicated"] == 1


def test_the_same_key_with_another_payload_is_a_conflict_and_the_first_job_stays(
    ports: Ports, store: InMemoryJobStore
) -> None:
    first = submit_job(request({"n": 1}, idempotency_key="k-1"), ports, SubmitPolicy()).job

    with pytest.raises(IdempotencyConflictError) as conflict:
        submit_job(request({"n": 2}, idempotency_key="k-1"), ports, SubmitPolicy())

    assert str(conflict.value) == "idempotency key already used with a different payload"
    assert conflict.value.existing == first
    assert store.get(first.job_id, tenant=first.tenant) == first


def test_the_same_key_from_another_tenant_makes_its_own_job(ports: Ports) -> None:
    first = submit_job(request(idempotency_key="k-1"), ports, SubmitPolicy()).job

    other = submit_job(request(idempotency_key="k-1", tenant="tenant-b"), ports, SubmitPolicy())

    assert not other.replayed
    assert other.job.job_id != first.job_id
    assert other.job.tenant == "tenant-b"


def test_a_submit_that_stopped_between_its_keys_record_and_its_job_is_carried_on_by_the_retry(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue
) -> None:
    """The key was marked and the message sent, then the job's write failed: the client's retry with the same key
    writes the job under the recorded id and creation time (and sends it again): one job, QUEUED."""
    store.fail_next("create", StoreUnavailableError("DynamoDB throttled"))
    with pytest.raises(StoreUnavailableError):
        submit_job(request(idempotency_key="k-1"), ports, SubmitPolicy())
    record = store.key_record(TENANT, "k-1")
    assert record is not None and store.jobs() == []

    retried = submit_job(request(idempotency_key="k-1"), ports, SubmitPolicy())

    assert not retried.replayed
    assert (retried.job.job_id, retried.job.created_at) == (record.job_id, record.created_at)
    assert [(j.job_id, j.status) for j in store.jobs()] == [(record.job_id, JobStatus.QUEUED)]
    assert [s.message.job_id for s in queue.sent] == [record.job_id] * 2  # a duplicate delivery, acked
    again = submit_job(request(idempotency_key="k-1"), ports, SubmitPolicy())
    assert again.replayed and again.job == retried.job


def test_a_conflicting_retry_after_a_stopped_submit_is_still_a_conflict(ports: Ports, store: InMemoryJobStore) -> None:
    store.fail_next("create", StoreUnavailableError("DynamoDB throttled"))
    with pytest.raises(StoreUnavailableError):
        submit_job(request({"n": 1}, idempotency_key="k-1"), ports, SubmitPolicy())

    with pytest.raises(IdempotencyConflictError):
        submit_job(request({"n": 2}, idempotency_key="k-1"), ports, SubmitPolicy())

    assert store.jobs() == []


def test_a_plain_submit_writes_the_job_only(ports: Ports, store: InMemoryJobStore) -> None:
    submit_job(request(), ports, SubmitPolicy())

    assert store.writes == ["create"]


def test_without_a_key_every_submission_is_a_new_job(ports: Ports) -> None:
    first = submit_job(request(), ports, SubmitPolicy()).job

    second = submit_job(request(), ports, SubmitPolicy()).job

    assert first.job_id != second.job_id


def test_a_retried_write_that_had_landed_counts_as_new(ports: Ports, store: InMemoryJobStore) -> None:
    """The store sees its own earlier write (same submission) and answers as for a new job."""
    job = submit_job(request(idempotency_key="k-1"), ports, SubmitPolicy()).job

    outcome = store.create(job)

    assert (outcome.job, outcome.replayed) == (job, False)


# -- how long an idempotency key's record is kept --------------------------------------------------


def keyed_job_due(after: timedelta | None) -> Any:
    """A keyed job created at START, due `after` later (None: due at once)."""
    return a_job(JobStatus.SUCCEEDED, idempotency_key="k-1", run_at=None if after is None else START + after)


@pytest.mark.parametrize(
    ("due_after", "finished_after"),
    [
        (None, timedelta(hours=1)),
        (None, timedelta(days=1)),
        # A job due in three days is due then, not when it was submitted.
        (timedelta(days=3), timedelta(days=3, hours=2)),
    ],
)
def test_a_job_finishing_within_a_day_of_being_due_leaves_its_keys_record_as_it_is(
    due_after: timedelta | None, finished_after: timedelta
) -> None:
    now = START + finished_after

    assert key_record_extension(keyed_job_due(due_after), now=now, expires_at=now + timedelta(days=7)) is None


@pytest.mark.parametrize(
    ("due_after", "finished_after"),
    [
        (None, timedelta(days=1, seconds=1)),
        (timedelta(days=3), timedelta(days=4, seconds=1)),
        # A run_at in the past is due when it was submitted.
        (-timedelta(days=3), timedelta(days=1, seconds=1)),
    ],
)
def test_a_job_finishing_later_keeps_its_keys_record_a_day_past_its_own_expiry(
    due_after: timedelta | None, finished_after: timedelta
) -> None:
    now = START + finished_after

    kept = key_record_extension(keyed_job_due(due_after), now=now, expires_at=now + timedelta(days=7))

    assert kept == now + timedelta(days=8)


def test_a_job_without_a_key_has_no_record_to_keep() -> None:
    late = START + timedelta(days=30)

    assert key_record_extension(a_job(JobStatus.SUCCEEDED), now=late, expires_at=late + timedelta(days=7)) is None


# -- sending ------------------------------------------------------------------------------------


def test_a_failed_send_still_accepts_the_job_and_counts_the_failure(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, metrics: RecordingMetrics
) -> None:
    queue.fail_sends()

    submitted = submit_job(request(), ports, SubmitPolicy())

    assert not submitted.replayed
    assert store.get(submitted.job.job_id, tenant=submitted.job.tenant) == submitted.job
    assert submitted.job.sweep_at is not None  # the sweeper will send it
    assert metrics.counts == {"SendFailed": 1}  # JobsSubmitted comes from the table's stream (the notifier)


def test_the_message_of_a_job_carries_the_callers_trace(ports: Ports, queue: InMemoryJobQueue) -> None:
    trace = "0af7651916cd43dd8448eb211c80319c"

    submitted = submit_job(request(trace_id=trace), ports, SubmitPolicy())

    assert submitted.job.trace_id == trace
    assert [s.message.trace_id for s in queue.sent] == [trace]


def test_a_sent_job_is_written_without_a_sweep_time(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue
) -> None:
    submitted = submit_job(request(), ports, SubmitPolicy())

    stored = store.get(submitted.job.job_id, tenant=submitted.job.tenant)
    assert stored is not None and stored.status is JobStatus.QUEUED
    assert stored.sweep_at is None  # its message is on the queue: nothing for the sweeper to find
    assert [s.message for s in queue.sent] == [JobMessage.of(stored)]


def test_the_message_goes_out_before_the_write_so_a_failed_write_leaves_only_a_message(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue
) -> None:
    store.fail_next("create", StoreUnavailableError("DynamoDB throttled"))

    with pytest.raises(StoreUnavailableError):
        submit_job(request(), ports, SubmitPolicy())

    assert store.jobs() == []  # the caller got an error: nothing was accepted
    assert len(queue.sent) == 1  # the worker drops it once it is older than the bound (test_process)


def test_a_job_due_later_than_an_sqs_delay_is_written_with_its_sweep_time_and_sends_nothing(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue
) -> None:
    submitted = submit_job(
        request(run_at="2099-01-01T00:00:00Z"), ports, SubmitPolicy(max_schedule_ahead=timedelta(days=36500))
    )

    stored = store.get(submitted.job.job_id, tenant=submitted.job.tenant)
    assert stored is not None and stored.status is JobStatus.SCHEDULED
    assert stored.sweep_at is not None
    assert queue.sent == []


# -- batches ------------------------------------------------------------------------------------


def test_a_batch_accepts_the_good_items_and_reports_the_bad_ones(ports: Ports, queue: InMemoryJobQueue) -> None:
    results = submit_batch(
        [request({"n": 1}), request(type="no.such.type"), request({"n": 3}), request({"name": 1}, type=STRICT_TYPE)],
        ports,
        SubmitPolicy(),
    )

    assert [r.index for r in results] == [0, 1, 2, 3]
    assert [r.submitted is not None for r in results] == [True, False, True, False]
    assert isinstance(results[1].error, InvalidRequestError)
    assert len(queue.batches) == 1
    assert {m.job_id for m in queue.batches[0][1]} == {r.submitted.job.job_id for r in results if r.submitted}


def test_a_batch_over_the_limit_is_rejected_whole(ports: Ports, store: InMemoryJobStore) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        submit_batch([request()] * (MAX_BATCH + 1), ports, SubmitPolicy())

    assert raised.value.field == "jobs"
    assert store.writes == []


def test_a_batch_whose_send_fails_keeps_its_jobs_and_counts_each_unsent(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, metrics: RecordingMetrics
) -> None:
    queue.fail_sends()

    results = submit_batch([request({"n": 1}), request({"n": 2})], ports, SubmitPolicy())

    assert all(r.submitted is not None for r in results)
    assert len(store.jobs()) == 2
    assert metrics.counts["SendFailed"] == 2


# -- what a submit sends, schedules and counts (dispatch, the batch's delayed items, submit_made) ------------------


def metric(metrics: RecordingMetrics, name: str, job_type: str = SCRIPTED_TYPE) -> float:
    """A count as a dashboard's per-queue, per-type graph shows it."""
    return metrics.dimensioned.get((name, "default", job_type), 0)


def test_a_batch_item_due_in_ten_minutes_is_sent_on_its_queue_with_that_delay(
    ports: Ports, queue: InMemoryJobQueue
) -> None:
    run_at = (START + timedelta(minutes=10)).isoformat()
    [result] = submit_batch([request(run_at=run_at)], ports, SubmitPolicy())

    assert result.submitted is not None
    assert queue.sent == [Sent("default", JobMessage.of(result.submitted.job), delay_s=600)]


def test_a_batch_item_due_later_whose_send_fails_is_kept_counted_and_logged_by_its_id(
    ports: Ports, queue: InMemoryJobQueue, store: InMemoryJobStore, metrics: RecordingMetrics, caplog: Any
) -> None:
    queue.fail_sends()
    with caplog.at_level(logging.WARNING, logger="offpath.logic.submit"):
        [result] = submit_batch([request(run_at=(START + timedelta(minutes=10)).isoformat())], ports, SubmitPolicy())

    assert result.submitted is not None and store.get(result.submitted.job.job_id, tenant=TENANT) is not None
    assert metric(metrics, "SendFailed") == 1
    [line] = [r for r in caplog.records if r.name == "offpath.logic.submit"]
    assert (line.getMessage(), line.job_id) == (
        "send failed; the sweeper will send the job",
        result.submitted.job.job_id,
    )


def test_a_job_due_past_an_sqs_delay_gets_its_one_time_schedule(ports: Ports, queue: InMemoryJobQueue) -> None:
    scheduler = InMemoryScheduler()
    submitted = submit_job(
        request(run_at=(START + timedelta(days=2)).isoformat()),
        dataclasses.replace(ports, scheduler=scheduler),
        SubmitPolicy(),
    )

    assert submitted.job.status is JobStatus.SCHEDULED
    assert scheduler.schedules == {submitted.job.job_id: submitted.job} and queue.sent == []


def test_a_one_time_schedule_not_created_is_counted_and_logged_and_the_job_kept(
    ports: Ports, store: InMemoryJobStore, metrics: RecordingMetrics, caplog: Any
) -> None:
    scheduler = InMemoryScheduler()
    scheduler.failing = True
    with caplog.at_level(logging.WARNING, logger="offpath.logic.submit"):
        submitted = submit_job(
            request(run_at=(START + timedelta(days=2)).isoformat()),
            dataclasses.replace(ports, scheduler=scheduler),
            SubmitPolicy(),
        )

    assert store.get(submitted.job.job_id, tenant=TENANT) is not None
    assert metric(metrics, "ScheduleCreateFailed") == 1
    assert [r.getMessage() for r in caplog.records if r.name == "offpath.logic.submit"] == [
        "one-time schedule not created; the sweeper will enqueue the job when due"
    ]


def test_without_a_scheduler_a_job_due_later_is_logged_as_an_error_for_the_sweeper(
    ports: Ports, store: InMemoryJobStore, caplog: Any
) -> None:
    with caplog.at_level(logging.WARNING, logger="offpath.logic.submit"):
        submitted = submit_job(request(run_at=(START + timedelta(days=2)).isoformat()), ports, SubmitPolicy())

    assert store.get(submitted.job.job_id, tenant=TENANT) is not None
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "offpath.logic.submit"] == [
        ("ERROR", "no scheduler configured; the sweeper will enqueue the job when due")
    ]


def test_a_failed_first_send_is_logged_with_the_jobs_id(ports: Ports, queue: InMemoryJobQueue, caplog: Any) -> None:
    queue.fail_sends()
    with caplog.at_level(logging.WARNING, logger="offpath.logic.submit"):
        submitted = submit_job(request(), ports, SubmitPolicy())

    [line] = [r for r in caplog.records if r.name == "offpath.logic.submit"]
    assert line.getMessage() == "send failed; the job is written for the sweeper to send"
    assert line.job_id == submitted.job.job_id


def test_a_replayed_submit_is_counted_deduplicated_on_its_queue_and_type(
    ports: Ports, metrics: RecordingMetrics
) -> None:
    submit_job(request(idempotency_key="k-1"), ports, SubmitPolicy())
    again = submit_job(request(idempotency_key="k-1"), ports, SubmitPolicy())

    assert again.replayed is True
    assert metric(metrics, "JobsDeduplicated") == 1


def test_a_made_job_already_there_is_answered_as_a_replay_and_counted(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, metrics: RecordingMetrics
) -> None:
    job = a_job(sweep_at=START + timedelta(minutes=5))
    first = submit_made(job, ports)
    second = submit_made(job.replace(submission_id="another-attempts-submit"), ports)  # a retried attempt's

    assert (first.replayed, second.replayed) == (False, True)
    assert (
        store.get(job.job_id, tenant=TENANT) == first.job and first.job.sweep_at is None
    )  # sent: no sweep time needed
    assert [sent.delay_s for sent in queue.sent] == [0, 0]
    assert metric(metrics, "JobsDeduplicated") == 1


def test_a_batch_replays_an_item_under_a_key_it_accepted_before_at_its_own_index(ports: Ports) -> None:
    [first] = submit_batch([request(idempotency_key="k-1")], ports, SubmitPolicy())
    results = submit_batch([request({"n": 2}), request(idempotency_key="k-1")], ports, SubmitPolicy())

    assert [r.index for r in results] == [0, 1]
    assert first.submitted is not None and results[1].submitted is not None
    assert results[1].submitted.replayed is True and results[1].submitted.job == first.submitted.job


def test_a_bad_key_in_a_batch_names_the_items_body_field(ports: Ports) -> None:
    [result] = submit_batch([request(idempotency_key=" ")], ports, SubmitPolicy())

    assert isinstance(result.error, InvalidRequestError) and result.error.field == "idempotency_key"


def test_a_batch_over_the_limit_says_how_many_it_holds(ports: Ports) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        submit_batch([request()] * (MAX_BATCH + 1), ports, SubmitPolicy())

    assert str(raised.value) == f"a batch holds at most {MAX_BATCH} jobs"


# -- chains: each refusal of a step names its field, says why, and has its code --------------------------------------


def refusal(ports: Ports, then: Any, submitter: Submitter = "tenant") -> tuple[str, str, str]:
    with pytest.raises(InvalidRequestError) as raised:
        submit_job(request(then=then, submitter=submitter), ports, SubmitPolicy())
    return raised.value.field, str(raised.value), raised.value.code


def test_a_chain_step_that_is_not_an_object_is_refused(ports: Ports) -> None:
    assert refusal(ports, {"type": SCRIPTED_TYPE, "then": ["x"]}) == (
        "then.then",
        "then.then must be an object: {type, payload, then?}",
        "invalid_request",
    )


def test_a_chain_step_with_an_unknown_field_is_refused(ports: Ports) -> None:
    assert refusal(ports, {"type": SCRIPTED_TYPE, "after": 1}) == (
        "then",
        "then: unknown field (a step has type, payload and then)",
        "invalid_request",
    )


def test_a_chain_step_without_a_type_name_is_refused(ports: Ports) -> None:
    assert refusal(ports, {"payload": {}}) == ("then.type", "then.type must be a job type's name", "invalid_request")


def test_a_chain_step_of_an_unknown_type_is_refused_as_a_submit_of_it_is(ports: Ports) -> None:
    assert refusal(ports, {"type": "no.such"}) == (
        "then.type",
        "unknown job type 'no.such'; GET /job-types lists the registered ones",
        "unknown_job_type",
    )
    assert refusal(ports, {"type": SNEAKY})[1] == (
        "unknown job type (not a job type name: a-z, 0-9, '_', '.', '-'); GET /job-types lists the registered ones"
    )


def test_a_chain_step_of_a_type_above_the_callers_authority_is_refused(ports: Ports) -> None:
    assert refusal(ports, {"type": "maintenance.nightly_cleanup"}) == (
        "then.type",
        "job type 'maintenance.nightly_cleanup' is not open to this caller",
        "job_type_forbidden",
    )


def test_a_chain_steps_payload_that_is_not_an_object_is_refused(ports: Ports) -> None:
    assert refusal(ports, {"type": SCRIPTED_TYPE, "payload": [1]}) == (
        "then.payload",
        "then.payload must be an object",
        "invalid_payload",
    )


def test_a_chain_step_without_a_payload_is_given_its_models_defaults(ports: Ports) -> None:
    submitted = submit_job(request(then={"type": SCRIPTED_TYPE}), ports, SubmitPolicy())

    assert submitted.job.then == {"type": SCRIPTED_TYPE, "payload": {}}


def test_a_chain_of_exactly_the_byte_limit_is_accepted_and_one_byte_more_is_not(ports: Ports) -> None:
    def chain(size: int) -> dict[str, Any]:
        empty = len(payload_json({"type": SCRIPTED_TYPE, "payload": {"s": ""}}).encode())
        return {"type": SCRIPTED_TYPE, "payload": {"s": "x" * (size - empty)}}

    assert submit_job(request(then=chain(MAX_THEN_BYTES)), ports, SubmitPolicy()).job.then is not None
    field, message, _ = refusal(ports, chain(MAX_THEN_BYTES + 1))
    assert (field, message) == (
        "then",
        f"the chain is {MAX_THEN_BYTES + 1} bytes; at most {MAX_THEN_BYTES} are accepted",
    )


# -- payloads and times: the refusal's field, message and code -------------------------------------------------------


def test_a_payload_is_validated_strictly_and_stored_as_json(ports: Ports) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        submit_job(request({"name": "ok", "count": "5"}, type=STRICT_TYPE), ports, SubmitPolicy())
    assert raised.value.field == "payload.count"

    submitted = submit_job(request({"name": "ok", "count": 5}, type=STRICT_TYPE), ports, SubmitPolicy())
    assert submitted.job.payload == {"name": "ok", "count": 5}


def test_a_payload_nested_too_deeply_is_refused_naming_the_field(ports: Ports) -> None:
    deep: Any = {}
    for _ in range(2_000):
        deep = {"a": deep}
    with pytest.raises(InvalidRequestError) as raised:
        submit_job(request(deep), ports, SubmitPolicy())

    assert (raised.value.field, raised.value.code) == ("payload", "invalid_payload")
    # Which of the two refusals depends on the pydantic: the one the tests' venv holds raises past its recursion
    # limit (offpath's own message); the one bundled for Lambda reports it as invalid JSON at the payload itself.
    message = str(raised.value)
    assert message == "payload is nested too deeply" or message.startswith(
        "payload: Invalid JSON: recursion limit exceeded"
    )


def test_every_failing_field_of_a_payload_is_listed_with_the_first_as_the_message(ports: Ports) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        submit_job(request({"name": 1, "count": -1}, type=STRICT_TYPE), ports, SubmitPolicy())

    error = raised.value
    assert [field for field, _ in error.errors] == ["payload.name", "payload.count"]
    assert str(error) == f"payload.name: {error.errors[0][1]}" and error.field == "payload.name"
    assert error.code == "invalid_payload"


def test_run_at_and_debounce_together_are_refused(ports: Ports) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        submit_job(request(run_at=START.isoformat(), debounce=("k", 2)), ports, SubmitPolicy())

    assert (raised.value.field, str(raised.value)) == (
        "run_at",
        "run_at and debounce cannot both be given (debounce sets when it runs)",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tomorrow", "run_at must be an RFC 3339 date-time (ISO 8601), e.g. 2026-01-31T09:00:00Z"),
        ("1969-12-31T23:59:59Z", "run_at must be 1970-01-01T00:00:00Z or later"),
    ],
)
def test_a_run_at_that_is_not_a_time_offpath_takes_is_refused_saying_why(ports: Ports, text: str, message: str) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        submit_job(request(run_at=text), ports, SubmitPolicy())

    assert (raised.value.field, str(raised.value)) == ("run_at", message)


def test_the_earliest_run_at_is_accepted_and_an_offset_is_read_in_utc(ports: Ports) -> None:
    earliest = submit_job(request(run_at="1970-01-01T00:00:00Z"), ports, SubmitPolicy()).job
    assert earliest.run_at == datetime(1970, 1, 1, tzinfo=UTC)

    job = submit_job(request(run_at="2026-03-01T13:00:00.5+01:00"), ports, SubmitPolicy()).job
    assert job.run_at == START + timedelta(milliseconds=500) and job.run_at.utcoffset() == timedelta(0)
