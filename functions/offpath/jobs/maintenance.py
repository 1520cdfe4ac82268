"""Nightly cleanup at 03:00 Prague time, fired by EventBridge Scheduler (no crontab anywhere). Only its
schedule submits it (`submitted_by="system"`); an admin can fire the schedule now."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Protocol

from pydantic import BaseModel, Field

from offpath.domain.context import JobContext
from offpath.domain.registry import job, schedule


class CleanupPayload(BaseModel):
    older_than_days: int = Field(default=30, ge=1, le=3650)


class ScratchStorage(Protocol):
    def delete_older_than(self, cutoff: datetime) -> int: ...


class LoggingScratchStorageStub:
    """STAND-IN: pretends to delete scratch files and logs it. Replace with your storage (e.g. S3)."""

    def delete_older_than(self, cutoff: datetime) -> int:
        logging.getLogger("offpath.cleanup.stub").info(
            "stub scratch storage: nothing really deleted", extra={"cutoff": cutoff.isoformat()}
        )
        return 0


storage: ScratchStorage = LoggingScratchStorageStub()


@job(
    "maintenance.nightly_cleanup",
    payload=CleanupPayload,
    queue="bulk",
    max_attempts=3,
    timeout_s=300,
    submitted_by="system",
)
def nightly_cleanup(payload: CleanupPayload, ctx: JobContext) -> dict[str, int | str]:
    cutoff = ctx.created_at - timedelta(days=payload.older_than_days)
    deleted = storage.delete_older_than(cutoff)
    return {"deleted": deleted, "cutoff": cutoff.isoformat()}


schedule(
    "nightly-cleanup",
    cron="0 3 * * ? *",
    timezone="Europe/Prague",
    job="maintenance.nightly_cleanup",
    payload={"older_than_days": 30},
    overlap="skip",
    flexible_window_min=15,
)
