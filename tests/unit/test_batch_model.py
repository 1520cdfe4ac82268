"""A batch as its notices carry it, its counts and its page ids (domain/batch.py); the batches' use cases against the
fakes (logic/batches.py: pages, seal, callbacks, cancel); the batches through the api and the worker:
tests/integration/test_batches.py."""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from offpath.domain.batch import (
    MAX_PAGE,
    ON_COMPLETE,
    ON_SUCCESS,
    Batch,
    BatchStatus,
    CallbackSpec,
    batch_summary,
    page_id_of,
)
from offpath.domain.errors import BatchConflictError, BatchKeyConflictError, BatchNotFoundError, InvalidRequestError
from offpath.domain.ids import derived_job_id
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import JobMessage, Ports
from offpath.logic.batches import (
    BatchRequest,
    JobBatches,
    add_jobs,
    batch_jobs,
    batch_member_final,
    callback_job_id,
    cancel_batch,
    create_batch,
    fingerprint,
    get_batch,
    list_batches,
    seal_batch,
)
from offpath.logic.process import WorkerPolicy, WorkerPorts, process_record
from offpath.logic.submit import SubmitPolicy, SubmitRequest
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import (
    SCRIPTED_TYPE,
    DeadLetter,
    InMemoryBatchStore,
    InMemoryJobQueue,
    InMemoryJobStore,
    RecordingMetrics,
)
from tests.unit.conftest import TENANT, a_job, delivery_of, unbounded

AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_a_batchs_summary_has_its_status_counts_and_callback_jobs() -> None:
    batch = Batch(
        "b-1",
        "tenant-a",
        AT,
        AT,
        total=5,
        counts={"SUCCEEDED": 3, "FAILED": 1},
        sealed_at=AT,
        callback_jobs={ON_COMPLETE: "j-complete", ON_SUCCESS: "j-success"},
    )

    assert batch_summary(batch) == {
        "batch_id": "b-1",
        "status": "RUNNING",
        "total": 5,
        "pending": 1,
        "counts": {"SUCCEEDED": 3, "FAILED": 1},
        "on_complete_job_id": "j-complete",
        "on_success_job_id": "j-success",
    }


def test_a_batch_without_callbacks_names_none() -> None:
    summary = batch_summary(Batch("b-2", "tenant-a", AT, AT))

    assert (summary["on_complete_job_id"], summary["on_success_job_id"]) == (None, None)


def test_a_state_no_member_reached_counts_zero() -> None:
    batch = Batch("b-1", "tenant-a", AT, AT, total=2, counts={"SUCCEEDED": 2})

    assert (batch.count(JobStatus.SUCCEEDED), batch.count(JobStatus.FAILED)) == (2, 0)


def test_a_pages_id_is_the_same_for_its_key_on_every_deployment() -> None:
    # Kept on the page item: a replay of the request after a deployment must find the same page.
    assert page_id_of("page-1") == "0eb236e50de35c59c03b63629624351a"
    assert page_id_of("page-2") != page_id_of("page-1")


# -- the batches, against the fakes (logic/batches.py) ---------------------------------------------------


@pytest.fixture
def batches(store: InMemoryJobStore) -> InMemoryBatchStore:
    return InMemoryBatchStore(store)


@pytest.fixture
def with_batches(ports: Ports, batches: InMemoryBatchStore) -> Ports:
    return dataclasses.replace(ports, batches=batches)


POLICY = SubmitPolicy()
CALLBACK_SPECS = {ON_COMPLETE: CallbackSpec(SCRIPTED_TYPE, {"done": True}), ON_SUCCESS: CallbackSpec(SCRIPTED_TYPE, {})}


def jobs(count: int, **changes: Any) -> list[SubmitRequest]:
    return [SubmitRequest(tenant=TENANT, type=SCRIPTED_TYPE, payload={"n": n}, **changes) for n in range(count)]


def request(count: int = 3, **changes: Any) -> BatchRequest:
    return BatchRequest(**{"tenant": TENANT, "jobs": jobs(count), "callbacks": CALLBACK_SPECS, **changes})


def members(batch: Batch, ports: Ports) -> list[Job]:
    found, cursor = batch_jobs(batch, limit=100, cursor=None, ports=ports)
    assert cursor is None
    return found


def finish(job: Job, status: JobStatus, ports: Ports, store: InMemoryJobStore) -> None:
    """The member ends in `status` and its follow-up counts it."""
    current = store.get(job.job_id, tenant=job.tenant)
    assert current is not None
    if current.status is not status:
        store.put(current.replace(status=status))
    batch_member_final(current.replace(status=status), ports, ports.clock.now())


def test_a_batch_is_written_with_its_jobs_and_sealed(
    with_batches: Ports, queue: InMemoryJobQueue, store: InMemoryJobStore, clock: ManualClock
) -> None:
    made = create_batch(request(), with_batches, POLICY)

    batch = made.batch
    assert not made.replayed
    assert (batch.tenant, batch.total, batch.open_pages, batch.sealed_at, batch.status) == (
        TENANT,
        3,
        0,
        clock.now(),
        BatchStatus.RUNNING,
    )
    assert (batch.created_at, batch.callbacks, batch.callback_jobs) == (clock.now(), CALLBACK_SPECS, {})
    assert batch.fingerprint == fingerprint(request()) and batch.parent_job_id is None
    found = members(batch, with_batches)
    assert [(j.payload, j.batch_id, j.idempotency_key, j.status) for j in found] == [
        ({"n": n}, batch.batch_id, None, JobStatus.QUEUED) for n in range(3)
    ]
    assert [j.job_id for j in found] == [
        derived_job_id(batch.created_at, batch.batch_id, page_id_of("\x00first"), str(n)) for n in range(3)
    ]
    assert [m.job_id for _, sent in queue.batches for m in sent] == [j.job_id for j in found]
    assert get_batch(batch.batch_id, tenant=TENANT, ports=with_batches) == batch


def test_a_batch_requests_fingerprint_is_the_same_on_every_deployment() -> None:
    # Kept on the key's record: a replay after a deployment must match it.
    job = SubmitRequest(
        tenant="t",
        type="a.b",
        payload={"n": 1},
        queue="default",
        run_at="2026-03-01T12:00:00+00:00",
        tags={"team": "maps"},
    )
    made = BatchRequest(tenant="t", jobs=[job], callbacks={ON_SUCCESS: CallbackSpec("c.d", {"x": 2})}, open=True)

    assert fingerprint(made) == "41b0d8cac25e785647350c1124067b1bfd98cff4016c84331bd68693649f7d0c"


def test_a_batch_request_sent_again_with_its_key_is_the_same_batch_and_another_under_it_is_refused(
    with_batches: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    first = create_batch(request(idempotency_key="k"), with_batches, POLICY)
    clock.advance(5)

    again = create_batch(request(idempotency_key="k"), with_batches, POLICY)

    assert again.replayed and (again.batch.batch_id, again.batch.created_at) == (
        first.batch.batch_id,
        first.batch.created_at,
    )
    assert len(store.jobs()) == 3
    with pytest.raises(BatchKeyConflictError, match="Idempotency-Key was already used with another batch request"):
        create_batch(request(2, idempotency_key="k"), with_batches, POLICY)
    with pytest.raises(BatchKeyConflictError):
        create_batch(request(idempotency_key="k", open=True), with_batches, POLICY)


def test_a_request_with_a_bad_job_or_callback_or_too_many_jobs_writes_nothing(
    with_batches: Ports, store: InMemoryJobStore, batches: InMemoryBatchStore
) -> None:
    bad_job = [*jobs(1), SubmitRequest(tenant=TENANT, type="no.such.type", payload={})]
    cases = [
        (request(jobs=bad_job), "jobs.1.type", "jobs.1: "),
        (request(callbacks={ON_SUCCESS: CallbackSpec("no.such.type", {})}), "on_success.type", "on_success: "),
        (request(MAX_PAGE + 1), "jobs", f"a request adds at most {MAX_PAGE} jobs to a batch"),
    ]
    for made, field, says in cases:
        with pytest.raises(InvalidRequestError) as refused:
            create_batch(made, with_batches, POLICY)
        assert refused.value.field == field and str(refused.value).startswith(says)

    assert store.jobs() == [] and batches.batches == {}


def test_pages_are_added_to_an_open_batch_once_each_until_it_is_sealed(
    with_batches: Ports, store: InMemoryJobStore
) -> None:
    opened = create_batch(request(0, open=True), with_batches, POLICY).batch
    assert (opened.status, opened.total) == (BatchStatus.OPEN, 0)

    def add(count: int, key: str | None) -> Batch:
        return add_jobs(
            opened.batch_id, tenant=TENANT, jobs=jobs(count), idempotency_key=key, ports=with_batches, policy=POLICY
        )

    assert add(2, "p1").total == 2
    assert add(2, "p1").total == 2  # the same page, sent again
    assert add(1, None).total == 3
    with pytest.raises(BatchKeyConflictError, match="Idempotency-Key was already used with another page of jobs"):
        add(3, "p1")
    sealed = seal_batch(opened.batch_id, tenant=TENANT, ports=with_batches)
    assert (sealed.status, sealed.total, len(store.jobs())) == (BatchStatus.RUNNING, 3, 3)
    with pytest.raises(BatchConflictError):
        add(1, "p2")
    with pytest.raises(InvalidRequestError):
        add(MAX_PAGE + 1, "p3")


def test_a_batch_is_found_only_by_its_own_tenant_and_a_well_formed_id(with_batches: Ports) -> None:
    batch = create_batch(request(1), with_batches, POLICY).batch

    for batch_id, tenant in ((batch.batch_id, "other"), ("nope", TENANT), (batch.batch_id.upper(), TENANT)):
        with pytest.raises(BatchNotFoundError):
            get_batch(batch_id, tenant=tenant, ports=with_batches)
    with pytest.raises(RuntimeError, match="no batch store configured"):
        get_batch(batch.batch_id, tenant=TENANT, ports=dataclasses.replace(with_batches, batches=None))


def test_a_batchs_jobs_and_the_tenants_batches_are_listed_a_page_at_a_time(
    with_batches: Ports, clock: ManualClock
) -> None:
    first = create_batch(request(3), with_batches, POLICY).batch
    clock.advance(1)
    second = create_batch(request(1), with_batches, POLICY).batch

    page, cursor = batch_jobs(first, limit=2, cursor=None, ports=with_batches)
    rest, end = batch_jobs(first, limit=2, cursor=cursor, ports=with_batches)
    assert [j.payload["n"] for j in page + rest] == [0, 1, 2] and end is None
    listing = list_batches(TENANT, limit=1, cursor=None, ports=with_batches)
    assert [b.batch_id for b in listing.batches] == [second.batch_id]
    following = list_batches(TENANT, limit=1, cursor=listing.cursor, ports=with_batches)
    assert [b.batch_id for b in following.batches] == [first.batch_id]


def test_when_every_member_succeeded_both_callbacks_are_submitted_once(
    with_batches: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, batches: InMemoryBatchStore
) -> None:
    batch = create_batch(request(2), with_batches, POLICY).batch
    first, second = members(batch, with_batches)
    finish(first, JobStatus.SUCCEEDED, with_batches, store)
    assert batches.get(batch.batch_id, tenant=TENANT).callback_jobs == {}  # type: ignore[union-attr]

    finish(second, JobStatus.SUCCEEDED, with_batches, store)
    finish(second, JobStatus.SUCCEEDED, with_batches, store)  # the follow-up run again

    done = get_batch(batch.batch_id, tenant=TENANT, ports=with_batches)
    assert (done.status, done.counts) == (BatchStatus.SUCCEEDED, {"SUCCEEDED": 2})
    callbacks = {name: store.get(job_id, tenant=TENANT) for name, job_id in done.callback_jobs.items()}
    assert set(callbacks) == {ON_COMPLETE, ON_SUCCESS}
    for name, job in callbacks.items():
        assert job is not None
        assert (job.job_id, job.callback_of, job.payload) == (
            callback_job_id(done, name),
            batch.batch_id,
            CALLBACK_SPECS[name].payload,
        )
    callback_sends = [s.message.job_id for s in queue.sent if s.message.job_id not in {first.job_id, second.job_id}]
    assert sorted(callback_sends) == sorted(done.callback_jobs.values())


def test_a_failed_member_completes_the_batch_without_success(
    with_batches: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, caplog: pytest.LogCaptureFixture
) -> None:
    batch = create_batch(request(1), with_batches, POLICY).batch
    [member] = members(batch, with_batches)

    with caplog.at_level(logging.INFO, logger="offpath.logic.batches"):
        finish(member, JobStatus.FAILED, with_batches, store)

    done = get_batch(batch.batch_id, tenant=TENANT, ports=with_batches)
    assert (done.status, set(done.callback_jobs)) == (BatchStatus.COMPLETE, {ON_COMPLETE})
    [logged] = caplog.records
    assert logged.getMessage() == "batch callback submitted"
    assert (logged.__dict__["batch_id"], logged.__dict__["callback"]) == (batch.batch_id, ON_COMPLETE)


def test_a_member_whose_last_attempts_lease_expired_goes_to_the_dlq_and_completes_its_batch(
    with_batches: Ports,
    worker_ports: WorkerPorts,
    batches: InMemoryBatchStore,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    clock: ManualClock,
) -> None:
    batch = create_batch(request(1), with_batches, POLICY).batch
    [member] = members(batch, with_batches)
    dead = member.replace(
        status=JobStatus.RUNNING, attempt=member.max_attempts, lease_until=clock.now() - timedelta(seconds=1)
    )
    store.put(dead)
    worker = dataclasses.replace(worker_ports, batches=batches)

    assert process_record(delivery_of(member), worker, WorkerPolicy(queue=member.queue), unbounded) is True

    failed = store.get(member.job_id, tenant=TENANT)
    assert failed is not None
    assert (failed.status, failed.error, failed.expires_at) == (
        JobStatus.FAILED,
        "lease expired",
        clock.now() + timedelta(days=7),
    )
    assert queue.dead_letters == [DeadLetter(member.queue, JobMessage.of(dead), "lease expired")]
    done = get_batch(batch.batch_id, tenant=TENANT, ports=with_batches)
    assert (done.status, done.counts, set(done.callback_jobs)) == (BatchStatus.COMPLETE, {"FAILED": 1}, {ON_COMPLETE})


def test_a_callback_whose_send_fails_is_left_to_the_sweeper_and_said(
    with_batches: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, caplog: pytest.LogCaptureFixture
) -> None:
    batch = create_batch(request(1, callbacks={ON_COMPLETE: CALLBACK_SPECS[ON_COMPLETE]}), with_batches, POLICY).batch
    [member] = members(batch, with_batches)
    queue.fail_sends(1)

    with caplog.at_level(logging.WARNING, logger="offpath.logic.batches"):
        finish(member, JobStatus.SUCCEEDED, with_batches, store)

    job_id = get_batch(batch.batch_id, tenant=TENANT, ports=with_batches).callback_jobs[ON_COMPLETE]
    assert store.get(job_id, tenant=TENANT) is not None
    assert job_id not in {s.message.job_id for s in queue.sent}
    [logged] = caplog.records
    assert (logged.getMessage(), logged.__dict__["job_id"]) == ("callback not sent; the sweeper sends it", job_id)


def test_a_seal_after_every_member_finished_submits_the_callbacks(with_batches: Ports, store: InMemoryJobStore) -> None:
    opened = create_batch(request(0, open=True), with_batches, POLICY).batch
    batch = add_jobs(
        opened.batch_id, tenant=TENANT, jobs=jobs(1), idempotency_key="p", ports=with_batches, policy=POLICY
    )
    [member] = members(batch, with_batches)
    finish(member, JobStatus.SUCCEEDED, with_batches, store)
    assert get_batch(batch.batch_id, tenant=TENANT, ports=with_batches).callback_jobs == {}

    sealed = seal_batch(batch.batch_id, tenant=TENANT, ports=with_batches)

    assert set(sealed.callback_jobs) == {ON_COMPLETE, ON_SUCCESS}


def test_a_cancel_cancels_the_members_not_started_and_completes_the_batch(
    with_batches: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    batch = create_batch(request(3), with_batches, POLICY).batch
    first, second, third = members(batch, with_batches)
    store.put(first.replace(status=JobStatus.RUNNING, attempt=1))
    finish(third, JobStatus.SUCCEEDED, with_batches, store)
    clock.advance(5)

    over = cancel_batch(batch.batch_id, tenant=TENANT, ports=with_batches, retention=timedelta(days=1))

    assert over.cancelled_at == clock.now()
    statuses = [store.get(j.job_id, tenant=TENANT).status for j in (first, second, third)]  # type: ignore[union-attr]
    assert statuses == [JobStatus.RUNNING, JobStatus.CANCELLED, JobStatus.SUCCEEDED]
    assert store.get(second.job_id, tenant=TENANT).expires_at == clock.now() + timedelta(days=1)  # type: ignore[union-attr]
    assert (over.counts, over.callback_jobs) == ({"SUCCEEDED": 1, "CANCELLED": 1}, {})
    finish(first, JobStatus.SUCCEEDED, with_batches, store)
    assert set(get_batch(batch.batch_id, tenant=TENANT, ports=with_batches).callback_jobs) == {ON_COMPLETE}


def test_an_open_batch_cancelled_is_sealed_and_its_callbacks_follow(with_batches: Ports) -> None:
    opened = create_batch(request(1, open=True), with_batches, POLICY).batch

    over = cancel_batch(opened.batch_id, tenant=TENANT, ports=with_batches, retention=timedelta(days=1))

    assert (over.status, over.counts, set(over.callback_jobs)) == (
        BatchStatus.COMPLETE,
        {"CANCELLED": 1},
        {ON_COMPLETE},
    )


def test_a_member_of_a_batch_that_is_gone_is_not_counted(
    with_batches: Ports, store: InMemoryJobStore, batches: InMemoryBatchStore, caplog: pytest.LogCaptureFixture
) -> None:
    batch = create_batch(request(1), with_batches, POLICY).batch
    [member] = members(batch, with_batches)
    batches.batches.clear()

    with caplog.at_level(logging.WARNING, logger="offpath.logic.batches"):
        finish(member, JobStatus.SUCCEEDED, with_batches, store)

    [logged] = caplog.records
    assert (logged.getMessage(), logged.__dict__["batch_id"]) == (
        "a member's batch is gone; nothing to count",
        batch.batch_id,
    )


def test_a_job_that_is_no_member_or_not_final_counts_nothing(with_batches: Ports, store: InMemoryJobStore) -> None:
    batch = create_batch(request(1), with_batches, POLICY).batch
    [member] = members(batch, with_batches)

    batch_member_final(member, with_batches, with_batches.clock.now())  # still QUEUED
    batch_member_final(
        member.replace(batch_id=None, status=JobStatus.SUCCEEDED), with_batches, with_batches.clock.now()
    )

    assert get_batch(batch.batch_id, tenant=TENANT, ports=with_batches).counts == {}


def test_members_whose_send_fails_are_counted_and_a_delayed_one_is_not_sent(
    with_batches: Ports, queue: InMemoryJobQueue, metrics: RecordingMetrics, clock: ManualClock
) -> None:
    later = (clock.now() + timedelta(hours=2)).isoformat()
    queue.fail_sends(1)
    requests = [*jobs(2), SubmitRequest(tenant=TENANT, type=SCRIPTED_TYPE, payload={"n": 9}, run_at=later)]

    batch = create_batch(request(jobs=requests), with_batches, POLICY).batch

    assert metrics.dimensioned[("SendFailed", "default", SCRIPTED_TYPE)] == 2
    assert [j.status for j in members(batch, with_batches)] == [JobStatus.QUEUED] * 2 + [JobStatus.SCHEDULED]
    assert not queue.sent


def test_a_job_submits_a_batch_once_under_its_key(
    with_batches: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    parent = a_job(JobStatus.RUNNING, job_id="a" * 32, attempt=1, trace_id="b" * 32)
    gateway = JobBatches(with_batches)
    run_at = clock.now() + timedelta(minutes=5)
    spec = {"type": SCRIPTED_TYPE, "payload": {"x": 1}, "tags": {"team": "maps"}, "queue": "default"}
    later = {**spec, "run_at": run_at.isoformat()}
    success = {"type": SCRIPTED_TYPE, "payload": {"ok": 1}}

    made = gateway.submit(parent, [spec, later], on_complete={"type": SCRIPTED_TYPE}, on_success=success, key="fan")
    again = gateway.submit(parent, [spec, later], on_complete={"type": SCRIPTED_TYPE}, on_success=success, key="fan")

    assert again == made and gateway.read(made.batch_id, tenant=TENANT) == made
    assert made.batch_id == derived_job_id(parent.created_at, parent.job_id, "batch", "fan")
    assert (made.parent_job_id, made.idempotency_key) == (parent.job_id, None)
    assert made.callbacks == {
        ON_COMPLETE: CallbackSpec(SCRIPTED_TYPE, {}),
        ON_SUCCESS: CallbackSpec(SCRIPTED_TYPE, {"ok": 1}),
    }
    [first, second], cursor = gateway.jobs(made, cursor=None)
    assert (first.payload, first.tags, first.queue, first.trace_id, cursor) == (
        {"x": 1},
        {"team": "maps"},
        "default",
        "b" * 32,
        None,
    )
    assert (first.run_at, second.run_at) == (None, run_at)


def test_a_cancel_goes_through_every_page_of_members_and_a_full_page_is_accepted(
    with_batches: Ports, store: InMemoryJobStore
) -> None:
    opened = create_batch(request(MAX_PAGE, open=True), with_batches, POLICY).batch
    add_jobs(opened.batch_id, tenant=TENANT, jobs=jobs(1), idempotency_key="p", ports=with_batches, policy=POLICY)

    over = cancel_batch(opened.batch_id, tenant=TENANT, ports=with_batches, retention=timedelta(days=1))

    assert over.counts == {"CANCELLED": MAX_PAGE + 1}
    member_statuses = [j.status for j in store.jobs() if j.batch_id == opened.batch_id]
    assert member_statuses == [JobStatus.CANCELLED] * (MAX_PAGE + 1)
