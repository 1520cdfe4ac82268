"""Recurring schedules and delayed jobs: what the enqueue function does when the Scheduler fires.

The Scheduler delivers at least once: a slot may fire twice. The job's idempotency key is derived
from the schedule name and the slot (`<aws.scheduler.scheduled-time>`, identical on every retry of
a slot), so a second firing of a slot replays the first job instead of making another (the same
path as any keyed submit: the key's record, logic/submit.py `take_key`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from offpath.domain.clock import iso
from offpath.domain.errors import JobConflictError, JobNotFoundError, UnknownScheduleError
from offpath.domain.job import Job
from offpath.domain.ports import Firing, JobMessage, Ports
from offpath.domain.registry import Schedule
from offpath.logic.submit import SubmitPolicy, SubmitRequest, delay_seconds, submit_job
from offpath.tenancy import SYSTEM_TENANT as SYSTEM_TENANT  # jobs made by schedules belong to it

logger = logging.getLogger("offpath.schedules")

FIRINGS_KEPT = 20
NEXT_FIRINGS_SHOWN = 5


@dataclass(frozen=True)
class FireOutcome:
    firing: Firing
    job: Job | None
    replayed: bool = False


def slot_key(schedule_name: str, slot: str) -> str:
    return f"schedule:{schedule_name}:{slot}"


def fire_schedule(name: str, slot: str, ports: Ports, policy: SubmitPolicy) -> FireOutcome:
    schedule = ports.registry.schedules.get(name)
    if schedule is None:
        raise UnknownScheduleError(name)
    now = ports.clock.now()
    key = slot_key(name, slot)
    if schedule.overlap == "skip":
        running = _running_previous_job(schedule, slot, ports)
        if running is not None:
            firing = Firing(slot, now, None, f"previous job {running.job_id} is {running.status.value}")
            ports.store.record_firing(name, firing, keep=FIRINGS_KEPT)
            ports.metrics.count("ScheduleFiringsSkipped", queue=running.queue, job_type=schedule.job)
            logger.info("schedule %s slot %s skipped: %s", name, slot, firing.skipped_reason)
            return FireOutcome(firing, None)
    submitted = submit_job(
        SubmitRequest(
            tenant=SYSTEM_TENANT,
            type=schedule.job,
            payload=schedule.payload,
            idempotency_key=key,
            schedule_name=name,
            submitter="system",
        ),
        ports,
        policy,
    )
    firing = Firing(slot, now, submitted.job.job_id)
    ports.store.record_firing(name, firing, keep=FIRINGS_KEPT)
    if not submitted.replayed:
        ports.metrics.count("ScheduleFirings", queue=submitted.job.queue, job_type=schedule.job)
    logger.info(
        "schedule %s slot %s fired", name, slot, extra={"job_id": submitted.job.job_id, "replay": submitted.replayed}
    )
    return FireOutcome(firing, submitted.job, submitted.replayed)


def _running_previous_job(schedule: Schedule, slot: str, ports: Ports) -> Job | None:
    """The schedule's last job while it is unfinished, unless it is this slot's own (a repeated firing)."""
    state = ports.store.get_schedule_state(schedule.name)
    if state is None or state.last_job_id is None:
        return None
    if any(firing.slot == slot and firing.job_id == state.last_job_id for firing in state.firings):
        return None
    previous = ports.store.get(state.last_job_id, tenant=SYSTEM_TENANT)
    if previous is None or previous.status.is_final:
        return None
    return previous


def enqueue_delayed(job_id: str, tenant: str, ports: Ports, policy: SubmitPolicy) -> Job | None:
    """A one-time schedule fired: SCHEDULED -> QUEUED, then send. A repeat firing changes nothing."""
    now = ports.clock.now()
    try:
        job = ports.store.enqueue_scheduled(job_id, tenant=tenant, now=now, sweep_at=now + policy.sweep_grace)
    except JobNotFoundError:
        logger.warning("one-time schedule fired for a job that does not exist", extra={"job_id": job_id})
        return None
    except JobConflictError as conflict:
        logger.info("one-time schedule fired for a job that is no longer scheduled", extra={"job_id": job_id})
        return conflict.job
    ports.queue.send(job.queue, JobMessage.of(job), delay_s=delay_seconds(job, now))
    ports.metrics.count("DelayedJobsEnqueued", queue=job.queue, job_type=job.type)
    return job


def describe_schedules(ports: Ports, now: datetime) -> list[dict[str, Any]]:
    """Every declared schedule with its next firing in its own time zone and its last firings."""
    views = []
    for schedule in ports.registry.schedules.values():
        state = ports.store.get_schedule_state(schedule.name)
        firings = state.firings if state else ()
        anchor = _last_slot_time(firings)
        next_utc = schedule.next_after(now, anchor) if (anchor or not schedule.expression.startswith("rate")) else None
        upcoming = _upcoming(schedule, next_utc, anchor) if schedule.enabled else []
        views.append(
            {
                "name": schedule.name,
                "expression": schedule.expression,
                "timezone": schedule.timezone,
                "job": schedule.job,
                "overlap": schedule.overlap,
                "enabled": schedule.enabled,
                "flexible_window_min": schedule.flexible_window_min,
                "next_firing": _in_zone(next_utc, schedule.timezone) if next_utc and schedule.enabled else None,
                "next_firings": [_in_zone(when, schedule.timezone) for when in upcoming],
                "last_firings": [
                    {
                        "slot": f.slot,
                        "fired_at": iso(f.fired_at),
                        "job_id": f.job_id,
                        "skipped_reason": f.skipped_reason,
                    }
                    for f in firings
                ],
            }
        )
    return views


def _upcoming(schedule: Schedule, first: datetime | None, anchor: datetime | None) -> list[datetime]:
    """The next NEXT_FIRINGS_SHOWN slots from `first` (UTC)."""
    upcoming: list[datetime] = []
    when = first
    while when is not None and len(upcoming) < NEXT_FIRINGS_SHOWN:
        upcoming.append(when)
        when = schedule.next_after(when, anchor or first)
    return upcoming


def _last_slot_time(firings: tuple[Firing, ...]) -> datetime | None:
    for firing in firings:
        if not firing.slot.startswith("manual:"):
            try:
                return datetime.fromisoformat(firing.slot)
            except ValueError:
                continue
    return None


def _in_zone(when: datetime, zone_name: str) -> str:
    from offpath.domain.cron import load_zone

    return when.astimezone(load_zone(zone_name)).isoformat()
