"""The HTTP contract on the request path: request bodies and the job view (see openapi.py for the document)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from offpath.domain.errors import InvalidRequestError
from offpath.domain.job import Job

SAFE_FIELD_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$|^[0-9]{1,6}$")


class SubmitBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str = Field(min_length=1, max_length=64, description="a registered job type")
    payload: dict[str, Any] = Field(default_factory=dict)
    run_at: str | None = Field(default=None, description="ISO 8601 time to run at (delayed job)")
    queue: str | None = Field(default=None, max_length=32)


class BatchItemBody(SubmitBody):
    idempotency_key: str | None = Field(default=None, max_length=255)


class BatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    jobs: list[BatchItemBody] = Field(min_length=1, max_length=100)


def job_view(job: Job) -> dict[str, Any]:
    view: dict[str, Any] = {
        "job_id": job.job_id,
        "type": job.type,
        "queue": job.queue,
        "status": job.status.value,
        "attempts": job.attempt,
        "max_attempts": job.max_attempts,
        "progress": ({"fraction": job.progress.fraction, "message": job.progress.message} if job.progress else None),
        "result": job.result,
        "error": job.error,
        "idempotency_key": job.idempotency_key,
        "run_at": _iso(job.run_at),
        "created_at": _iso(job.created_at),
        "updated_at": _iso(job.updated_at),
        "started_at": _iso(job.started_at),
        "finished_at": _iso(job.finished_at),
        "next_attempt_at": _iso(job.next_attempt_at),
        "redrives": job.redrives,
    }
    return view


def _iso(when: datetime | None) -> str | None:
    return when.isoformat().replace("+00:00", "Z") if when else None


def parse_body(model: type[BaseModel], data: Any) -> Any:
    """Validate a decoded JSON body; the error names the field, never echoes the value."""
    if not isinstance(data, dict):
        raise InvalidRequestError("body", "body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        parts = [str(p) if SAFE_FIELD_PART.match(str(p)) else "?" for p in first["loc"]]
        field = ".".join(parts) or "body"
        message = "unknown field" if first["type"] == "extra_forbidden" else first["msg"]
        raise InvalidRequestError(field, f"{field}: {message}") from None
