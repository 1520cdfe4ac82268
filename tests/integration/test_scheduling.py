"""Schedules, delayed jobs, the sweeper and redrive, through the api, enqueue, sweeper and worker handlers."""

from __future__ import annotations

import dataclasses
import json
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from offpath.adapters.dynamodb_store import DynamoDbJobStore
from offpath.domain.errors import QueueUnavailableError
from offpath.domain.job import Job, JobStatus
from offpath.domain.registry import Registry
from offpath.handlers import sweeper
from offpath.jobs import billing
from offpath.logic.submit import SubmitRequest, build_job
from offpath.logic.sweep import SweepPolicy
from offpath_local.resources import Resources
from offpath_tools.clocks import ManualClock
from tests.integration.conftest import Pipeline, RecordingMetrics

ADMIN = ["offpath/admin"]
GRACE_S = 120


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
def timed(
    resources: Resources, clients: dict[str, Any], registry: Registry, metrics: RecordingMetrics, clock: ManualClock
) -> Pipeline:
    """A pipeline whose clock only moves when the test says (SQS itself keeps real time)."""
    return Pipeline(resources, clients, registry, metrics, clock=clock)


def status_of(pipeline: Pipeline, job_id: str, **kwargs: Any) -> dict[str, Any]:
    code, view, _ = pipeline.call("GET", f"/jobs/{job_id}", **kwargs)
    assert code == 200, view
    return view


def schedules_in_group(pipeline: Pipeline) -> list[dict[str, Any]]:
    scheduler = pipeline.scheduler.client
    names = [s["Name"] for s in scheduler.list_schedules(GroupName=pipeline.scheduler.group)["Schedules"]]
    return [scheduler.get_schedule(Name=n, GroupName=pipeline.scheduler.group) for n in names]


# -- delayed jobs (TESTPLAN 9) ----------------------------------------------------------------


def test_run_at_in_the_past_runs_now(timed: Pipeline, clock: ManualClock) -> None:
    past = (clock.now() - timedelta(days=2)).isoformat()
    code, job, _ = timed.call("POST", "/jobs", body={"type": "demo.echo", "payload": {"n": 1}, "run_at": past})
    assert code == 202
    assert job["status"] == "QUEUED"

    timed.drain()

    assert status_of(timed, job["job_id"])["status"] == "SUCCEEDED"


def test_run_at_within_15_minutes_is_an_sqs_delay(timed: Pipeline, clock: ManualClock) -> None:
    soon = (clock.now() + timedelta(minutes=10)).isoformat()
    code, job, _ = timed.call("POST", "/jobs", body={"type": "demo.echo", "payload": {}, "run_at": soon})

    assert code == 202
    assert job["status"] == "QUEUED"
    assert schedules_in_group(timed) == []
    attributes = timed.clients["sqs"].get_queue_attributes(
        QueueUrl=timed.resources.queue_urls["default"], AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "1"


def test_run_at_beyond_15_minutes_creates_a_one_time_schedule(timed: Pipeline, clock: ManualClock) -> None:
    later = clock.now() + timedelta(hours=3)
    code, job, _ = timed.call("POST", "/jobs", body={"type": "demo.echo", "payload": {}, "run_at": later.isoformat()})

    assert code == 202
    assert job["status"] == "SCHEDULED"
    [created] = schedules_in_group(timed)
    assert created["ScheduleExpression"] == f"at({later.strftime('%Y-%m-%dT%H:%M:%S')})"
    assert created["ScheduleExpressionTimezone"] == "UTC"
    assert created["ActionAfterCompletion"] == "DELETE"
    assert json.loads(created["Target"]["Input"]) == {
        "kind": "delayed",
        "job_id": job["job_id"],
        "tenant": "tenant-a",
        "scheduled_time": "<aws.scheduler.scheduled-time>",
    }


def test_one_time_schedule_firing_enqueues_and_runs_the_job_once(timed: Pipeline, clock: ManualClock) -> None:
    later = clock.now() + timedelta(hours=3)
    _, job, _ = timed.call(
        "POST", "/jobs", body={"type": "demo.echo", "payload": {"x": 1}, "run_at": later.isoformat()}
    )
    [created] = schedules_in_group(timed)
    event = json.loads(created["Target"]["Input"].replace("<aws.scheduler.scheduled-time>", later.isoformat()))
    clock.set(later)

    timed.enqueue(event)
    timed.enqueue(event)  # the Scheduler delivers at least once
    timed.drain()

    view = status_of(timed, job["job_id"])
    assert view["status"] == "SUCCEEDED"
    assert view["attempts"] == 1
    assert timed.metrics.counts.get("DuplicateDeliveries", 0) == 0


@pytest.mark.parametrize(
    "run_at",
    [
        "2027-13-01T00:00:00Z",
        "tomorrow",
        "2026-01-01T10:00:00",
        "9" * 5000,
        "0001-01-01T00:00:00+01:00",
        "0999-01-01T00:00:00Z",
        "1969-12-31T23:59:59Z",
    ],
    ids=["bad-month", "words", "no-time-zone", "huge", "before-year-one-in-utc", "year-999", "before-1970"],
)
def test_run_at_that_is_not_iso_8601_with_a_zone_is_rejected(timed: Pipeline, run_at: str) -> None:
    code, body, _ = timed.call("POST", "/jobs", body={"type": "demo.echo", "payload": {}, "run_at": run_at})

    assert code == 422
    assert body["error"]["field"] == "run_at"
    assert run_at not in json.dumps(body)


def test_run_at_more_than_a_year_ahead_is_rejected(timed: Pipeline, clock: ManualClock) -> None:
    too_far = (clock.now() + timedelta(days=366)).isoformat()
    code, body, _ = timed.call("POST", "/jobs", body={"type": "demo.echo", "payload": {}, "run_at": too_far})

    assert code == 422
    assert body["error"]["field"] == "run_at"


def test_cancelled_scheduled_job_never_runs(timed: Pipeline, clock: ManualClock) -> None:
    later = clock.now() + timedelta(hours=1)
    _, job, _ = timed.call("POST", "/jobs", body={"type": "demo.echo", "payload": {}, "run_at": later.isoformat()})

    code, cancelled, _ = timed.call("POST", f"/jobs/{job['job_id']}/cancel")
    clock.set(later)
    timed.enqueue({"kind": "delayed", "job_id": job["job_id"], "tenant": "tenant-a", "scheduled_time": "x"})
    timed.drain()

    assert code == 200
    assert cancelled["status"] == "CANCELLED"
    assert status_of(timed, job["job_id"])["status"] == "CANCELLED"


# -- the sweeper (TESTPLAN 10, 11, 18) ----------------------------------------------------------


class FailingSends:
    """Wraps the queue so sends fail, as a broken network or an SQS outage would."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.original = pipeline.queue.send

    def __enter__(self) -> None:
        def fail(*args: Any, **kwargs: Any) -> None:
            raise QueueUnavailableError("SQS unreachable")

        self.pipeline.queue.send = fail  # type: ignore[method-assign]

    def __exit__(self, *exc: object) -> None:
        self.pipeline.queue.send = self.original  # type: ignore[method-assign]


def test_job_whose_send_failed_is_accepted_and_sent_by_the_sweeper(timed: Pipeline, clock: ManualClock) -> None:
    with FailingSends(timed):
        code, job, _ = timed.submit("demo.echo", {"lost": False})
    assert code == 202
    assert timed.drain() == 0  # nothing on the queue

    clock.advance(GRACE_S + 1)
    report = timed.sweep()
    timed.drain()

    assert report["resent"] == 1
    view = status_of(timed, job["job_id"])
    assert view["status"] == "SUCCEEDED"
    assert view["attempts"] == 1


def test_process_dying_between_write_and_send_is_recovered_by_the_sweeper(timed: Pipeline, clock: ManualClock) -> None:
    # The write lands and the process dies before it sends: only the store has the job.
    job = build_job(
        SubmitRequest(tenant="tenant-a", type="demo.echo", payload={"k": 1}),
        timed.ports,
        timed.api_services.policy,
        clock.now(),
    )
    timed.store.create(job)

    clock.advance(GRACE_S + 1)
    timed.sweep()
    timed.drain()

    assert status_of(timed, job.job_id)["status"] == "SUCCEEDED"


def test_sweep_before_the_grace_period_sends_nothing(timed: Pipeline, clock: ManualClock) -> None:
    timed.submit("demo.echo", {})

    report = timed.sweep()

    assert report["stuck"] == 0


def test_overlapping_sweeps_resend_a_job_once(timed: Pipeline, clock: ManualClock) -> None:
    with FailingSends(timed):
        timed.submit("demo.echo", {})
    clock.advance(GRACE_S + 1)

    reports: list[dict[str, Any]] = []
    threads = [threading.Thread(target=lambda: reports.append(timed.sweep())) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sum(r["resent"] for r in reports) == 1


def test_a_backlog_on_the_queue_gets_no_resends_and_a_lost_send_beside_it_is_resent(
    timed: Pipeline, clock: ManualClock
) -> None:
    """Issue 13: the sweeper reads the queue's size from SQS (GetQueueAttributes) before re-sending: 20 overdue
    jobs of a batch (written, then sent) and 20 messages on the queue are a backlog; a 21st overdue job, whose
    send failed, cannot be among them."""
    items = [{"type": "demo.echo", "payload": {"n": n}} for n in range(20)]
    code, batch, _ = timed.call("POST", "/jobs/batch", body={"jobs": items})
    assert code == 207, batch
    clock.advance(1)
    with FailingSends(timed):
        code, lost, _ = timed.submit("demo.echo", {"lost": True})
    assert code == 202
    clock.advance(GRACE_S + 1)

    report = timed.sweep()

    assert (report["resent"], report["backlog"]) == (1, 20)
    assert timed.depth() == (21, 0)
    timed.drain()
    assert {status_of(timed, r["job"]["job_id"])["status"] for r in batch["results"]} == {"SUCCEEDED"}
    assert status_of(timed, lost["job_id"])["status"] == "SUCCEEDED"


class OneJobCannotBeSwept(DynamoDbJobStore):
    """Sweeping one given job raises what nothing expects (as an item the code cannot read would)."""

    def __init__(self, store: DynamoDbJobStore, job_id: str) -> None:
        super().__init__(store.table_name, client=store.client)
        self.job_id = job_id

    def reschedule_sweep(self, job: Job, *, sweep_at: datetime, resent: bool) -> None:
        if job.job_id == self.job_id:
            raise ValueError("time data 'not a time' does not match format '%Y-%m-%dT%H:%M:%S.%fZ'")
        super().reschedule_sweep(job, sweep_at=sweep_at, resent=resent)


class DueJobsCannotBeRead(DynamoDbJobStore):
    def due_for_sweep(self, *, now: datetime, limit: int) -> list[Job]:
        raise ValueError("time data 'not a time' does not match format '%Y-%m-%dT%H:%M:%S.%fZ'")


def sweep_with(pipeline: Pipeline, store: DynamoDbJobStore) -> dict[str, Any]:
    ports = dataclasses.replace(pipeline.ports, store=store)
    services = sweeper.SweeperServices(ports, SweepPolicy(grace=timedelta(seconds=GRACE_S)))
    return sweeper.handler({"kind": "sweep"}, None, services=services)


def test_a_job_whose_sweep_raises_does_not_stop_the_sweep_of_the_others(timed: Pipeline, clock: ManualClock) -> None:
    """TESTPLAN 31, the sweeper's half: the job that raised stays due; every other job is swept."""
    with FailingSends(timed):
        job_ids = [timed.submit("demo.echo", {"n": n})[1]["job_id"] for n in range(3)]
    clock.advance(GRACE_S + 1)

    report = sweep_with(timed, OneJobCannotBeSwept(timed.store, job_ids[1]))
    timed.drain()

    assert (report["resent"], report["errors"]) == (2, 1)
    statuses = [status_of(timed, job_id)["status"] for job_id in job_ids]
    assert statuses == ["SUCCEEDED", "QUEUED", "SUCCEEDED"]
    assert timed.metrics.counts["SweepErrors"] == 1

    # It stayed due: the next sweep that can read it sends it.
    assert timed.sweep()["resent"] == 1
    timed.drain()
    assert status_of(timed, job_ids[1])["status"] == "SUCCEEDED"


def test_a_failed_query_of_due_jobs_ends_the_sweep_without_raising(timed: Pipeline, clock: ManualClock) -> None:
    clock.advance(GRACE_S + 1)

    report = sweep_with(timed, DueJobsCannotBeRead(timed.store.table_name, client=timed.store.client))

    assert (report["stuck"], report["errors"]) == (0, 1)
    assert timed.metrics.counts["SweepErrors"] == 1
    assert timed.metrics.counts["StuckJobsFound"] == 0  # the stuck-jobs metric stays continuous
    assert timed.metrics.flushes == 1


def test_a_job_whose_worker_died_runs_again_when_its_message_returns_without_the_sweeper(
    timed: Pipeline, clock: ManualClock
) -> None:
    _, job, _ = timed.submit("demo.echo", {"v": 1})
    # A worker claims the job and then its Lambda times out: the job is RUNNING with a lease, not in the
    # sweep index, and its message (never deleted) comes back after its visibility timeout.
    claimed = timed.store.claim(
        job["job_id"], tenant="tenant-a", now=clock.now(), lease_until=clock.now() + timedelta(seconds=40)
    )
    assert claimed.sweep_at is None
    clock.advance(GRACE_S + 1)

    report = timed.sweep()
    timed.drain()

    assert report["requeued"] == 0
    view = status_of(timed, job["job_id"])
    assert view["status"] == "SUCCEEDED"
    assert view["attempts"] == 2


def test_expired_lease_with_attempts_left_is_requeued_and_retried(timed: Pipeline, clock: ManualClock) -> None:
    _, job, _ = timed.submit("demo.echo", {"v": 1})
    # A worker claims the job on its message's last receives (so the claim enters it in the sweep index)
    # and then its Lambda times out: the job is RUNNING with a lease.
    claimed = timed.store.claim(
        job["job_id"],
        tenant="tenant-a",
        now=clock.now(),
        lease_until=clock.now() + timedelta(seconds=40),
        sweep_at=clock.now() + timedelta(seconds=41),
    )
    assert claimed.status is JobStatus.RUNNING

    clock.advance(GRACE_S + 1)
    report = timed.sweep()
    timed.drain()

    assert report["requeued"] == 1
    view = status_of(timed, job["job_id"])
    assert view["status"] == "SUCCEEDED"
    assert view["attempts"] == 2


def test_expired_lease_on_the_last_attempt_fails_the_job_into_the_dlq(timed: Pipeline, clock: ManualClock) -> None:
    _, job, _ = timed.submit("demo.echo", {"v": 2})
    for _ in range(3):  # demo.echo allows 3 attempts; each worker died holding the lease
        now = clock.now()
        # The last claim on the message's last receives: it enters the job in the sweep index.
        timed.store.claim(job["job_id"], tenant="tenant-a", now=now, lease_until=now, sweep_at=now)
    clock.advance(GRACE_S + 1)

    report = timed.sweep()

    assert report["failed"] == 1
    view = status_of(timed, job["job_id"])
    assert view["status"] == "FAILED"
    assert view["error"] == "lease expired"
    assert [d["job_id"] for d in timed.dlq_bodies()] == [job["job_id"]]
    assert timed.metrics.counts["StuckJobsFound"] >= 1


def test_overdue_scheduled_job_without_its_schedule_is_enqueued(timed: Pipeline, clock: ManualClock) -> None:
    later = clock.now() + timedelta(hours=1)
    _, job, _ = timed.call("POST", "/jobs", body={"type": "demo.echo", "payload": {}, "run_at": later.isoformat()})
    [created] = schedules_in_group(timed)
    timed.scheduler.client.delete_schedule(Name=created["Name"], GroupName=timed.scheduler.group)

    clock.set(later + timedelta(seconds=GRACE_S + 1))
    report = timed.sweep()
    timed.drain()

    assert report["enqueued"] == 1
    assert status_of(timed, job["job_id"])["status"] == "SUCCEEDED"


# -- recurring schedules (TESTPLAN 23, 26) ----------------------------------------------------


def recurring(name: str, slot: str) -> dict[str, str]:
    return {"kind": "recurring", "schedule": name, "scheduled_time": slot, "execution_id": "e"}


def test_the_same_schedule_slot_fired_twice_makes_one_job(timed: Pipeline) -> None:
    first = timed.enqueue(recurring("nightly-cleanup", "2026-12-01T02:00:00Z"))
    second = timed.enqueue(recurring("nightly-cleanup", "2026-12-01T02:00:00Z"))

    assert first["job_id"] == second["job_id"]
    _, schedules, _ = timed.call("GET", "/schedules", scopes=ADMIN)
    [cleanup] = [s for s in schedules["schedules"] if s["name"] == "nightly-cleanup"]
    assert [f["job_id"] for f in cleanup["last_firings"]] == [first["job_id"]]
    assert timed.metrics.counts["JobsDeduplicated"] == 1


def test_overlapping_firing_is_skipped_and_recorded(timed: Pipeline) -> None:
    first = timed.enqueue(recurring("nightly-cleanup", "2026-12-01T02:00:00Z"))

    second = timed.enqueue(recurring("nightly-cleanup", "2026-12-02T02:00:00Z"))

    assert second["job_id"] is None
    assert first["job_id"] in second["skipped"]
    _, schedules, _ = timed.call("GET", "/schedules", scopes=ADMIN)
    [cleanup] = [s for s in schedules["schedules"] if s["name"] == "nightly-cleanup"]
    assert cleanup["last_firings"][0]["skipped_reason"].endswith("is QUEUED")
    assert timed.metrics.counts["ScheduleFiringsSkipped"] == 1


def test_firing_after_the_previous_job_finished_makes_a_new_job(timed: Pipeline) -> None:
    first = timed.enqueue(recurring("nightly-cleanup", "2026-12-01T02:00:00Z"))
    timed.drain("bulk")

    second = timed.enqueue(recurring("nightly-cleanup", "2026-12-02T02:00:00Z"))

    assert second["job_id"] not in (None, first["job_id"])


def test_schedules_list_next_firing_in_their_own_time_zone(timed: Pipeline, clock: ManualClock) -> None:
    clock.set(datetime(2026, 3, 28, 12, 0, tzinfo=UTC))  # the night before clocks go forward in Prague

    code, body, _ = timed.call("GET", "/schedules", scopes=ADMIN)

    assert code == 200
    by_name = {s["name"]: s for s in body["schedules"]}
    assert by_name["nightly-cleanup"]["next_firing"] == "2026-03-29T03:00:00+02:00"
    assert by_name["nightly-cleanup"]["expression"] == "cron(0 3 * * ? *)"
    assert by_name["monthly-billing"]["next_firing"] == "2026-04-01T06:00:00+02:00"


def test_trigger_needs_the_admin_scope(timed: Pipeline) -> None:
    code, body, _ = timed.call("POST", "/schedules/monthly-billing/trigger")

    assert code == 403
    assert body["error"]["code"] == "forbidden"


def test_trigger_of_an_unknown_schedule_is_404(timed: Pipeline) -> None:
    code, _, _ = timed.call("POST", "/schedules/nope/trigger", scopes=ADMIN)

    assert code == 404


def test_monthly_billing_charges_each_customer_once_per_month(timed: Pipeline, clock: ManualClock) -> None:
    gateway = billing.LoggingPaymentGatewayStub()
    billing.payments = gateway
    try:
        code, first, _ = timed.call("POST", "/schedules/monthly-billing/trigger", scopes=ADMIN)
        timed.drain("critical")
        clock.advance(60)
        code_again, second, _ = timed.call("POST", "/schedules/monthly-billing/trigger", scopes=ADMIN)
        timed.drain("critical")
    finally:
        billing.payments = billing.LoggingPaymentGatewayStub()

    assert (code, code_again) == (202, 202)
    assert len(gateway.charges) == 3
    second_view = status_of(timed, second["job_id"], scopes=ADMIN)
    assert second_view["status"] == "SUCCEEDED"
    assert second_view["result"]["charged"] == []
    assert sorted(second_view["result"]["already_charged"]) == ["customer-1", "customer-2", "customer-3"]
    assert first["job_id"] != second["job_id"]


# -- redrive (TESTPLAN 17, second half) -----------------------------------------------------------


def test_redrive_after_the_cause_is_fixed_completes_the_job_once(timed: Pipeline) -> None:
    _, job, _ = timed.submit("demo.flaky", {"fail_first": 99})
    timed.drain()
    failed = status_of(timed, job["job_id"])
    assert failed["status"] == "FAILED"
    assert failed["attempts"] == 5

    # The cause is fixed (a new deployment): the job type now succeeds.
    original = timed.registry.job_types["demo.flaky"]
    timed.registry.job_types["demo.flaky"] = dataclasses.replace(
        original, function=lambda payload, ctx: {"fixed": True}
    )
    try:
        code, body, _ = timed.call("POST", "/queues/default/redrive", scopes=ADMIN)
        timed.drain()
    finally:
        timed.registry.job_types["demo.flaky"] = original

    assert code == 202
    assert body["redrive"]["moved"] == 1
    view = status_of(timed, job["job_id"])
    assert view["status"] == "SUCCEEDED"
    assert view["result"] == {"fixed": True}
    assert view["redrives"] == 1
    assert view["attempts"] == 1
    assert timed.dlq_bodies() == []
    _, queues, _ = timed.call("GET", "/queues", scopes=ADMIN)
    [default] = [q for q in queues["queues"] if q["name"] == "default"]
    assert default["dlq_depth"] == 0
    assert default["redrive"]["status"] == "COMPLETED"


def test_redrive_needs_the_admin_scope(timed: Pipeline) -> None:
    code, _, _ = timed.call("POST", "/queues/default/redrive")

    assert code == 403


def test_redrive_of_an_unknown_queue_is_404(timed: Pipeline) -> None:
    code, _, _ = timed.call("POST", "/queues/nope/redrive", scopes=ADMIN)

    assert code == 404
