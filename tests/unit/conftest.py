"""Logic against the in-memory fakes: no network, no AWS."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import JobMessage, Ports
from offpath.domain.registry import Registry
from offpath.logic.process import Delivery, WorkerPolicy, WorkerPorts
from offpath.logic.submit import SubmitPolicy, SubmitRequest, submit_job
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import (
    SCRIPTED_TYPE,
    CeilingJitter,
    InMemoryJobQueue,
    InMemoryJobStore,
    RecordingMetrics,
    ScriptedJob,
    registry_with,
)

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TENANT = "tenant-a"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def store() -> InMemoryJobStore:
    return InMemoryJobStore()


@pytest.fixture
def queue() -> InMemoryJobQueue:
    return InMemoryJobQueue()


@pytest.fixture
def metrics() -> RecordingMetrics:
    return RecordingMetrics()


@pytest.fixture
def scripted() -> ScriptedJob:
    return ScriptedJob()


@pytest.fixture
def registry(scripted: ScriptedJob) -> Registry:
    return registry_with(scripted)


@pytest.fixture
def ports(
    registry: Registry, store: InMemoryJobStore, queue: InMemoryJobQueue, clock: ManualClock, metrics: RecordingMetrics
) -> Ports:
    return Ports(registry=registry, store=store, queue=queue, clock=clock, metrics=metrics)


@pytest.fixture
def worker_ports(
    registry: Registry, store: InMemoryJobStore, queue: InMemoryJobQueue, clock: ManualClock, metrics: RecordingMetrics
) -> WorkerPorts:
    return WorkerPorts(
        registry=registry,
        store=store,
        queue=queue,
        clock=clock,
        metrics=metrics,
        rng=CeilingJitter(),
        sleep=clock.advance,  # the worker's waits move the test's clock, not real time
    )


@pytest.fixture
def policy() -> WorkerPolicy:
    return WorkerPolicy(queue="default")


def submitted(ports: Ports, job_type: str = SCRIPTED_TYPE, payload: dict[str, Any] | None = None, **kwargs: Any) -> Job:
    """A job accepted through the submit logic, as the api would."""
    request = SubmitRequest(tenant=kwargs.pop("tenant", TENANT), type=job_type, payload=payload or {}, **kwargs)
    return submit_job(request, ports, SubmitPolicy()).job


def fails(error: Exception) -> Any:
    """A job function that raises `error`."""

    def action(payload: Any, ctx: Any) -> Any:
        raise error

    return action


def delivery_of(job: Job, message_id: str = "m-1") -> Delivery:
    return Delivery(message_id=message_id, receipt_handle=f"rh-{message_id}", body=JobMessage.of(job).to_body())


def a_job(status: JobStatus = JobStatus.QUEUED, **changes: Any) -> Job:
    """A job record built directly (for the pure transitions)."""
    job = Job(
        job_id="0" * 32,
        tenant=TENANT,
        type=SCRIPTED_TYPE,
        queue="default",
        payload={},
        payload_hash="h",
        status=status,
        created_at=START,
        updated_at=START,
        max_attempts=3,
    )
    return job.replace(**changes)


def unbounded() -> int:
    return 15 * 60 * 1000
