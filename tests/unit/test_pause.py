"""The pause step of admission against fakes: a paused job type's (or queue class's) job is not claimed and its
message comes back after the pause's wait; on one of its last receives a delayed fresh copy takes its place; the
worker's view of the pauses is cached for 10 s and outlives a store outage; the pause and resume use cases."""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime

import pytest

from offpath.domain.errors import StoreUnavailableError
from offpath.domain.job import JobStatus
from offpath.domain.pauses import Pause, PauseKind, Pauses
from offpath.domain.ports import Ports
from offpath.logic import pause as pausing
from offpath.logic.admission import Wait
from offpath.logic.pause import (
    PAUSE_FLAGS_TTL_S,
    PAUSED_QUEUE_WAIT_S,
    PAUSED_WAIT_S,
    QUEUE_RECHECK_S,
    PauseFlags,
    UnknownPauseTargetError,
)
from offpath.logic.process import WorkerPolicy, WorkerPorts, process_record
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import InMemoryJobQueue, InMemoryJobStore, RecordingMetrics
from tests.unit.conftest import SCRIPTED_TYPE, delivery_of, submitted, unbounded


class InMemoryPauseStore:
    """The PauseStore port in memory (its DynamoDB adapter: tests/integration/test_pause.py)."""

    def __init__(self) -> None:
        self.state: dict[tuple[PauseKind, str], Pause] = {}
        self.reads = 0
        self.failing = False

    def pauses(self) -> Pauses:
        self.reads += 1
        if self.failing:
            raise StoreUnavailableError("DynamoDB unavailable (injected)")
        queues = {name: p for (kind, name), p in self.state.items() if kind == "queue"}
        types = {name: p for (kind, name), p in self.state.items() if kind == "job_type"}
        return Pauses(queues=queues, job_types=types)

    def pause(self, pause: Pause) -> tuple[Pause, bool]:
        earlier = self.state.get((pause.kind, pause.name))
        if earlier is not None:
            return earlier, False
        self.state[(pause.kind, pause.name)] = pause
        return pause, True

    def resume(self, kind: PauseKind, name: str) -> Pause | None:
        return self.state.pop((kind, name), None)


class RecordingSwitch:
    def __init__(self) -> None:
        self.applied: list[tuple[str, bool]] = []

    def apply(self, queue: str, *, paused: bool) -> None:
        self.applied.append((queue, paused))


class Ticks:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def pauses() -> InMemoryPauseStore:
    return InMemoryPauseStore()


@pytest.fixture
def ticks() -> Ticks:
    return Ticks()


@pytest.fixture
def flagged(worker_ports: WorkerPorts, pauses: InMemoryPauseStore, ticks: Ticks) -> WorkerPorts:
    return dataclasses.replace(worker_ports, pauses=PauseFlags(pauses, queue="default", monotonic=ticks))


def pause_type(pauses: InMemoryPauseStore, clock: ManualClock, name: str = SCRIPTED_TYPE) -> None:
    pauses.pause(Pause("job_type", name, clock.now()))


def test_a_paused_job_types_job_is_not_claimed_and_comes_back_after_the_pauses_wait(
    ports: Ports,
    flagged: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    pauses: InMemoryPauseStore,
    clock: ManualClock,
    metrics: RecordingMetrics,
) -> None:
    job = submitted(ports)
    pause_type(pauses, clock)

    acked = process_record(delivery_of(job), flagged, policy, unbounded)

    assert acked is False
    kept = store.get(job.job_id, tenant=job.tenant)
    assert (kept.status, kept.attempt) == (JobStatus.QUEUED, 0)
    assert [(c.receipt_handle, c.timeout_s) for c in queue.visibility_changes] == [("rh-m-1", PAUSED_WAIT_S)]
    assert metrics.counts["AdmissionWaits"] == 1


def test_a_paused_queue_classs_job_waits_too(
    ports: Ports,
    flagged: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    pauses: InMemoryPauseStore,
    clock: ManualClock,
) -> None:
    job = submitted(ports)
    pauses.pause(Pause("queue", "default", clock.now()))

    assert process_record(delivery_of(job), flagged, policy, unbounded) is False
    assert store.get(job.job_id, tenant=job.tenant).attempt == 0
    # Its message arrives only while polling is being switched: it looks again soon, not after a type's wait.
    assert [c.timeout_s for c in queue.visibility_changes] == [PAUSED_QUEUE_WAIT_S]


def test_a_resumed_queues_job_runs_at_once_though_the_worker_read_the_pause_a_moment_before(
    ports: Ports,
    flagged: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    pauses: InMemoryPauseStore,
    clock: ManualClock,
    ticks: Ticks,
) -> None:
    """A resume switches polling on, then lifts the pause item: a worker may read the item between the two. The next
    message of its queue class makes it read the item again (after QUEUE_RECHECK_S), not wait out its 10 s cache."""
    first, second = submitted(ports), submitted(ports)
    pauses.pause(Pause("queue", "default", clock.now()))
    assert process_record(delivery_of(first), flagged, policy, unbounded) is False  # read: paused
    pauses.resume("queue", "default")

    ticks.now += QUEUE_RECHECK_S
    assert process_record(delivery_of(second, "m-2"), flagged, policy, unbounded) is True

    assert store.get(second.job_id, tenant=second.tenant).status is JobStatus.SUCCEEDED
    assert flagged.pauses.reads == 2  # type: ignore[union-attr]


def test_a_paused_job_types_flag_is_not_read_again_before_its_cache_ends(
    ports: Ports,
    flagged: WorkerPorts,
    policy: WorkerPolicy,
    pauses: InMemoryPauseStore,
    clock: ManualClock,
    ticks: Ticks,
) -> None:
    pause_type(pauses, clock)
    for n in range(3):
        ticks.now += QUEUE_RECHECK_S
        assert process_record(delivery_of(submitted(ports), f"m-{n}"), flagged, policy, unbounded) is False

    assert flagged.pauses.reads == 1  # type: ignore[union-attr]


def test_on_its_last_receives_a_waiting_message_is_replaced_by_a_delayed_fresh_copy(
    ports: Ports,
    flagged: WorkerPorts,
    policy: WorkerPolicy,
    queue: InMemoryJobQueue,
    pauses: InMemoryPauseStore,
    clock: ManualClock,
) -> None:
    job = submitted(ports)
    queue.sent.clear()
    pause_type(pauses, clock)
    last = dataclasses.replace(delivery_of(job), receive_count=flagged.registry.max_receive_count("default"))

    assert process_record(last, flagged, policy, unbounded) is True, "this copy is acknowledged"

    assert [(s.message.job_id, s.delay_s) for s in queue.sent] == [(job.job_id, PAUSED_WAIT_S)]


def test_an_unpaused_job_runs_and_the_flags_are_read_once_per_ttl(
    ports: Ports,
    flagged: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    pauses: InMemoryPauseStore,
    ticks: Ticks,
) -> None:
    first, second = submitted(ports), submitted(ports)

    process_record(delivery_of(first, "m-1"), flagged, policy, unbounded)
    ticks.now += PAUSE_FLAGS_TTL_S - 0.1
    process_record(delivery_of(second, "m-2"), flagged, policy, unbounded)

    assert [store.get(j.job_id, tenant=j.tenant).status for j in (first, second)] == [JobStatus.SUCCEEDED] * 2
    assert pauses.reads == 1


def test_a_pause_reaches_the_worker_within_the_ttl(pauses: InMemoryPauseStore, ticks: Ticks) -> None:
    flags = PauseFlags(pauses, queue="default", monotonic=ticks)
    assert flags.reason("demo.echo") is None
    pauses.pause(Pause("job_type", "demo.echo", datetime(2026, 12, 2)))

    ticks.now = PAUSE_FLAGS_TTL_S - 0.1
    stale = flags.reason("demo.echo")
    ticks.now = PAUSE_FLAGS_TTL_S
    fresh = flags.reason("demo.echo")

    assert (stale, fresh) == (None, "job type demo.echo is paused")


def test_a_store_outage_keeps_the_last_view_and_is_retried_soon(pauses: InMemoryPauseStore, ticks: Ticks) -> None:
    flags = PauseFlags(pauses, queue="default", monotonic=ticks, retry_s=1.0)
    pauses.pause(Pause("queue", "default", datetime(2026, 12, 2)))
    assert flags.reason("demo.echo") == "queue default is paused"
    pauses.failing = True

    ticks.now = PAUSE_FLAGS_TTL_S
    during = flags.reason("demo.echo")
    ticks.now += 0.5
    flags.reason("demo.echo")

    assert during == "queue default is paused"
    assert pauses.reads == 2, "one failed read, then none until retry_s has passed"


def test_a_worker_without_pause_flags_never_waits(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, store: InMemoryJobStore
) -> None:
    job = submitted(ports)

    assert process_record(delivery_of(job), worker_ports, policy, unbounded) is True
    assert store.get(job.job_id, tenant=job.tenant).status is JobStatus.SUCCEEDED


# -- the use cases -----------------------------------------------------------------------------------------------


def test_a_queue_pause_writes_the_state_then_switches_and_a_resume_switches_first(
    ports: Ports, pauses: InMemoryPauseStore, clock: ManualClock
) -> None:
    switch = RecordingSwitch()

    state, made = pausing.pause(
        "queue", "default", reason="why", registry=ports.registry, store=pauses, switch=switch, clock=clock
    )
    again, made_again = pausing.pause(
        "queue", "default", reason="other", registry=ports.registry, store=pauses, switch=switch, clock=clock
    )
    lifted = pausing.resume("queue", "default", registry=ports.registry, store=pauses, switch=switch)

    assert (made, made_again, again) == (True, False, state)
    assert (state.reason, lifted) == ("why", state)
    assert switch.applied == [("default", True), ("default", True), ("default", False)]


def test_a_job_type_pause_switches_nothing_and_an_unknown_name_is_refused(
    ports: Ports, pauses: InMemoryPauseStore, clock: ManualClock
) -> None:
    switch = RecordingSwitch()

    pausing.pause(
        "job_type", SCRIPTED_TYPE, reason=None, registry=ports.registry, store=pauses, switch=switch, clock=clock
    )

    assert switch.applied == []
    with pytest.raises(UnknownPauseTargetError):
        pausing.pause("queue", "nope", reason=None, registry=ports.registry, store=pauses, switch=switch, clock=clock)
    with pytest.raises(UnknownPauseTargetError):
        pausing.resume("job_type", "nope", registry=ports.registry, store=pauses, switch=switch)


@pytest.mark.parametrize(("kind", "says"), [("queue", "no such queue"), ("job_type", "no such job type")])
def test_an_unknown_name_is_refused_saying_what_was_not_found(
    ports: Ports, pauses: InMemoryPauseStore, clock: ManualClock, kind: PauseKind, says: str
) -> None:
    with pytest.raises(UnknownPauseTargetError) as refused:
        pausing.pause(kind, "nope", reason=None, registry=ports.registry, store=pauses, switch=None, clock=clock)

    assert (str(refused.value), refused.value.kind) == (says, kind)


def test_a_pause_is_dated_and_a_pause_and_a_resume_are_logged(
    ports: Ports, pauses: InMemoryPauseStore, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="offpath.pause"):
        state, _ = pausing.pause(
            "queue", "default", reason=None, registry=ports.registry, store=pauses, switch=None, clock=clock
        )
        pausing.resume("queue", "default", registry=ports.registry, store=pauses, switch=None)
        pausing.resume("queue", "default", registry=ports.registry, store=pauses, switch=None)

    assert state.paused_at == clock.now()
    logged = [(r.getMessage(), getattr(r, "new", None), getattr(r, "was_paused", None)) for r in caplog.records]
    assert logged == [
        ("queue default paused", True, None),
        ("queue default resumed", None, True),
        ("queue default resumed", None, False),
    ]


def test_a_job_type_resume_switches_nothing(ports: Ports, pauses: InMemoryPauseStore, clock: ManualClock) -> None:
    switch = RecordingSwitch()
    pause_type(pauses, clock)

    pausing.resume("job_type", SCRIPTED_TYPE, registry=ports.registry, store=pauses, switch=switch)

    assert switch.applied == []


def test_a_paused_job_waits_with_the_reason_paused_and_the_worker_says_why(
    flagged: WorkerPorts, pauses: InMemoryPauseStore, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    pause_type(pauses, clock)
    job_type = flagged.registry.job_types[SCRIPTED_TYPE]

    with caplog.at_level(logging.INFO, logger="offpath.pause"):
        verdict = pausing.paused(None, job_type, flagged, now=clock.now())

    assert verdict == Wait(PAUSED_WAIT_S, "paused")
    [logged] = caplog.records
    assert logged.getMessage() == f"the job waits: job type {SCRIPTED_TYPE} is paused"
    assert logged.retry_in_s == PAUSED_WAIT_S  # type: ignore[attr-defined]


def test_a_worker_whose_first_read_fails_runs_its_jobs_and_tries_again_a_second_later(
    pauses: InMemoryPauseStore, ticks: Ticks, caplog: pytest.LogCaptureFixture
) -> None:
    flags = PauseFlags(pauses, queue="default", monotonic=ticks)
    pauses.failing = True

    with caplog.at_level(logging.WARNING, logger="offpath.pause"):
        assert flags.reason("demo.echo") is None
    pauses.failing = False
    ticks.now = 1.0
    flags.reason("demo.echo")

    assert pauses.reads == 2
    [logged] = caplog.records
    assert logged.getMessage() == "the pause flags could not be read; the last view stands"
    assert logged.exc_info is not None and isinstance(logged.exc_info[1], StoreUnavailableError)


def test_the_pause_in_force_is_found_by_kind_and_name() -> None:
    queue = Pause("queue", "default", datetime(2026, 12, 2))
    kind = Pause("job_type", "default", datetime(2026, 12, 3))
    view = Pauses(queues={"default": queue}, job_types={"default": kind})

    assert (view.of("queue", "default"), view.of("job_type", "default")) == (queue, kind)
    assert (view.of("queue", "other"), Pauses().of("job_type", "default")) == (None, None)
