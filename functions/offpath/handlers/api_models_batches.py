"""The batch routes' models (POST /batches and the routes under it). Imported on first use, through
offpath.handlers.api_models (which names them too)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from offpath.domain.batch import MAX_PAGE, Batch, BatchStatus
from offpath.domain.job import JobStatus
from offpath.handlers.api_models import _DONE_EXAMPLE, _LAZY, JobView, SubmitBody, Timestamp, _examples

BATCH_EXAMPLE: dict[str, Any] = {
    "batch_id": "019ad4c2a1f04e5b8c7d6e5f4a3b2c1d",
    "status": "COMPLETE",
    "total": 3,
    "pending": 0,
    "succeeded": 2,
    "failed": 1,
    "cancelled": 0,
    "counts": {"SUCCEEDED": 2, "FAILED": 1},
    "pages_being_added": 0,
    "created_at": "2026-12-01T09:00:00Z",
    "updated_at": "2026-12-01T09:00:05Z",
    "sealed_at": "2026-12-01T09:00:00Z",
    "cancelled_at": None,
    "on_complete": {"type": "reports.summarise", "payload": {"report": "r-7"}},
    "on_success": None,
    "on_complete_job_id": "019ad4c2a5e0d1e6f7a8b9c0d1e2f3a4",
    "on_success_job_id": None,
    "parent_job_id": None,
}


class BatchJobBody(SubmitBody):
    """One job of a batch: as POST /jobs takes it (its key is the request's, for the whole page)."""

    model_config = _LAZY


class CallbackBody(BaseModel):
    """A callback job: submitted once, as the tenant's own job, when it is due; its `ctx.batch` reads the batch."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    type: str = Field(min_length=1, max_length=64, description="a registered job type")
    payload: dict[str, Any] = Field(default_factory=dict)


class BatchCreateBody(BaseModel):
    """`open`: more pages of jobs may be added (POST /batches/{batch_id}/jobs) until the batch is sealed
    (POST /batches/{batch_id}/seal); otherwise the batch is sealed at once. `on_complete` runs once, when the sealed
    batch's every job is final; `on_success` once, when every job has SUCCEEDED (also later, after hand retries)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    jobs: list[BatchJobBody] = Field(default_factory=list, max_length=MAX_PAGE)
    on_complete: CallbackBody | None = None
    on_success: CallbackBody | None = None
    open: StrictBool = False


class BatchJobsBody(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    jobs: list[BatchJobBody] = Field(min_length=1, max_length=MAX_PAGE)


class BatchDetailView(BaseModel):
    """A batch: its counts (`pending` = `total` minus the jobs counted final; `counts` per final state), its status
    (OPEN until sealed; then RUNNING, COMPLETE when every job is final, SUCCEEDED when every job SUCCEEDED), and its
    callback jobs' ids once they were submitted."""

    model_config = _examples(BATCH_EXAMPLE)

    batch_id: str
    status: BatchStatus
    total: int
    pending: int
    succeeded: int
    failed: int
    cancelled: int
    counts: dict[str, int] = Field(description="jobs counted per final state (SUCCEEDED, FAILED, CANCELLED, ...)")
    pages_being_added: int = 0
    created_at: Timestamp
    updated_at: Timestamp
    sealed_at: Timestamp | None = None
    cancelled_at: Timestamp | None = None
    on_complete: CallbackBody | None = None
    on_success: CallbackBody | None = None
    on_complete_job_id: str | None = None
    on_success_job_id: str | None = None
    parent_job_id: str | None = None

    @classmethod
    def of(cls, batch: Batch) -> BatchDetailView:
        def callback(name: str) -> CallbackBody | None:
            spec = batch.callbacks.get(name)
            return CallbackBody(type=spec.type, payload=spec.payload) if spec is not None else None

        return cls(
            batch_id=batch.batch_id,
            status=batch.status,
            total=batch.total,
            pending=batch.pending,
            succeeded=batch.count(JobStatus.SUCCEEDED),
            failed=batch.count(JobStatus.FAILED),
            cancelled=batch.count(JobStatus.CANCELLED),
            counts=dict(batch.counts),
            pages_being_added=batch.open_pages,
            created_at=batch.created_at,
            updated_at=batch.updated_at,
            sealed_at=batch.sealed_at,
            cancelled_at=batch.cancelled_at,
            on_complete=callback("on_complete"),
            on_success=callback("on_success"),
            on_complete_job_id=batch.callback_jobs.get("on_complete"),
            on_success_job_id=batch.callback_jobs.get("on_success"),
            parent_job_id=batch.parent_job_id,
        )


class BatchPageView(BaseModel):
    """The caller's batches, newest first; `cursor` is null on the last page."""

    model_config = _examples({"batches": [BATCH_EXAMPLE], "cursor": None})

    batches: list[BatchDetailView]
    cursor: str | None


class BatchJobsView(BaseModel):
    """A page of the batch's jobs (their results on them); `cursor` is null on the last page."""

    model_config = _examples({"jobs": [{**_DONE_EXAMPLE, "batch_id": BATCH_EXAMPLE["batch_id"]}], "cursor": None})

    jobs: list[JobView]
    cursor: str | None
