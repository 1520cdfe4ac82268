"""A replay under an idempotency key must ask for the same job: the type and payload, the queue and the run_at.
Anything else is a 422 (`idempotency_key_reused`), and the first job stays as it was."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from offpath.domain.errors import IdempotencyConflictError
from offpath.domain.quotas import QuotaExceededError, parse
from offpath.handlers.api import _error_body
from offpath.logic.quotas import CachedQuotaGate
from offpath.logic.submit import Ports, SubmitPolicy, SubmitRequest, submit_job
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import SCRIPTED_TYPE, InMemoryJobQueue, InMemoryJobStore, InMemoryQuotaCounters
from tests.unit.conftest import START, TENANT


def request(**changes: object) -> SubmitRequest:
    fields: dict[str, object] = {"tenant": TENANT, "type": SCRIPTED_TYPE, "payload": {"n": 1}, "idempotency_key": "k"}
    fields.update(changes)
    return SubmitRequest(**fields)  # type: ignore[arg-type]


def moved_to(ports: Ports, queue: str) -> Ports:
    """The same deployment after the job type moved to another queue."""
    registry = dataclasses.replace(ports.registry, job_types=dict(ports.registry.job_types))
    registry.job_types[SCRIPTED_TYPE] = dataclasses.replace(registry.job_types[SCRIPTED_TYPE], queue=queue)
    return dataclasses.replace(ports, registry=registry)


def test_a_replay_that_asks_for_another_queue_is_a_422_and_the_first_job_stays(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue
) -> None:
    first = submit_job(request(), ports, SubmitPolicy()).job
    assert first.queue == "default"

    with pytest.raises(IdempotencyConflictError) as conflict:
        submit_job(request(queue="bulk"), moved_to(ports, "bulk"), SubmitPolicy())

    status, body = _error_body(conflict.value)
    assert (status, body.code) == (422, "idempotency_key_reused")
    assert store.jobs() == [first]
    assert [s.queue for s in queue.sent] == ["default"]


def test_a_replay_that_asks_for_another_run_at_is_a_422(ports: Ports, store: InMemoryJobStore) -> None:
    first = submit_job(request(run_at="2026-03-01T12:05:00Z"), ports, SubmitPolicy()).job

    with pytest.raises(IdempotencyConflictError):
        submit_job(request(run_at="2026-03-01T12:06:00Z"), ports, SubmitPolicy())
    assert store.jobs() == [first]


def test_a_replay_of_the_same_submission_over_a_quota_is_answered_and_another_queue_is_not(
    ports: Ports, store: InMemoryJobStore
) -> None:
    first = submit_job(request(), ports, SubmitPolicy()).job
    gate = CachedQuotaGate(parse(f"{TENANT}:open_jobs=0"), InMemoryQuotaCounters(), ManualClock(START))
    full = dataclasses.replace(ports, quotas=gate)

    assert submit_job(request(), full, SubmitPolicy()).job == first
    with pytest.raises(IdempotencyConflictError):
        submit_job(request(queue="bulk"), moved_to(full, "bulk"), SubmitPolicy())
    with pytest.raises(QuotaExceededError):
        submit_job(request(idempotency_key="k-2"), full, SubmitPolicy())
    assert store.jobs() == [first]


def test_the_fingerprint_names_the_payload_the_queue_and_the_run_at_in_utc(ports: Ports) -> None:
    job = submit_job(request(run_at="2026-03-01T13:05:00+01:00"), ports, SubmitPolicy()).job

    assert job.run_at == START + timedelta(minutes=5)
    assert job.fingerprint == f"{job.payload_hash}|default|2026-03-01T12:05:00+00:00"
