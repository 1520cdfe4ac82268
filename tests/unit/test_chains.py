"""Chains (`then`) and jobs that submit jobs (`ctx.submit`): validation at submit, the next job made exactly once by
the follow-up of the parent's success (also after a crash, by the sweeper), and children made once per key."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest

from offpath.domain.chain import MAX_CHAIN_STEPS, chain_state
from offpath.domain.context import JobContext
from offpath.domain.errors import InvalidRequestError, JobConflictError, PermanentError, StoreUnavailableError
from offpath.domain.ids import derived_job_id
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import Ports
from offpath.domain.quotas import QuotaExceededError
from offpath.handlers.api_models import JobView
from offpath.logic.followups import FOLLOWUP_GRACE, MADE_JOB_GRACE, run_followups, settle
from offpath.logic.process import WorkerPolicy, WorkerPorts, process_record
from offpath.logic.submit import payload_hash
from offpath.logic.sweep import SweepPolicy, sweep
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import (
    SCRIPTED_TYPE,
    STRICT_TYPE,
    InMemoryJobQueue,
    InMemoryJobStore,
    RecordingMetrics,
    ScriptedJob,
)
from tests.unit.conftest import START, TENANT, delivery_of, submitted, unbounded


def step(job_type: str = SCRIPTED_TYPE, payload: dict[str, Any] | None = None, then: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": job_type, "payload": payload or {}}
    if then is not None:
        spec["then"] = then
    return spec


def stored(store: InMemoryJobStore, job_id: str) -> Job:
    job = store.get(job_id, tenant=TENANT)
    assert job is not None
    return job


def run(job: Job, worker_ports: WorkerPorts, policy: WorkerPolicy) -> bool:
    return process_record(delivery_of(job), worker_ports, policy, unbounded)


def children_of(store: InMemoryJobStore, parent: Job) -> list[Job]:
    return [job for job in store.jobs() if job.parent_job_id == parent.job_id]


def failed_with(store: InMemoryJobStore, job: Job, error: str) -> list[Job]:
    """Asserts the job ended FAILED with `error` in its error; returns the children it made."""
    failed = stored(store, job.job_id)
    assert failed.status is JobStatus.FAILED
    assert error in (failed.error or "")
    return children_of(store, job)


class Refusing:
    """A quota gate over the tenant's quota while `full`."""

    def __init__(self) -> None:
        self.full = True

    def admit(self, tenant: str, *, delayed: bool) -> None:
        if self.full:
            raise QuotaExceededError("jobs", "over the open jobs quota", retry_after_s=5)


# -- validation at submit ---------------------------------------------------------------------------


def test_a_chain_is_kept_on_the_job_as_validated(ports: Ports) -> None:
    job = submitted(ports, then=step(STRICT_TYPE, {"name": "b"}, then=step(SCRIPTED_TYPE, {"x": 1})))

    assert job.then == {
        "type": STRICT_TYPE,
        "payload": {"name": "b", "count": 0},
        "then": {"type": SCRIPTED_TYPE, "payload": {"x": 1}},
    }
    assert chain_state(job) == "pending"


@pytest.mark.parametrize(
    ("then", "field"),
    [
        (step("no.such.type"), "then.type"),
        (step(then=step("no.such.type")), "then.then.type"),
        (step(STRICT_TYPE, {"name": 5}), "then.payload.name"),
        (step(then=step(STRICT_TYPE, {"name": "a", "nope": 1})), "then.then.payload.nope"),
        (step(then="not a step"), "then.then"),
        (step("maintenance.nightly_cleanup"), "then.type"),
        ({"payload": {}}, "then.type"),
    ],
)
def test_a_bad_step_anywhere_in_the_chain_is_refused_naming_its_path(ports: Ports, then: Any, field: str) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        submitted(ports, then=then)

    assert refused.value.field == field
    assert ports.store.jobs() == []  # type: ignore[attr-defined]


def test_a_chain_of_at_most_ten_steps_after_the_first_job_is_accepted_and_one_more_is_refused(ports: Ports) -> None:
    def chain(steps: int) -> dict[str, Any]:
        spec = step()
        for _ in range(steps - 1):
            spec = step(then=spec)
        return spec

    assert submitted(ports, then=chain(MAX_CHAIN_STEPS)).then is not None
    with pytest.raises(InvalidRequestError) as refused:
        submitted(ports, then=chain(MAX_CHAIN_STEPS + 1))

    assert refused.value.field == "then" + ".then" * MAX_CHAIN_STEPS
    assert "at most 10 steps" in str(refused.value)


def test_a_chain_larger_than_its_limit_is_refused(ports: Ports) -> None:
    big = {"text": "x" * 10_000}

    with pytest.raises(InvalidRequestError) as refused:
        submitted(ports, then=step(payload=big, then=step(payload=big)))

    assert refused.value.field == "then"
    assert "bytes" in str(refused.value)


# -- the next job, exactly once ---------------------------------------------------------------------


def test_a_three_step_chain_runs_in_order_each_step_seeing_its_parents_id_and_result(
    ports: Ports, worker_ports: WorkerPorts, store: InMemoryJobStore, queue: InMemoryJobQueue, policy: WorkerPolicy
) -> None:
    scripted = worker_ports.registry.job_type(SCRIPTED_TYPE)
    assert scripted is not None
    seen: list[tuple[str | None, Any]] = []

    def count_on(payload: Any, ctx: JobContext) -> dict[str, int]:
        parent = ctx.parent
        seen.append((parent.job_id, parent.result) if parent else (None, None))
        return {"n": parent.result["n"] + 1 if parent else 1}

    assert isinstance(scripted.function, ScriptedJob)
    scripted.function.action = count_on
    first = submitted(ports, then=step(then=step()))

    assert run(first, worker_ports, policy)
    first = stored(store, first.job_id)
    assert first.next_job_id is not None and chain_state(first) == "continued"
    second = stored(store, first.next_job_id)
    assert (second.status, second.parent_job_id, second.then) == (JobStatus.QUEUED, first.job_id, step())
    assert queue.sent[-1].message.job_id == second.job_id

    assert run(second, worker_ports, policy)
    second = stored(store, second.job_id)
    assert second.next_job_id is not None
    third = stored(store, second.next_job_id)
    assert run(third, worker_ports, policy)
    third = stored(store, third.job_id)

    assert seen == [(None, None), (first.job_id, {"n": 1}), (second.job_id, {"n": 2})]
    assert [j.status for j in (first, second, third)] == [JobStatus.SUCCEEDED] * 3
    assert (third.result, third.then, third.next_job_id, chain_state(third)) == ({"n": 3}, None, None, None)
    assert [j.sweep_at for j in (first, second, third)] == [None, None, None]
    assert len(store.jobs()) == 3


def test_a_plain_jobs_success_costs_no_extra_write(
    ports: Ports, worker_ports: WorkerPorts, store: InMemoryJobStore, policy: WorkerPolicy
) -> None:
    job = submitted(ports)
    store.writes.clear()

    assert run(job, worker_ports, policy)

    assert store.writes == ["claim", "record_success"]
    assert stored(store, job.job_id).next_job_id is None


def test_a_chain_steps_success_costs_one_extra_write_and_the_next_jobs_create(
    ports: Ports, worker_ports: WorkerPorts, store: InMemoryJobStore, policy: WorkerPolicy
) -> None:
    job = submitted(ports, then=step())
    store.writes.clear()

    assert run(job, worker_ports, policy)

    assert store.writes == ["claim", "record_success", "create", "clear_followups"]


def test_a_failed_step_stops_the_chain_there(
    ports: Ports, worker_ports: WorkerPorts, store: InMemoryJobStore, scripted: ScriptedJob, policy: WorkerPolicy
) -> None:
    def poison(payload: Any, ctx: JobContext) -> None:
        raise PermanentError("poison")

    scripted.action = poison
    job = submitted(ports, then=step())

    assert run(job, worker_ports, policy)

    failed = stored(store, job.job_id)
    assert (failed.status, failed.next_job_id, failed.sweep_at) == (JobStatus.FAILED, None, None)
    assert chain_state(failed) == "stopped"
    assert JobView.of(failed).chain == "stopped"
    assert len(store.jobs()) == 1


def test_a_worker_that_dies_before_the_next_job_is_made_leaves_it_to_the_sweeper_once(
    ports: Ports,
    worker_ports: WorkerPorts,
    store: InMemoryJobStore,
    clock: ManualClock,
    policy: WorkerPolicy,
) -> None:
    job = submitted(ports, then=step())
    # The follow-up's create never lands (as if the worker died right after the SUCCEED write).
    store.fail_next("create", StoreUnavailableError("down"))

    assert run(job, worker_ports, policy)

    parent = stored(store, job.job_id)
    assert parent.status is JobStatus.SUCCEEDED and parent.next_job_id is not None
    assert parent.sweep_at == parent.finished_at + FOLLOWUP_GRACE  # type: ignore[operator]
    assert children_of(store, parent) == []

    clock.advance(FOLLOWUP_GRACE.total_seconds())
    report = sweep(ports, SweepPolicy())

    assert report.followed_up == 1
    [child] = children_of(store, parent)
    assert child.job_id == parent.next_job_id
    assert stored(store, job.job_id).sweep_at is None
    clock.advance(3600)
    assert sweep(ports, SweepPolicy()).followed_up == 0
    assert len(store.jobs()) == 2


def test_a_replayed_follow_up_creates_nothing_new(
    ports: Ports, worker_ports: WorkerPorts, store: InMemoryJobStore, policy: WorkerPolicy, clock: ManualClock
) -> None:
    job = submitted(ports, then=step())
    assert run(job, worker_ports, policy)
    parent = stored(store, job.job_id)
    before = store.jobs()

    run_followups(parent, ports, now=clock.now() + timedelta(seconds=5))
    run_followups(parent, ports, now=clock.now() + timedelta(seconds=9))

    assert store.jobs() == before
    assert len(children_of(store, parent)) == 1


def test_a_hand_retry_of_a_failed_parent_that_then_succeeds_submits_the_next_job_then_once(
    ports: Ports,
    worker_ports: WorkerPorts,
    store: InMemoryJobStore,
    scripted: ScriptedJob,
    clock: ManualClock,
    policy: WorkerPolicy,
) -> None:
    runs: list[int] = []

    def fails_first_run(payload: Any, ctx: JobContext) -> dict[str, bool]:
        runs.append(ctx.attempt)
        if len(runs) == 1:
            raise PermanentError("not yet")
        return {"ok": True}

    scripted.action = fails_first_run
    job = submitted(ports, then=step())
    assert run(job, worker_ports, policy)
    assert chain_state(stored(store, job.job_id)) == "stopped"

    store.retry_by_hand(job.job_id, tenant=TENANT, now=clock.now(), sweep_at=clock.now() + timedelta(minutes=2))
    assert run(job, worker_ports, policy)

    parent = stored(store, job.job_id)
    assert (parent.status, chain_state(parent)) == (JobStatus.SUCCEEDED, "continued")
    assert [c.job_id for c in children_of(store, parent)] == [parent.next_job_id]
    run_followups(parent, ports, now=clock.now())
    assert len(children_of(store, parent)) == 1


def test_a_next_job_over_the_tenants_quota_waits_for_the_sweeper(
    ports: Ports,
    worker_ports: WorkerPorts,
    store: InMemoryJobStore,
    clock: ManualClock,
    policy: WorkerPolicy,
) -> None:
    gate = Refusing()
    job = submitted(ports, then=step())
    worker_ports.quotas = gate

    assert run(job, worker_ports, policy)
    assert children_of(store, job) == []

    gate.full = False
    clock.advance(FOLLOWUP_GRACE.total_seconds())
    sweep(Ports(ports.registry, store, ports.queue, clock, ports.metrics, quotas=gate), SweepPolicy())

    assert len(children_of(store, job)) == 1


# -- ctx.submit -------------------------------------------------------------------------------------


def test_a_retried_attempt_that_submits_again_gets_the_same_child(
    ports: Ports, worker_ports: WorkerPorts, store: InMemoryJobStore, scripted: ScriptedJob, policy: WorkerPolicy
) -> None:
    child_ids: list[str] = []

    def submits_then_crashes_once(payload: Any, ctx: JobContext) -> dict[str, str]:
        child_ids.append(ctx.submit(STRICT_TYPE, {"name": "child"}, key="welcome"))
        if ctx.attempt == 1:
            raise RuntimeError("crashed after the submit")
        return {"child": child_ids[-1]}

    scripted.action = submits_then_crashes_once
    job = submitted(ports)

    assert not run(job, worker_ports, policy)  # attempt 1 fails after its submit: retried
    assert run(job, worker_ports, policy)

    parent = stored(store, job.job_id)
    [child] = children_of(store, parent)
    assert child_ids == [child.job_id, child.job_id]
    assert (parent.status, parent.result) == (JobStatus.SUCCEEDED, {"child": child.job_id})
    assert (child.status, child.type, child.payload) == (JobStatus.QUEUED, STRICT_TYPE, {"name": "child", "count": 0})
    assert JobView.of(child).parent_job_id == parent.job_id


def test_a_child_belongs_to_its_parents_tenant_and_trace(
    ports: Ports, worker_ports: WorkerPorts, store: InMemoryJobStore, scripted: ScriptedJob, policy: WorkerPolicy
) -> None:
    scripted.action = lambda payload, ctx: ctx.submit(SCRIPTED_TYPE, {}, key="k")
    job = submitted(ports, tenant="tenant-b", trace_id="trace-of-the-parent")

    assert process_record(delivery_of(job), worker_ports, policy, unbounded)

    [child] = [c for c in store.jobs() if c.parent_job_id == job.job_id]
    assert (child.tenant, child.trace_id) == ("tenant-b", "trace-of-the-parent")


def test_two_parents_submitting_under_the_same_key_make_two_children(
    ports: Ports, worker_ports: WorkerPorts, store: InMemoryJobStore, scripted: ScriptedJob, policy: WorkerPolicy
) -> None:
    scripted.action = lambda payload, ctx: ctx.submit(SCRIPTED_TYPE, {}, key="welcome")
    parents = [submitted(ports, payload={"parent": i}) for i in range(2)]

    for parent in parents:
        assert run(parent, worker_ports, policy)

    assert [len(children_of(store, parent)) for parent in parents] == [1, 1]


@pytest.mark.parametrize("key", ["", "k" * 256])
def test_a_child_key_of_no_or_too_many_characters_fails_the_job_saying_so(
    ports: Ports,
    worker_ports: WorkerPorts,
    store: InMemoryJobStore,
    scripted: ScriptedJob,
    policy: WorkerPolicy,
    key: str,
) -> None:
    scripted.action = lambda payload, ctx: ctx.submit(SCRIPTED_TYPE, {}, key=key)
    job = submitted(ports)

    assert run(job, worker_ports, policy)

    assert failed_with(store, job, "ctx.submit's key must be 1 to 255 characters") == []


def test_a_child_key_of_the_longest_length_is_accepted(
    ports: Ports, worker_ports: WorkerPorts, store: InMemoryJobStore, scripted: ScriptedJob, policy: WorkerPolicy
) -> None:
    scripted.action = lambda payload, ctx: ctx.submit(SCRIPTED_TYPE, {}, key="k" * 255)
    job = submitted(ports)

    assert run(job, worker_ports, policy)

    assert stored(store, job.job_id).status is JobStatus.SUCCEEDED
    assert len(children_of(store, job)) == 1


def test_children_under_different_keys_are_different_jobs(
    ports: Ports, worker_ports: WorkerPorts, store: InMemoryJobStore, scripted: ScriptedJob, policy: WorkerPolicy
) -> None:
    scripted.action = lambda payload, ctx: [ctx.submit(SCRIPTED_TYPE, {"i": i}, key=f"k{i}") for i in range(3)]
    job = submitted(ports)

    assert run(job, worker_ports, policy)

    assert len({c.job_id for c in children_of(store, job)}) == 3


@pytest.mark.parametrize(
    ("job_type", "payload"),
    [("no.such.type", {}), (STRICT_TYPE, {"name": 7}), ("maintenance.nightly_cleanup", {})],
)
def test_a_submit_that_can_never_be_accepted_fails_the_job_at_once(
    ports: Ports,
    worker_ports: WorkerPorts,
    store: InMemoryJobStore,
    scripted: ScriptedJob,
    policy: WorkerPolicy,
    job_type: str,
    payload: dict[str, Any],
) -> None:
    scripted.action = lambda p, ctx: ctx.submit(job_type, payload, key="x")
    job = submitted(ports)

    assert run(job, worker_ports, policy)

    assert failed_with(store, job, "ctx.submit refused") == []


def test_the_same_key_for_another_payload_is_refused(
    ports: Ports, worker_ports: WorkerPorts, store: InMemoryJobStore, scripted: ScriptedJob, policy: WorkerPolicy
) -> None:
    def two_payloads(payload: Any, ctx: JobContext) -> None:
        ctx.submit(SCRIPTED_TYPE, {"a": 1}, key="same")
        ctx.submit(SCRIPTED_TYPE, {"a": 2}, key="same")

    scripted.action = two_payloads
    job = submitted(ports)

    assert run(job, worker_ports, policy)

    used = "ctx.submit: key 'same' was used for another type or payload by an earlier attempt"
    assert len(failed_with(store, job, used)) == 1


def test_a_child_over_the_tenants_quota_retries_the_attempt(
    ports: Ports, worker_ports: WorkerPorts, store: InMemoryJobStore, scripted: ScriptedJob, policy: WorkerPolicy
) -> None:
    scripted.action = lambda payload, ctx: ctx.submit(SCRIPTED_TYPE, {}, key="k")
    job = submitted(ports)
    worker_ports.quotas = Refusing()

    assert not run(job, worker_ports, policy)

    assert stored(store, job.job_id).status is JobStatus.RETRYING
    assert children_of(store, job) == []


# -- the document -----------------------------------------------------------------------------------


def test_the_document_describes_then_as_a_step_of_each_job_type_a_caller_may_chain() -> None:
    from offpath.handlers.openapi import openapi_document
    from offpath.jobs import load_job_types

    schemas = openapi_document(registry=load_job_types(demo=True))["components"]["schemas"]

    mapping = schemas["ChainStep"]["discriminator"]["mapping"]
    assert "demo.step" in mapping and "send_welcome_email" in mapping
    assert "maintenance.nightly_cleanup" not in mapping  # submitted by its schedules only
    step = schemas["DemoStepStep"]
    assert step["properties"]["payload"] == {"$ref": "#/components/schemas/StepPayload"}
    assert step["properties"]["then"]["anyOf"][0] == {"$ref": "#/components/schemas/ChainStep"}
    assert step["additionalProperties"] is False
    assert schemas["DemoEchoSubmission"]["properties"]["then"]["anyOf"][0] == {"$ref": "#/components/schemas/ChainStep"}
    view = schemas["JobView"]["properties"]
    assert {"parent_job_id", "next_job_id", "chain"} <= set(view)


def test_a_replay_under_the_same_key_with_another_chain_is_a_conflict(ports: Ports) -> None:
    from offpath.domain.errors import IdempotencyConflictError

    first = submitted(ports, idempotency_key="k-1", then=step(payload={"a": 1}))
    again = submitted(ports, idempotency_key="k-1", then=step(payload={"a": 1}))

    assert again.job_id == first.job_id
    with pytest.raises(IdempotencyConflictError):
        submitted(ports, idempotency_key="k-1", then=step(payload={"a": 2}))
    with pytest.raises(IdempotencyConflictError):
        submitted(ports, idempotency_key="k-1")


def test_ctx_parent_is_read_once_when_asked_and_never_when_not(
    ports: Ports, worker_ports: WorkerPorts, store: InMemoryJobStore, scripted: ScriptedJob, policy: WorkerPolicy
) -> None:
    first = submitted(ports, then=step(then=step()))
    assert run(first, worker_ports, policy)  # reads no parent: it has none
    second = stored(store, stored(store, first.job_id).next_job_id or "")
    seen: list[Any] = []
    scripted.action = lambda payload, ctx: seen.extend([ctx.parent, ctx.parent])
    store.reads.clear()

    assert run(second, worker_ports, policy)

    assert store.reads.count("get") == 1
    assert seen[0] == seen[1] and seen[0].job_id == first.job_id
    third = stored(store, stored(store, second.job_id).next_job_id or "")
    scripted.action = lambda payload, ctx: None
    store.reads.clear()
    assert run(third, worker_ports, policy)
    assert store.reads.count("get") == 0


def test_a_parent_past_its_retention_reads_as_its_id_without_a_result(
    ports: Ports, worker_ports: WorkerPorts, store: InMemoryJobStore, scripted: ScriptedJob, policy: WorkerPolicy
) -> None:
    first = submitted(ports, then=step())
    assert run(first, worker_ports, policy)
    second = stored(store, stored(store, first.job_id).next_job_id or "")
    store._jobs.pop((TENANT, first.job_id))  # expired (TTL)
    seen: list[Any] = []
    scripted.action = lambda payload, ctx: seen.append(ctx.parent)

    assert run(second, worker_ports, policy)

    assert (seen[0].job_id, seen[0].result) == (first.job_id, None)


def test_the_next_job_of_a_chain_gets_its_steps_payload(
    ports: Ports, worker_ports: WorkerPorts, store: InMemoryJobStore, policy: WorkerPolicy
) -> None:
    first = submitted(ports, then=step(payload={"size": "large"}, then=step()))

    assert run(first, worker_ports, policy)

    second = stored(store, stored(store, first.job_id).next_job_id or "")
    assert (second.payload, second.then) == ({"size": "large"}, step())


# -- the follow-up that makes the next job, and settling ---------------------------------------------------------------


def succeeded_step(
    store: InMemoryJobStore, then: Any = None, status: JobStatus = JobStatus.SUCCEEDED, **changes: Any
) -> Job:
    """A chain step written SUCCEEDED by its worker, its follow-ups not run yet (it is in the sweep index)."""
    from tests.unit.conftest import a_job

    fields: dict[str, Any] = {
        "then": then if then is not None else step(payload={"n": 2}),
        "next_job_id": derived_job_id(START + timedelta(seconds=5), "next"),
        "sweep_at": START + FOLLOWUP_GRACE,
        "trace_id": "trace-1",
        "result": {"n": 1},
        **changes,
    }
    return store.put(a_job(status, **fields))


def test_the_next_job_is_made_as_its_submit_would_be_under_the_id_its_parent_fixed(
    ports: Ports,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    parent = succeeded_step(store)
    queue.fail_sends(1)  # its message is left to the sweeper: the job waits in the sweep index

    with caplog.at_level(logging.INFO, logger="offpath.followups"):
        assert settle(parent, ports, now=clock.now()) is True

    made = stored(store, parent.next_job_id or "")
    assert (made.type, made.queue, made.payload, made.payload_hash) == (
        SCRIPTED_TYPE,
        "default",
        {"n": 2},
        payload_hash(SCRIPTED_TYPE, {"n": 2}),
    )
    assert (made.created_at, made.updated_at, made.sweep_at) == (
        START + timedelta(seconds=5),
        clock.now(),
        clock.now() + MADE_JOB_GRACE,
    )
    assert (made.submission_id, made.trace_id, made.parent_job_id) == (
        f"then:{parent.job_id}",
        "trace-1",
        parent.job_id,
    )
    logged = [
        (r.getMessage(), getattr(r, "next_job_id", None)) for r in caplog.records if r.name == "offpath.followups"
    ]
    assert logged == [("the chain's next job submitted", parent.next_job_id)]


def test_a_next_job_type_no_longer_deployed_stops_the_chain_and_is_counted(
    ports: Ports,
    store: InMemoryJobStore,
    clock: ManualClock,
    metrics: RecordingMetrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    parent = succeeded_step(store, then=step("gone.since.then"))

    with caplog.at_level(logging.ERROR, logger="offpath.followups"):
        run_followups(parent, ports, now=clock.now())

    assert [r.getMessage() for r in caplog.records] == [
        "the chain's next job type gone.since.then is not in this deployment; the chain stops here"
    ]
    assert metrics.dimensioned == {("ChainStepsDropped", parent.queue, "gone.since.then"): 1}
    assert store.get(parent.next_job_id or "", tenant=parent.tenant) is None


def test_a_chain_step_without_its_next_jobs_id_stops_the_chain_saying_so(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    parent = succeeded_step(store, next_job_id=None)

    with caplog.at_level(logging.ERROR, logger="offpath.followups"):
        run_followups(parent, ports, now=clock.now())

    assert [r.getMessage() for r in caplog.records] == [
        "a succeeded chain step without its next job's id; the chain stops here"
    ]


def test_a_failed_chain_step_has_no_next_job_and_nothing_to_say(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    parent = succeeded_step(store, status=JobStatus.FAILED, next_job_id=None)

    with caplog.at_level(logging.INFO, logger="offpath.followups"):
        run_followups(parent, ports, now=clock.now())

    assert caplog.records == []
    assert len(store.jobs()) == 1


def test_follow_ups_that_fail_leave_the_job_to_the_sweeper_and_are_counted(
    ports: Ports,
    store: InMemoryJobStore,
    clock: ManualClock,
    metrics: RecordingMetrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    parent = succeeded_step(store)
    store.fail_next("create", StoreUnavailableError("down"))

    with caplog.at_level(logging.WARNING, logger="offpath.followups"):
        assert settle(parent, ports, now=clock.now()) is False

    [logged] = caplog.records
    assert logged.getMessage() == "the job's follow-ups did not run; the sweeper runs them"
    assert logged.exc_info is not None and isinstance(logged.exc_info[1], StoreUnavailableError)
    assert metrics.dimensioned == {("FollowupsDeferred", parent.queue, parent.type): 1}
    assert stored(store, parent.job_id).sweep_at == parent.sweep_at


@pytest.mark.parametrize(
    ("error", "level", "says"),
    [
        (JobConflictError(None, "settled"), logging.INFO, "the job's follow-ups were already settled"),
        (
            StoreUnavailableError("down"),
            logging.WARNING,
            "the job's follow-ups ran; it stays in the sweep index until a sweep",
        ),
    ],
)
def test_follow_ups_that_ran_but_were_not_cleared_say_why(
    ports: Ports,
    store: InMemoryJobStore,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
    error: Exception,
    level: int,
    says: str,
) -> None:
    parent = succeeded_step(store)
    store.fail_next("clear_followups", error)

    with caplog.at_level(logging.INFO, logger="offpath.followups"):
        assert settle(parent, ports, now=clock.now()) is True

    [logged] = [r for r in caplog.records if r.levelno >= logging.INFO and "follow-ups" in r.getMessage()]
    assert (logged.levelno, logged.getMessage()) == (level, says)
    assert (logged.exc_info is not None) == (level == logging.WARNING)
