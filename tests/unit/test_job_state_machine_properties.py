"""No sequence of events takes a job out of a final state or loses it.

Hypothesis drives the real worker logic, sweeper, cancel and redrive against the in-memory fakes
with any interleaving of: submits, deliveries (duplicates included, and redriven copies), workers
that die holding a lease, clock jumps past leases and backoffs, sweeps and cancels.
"""

from __future__ import annotations

import contextlib
import random
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, initialize, invariant, rule

from offpath.domain.context import JobContext
from offpath.domain.errors import JobConflictError, JobNotFoundError, PermanentError
from offpath.domain.job import JobStatus
from offpath.domain.ports import JobMessage, Ports
from offpath.logic import queries
from offpath.logic.process import Delivery, WorkerPolicy, WorkerPorts, process_record
from offpath.logic.submit import SubmitPolicy, SubmitRequest, submit_job
from offpath.logic.sweep import SweepPolicy, sweep
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import (
    SCRIPTED_TYPE,
    InMemoryJobQueue,
    InMemoryJobStore,
    RecordingMetrics,
    ScriptedJob,
    registry_with,
)

TENANT = "tenant-a"
OUTCOMES = ("succeed", "retry", "permanent")
UNLIMITED_MS = 10**9


class JobLifecycle(RuleBasedStateMachine):
    jobs = Bundle("jobs")

    @initialize()
    def setup(self) -> None:
        self.clock = ManualClock(datetime(2026, 3, 29, 0, 30, tzinfo=UTC))
        self.store = InMemoryJobStore()
        self.queue = InMemoryJobQueue()
        self.metrics = RecordingMetrics()
        self.plans: dict[str, list[str]] = {}
        self.side_effects: dict[str, int] = {}
        self.scripted = ScriptedJob(action=self._act)
        self.registry = registry_with(self.scripted)
        self.submit_ports = Ports(
            registry=self.registry, store=self.store, queue=self.queue, clock=self.clock, metrics=self.metrics
        )
        self.worker_ports = WorkerPorts(
            registry=self.registry,
            store=self.store,
            queue=self.queue,
            clock=self.clock,
            metrics=self.metrics,
            rng=random.Random(7),
        )
        self.policy = WorkerPolicy(queue="default")
        self.accepted: set[str] = set()
        self.final_seen: dict[str, JobStatus] = {}
        self.redriven_since_failure: set[str] = set()

    def _act(self, payload: Any, ctx: JobContext) -> Any:
        if ctx.once("side-effect"):
            self.side_effects[ctx.job_id] = self.side_effects.get(ctx.job_id, 0) + 1
        plan = self.plans.get(ctx.job_id) or ["succeed"]
        outcome = plan.pop(0) if len(plan) > 1 else plan[0]
        if outcome == "retry":
            raise RuntimeError("transient")
        if outcome == "permanent":
            raise PermanentError("bad input")
        return {"ok": True}

    def _deliver(self, job_id: str, *, redriven: bool = False) -> None:
        job = self.store.get(job_id, tenant=TENANT)
        assert job is not None
        body = JobMessage.of(job).to_body()
        delivery = Delivery(message_id=f"m-{job_id}", receipt_handle=f"r-{job_id}", body=body, redriven=redriven)
        process_record(delivery, self.worker_ports, self.policy, lambda: UNLIMITED_MS)

    @rule(target=jobs, plan=st.lists(st.sampled_from(OUTCOMES), min_size=1, max_size=5))
    def submit(self, plan: list[str]) -> str:
        submitted = submit_job(
            SubmitRequest(tenant=TENANT, type=SCRIPTED_TYPE, payload={"n": len(self.accepted)}),
            self.submit_ports,
            SubmitPolicy(),
        )
        job_id = submitted.job.job_id
        self.plans[job_id] = list(plan)
        self.accepted.add(job_id)
        return job_id

    @rule(job_id=jobs, copies=st.integers(1, 3))
    def deliver(self, job_id: str, copies: int) -> None:
        for _ in range(copies):  # duplicate deliveries of the same message
            self._deliver(job_id)

    @rule(job_id=jobs)
    def deliver_redriven_copy(self, job_id: str) -> None:
        before = self.store.get(job_id, tenant=TENANT)
        self._deliver(job_id, redriven=True)
        if before is not None and before.status is JobStatus.FAILED:
            self.redriven_since_failure.add(job_id)

    @rule(job_id=jobs)
    def worker_dies_holding_the_lease(self, job_id: str) -> None:
        now = self.clock.now()
        with contextlib.suppress(JobConflictError, JobNotFoundError):
            self.store.claim(job_id, tenant=TENANT, now=now, lease_until=now + timedelta(seconds=40))

    @rule(seconds=st.sampled_from([1, 30, 45, 130, 3600]))
    def time_passes(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @rule()
    def sweeper_runs(self) -> None:
        sweep(self.submit_ports, SweepPolicy())

    @rule(job_id=jobs)
    def cancel(self, job_id: str) -> None:
        with contextlib.suppress(JobConflictError):
            queries.cancel_job(job_id, tenant=TENANT, store=self.store, clock=self.clock, retention=timedelta(days=7))

    @rule(job_id=consumes(jobs))
    def forget(self, job_id: str) -> None:
        """Stop sending events for a job (it keeps being checked by the invariants)."""

    @invariant()
    def no_accepted_job_is_lost(self) -> None:
        for job_id in getattr(self, "accepted", ()):
            assert self.store.get(job_id, tenant=TENANT) is not None

    @invariant()
    def final_states_hold(self) -> None:
        for job_id in getattr(self, "accepted", ()):
            job = self.store.get(job_id, tenant=TENANT)
            assert job is not None
            seen = self.final_seen.get(job_id)
            if seen in (JobStatus.SUCCEEDED, JobStatus.CANCELLED):
                assert job.status is seen, f"{seen.value} job became {job.status.value}"
            if seen is JobStatus.FAILED and job.status is not JobStatus.FAILED:
                assert job_id in self.redriven_since_failure, "a FAILED job changed without a redrive"
                self.redriven_since_failure.discard(job_id)
            if job.status.is_final:
                self.final_seen[job_id] = job.status
            else:
                self.final_seen.pop(job_id, None)

    @invariant()
    def attempts_stay_within_the_budget(self) -> None:
        for job_id in getattr(self, "accepted", ()):
            job = self.store.get(job_id, tenant=TENANT)
            assert job is not None
            assert 0 <= job.attempt <= job.max_attempts

    @invariant()
    def guarded_side_effects_happen_at_most_once(self) -> None:
        assert all(count == 1 for count in getattr(self, "side_effects", {}).values())

    @invariant()
    def a_final_job_has_no_sweep_time_and_an_unfinished_one_has_one_or_a_message(self) -> None:
        """An unfinished job is found again by its message (sent before it was written) or by the sweeper."""
        sent = {s.message.job_id for s in self.queue.sent} if hasattr(self, "queue") else set()
        for job_id in getattr(self, "accepted", ()):
            job = self.store.get(job_id, tenant=TENANT)
            assert job is not None
            if job.status.is_final:
                assert job.sweep_at is None
            else:
                assert job.sweep_at is not None or job_id in sent


JobLifecycle.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestJobLifecycle = JobLifecycle.TestCase
