"""The checks before a claim (logic/admission.py): in order, the first answer decides; a wait spends no attempt."""

from __future__ import annotations

from datetime import datetime

import pytest

from offpath.domain.job import JobStatus
from offpath.domain.ports import JobMessage, Ports
from offpath.domain.registry import JobType
from offpath.logic import admission
from offpath.logic.admission import Done, Wait
from offpath.logic.process import WorkerPolicy, WorkerPorts, process_record
from offpath_tools.fakes import InMemoryJobQueue, InMemoryJobStore, ScriptedJob, VisibilityChange
from tests.unit.conftest import TENANT, delivery_of, submitted, unbounded


def test_the_first_step_that_answers_decides(monkeypatch: pytest.MonkeyPatch, worker_ports: WorkerPorts) -> None:
    asked: list[str] = []

    def step(name: str, verdict: Wait | Done | None) -> admission.Step:
        def check(message: JobMessage, job_type: JobType, ports: WorkerPorts, *, now: datetime) -> Wait | Done | None:
            asked.append(name)
            return verdict

        return check

    monkeypatch.setattr(
        admission, "ADMISSION", (step("a", None), step("b", Wait(5, "paused")), step("c", Done("expired")))
    )
    message = JobMessage("j", "test.scripted", TENANT)
    job_type = worker_ports.registry.job_types["test.scripted"]

    assert admission.admit(message, job_type, worker_ports, now=worker_ports.clock.now()) == Wait(5, "paused")
    assert asked == ["a", "b"]


def test_a_waiting_job_is_not_claimed_and_its_message_comes_back_after_the_wait(
    monkeypatch: pytest.MonkeyPatch,
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    scripted: ScriptedJob,
) -> None:
    monkeypatch.setattr(admission, "ADMISSION", (lambda message, job_type, ports, *, now: Wait(7, "rate_limit"),))
    job = submitted(ports)

    assert process_record(delivery_of(job), worker_ports, policy, unbounded) is False

    waiting = store.get(job.job_id, tenant=TENANT)
    assert waiting is not None and (waiting.status, waiting.attempt) == (JobStatus.QUEUED, 0)
    assert scripted.runs_of(job.job_id) == 0
    assert queue.visibility_changes[-1] == VisibilityChange("default", "rh-m-1", 7)
    assert "claim" not in store.writes
