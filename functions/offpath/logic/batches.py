"""Batches (fan-out / fan-in): create, add pages of jobs, seal, cancel, read; and the follow-up that counts a
member's final state and submits the batch's callbacks exactly once.

- A batch's members are ordinary jobs that name it: the same routes, quotas, retries and fairness.
- A page of jobs is added in three steps: the page is reserved (its members' ids, reproducible from the batch, the
  page and the index, and the batch's `open_pages` + 1, in one transaction); the jobs are written (create-if-absent)
  and sent; the page is marked written and its members join the total (one transaction). A request that stops
  between them is resent with the same key and finishes the page; a batch is sealed only with no page open, so
  a sealed batch's total is every member it will ever have.
- A member's final state is counted by `batch_member_final` (a follow-up, logic/followups.py): the member's mark and
  the batch's count in one transaction, so a second run changes nothing. Then the callbacks that are due are
  submitted under ids derived from the batch (create-if-absent): never twice, and a run that stopped half way is
  completed by the sweeper's run of the same follow-up.
- `on_complete` once, when the batch is sealed and every member is final; `on_success` once, when every member has
  SUCCEEDED, also later, when a failed member retried by hand then succeeds (as Sidekiq's batches do).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from offpath.domain.batch import (
    CALLBACKS,
    MAX_PAGE,
    Batch,
    BatchListing,
    BatchStore,
    CallbackSpec,
    page_id_of,
)
from offpath.domain.errors import (
    BatchKeyConflictError,
    BatchNotFoundError,
    IdempotencyConflictError,
    InvalidRequestError,
    JobConflictError,
    QueueUnavailableError,
)
from offpath.domain.ids import derived_job_id, new_job_id
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import JobMessage, Ports
from offpath.logic.submit import SubmitPolicy, SubmitRequest, admit, build_job, canonical_json

logger = logging.getLogger(__name__)

BATCH_WRITERS = 8
# The page a POST /batches request's own jobs are written as.
FIRST_PAGE_KEY = "\x00first"


@dataclass(frozen=True)
class BatchRequest:
    tenant: str
    jobs: Sequence[SubmitRequest]
    callbacks: Mapping[str, CallbackSpec]
    open: bool = False
    idempotency_key: str | None = None
    # ctx.submit_batch: the job that submits it (the batch's id derives from it and the key).
    parent: Job | None = None


@dataclass(frozen=True)
class BatchSubmitted:
    batch: Batch
    replayed: bool


def batches_of(ports: Ports) -> BatchStore:
    if ports.batches is None:
        raise RuntimeError("no batch store configured")
    return ports.batches


def fingerprint(request: BatchRequest) -> str:
    """What a replay under the batch's key must match: its jobs, its callbacks and whether it is open."""
    shape = {
        "jobs": [
            {"type": j.type, "payload": j.payload, "queue": j.queue, "run_at": j.run_at, "tags": dict(j.tags or {})}
            for j in request.jobs
        ],
        "callbacks": {name: {"type": c.type, "payload": c.payload} for name, c in sorted(request.callbacks.items())},
        "open": request.open,
    }
    return hashlib.sha256(canonical_json(shape).encode()).hexdigest()


def _check_page(jobs: Sequence[SubmitRequest]) -> None:
    if len(jobs) > MAX_PAGE:
        raise InvalidRequestError("jobs", f"a request adds at most {MAX_PAGE} jobs to a batch")


def create_batch(request: BatchRequest, ports: Ports, policy: SubmitPolicy) -> BatchSubmitted:
    """POST /batches (and ctx.submit_batch): the batch, its first page of jobs, and, unless it is open, its seal.
    Every part is idempotent under the batch's key: a replay finishes what an earlier request left undone and
    answers with the same batch."""
    store = batches_of(ports)
    now = ports.clock.now()
    _check_page(request.jobs)
    for name, spec in request.callbacks.items():
        _callback_job(spec, request.tenant, name, ports, policy, now)  # refused now, not when it is due
    _member_jobs(request.jobs, ports, policy, now, batch_id="0" * 32, page_id="0" * 32, created_at=now)
    if request.parent is not None and request.idempotency_key is not None:
        batch_id = derived_job_id(request.parent.created_at, request.parent.job_id, "batch", request.idempotency_key)
    else:
        batch_id = new_job_id(now)
    batch = Batch(
        batch_id=batch_id,
        tenant=request.tenant,
        created_at=now,
        updated_at=now,
        callbacks=dict(request.callbacks),
        idempotency_key=request.idempotency_key if request.parent is None else None,
        fingerprint=fingerprint(request),
        parent_job_id=request.parent.job_id if request.parent is not None else None,
    )
    if batch.idempotency_key is not None:
        recorded = store.record_key(batch)
        if recorded.fingerprint != batch.fingerprint:
            raise BatchKeyConflictError("Idempotency-Key was already used with another batch request")
        batch = recorded
    stored = store.create(batch)
    replayed = stored.created_at != now or stored.fingerprint != batch.fingerprint
    if replayed and stored.fingerprint != batch.fingerprint:
        raise BatchKeyConflictError("the key was already used with another batch request")
    if request.jobs:
        # A batch sealed next is read by its seal: no read of it here.
        stored = _add_page(stored, request.jobs, FIRST_PAGE_KEY, ports, policy, read_after=request.open)
    if not request.open:
        stored = seal_batch(stored.batch_id, tenant=request.tenant, ports=ports)
    return BatchSubmitted(stored, replayed=replayed)


def add_jobs(
    batch_id: str,
    *,
    tenant: str,
    jobs: Sequence[SubmitRequest],
    idempotency_key: str | None,
    ports: Ports,
    policy: SubmitPolicy,
) -> Batch:
    """POST /batches/{id}/jobs: a page of up to 100 jobs for an open batch; with a key, a replay is the same page."""
    _check_page(jobs)
    batch = get_batch(batch_id, tenant=tenant, ports=ports)
    return _add_page(batch, jobs, idempotency_key or uuid.uuid4().hex, ports, policy)


def _add_page(
    batch: Batch,
    jobs: Sequence[SubmitRequest],
    key: str,
    ports: Ports,
    policy: SubmitPolicy,
    *,
    read_after: bool = True,
) -> Batch:
    store = batches_of(ports)
    now = ports.clock.now()
    page_id = page_id_of(key)
    members = _member_jobs(
        jobs, ports, policy, now, batch_id=batch.batch_id, page_id=page_id, created_at=batch.created_at
    )
    page = store.reserve_page(batch, page_id, [job.job_id for job in members], now=now)
    if page.job_ids != tuple(job.job_id for job in members):
        raise BatchKeyConflictError("Idempotency-Key was already used with another page of jobs")
    if not page.written:
        _write_members(members, ports)
        store.write_page(batch, page, now=now)
    if not read_after:
        return batch
    found = store.get(batch.batch_id, tenant=batch.tenant)
    if found is None:
        raise BatchNotFoundError(batch.batch_id)
    return found


def _member_jobs(
    jobs: Sequence[SubmitRequest],
    ports: Ports,
    policy: SubmitPolicy,
    now: datetime,
    *,
    batch_id: str,
    page_id: str,
    created_at: datetime,
) -> list[Job]:
    """The page's jobs, validated (a bad one refuses the whole page, naming `jobs.<i>.<field>`), with ids reproducible
    from the batch, the page and their place in it."""
    members = []
    for index, request in enumerate(jobs):
        try:
            job = build_job(request, ports, policy, now)
        except InvalidRequestError as error:
            field = f"jobs.{index}.{error.field}"
            raise InvalidRequestError(field, f"jobs.{index}: {error}", code=error.code) from None
        members.append(
            job.replace(
                job_id=derived_job_id(created_at, batch_id, page_id, str(index)),
                batch_id=batch_id,
                # No idempotency key of its own: the page's is the key.
                idempotency_key=None,
            )
        )
    return members


def _write_members(members: list[Job], ports: Ports) -> None:
    """Write the page's jobs (create-if-absent: a replay finds them written) and send them; a send that fails leaves
    the job to the sweeper (each is written with its sweep time)."""

    def write(job: Job) -> Job | None:
        replay = admit(job, ports)
        if replay is not None:
            return None
        outcome = ports.store.create(job)
        return None if outcome.replayed else outcome.job

    with ThreadPoolExecutor(max_workers=BATCH_WRITERS) as pool:
        written = [job for job in pool.map(write, members) if job is not None]
    by_queue: dict[str, list[JobMessage]] = {}
    for job in written:
        if job.status is JobStatus.QUEUED:
            by_queue.setdefault(job.queue, []).append(JobMessage.of(job))
    for queue, messages in by_queue.items():
        try:
            unsent = ports.queue.send_batch(queue, messages)
        except QueueUnavailableError:
            unsent = messages
        for message in unsent:
            ports.metrics.count("SendFailed", queue=queue, job_type=message.type)


def get_batch(batch_id: str, *, tenant: str, ports: Ports) -> Batch:
    batch = batches_of(ports).get(batch_id, tenant=tenant) if _is_id(batch_id) else None
    if batch is None:
        raise BatchNotFoundError(batch_id)
    return batch


def _is_id(text: str) -> bool:
    return len(text) == 32 and all(c in "0123456789abcdef" for c in text)


def list_batches(tenant: str, *, limit: int, cursor: str | None, ports: Ports) -> BatchListing:
    return batches_of(ports).list_batches(tenant, limit=limit, cursor=cursor)


def batch_jobs(batch: Batch, *, limit: int, cursor: str | None, ports: Ports) -> tuple[list[Job], str | None]:
    """A page of the batch's jobs (results stay on the jobs: each is read where it is)."""
    store = batches_of(ports)
    ids = store.member_ids(batch, limit=limit, cursor=cursor)
    return store.get_jobs(batch.tenant, ids.job_ids), ids.cursor


def seal_batch(batch_id: str, *, tenant: str, ports: Ports) -> Batch:
    """Seal the batch (idempotent: a sealed batch is sealed again as it is) and submit the callbacks already due (a
    batch whose members all finished before its seal). A seal whose answer was lost is resent: it submits them."""
    store = batches_of(ports)
    batch = get_batch(batch_id, tenant=tenant, ports=ports)
    sealed = store.seal(batch, now=ports.clock.now())
    return submit_due_callbacks(sealed, ports)


def cancel_batch(batch_id: str, *, tenant: str, ports: Ports, retention: Any) -> Batch:
    """POST /batches/{id}/cancel: no more jobs may be added; every member not started is cancelled (its count and
    the callbacks then follow as for any final state); running members finish."""
    from offpath.logic.followups import finish_followups

    store = batches_of(ports)
    batch = store.mark_cancelled(get_batch(batch_id, tenant=tenant, ports=ports), now=ports.clock.now())
    if batch.open_pages == 0 and not batch.sealed:
        batch = store.seal(batch, now=ports.clock.now())
    cursor: str | None = None
    while True:
        ids = store.member_ids(batch, limit=100, cursor=cursor)
        for job in store.get_jobs(tenant, ids.job_ids):
            if job.status not in (JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.RETRYING):
                continue
            now = ports.clock.now()
            try:
                cancelled = ports.store.cancel(job.job_id, tenant=tenant, now=now, expires_at=now + retention)
            except JobConflictError:
                continue  # it started meanwhile: it finishes as it will
            finish_followups(cancelled, ports)
        cursor = ids.cursor
        if cursor is None:
            break
    return submit_due_callbacks(get_batch(batch_id, tenant=tenant, ports=ports), ports)


# -- the follow-up: count a member, submit the callbacks that are due ---------------------------------------


def batch_member_final(job: Job, ports: Ports, now: datetime) -> None:
    """A batch member reached a final state: count it (once: the member's mark and the count in one transaction),
    then submit the batch's callbacks that are due. Running it again changes nothing."""
    if job.batch_id is None or not job.status.is_final:
        return
    store = batches_of(ports)
    store.count_member(job, now=now)
    batch = store.get(job.batch_id, tenant=job.tenant)
    if batch is None:
        logger.warning("a member's batch is gone; nothing to count", extra={"batch_id": job.batch_id})
        return
    submit_due_callbacks(batch, ports)


def submit_due_callbacks(batch: Batch, ports: Ports) -> Batch:
    """Submit each callback that is due and not yet submitted, under its id derived from the batch: create-if-absent,
    so two members finishing at once, a repeated seal, or the sweeper's run after a crash submit it once."""
    due = {"on_complete": batch.complete, "on_success": batch.succeeded}
    for name in CALLBACKS:
        spec = batch.callbacks.get(name)
        if spec is None or not due[name] or name in batch.callback_jobs:
            continue
        now = ports.clock.now()
        job = _callback_job(spec, batch.tenant, name, ports, SubmitPolicy(), now).replace(
            job_id=callback_job_id(batch, name), callback_of=batch.batch_id
        )
        try:
            outcome = ports.store.create(job)
        except IdempotencyConflictError:
            outcome = None  # made before, from the same batch (its submission differs only in the time made)
        if outcome is not None and not outcome.replayed:
            try:
                ports.queue.send(job.queue, JobMessage.of(job))
            except QueueUnavailableError:
                logger.warning("callback not sent; the sweeper sends it", extra={"job_id": job.job_id})
            logger.info("batch callback submitted", extra={"batch_id": batch.batch_id, "callback": name})
        batch = batches_of(ports).record_callback(batch, name, job.job_id, now=now)
    return batch


def callback_job_id(batch: Batch, name: str) -> str:
    return derived_job_id(batch.created_at, batch.tenant, batch.batch_id, name)


def _callback_job(spec: CallbackSpec, tenant: str, name: str, ports: Ports, policy: SubmitPolicy, now: datetime) -> Job:
    try:
        return build_job(SubmitRequest(tenant=tenant, type=spec.type, payload=spec.payload), ports, policy, now)
    except InvalidRequestError as error:
        raise InvalidRequestError(f"{name}.{error.field}", f"{name}: {error}", code=error.code) from None


class JobBatches:
    """Batches as a job's context sees them (domain/context.py:BatchGateway): read one, page through its jobs,
    submit one from inside a job (idempotently, by the job and a key)."""

    PAGE = 100

    def __init__(self, ports: Ports, policy: SubmitPolicy | None = None) -> None:
        self.ports = ports
        self.policy = policy or SubmitPolicy()

    def read(self, batch_id: str, *, tenant: str) -> Batch:
        return get_batch(batch_id, tenant=tenant, ports=self.ports)

    def jobs(self, batch: Batch, *, cursor: str | None) -> tuple[list[Job], str | None]:
        return batch_jobs(batch, limit=self.PAGE, cursor=cursor, ports=self.ports)

    def submit(
        self,
        parent: Job,
        jobs: Sequence[Mapping[str, Any]],
        *,
        on_complete: Mapping[str, Any] | None,
        on_success: Mapping[str, Any] | None,
        key: str,
    ) -> Batch:
        callbacks = {
            name: CallbackSpec(type=str(spec["type"]), payload=dict(spec.get("payload") or {}))
            for name, spec in (("on_complete", on_complete), ("on_success", on_success))
            if spec is not None
        }
        requests = [
            SubmitRequest(
                tenant=parent.tenant,
                type=str(spec["type"]),
                payload=dict(spec.get("payload") or {}),
                queue=spec.get("queue"),
                run_at=spec.get("run_at"),
                tags=spec.get("tags"),
                trace_id=parent.trace_id,
            )
            for spec in jobs
        ]
        request = BatchRequest(
            tenant=parent.tenant, jobs=requests, callbacks=callbacks, idempotency_key=key, parent=parent
        )
        return create_batch(request, self.ports, self.policy).batch
