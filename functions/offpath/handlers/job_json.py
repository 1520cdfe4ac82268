"""A job's JSON as the api shows it (`api_models.JobView`), written directly from the job.

The model is the declaration: its schema is the document's, and `JobView.dumped` answers with this JSON when the
job holds plain JSON (tests/unit/test_api_models.py holds the two equal). The notifier's events and webhook bodies
are this JSON too, so a function that only renders jobs does not load pydantic; a result or payload that is not
plain JSON (pydantic converts it) is rendered by the model.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from offpath.domain.chain import chain_state
from offpath.domain.clock import iso
from offpath.domain.job import AttemptRecord, Job, JobStatus


def iso_or_none(when: datetime | None) -> str | None:
    return iso(when) if when is not None else None


def plain_json(value: Any) -> bool:
    """Whether a value is already what pydantic's JSON mode makes of it (strings, whole numbers, finite
    floats, booleans, None, and lists and string-keyed objects of these)."""
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(plain_json(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and plain_json(item) for key, item in value.items())
    return False


def lease_until(job: Job) -> datetime | None:
    """The lease of the attempt running; none once the job is not RUNNING (the item may keep an old one)."""
    return job.lease_until if job.status is JobStatus.RUNNING else None


def attempt_error(record: AttemptRecord) -> dict[str, Any] | None:
    if record.error is None:
        return None
    return {"type": record.error_type, "message": record.error, "traceback": record.traceback}


def job_json(job: Job, *, with_payload: bool = False) -> dict[str, Any] | None:
    """`JobView.of(job)`'s JSON form, or None when a value needs pydantic's conversion (a result or payload that
    is not plain JSON)."""
    payload = job.payload if with_payload else None
    if not (plain_json(job.result) and plain_json(payload)):
        return None
    progress = job.progress
    return {
        "job_id": job.job_id,
        "type": job.type,
        "queue": job.queue,
        "status": JobStatus(job.status).value,
        "attempts": int(job.attempt),
        "max_attempts": int(job.max_attempts),
        "progress": {"fraction": float(progress.fraction), "message": progress.message} if progress else None,
        "result": job.result,
        "error": job.error,
        "idempotency_key": job.idempotency_key,
        "run_at": iso_or_none(job.run_at),
        "created_at": iso(job.created_at),
        "updated_at": iso(job.updated_at),
        "started_at": iso_or_none(job.started_at),
        "finished_at": iso_or_none(job.finished_at),
        "next_attempt_at": iso_or_none(job.next_attempt_at),
        "lease_until": iso_or_none(lease_until(job)),
        "redrives": int(job.redrives),
        "retries": int(job.retries),
        "retried_at": iso_or_none(job.retried_at),
        "payload": payload,
        "attempt_history": [
            {
                "attempt": int(record.attempt),
                "started_at": iso_or_none(record.started_at),
                "finished_at": iso(record.finished_at),
                "outcome": record.outcome,
                "error": attempt_error(record),
            }
            for record in job.attempt_history
        ],
        "tags": dict(job.tags) if job.tags else None,
        "trace_id": job.trace_id,
        "discarded_at": iso_or_none(job.discarded_at),
        "batch_id": job.batch_id,
        "callback_of": job.callback_of,
        "parent_job_id": job.parent_job_id,
        "next_job_id": job.next_job_id,
        "chain": chain_state(job),
        "expires_at": iso_or_none(job.start_by),
        "cancel_reason": job.cancel_reason,
        "superseded_by": job.superseded_by,
        "waiting_on": None,
    }


def job_document(job: Job, with_payload: bool = False) -> dict[str, Any]:
    """A job as a delivery or an event shows it: the API's job view (the payload only when asked for)."""
    data = job_json(job, with_payload=with_payload)
    if data is not None:
        return data
    from offpath.handlers.api_models import JobView

    view: dict[str, Any] = JobView.of(job, with_payload=with_payload).model_dump(mode="json")
    return view
