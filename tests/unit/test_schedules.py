"""Recurring schedules and delayed jobs against the fakes (logic/schedules.py): what a firing makes, replays or
skips and records, what a one-time schedule's firing does, and what GET /schedules shows (the same through the
enqueue function and EventBridge Scheduler: tests/integration/test_scheduling.py)."""

from __future__ import annotations

import dataclasses
import logging
from datetime import timedelta

import pytest

from offpath.domain.cron import parse_cron, parse_rate
from offpath.domain.errors import UnknownScheduleError
from offpath.domain.job import JobStatus
from offpath.domain.ports import Firing, Ports
from offpath.domain.registry import Registry, Schedule
from offpath.logic.schedules import SYSTEM_TENANT, FireOutcome, describe_schedules, enqueue_delayed, fire_schedule
from offpath.logic.submit import SubmitPolicy
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import SCRIPTED_TYPE, InMemoryJobQueue, InMemoryJobStore, RecordingMetrics
from tests.unit.conftest import START, TENANT, submitted

POLICY = SubmitPolicy()
SLOT = "2026-03-01T12:00:00Z"


def schedule(name: str, *, cron: str | None = None, rate: str | None = None, **kwargs: object) -> Schedule:
    parsed = parse_cron(cron) if cron is not None else parse_rate(rate or "")
    return Schedule(name, parsed.text, job=SCRIPTED_TYPE, payload={"from": name}, parsed=parsed, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def scheduled(ports: Ports, registry: Registry) -> Ports:
    mine = Registry(queues=dict(registry.queues), job_types=dict(registry.job_types))
    for declared in (
        schedule("nightly", cron="0 3 * * ? *", timezone="Europe/Prague"),
        schedule("every-two-hours", rate="2 hours", timezone="UTC", overlap="allow"),
        schedule("twice-daily", rate="12 hours", timezone="UTC"),
        schedule("switched-off", cron="0 4 * * ? *", timezone="UTC", enabled=False),
    ):
        mine.add_schedule(declared)
    return dataclasses.replace(ports, registry=mine)


def counted(metrics: RecordingMetrics, name: str) -> dict[tuple[str, str, str], float]:
    return {key: value for key, value in metrics.dimensioned.items() if key[0] == name}


# -- recurring firings -----------------------------------------------------------------------------------------------


def test_a_firing_makes_the_schedules_job_under_the_slots_key_and_records_it(
    scheduled: Ports, store: InMemoryJobStore, metrics: RecordingMetrics, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="offpath.schedules"):
        outcome = fire_schedule("nightly", SLOT, scheduled, POLICY)

    job = outcome.job
    assert job is not None and not outcome.replayed
    assert (job.tenant, job.type, job.payload, job.idempotency_key, job.schedule_name) == (
        SYSTEM_TENANT,
        SCRIPTED_TYPE,
        {"from": "nightly"},
        f"schedule:nightly:{SLOT}",
        "nightly",
    )
    assert outcome.firing == Firing(SLOT, START, job.job_id)
    assert store.get_schedule_state("nightly").firings == (outcome.firing,)  # type: ignore[union-attr]
    assert counted(metrics, "ScheduleFirings") == {("ScheduleFirings", job.queue, SCRIPTED_TYPE): 1}
    [logged] = [r for r in caplog.records if r.name == "offpath.schedules"]
    assert logged.getMessage() == f"schedule nightly slot {SLOT} fired"
    assert (logged.job_id, logged.replay) == (job.job_id, False)  # type: ignore[attr-defined]


def test_a_second_firing_of_a_slot_replays_its_job_and_is_not_counted_again(
    scheduled: Ports, metrics: RecordingMetrics, caplog: pytest.LogCaptureFixture
) -> None:
    first = fire_schedule("nightly", SLOT, scheduled, POLICY)

    with caplog.at_level(logging.INFO, logger="offpath.schedules"):
        again = fire_schedule("nightly", SLOT, scheduled, POLICY)

    assert again.job is not None and first.job is not None
    assert (again.job.job_id, again.replayed) == (first.job.job_id, True)
    assert sum(counted(metrics, "ScheduleFirings").values()) == 1
    [logged] = [r for r in caplog.records if r.name == "offpath.schedules"]
    assert logged.replay is True  # type: ignore[attr-defined]


def test_a_firing_while_the_previous_job_is_unfinished_is_skipped_saying_why(
    scheduled: Ports, store: InMemoryJobStore, metrics: RecordingMetrics, caplog: pytest.LogCaptureFixture
) -> None:
    previous = fire_schedule("nightly", SLOT, scheduled, POLICY).job
    assert previous is not None

    with caplog.at_level(logging.INFO, logger="offpath.schedules"):
        outcome = fire_schedule("nightly", "2026-03-02T12:00:00Z", scheduled, POLICY)

    why = f"previous job {previous.job_id} is QUEUED"
    assert outcome == FireOutcome(Firing("2026-03-02T12:00:00Z", START, None, why), None)
    assert store.get_schedule_state("nightly").firings[0] == outcome.firing  # type: ignore[union-attr]
    assert counted(metrics, "ScheduleFiringsSkipped") == {("ScheduleFiringsSkipped", previous.queue, SCRIPTED_TYPE): 1}
    [logged] = [r for r in caplog.records if r.name == "offpath.schedules"]
    assert logged.getMessage() == f"schedule nightly slot 2026-03-02T12:00:00Z skipped: {why}"


@pytest.mark.parametrize("name", ["nightly", "every-two-hours"])
def test_a_schedule_keeps_its_last_20_firings_made_or_skipped(
    scheduled: Ports, store: InMemoryJobStore, name: str
) -> None:
    slots = [(START + timedelta(hours=n)).isoformat() for n in range(21)]
    for slot in slots:
        fire_schedule(name, slot, scheduled, POLICY)

    firings = store.get_schedule_state(name).firings  # type: ignore[union-attr]
    assert [f.slot for f in firings] == slots[:0:-1]


def test_an_unknown_schedule_is_refused_naming_it(scheduled: Ports) -> None:
    with pytest.raises(UnknownScheduleError, match="no-such-schedule"):
        fire_schedule("no-such-schedule", SLOT, scheduled, POLICY)


# -- one-time schedules of delayed jobs ------------------------------------------------------------------------------


def test_a_delayed_jobs_early_firing_queues_it_and_sends_it_with_the_delay_left(
    ports: Ports, queue: InMemoryJobQueue, clock: ManualClock, metrics: RecordingMetrics
) -> None:
    job = submitted(ports, run_at=(START + timedelta(hours=1)).isoformat())
    assert job.status is JobStatus.SCHEDULED
    clock.advance(3600 - 30)

    queued = enqueue_delayed(job.job_id, TENANT, ports, POLICY)

    assert queued is not None
    assert (queued.status, queued.sweep_at) == (JobStatus.QUEUED, clock.now() + POLICY.sweep_grace)
    assert [(s.queue, s.message.job_id, s.delay_s) for s in queue.sent] == [(job.queue, job.job_id, 30)]
    assert counted(metrics, "DelayedJobsEnqueued") == {("DelayedJobsEnqueued", job.queue, job.type): 1}


def test_a_firing_for_a_job_that_does_not_exist_is_a_warning(ports: Ports, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="offpath.schedules"):
        assert enqueue_delayed("f" * 32, TENANT, ports, POLICY) is None

    [logged] = caplog.records
    assert (logged.levelno, logged.getMessage()) == (
        logging.WARNING,
        "one-time schedule fired for a job that does not exist",
    )
    assert logged.job_id == "f" * 32  # type: ignore[attr-defined]


def test_a_repeated_firing_changes_nothing_and_says_so(
    ports: Ports, queue: InMemoryJobQueue, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    job = submitted(ports, run_at=(START + timedelta(hours=1)).isoformat())
    clock.advance(3600)
    first = enqueue_delayed(job.job_id, TENANT, ports, POLICY)

    with caplog.at_level(logging.INFO, logger="offpath.schedules"):
        again = enqueue_delayed(job.job_id, TENANT, ports, POLICY)

    assert again == first and len(queue.sent) == 1
    [logged] = [r for r in caplog.records if r.name == "offpath.schedules"]
    assert logged.getMessage() == "one-time schedule fired for a job that is no longer scheduled"
    assert logged.job_id == job.job_id  # type: ignore[attr-defined]


# -- GET /schedules --------------------------------------------------------------------------------------------------


def test_the_schedules_show_their_next_firings_in_their_zone_and_their_last_firings(
    scheduled: Ports, store: InMemoryJobStore
) -> None:
    # Newest first: a manual trigger, a slot that is no time, then the rate's last slot (its anchor).
    for slot in ("2026-03-01T11:30:00+00:00", "not-a-time", "manual:2026-03-01T11:45:00Z"):
        store.record_firing("every-two-hours", Firing(slot, START, None, "skipped"), keep=20)

    views = {view["name"]: view for view in describe_schedules(scheduled, START)}

    assert views["nightly"]["next_firing"] == "2026-03-02T03:00:00+01:00"
    assert views["nightly"]["next_firings"] == [f"2026-03-0{day}T03:00:00+01:00" for day in range(2, 7)]
    assert views["every-two-hours"]["next_firing"] == "2026-03-01T13:30:00+00:00"
    assert views["every-two-hours"]["next_firings"] == [f"2026-03-01T{h}:30:00+00:00" for h in (13, 15, 17, 19, 21)]
    assert views["every-two-hours"]["last_firings"][0] == {
        "slot": "manual:2026-03-01T11:45:00Z",
        "fired_at": "2026-03-01T12:00:00Z",
        "job_id": None,
        "skipped_reason": "skipped",
    }
    # A rate never fired has no slot to count from yet; a schedule switched off fires at no time.
    for name in ("twice-daily", "switched-off"):
        assert (views[name]["next_firing"], views[name]["next_firings"]) == (None, [])
