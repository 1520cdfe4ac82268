"""Bulk actions: retry or cancel every job a filter matches (POST /jobs/bulk), with a dry run.

A dry run counts the matching jobs through the listing (`JobStore.list_jobs`, within DRY_RUN_PAGES of its pages)
and shows the first SAMPLE_SIZE; past MAX_MATCHED or the pages it reads, its count is a lower bound marked
`exact: False`.

A real run is an operation (domain/bulk.py) moved on a page at a time by a runner holding its lease:
- the api function runs it for `inline_s` after writing it, so a small operation is finished in its answer;
- the sweeper continues every running operation whose lease is over (its runner finished its slice, or died),
  for `sweep_s` a sweep.
Each page: the jobs the filter matches (created before the operation) are moved one by one through the same
calls as the single routes (`queries.retry_job`: the quota check, the conditional write, the dead letter's
removal and the send; `queries.cancel_job`), marked with the operation's id by the write that moves them. A job
the action does not apply to is skipped with its state as the reason, without a write. Then one checkpoint
write (counts and cursor, fenced on the operation's step). A runner that stops within a page (its time is up,
or it died) leaves the page to the next runner, which redoes it from the page's start: a job it finds marked
with the operation's id counts as done, and is not moved again. So the counts are exact whatever dies when.

A retry counts against the jobs' tenant's quotas as a submit does: over the submit rate the runner waits for
the bucket (or leaves the rest of the page to the next runner); over the open jobs (or any other count) the
operation stops (status `stopped`, `stop_reason`), the jobs after it untouched.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum

from offpath.domain.bulk import (
    MAX_MATCHED,
    SAMPLE_SIZE,
    Action,
    BulkFilter,
    BulkOperation,
    BulkOperationConflictError,
    BulkStore,
    Tally,
)
from offpath.domain.errors import JobConflictError, JobNotFoundError, OffpathError
from offpath.domain.job import CANCEL, RETRY_BY_HAND, Job
from offpath.domain.ports import Ports
from offpath.domain.quotas import QuotaExceededError
from offpath.logic import queries

logger = logging.getLogger("offpath.bulk")

# A dry run reads at most this many listing pages of DRY_RUN_PAGE jobs.
DRY_RUN_PAGES = 10
DRY_RUN_PAGE = 100
SUBMIT_RATE = "submits_per_s"
ERROR_CHARS = 200


@dataclass(frozen=True)
class BulkPolicy:
    # Jobs listed per page (a checkpoint per page).
    page_size: int = 50
    # How long a runner holds an operation between two checkpoints; its slice ends well before.
    lease: timedelta = timedelta(minutes=2)
    # How long the api runs a new operation before it answers; how long a sweep continues operations.
    inline_s: float = 5.0
    sweep_s: float = 20.0
    # The retried jobs' sweep grace (the submit policy's) and the cancelled jobs' retention (the settings').
    sweep_grace: timedelta = timedelta(minutes=2)
    retention: timedelta = timedelta(days=7)
    limit: int = MAX_MATCHED


@dataclass
class BulkServices:
    ports: Ports
    operations: BulkStore
    policy: BulkPolicy = field(default_factory=BulkPolicy)
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic


@dataclass(frozen=True)
class Preview:
    count: int
    exact: bool
    sample: list[Job]
    limit: int


def preview(bulk_filter: BulkFilter, ports: Ports, *, limit: int = MAX_MATCHED) -> Preview:
    """The jobs a run would match now: their count (exact, or a lower bound past `limit` or the pages a dry run
    reads) and the first SAMPLE_SIZE of them, newest first."""
    count = 0
    sample: list[Job] = []
    cursor: str | None = None
    for _ in range(DRY_RUN_PAGES):
        page = ports.store.list_jobs(
            bulk_filter.tenant,
            status=bulk_filter.status,
            job_type=bulk_filter.job_type,
            tag=bulk_filter.tag,
            limit=DRY_RUN_PAGE,
            cursor=cursor,
        )
        for job in page.jobs:
            if count == limit:
                return Preview(limit, False, sample, limit)
            count += 1
            if len(sample) < SAMPLE_SIZE:
                sample.append(job)
        cursor = page.cursor
        if cursor is None:
            return Preview(count, True, sample, limit)
    return Preview(count, False, sample, limit)


def start(owner: str, action: Action, bulk_filter: BulkFilter, services: BulkServices) -> BulkOperation:
    """Write a new operation (held by this runner) and run it for the policy's `inline_s`. Whatever stops this
    runner, the operation stands: the sweeper goes on with it once its lease is over."""
    now = services.ports.clock.now()
    operation = BulkOperation(
        operation_id=uuid.uuid4().hex,
        owner=owner,
        action=action,
        filter=bulk_filter,
        status="running",
        created_at=now,
        updated_at=now,
        limit=services.policy.limit,
        lease_until=now + services.policy.lease,
    )
    services.operations.create(operation)
    try:
        return run(operation, services, seconds=services.policy.inline_s)
    except Exception:
        logger.exception("a bulk operation's first slice failed; the sweeper goes on with it")
        return services.operations.get(owner, operation.operation_id) or operation


def run(
    operation: BulkOperation, services: BulkServices, *, seconds: float, max_pages: int | None = None
) -> BulkOperation:
    """Move a held operation on, page by page, for about `seconds` (or `max_pages` pages), then release it
    (its lease over at once) unless it is over. Returns the operation as last written."""
    deadline = services.monotonic() + seconds
    pages = 0
    while not operation.is_over:
        if services.monotonic() >= deadline or (max_pages is not None and pages >= max_pages):
            return _release(operation, services)
        operation, paused = _run_page(operation, services, deadline)
        if paused:
            return operation  # its time ran out within the page: released, the page left to the next runner
        pages += 1
    return operation


def resume(services: BulkServices, *, seconds: float | None = None) -> int:
    """Continue every running operation whose lease is over (the sweeper's part), within `seconds` in all
    (the policy's `sweep_s`). One operation never stops the others. Returns how many it ran."""
    budget = services.policy.sweep_s if seconds is None else seconds
    deadline = services.monotonic() + budget
    store = services.operations
    ran = 0
    for owner, operation_id in store.open_operations():
        left = deadline - services.monotonic()
        if left <= 0:
            break
        try:
            operation = store.get(owner, operation_id)
            if operation is None or operation.is_over:
                store.forget(owner, operation_id)
                continue
            now = services.ports.clock.now()
            if operation.lease_until is not None and operation.lease_until > now:
                continue
            held = store.take(operation, now=now, lease_until=now + services.policy.lease)
            run(held, services, seconds=left)
            ran += 1
        except BulkOperationConflictError:
            continue  # another runner took it
        except Exception:
            logger.exception("a bulk operation could not be continued", extra={"operation_id": operation_id})
    return ran


class _Stop(Enum):
    PAUSE = "pause"  # the runner's time is up within the page: the page is left to the next runner
    QUOTA = "quota"  # over a count quota: the operation stops


@dataclass
class _Stopped:
    kind: _Stop
    reason: str | None = None


def _run_page(operation: BulkOperation, services: BulkServices, deadline: float) -> tuple[BulkOperation, bool]:
    """One page: the operation as written after it (checkpointed, over, or released), and whether this runner's
    time ran out within it (it then stops: the page is the next runner's)."""
    ports, policy = services.ports, services.policy
    bulk_filter = operation.filter
    # The status is checked here, not by the listing: a job this operation moved (and marked) has left it.
    page = ports.store.list_jobs(
        bulk_filter.tenant,
        status=None,
        job_type=bulk_filter.job_type,
        tag=bulk_filter.tag,
        limit=policy.page_size,
        cursor=operation.cursor,
    )
    tally = Tally()
    for job in page.jobs:
        if job.created_at > operation.created_at:
            continue  # submitted after the operation started
        mine = job.bulk_operation_id == operation.operation_id
        if not mine and not bulk_filter.matches(job):
            continue
        if operation.matched + tally.matched >= operation.limit:
            return _end(operation, tally, services, limit_reached=True), False
        if mine:
            tally.matched += 1
            tally.done += 1
            continue
        stopped = _act(operation, job, tally, services, deadline)
        if stopped is not None and stopped.kind is _Stop.PAUSE:
            return _release(operation, services), True
        if stopped is not None:
            return _end(operation, tally, services, stop_reason=stopped.reason), False
    if page.cursor is None:
        return _end(operation, tally, services), False
    now = ports.clock.now()
    checkpoint = tally.added_to(operation).replace(
        cursor=page.cursor, updated_at=now, lease_until=now + policy.lease, pages=operation.pages + 1
    )
    return services.operations.save(checkpoint, seen_step=operation.step), False


def _act(operation: BulkOperation, job: Job, tally: Tally, services: BulkServices, deadline: float) -> _Stopped | None:
    """Apply the operation's action to one matched job and count it; a reason to stop the page, or None."""
    ports, policy = services.ports, services.policy
    transition = RETRY_BY_HAND if operation.action == "retry" else CANCEL
    if job.status not in transition.from_:
        tally.matched += 1
        tally.skip(f"job is {job.status.value}")
        return None
    while True:
        if services.monotonic() >= deadline:
            return _Stopped(_Stop.PAUSE)
        try:
            if operation.action == "retry":
                queries.retry_job(
                    job.job_id,
                    tenant=job.tenant,
                    ports=ports,
                    sweep_grace=policy.sweep_grace,
                    operation=operation.operation_id,
                )
            else:
                queries.cancel_job(
                    job.job_id,
                    tenant=job.tenant,
                    store=ports.store,
                    clock=ports.clock,
                    retention=policy.retention,
                    scheduler=ports.scheduler,
                    operation=operation.operation_id,
                )
        except QuotaExceededError as over:
            if over.field != SUBMIT_RATE:
                return _Stopped(_Stop.QUOTA, str(over))
            wait = float(over.retry_after_s)
            if services.monotonic() + wait >= deadline:
                return _Stopped(_Stop.PAUSE)
            services.sleep(wait)
            continue
        except JobConflictError as conflict:
            current = conflict.job
            tally.matched += 1
            if current is not None and current.bulk_operation_id == operation.operation_id:
                tally.done += 1  # this operation's own move, met again
            else:
                tally.skip(f"job is {current.status.value}" if current is not None else "job changed")
            return None
        except JobNotFoundError:
            tally.matched += 1
            tally.skip("job is gone")
            return None
        except OffpathError as error:
            tally.matched += 1
            tally.fail(job.job_id, f"{type(error).__name__}: {error}"[:ERROR_CHARS])
            return None
        tally.matched += 1
        tally.done += 1
        return None


def _end(
    operation: BulkOperation,
    tally: Tally,
    services: BulkServices,
    *,
    limit_reached: bool = False,
    stop_reason: str | None = None,
) -> BulkOperation:
    now = services.ports.clock.now()
    over = tally.added_to(operation).replace(
        status="stopped" if stop_reason is not None else "finished",
        stop_reason=stop_reason,
        limit_reached=limit_reached,
        updated_at=now,
        finished_at=now,
        lease_until=None,
        cursor=None if stop_reason is None else operation.cursor,
        pages=operation.pages + 1,
    )
    written = services.operations.save(over, seen_step=operation.step)
    logger.info(
        "bulk operation over",
        extra={
            "operation_id": written.operation_id,
            "status": written.status,
            "matched": written.matched,
            "done": written.done,
            "skipped": written.skipped,
            "failed": written.failed,
        },
    )
    return written


def _release(operation: BulkOperation, services: BulkServices) -> BulkOperation:
    """The operation as of its last checkpoint, its lease over now: the next sweep goes on with it."""
    now = services.ports.clock.now()
    released: datetime = now
    return services.operations.save(operation.replace(lease_until=released), seen_step=operation.step)
