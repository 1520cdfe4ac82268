"""Job state changes, seen where they happen: at the job store port the handlers are given.

`ObservedJobStore` wraps the store of each in-process function and reports every transition it
makes (a write that fails its condition reports nothing). The console prints one line per change;
the benchmark counts them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from offpath.domain.job import Job

logger = logging.getLogger("offpath.local.jobs")


@dataclass(frozen=True)
class JobEvent:
    at: float
    job_id: str
    tenant: str
    type: str
    queue: str
    status: str
    detail: str = ""


Listener = Callable[[JobEvent], None]


class JobEvents:
    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def emit(self, job: Job, status: str, detail: str = "") -> None:
        event = JobEvent(time.time(), job.job_id, job.tenant, job.type, job.queue, status, detail)
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(event)
            except Exception:
                logger.exception("a job event listener failed")


class ObservedJobStore:
    """The wrapped store, reporting each transition it made to `events`. Every other method passes through."""

    def __init__(self, inner: Any, events: JobEvents) -> None:
        self._inner = inner
        self._events = events

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create(self, job: Job) -> Any:
        outcome = self._inner.create(job)
        if not outcome.replayed:
            created = outcome.job
            detail = f"run at {_iso(created.run_at)}" if created.run_at is not None else ""
            self._events.emit(created, created.status.value, detail)
        return outcome

    def claim(self, *args: Any, **kwargs: Any) -> Job:
        job = self._inner.claim(*args, **kwargs)
        self._events.emit(job, "RUNNING", f"attempt {job.attempt}/{job.max_attempts}")
        return job

    def record_success(self, job: Job, *args: Any, **kwargs: Any) -> None:
        self._inner.record_success(job, *args, **kwargs)
        now = kwargs.get("now")
        took = f" in {_ms(now, job.updated_at)}" if now is not None else ""
        self._events.emit(job, "SUCCEEDED", f"attempt {job.attempt}/{job.max_attempts}{took}")

    def record_retry(self, job: Job, *args: Any, **kwargs: Any) -> None:
        self._inner.record_retry(job, *args, **kwargs)
        now, next_at = kwargs.get("now"), kwargs.get("next_attempt_at")
        wait = f"; next attempt in {round((next_at - now).total_seconds())} s" if now and next_at else ""
        self._events.emit(
            job, "RETRYING", f"attempt {job.attempt}/{job.max_attempts} failed: {_short(kwargs.get('error'))}{wait}"
        )

    def record_failure(self, job: Job, *args: Any, **kwargs: Any) -> None:
        self._inner.record_failure(job, *args, **kwargs)
        self._events.emit(job, "FAILED", f"{_short(kwargs.get('error'))}; message in the DLQ")

    def fail_expired_lease(self, job: Job, *args: Any, **kwargs: Any) -> None:
        self._inner.fail_expired_lease(job, *args, **kwargs)
        self._events.emit(job, "FAILED", "lease expired on the last attempt; message in the DLQ")

    def cancel(self, *args: Any, **kwargs: Any) -> Job:
        job = self._inner.cancel(*args, **kwargs)
        self._events.emit(job, "CANCELLED", f"superseded by {job.superseded_by}" if job.superseded_by else "")
        return job

    def expire(self, *args: Any, **kwargs: Any) -> Job:
        job = self._inner.expire(*args, **kwargs)
        self._events.emit(job, "EXPIRED", "not started by its expires_at; never ran")
        return job

    def enqueue_scheduled(self, *args: Any, **kwargs: Any) -> Job:
        job = self._inner.enqueue_scheduled(*args, **kwargs)
        self._events.emit(job, "QUEUED", "its run_at came due")
        return job

    def reset_for_redrive(self, *args: Any, **kwargs: Any) -> Job:
        job = self._inner.reset_for_redrive(*args, **kwargs)
        self._events.emit(job, "QUEUED", f"redriven from the DLQ (redrive {job.redrives})")
        return job

    def retry_by_hand(self, *args: Any, **kwargs: Any) -> Job:
        job = self._inner.retry_by_hand(*args, **kwargs)
        self._events.emit(job, "QUEUED", f"retried by hand (retry {job.retries})")
        return job

    def requeue_expired_lease(self, job: Job, *args: Any, **kwargs: Any) -> Job:
        requeued = self._inner.requeue_expired_lease(job, *args, **kwargs)
        self._events.emit(requeued, "QUEUED", "lease expired; requeued by the sweeper")
        return requeued


class ConsoleSummary:
    """One human line per job state change."""

    def __init__(self, say: Callable[[str], None], tenants: int = 1) -> None:
        self.say = say
        self.show_tenant = tenants > 1

    def __call__(self, event: JobEvent) -> None:
        stamp = time.strftime("%H:%M:%S", time.localtime(event.at))
        tenant = f"  [{event.tenant}]" if self.show_tenant or event.tenant == "system" else ""
        detail = f"  {event.detail}" if event.detail else ""
        self.say(f"{stamp}  {event.status:<9}  {event.type:<24} {event.job_id}{tenant}{detail}")


def _short(text: Any, limit: int = 160) -> str:
    value = str(text or "").replace("\n", " ")
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _ms(now: datetime, since: datetime) -> str:
    return f"{max(0, round((now - since).total_seconds() * 1000))} ms"


def _iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")
