"""The operations routes through the api handler against moto: retry by hand (and what a stale DLQ message
does after it), GET /stats, GET /alarms, the jobs that schedules made, the schedules' next firings."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSPreparedRequest

from offpath.adapters.cloudwatch import CloudWatchAlarms
from offpath.domain.operations import AlarmChange, AlarmState, MinuteStats
from offpath.domain.ports import JobMessage
from offpath.tenancy import SYSTEM_TENANT
from tests.integration.conftest import Answer, Pipeline, operation_of

ADMIN = ["offpath/admin"]
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def job_of(pipeline: Pipeline, job_id: str, **kwargs: Any) -> dict[str, Any]:
    code, body, _ = pipeline.call("GET", f"/jobs/{job_id}", **kwargs)
    assert code == 200, body
    return dict(body)


def failed_job(pipeline: Pipeline, **payload: Any) -> str:
    """A demo.poison job that failed for good; its message is in the default DLQ."""
    code, job, _ = pipeline.submit("demo.poison", {"reason": "broken", **payload})
    assert code == 202, job
    pipeline.drain()
    assert job_of(pipeline, job["job_id"])["status"] == "FAILED"
    return str(job["job_id"])


def dlq_depth(pipeline: Pipeline, queue: str = "default") -> int:
    """The queue's DLQ depth as GET /queues shows it."""
    code, body, _ = pipeline.call("GET", "/queues", scopes=ADMIN)
    assert code == 200, body
    return int(next(q for q in body["queues"] if q["name"] == queue)["dlq_depth"])


# -- POST /jobs/{id}/retry -------------------------------------------------------------------------


def test_a_failed_job_is_retried_by_hand_and_runs_again(pipeline: Pipeline) -> None:
    job_id = failed_job(pipeline, first_run_only=True)

    code, retried, _ = pipeline.call("POST", f"/jobs/{job_id}/retry")
    pipeline.drain()

    assert code == 202
    assert (retried["status"], retried["attempts"], retried["retries"], retried["error"]) == ("QUEUED", 0, 1, None)
    assert retried["payload"] == {"reason": "broken", "first_run_only": True}
    done = job_of(pipeline, job_id)
    assert (done["status"], done["attempts"], done["retries"], done["result"]) == (
        "SUCCEEDED",
        1,
        1,
        {"recovered": True},
    )
    assert [(a["attempt"], a["outcome"]) for a in done["attempt_history"]] == [(1, "FAILED"), (1, "SUCCEEDED")]
    assert done["attempt_history"][0]["error"]["message"] == "broken"
    assert done["attempt_history"][0]["error"]["type"] == "PermanentError"
    assert pipeline.metrics.counts["JobsRetriedByHand"] == 1


def refuse_dlq_receives(request: AWSPreparedRequest) -> Answer | None:
    """SQS refuses to receive from a DLQ (a 500): a hand retry cannot remove the job's dead letter."""
    body = request.body.decode() if isinstance(request.body, bytes) else str(request.body or "")
    if operation_of(request) == "AmazonSQS.ReceiveMessage" and "-dlq" in body:
        return 500, {"Content-Type": "application/json"}, '{"__type": "InternalError", "message": "internal"}'
    return None


def test_a_hand_retry_removes_the_jobs_dead_letter_and_get_queues_shows_it(pipeline: Pipeline) -> None:
    others = [failed_job(pipeline) for _ in range(3)]
    job_id = failed_job(pipeline, first_run_only=True)
    assert dlq_depth(pipeline) == 4

    code, retried, _ = pipeline.call("POST", f"/jobs/{job_id}/retry")

    assert (code, retried["status"]) == (202, "QUEUED")
    assert dlq_depth(pipeline) == 3, "the retried job's dead letter is gone; the others are visible again at once"
    assert sorted(m["job_id"] for m in pipeline.dlq_bodies()) == sorted(others)
    pipeline.drain()
    assert job_of(pipeline, job_id)["status"] == "SUCCEEDED"
    assert pipeline.metrics.counts["DeadLettersRemoved"] == 1


def test_a_hand_retry_stands_when_the_dead_letter_cannot_be_removed(pipeline: Pipeline, aws_answers: list[Any]) -> None:
    job_id = failed_job(pipeline, first_run_only=True)
    aws_answers.append(refuse_dlq_receives)

    code, retried, _ = pipeline.call("POST", f"/jobs/{job_id}/retry")
    aws_answers.clear()

    assert (code, retried["status"]) == (202, "QUEUED")
    assert dlq_depth(pipeline) == 1
    assert pipeline.metrics.counts["DeadLetterRemovalFailed"] == 1
    pipeline.drain()
    assert job_of(pipeline, job_id)["status"] == "SUCCEEDED"


def test_a_hand_retry_of_a_job_without_a_dead_letter_leaves_the_dlq_alone(pipeline: Pipeline) -> None:
    other = failed_job(pipeline)
    _, job, _ = pipeline.submit("demo.echo", {"n": 1})
    pipeline.call("POST", f"/jobs/{job['job_id']}/cancel")

    code, _, _ = pipeline.call("POST", f"/jobs/{job['job_id']}/retry")

    assert code == 202
    assert [m["job_id"] for m in pipeline.dlq_bodies()] == [other]


def test_a_stale_dlq_message_redriven_after_a_hand_retry_does_not_run_the_job_again(
    pipeline: Pipeline, aws_answers: list[Any]
) -> None:
    job_id = failed_job(pipeline, first_run_only=True)
    assert [m["job_id"] for m in pipeline.dlq_bodies()] == [job_id]
    # The removal misses (as in a DLQ deeper than the search's bound): the message stays behind.
    aws_answers.append(refuse_dlq_receives)
    pipeline.call("POST", f"/jobs/{job_id}/retry")
    aws_answers.clear()
    pipeline.drain()
    assert job_of(pipeline, job_id)["status"] == "SUCCEEDED"
    duplicates_before = pipeline.metrics.counts.get("DuplicateDeliveries", 0)

    code, body, _ = pipeline.call("POST", "/queues/default/redrive", scopes=ADMIN)
    pipeline.drain()

    assert (code, body["redrive"]["moved"]) == (202, 1)
    after = job_of(pipeline, job_id)
    assert (after["status"], after["attempts"], after["redrives"], after["retries"]) == ("SUCCEEDED", 1, 0, 1)
    assert len(after["attempt_history"]) == 2, "the job ran once after the retry"
    assert pipeline.metrics.counts["DuplicateDeliveries"] == duplicates_before + 1
    assert pipeline.depth() == (0, 0), "the stale message was acknowledged"


# -- DELETE /queues/{name}/dead-letters/{job_id} ---------------------------------------------------


def test_a_discard_removes_the_dead_letter_and_the_job_stays_failed_marked_discarded(pipeline: Pipeline) -> None:
    other = failed_job(pipeline)
    job_id = failed_job(pipeline)

    code, body, _ = pipeline.call("DELETE", f"/queues/default/dead-letters/{job_id}", scopes=ADMIN)

    assert code == 200, body
    assert (body["job_id"], body["status"]) == (job_id, "FAILED")
    assert body["discarded_at"] is not None
    assert [m["job_id"] for m in pipeline.dlq_bodies()] == [other]
    assert dlq_depth(pipeline) == 1
    job = job_of(pipeline, job_id)
    assert (job["status"], job["discarded_at"]) == ("FAILED", body["discarded_at"])
    assert job["error"] == "permanent error: broken"


def test_a_redrive_after_a_discard_does_not_run_the_discarded_job(pipeline: Pipeline) -> None:
    kept = failed_job(pipeline, first_run_only=True)
    discarded = failed_job(pipeline, first_run_only=True)
    pipeline.call("DELETE", f"/queues/default/dead-letters/{discarded}", scopes=ADMIN)

    code, body, _ = pipeline.call("POST", "/queues/default/redrive", scopes=ADMIN)
    pipeline.drain()

    assert (code, body["redrive"]["moved"]) == (202, 1)
    assert job_of(pipeline, kept)["status"] == "SUCCEEDED"
    after = job_of(pipeline, discarded)
    assert (after["status"], after["redrives"], len(after["attempt_history"])) == ("FAILED", 0, 1)


def test_a_leftover_copy_of_a_discarded_jobs_message_is_acknowledged_without_running(pipeline: Pipeline) -> None:
    job_id = failed_job(pipeline, first_run_only=True)
    pipeline.call("DELETE", f"/queues/default/dead-letters/{job_id}", scopes=ADMIN)
    # A copy the discard did not meet (a failure recorded twice, the copy beyond the search's bound).
    pipeline.ports.queue.send_to_dlq("default", JobMessage(job_id, "demo.poison", "tenant-a"), reason="again")
    duplicates_before = pipeline.metrics.counts.get("DuplicateDeliveries", 0)

    code, body, _ = pipeline.call("POST", "/queues/default/redrive", scopes=ADMIN)
    pipeline.drain()

    assert (code, body["redrive"]["moved"]) == (202, 1)
    after = job_of(pipeline, job_id)
    assert (after["status"], after["redrives"], len(after["attempt_history"])) == ("FAILED", 0, 1)
    assert pipeline.metrics.counts["DuplicateDeliveries"] == duplicates_before + 1
    assert pipeline.depth() == (0, 0), "the copy was acknowledged"


def test_a_hand_retry_of_a_discarded_job_clears_its_mark(pipeline: Pipeline) -> None:
    job_id = failed_job(pipeline, first_run_only=True)
    pipeline.call("DELETE", f"/queues/default/dead-letters/{job_id}", scopes=ADMIN)

    code, retried, _ = pipeline.call("POST", f"/jobs/{job_id}/retry")
    pipeline.drain()

    assert (code, retried["status"], retried["discarded_at"]) == (202, "QUEUED", None)
    assert job_of(pipeline, job_id)["status"] == "SUCCEEDED"


def test_a_discard_is_for_admins_only(pipeline: Pipeline) -> None:
    job_id = failed_job(pipeline)

    own, _, _ = pipeline.call("DELETE", f"/queues/default/dead-letters/{job_id}")
    other, body, _ = pipeline.call("DELETE", f"/queues/default/dead-letters/{job_id}", tenant="tenant-b")

    assert (own, other, body["error"]["code"]) == (403, 403, "forbidden")
    assert [m["job_id"] for m in pipeline.dlq_bodies()] == [job_id]
    assert job_of(pipeline, job_id)["discarded_at"] is None


def test_a_discard_of_a_job_without_a_dead_letter_is_not_found(pipeline: Pipeline) -> None:
    failed = failed_job(pipeline)
    _, done, _ = pipeline.submit("demo.echo", {"n": 1})
    pipeline.drain()

    unknown = pipeline.call("DELETE", f"/queues/default/dead-letters/{'f' * 32}", scopes=ADMIN)
    not_failed = pipeline.call("DELETE", f"/queues/default/dead-letters/{done['job_id']}", scopes=ADMIN)
    other_queue = pipeline.call("DELETE", f"/queues/critical/dead-letters/{failed}", scopes=ADMIN)

    for code, body, _ in (unknown, not_failed, other_queue):
        assert (code, body["error"]["code"]) == (404, "not_found")
    assert [m["job_id"] for m in pipeline.dlq_bodies()] == [failed]


@pytest.mark.parametrize(
    ("path", "field"),
    [("/queues/nope/dead-letters/" + "f" * 32, "name"), ("/queues/default/dead-letters/not-a-job-id", "job_id")],
)
def test_a_discard_with_a_bad_queue_or_job_id_is_refused(pipeline: Pipeline, path: str, field: str) -> None:
    code, body, _ = pipeline.call("DELETE", path, scopes=ADMIN)

    assert (code, body["error"]["code"], body["error"]["field"]) == (422, "invalid_request", field)
    assert "nope" not in body["error"]["message"] and "not-a-job-id" not in body["error"]["message"]


def cancelled_delayed_job(pipeline: Pipeline, ahead: timedelta) -> dict[str, Any]:
    later = (datetime.now(UTC) + ahead).isoformat()
    code, job, _ = pipeline.call("POST", "/jobs", body={"type": "demo.echo", "payload": {"n": 1}, "run_at": later})
    assert code == 202, job
    code, cancelled, _ = pipeline.call("POST", f"/jobs/{job['job_id']}/cancel")
    assert (code, cancelled["status"]) == (200, "CANCELLED")
    return dict(job)


def test_a_cancelled_job_retried_with_now_runs_now(pipeline: Pipeline) -> None:
    job = cancelled_delayed_job(pipeline, timedelta(hours=1))

    code, retried, _ = pipeline.call("POST", f"/jobs/{job['job_id']}/retry?now=true")
    pipeline.drain()

    assert (code, retried["status"]) == (202, "QUEUED")
    assert job_of(pipeline, job["job_id"])["status"] == "SUCCEEDED"


def test_a_cancelled_delayed_job_retried_keeps_its_run_at_and_is_scheduled_again(pipeline: Pipeline) -> None:
    job = cancelled_delayed_job(pipeline, timedelta(hours=1))
    assert not pipeline.scheduler.exists(job["job_id"])  # the cancel deleted its one-time schedule

    code, retried, _ = pipeline.call("POST", f"/jobs/{job['job_id']}/retry")
    pipeline.drain()

    assert (code, retried["status"], retried["run_at"], retried["retries"]) == (202, "SCHEDULED", job["run_at"], 1)
    assert job_of(pipeline, job["job_id"])["status"] == "SCHEDULED"
    assert pipeline.scheduler.exists(job["job_id"])
    assert pipeline.depth() == (0, 0)


def test_a_cancelled_job_delayed_less_than_15_minutes_is_queued_with_its_message_delayed(pipeline: Pipeline) -> None:
    job = cancelled_delayed_job(pipeline, timedelta(minutes=10))
    pipeline.drain()  # the cancelled job's own delayed message is still on the queue, delayed

    code, retried, _ = pipeline.call("POST", f"/jobs/{job['job_id']}/retry")

    assert (code, retried["status"], retried["run_at"]) == (202, "QUEUED", job["run_at"])
    stored = pipeline.store.get(job["job_id"], tenant="tenant-a")
    assert (
        stored is not None
        and stored.sweep_at is not None
        and stored.sweep_at > datetime.now(UTC) + timedelta(minutes=9)
    )
    assert pipeline.depth() == (0, 0)  # both messages wait for the run_at: none can be received now
    assert job_of(pipeline, job["job_id"])["status"] == "QUEUED"


@pytest.mark.parametrize("value", ["yes", "1", ""])
def test_a_retry_with_a_now_that_is_not_true_or_false_is_refused_naming_now(pipeline: Pipeline, value: str) -> None:
    job = cancelled_delayed_job(pipeline, timedelta(hours=1))

    code, body, _ = pipeline.call("POST", f"/jobs/{job['job_id']}/retry?now={value}")

    assert (code, body["error"]["code"], body["error"]["field"]) == (422, "invalid_request", "now")
    assert job_of(pipeline, job["job_id"])["status"] == "CANCELLED"


@pytest.mark.parametrize("state", ["QUEUED", "SUCCEEDED"])
def test_a_job_that_is_not_failed_or_cancelled_is_not_retried(pipeline: Pipeline, state: str) -> None:
    _, job, _ = pipeline.submit("demo.echo", {"n": 1})
    if state == "SUCCEEDED":
        pipeline.drain()

    code, body, _ = pipeline.call("POST", f"/jobs/{job['job_id']}/retry")

    assert code == 409
    assert body["error"] == {"code": "conflict", "message": f"job is {state}"}
    assert job_of(pipeline, job["job_id"])["retries"] == 0


def test_another_tenants_job_is_not_retried(pipeline: Pipeline) -> None:
    job_id = failed_job(pipeline)

    code, body, _ = pipeline.call("POST", f"/jobs/{job_id}/retry", tenant="tenant-b")

    assert (code, body["error"]["code"]) == (404, "not_found")
    assert job_of(pipeline, job_id)["status"] == "FAILED"


@pytest.mark.parametrize("job_id", ["f" * 32, "not-a-job-id"])
def test_an_unknown_job_is_not_retried(pipeline: Pipeline, job_id: str) -> None:
    code, body, _ = pipeline.call("POST", f"/jobs/{job_id}/retry")

    assert (code, body["error"]["code"]) == (404, "not_found")


def test_a_retry_whose_send_is_lost_is_sent_by_the_sweeper(pipeline: Pipeline) -> None:
    job_id = failed_job(pipeline)
    pipeline.drain()
    pipeline.queue.queue_urls = {**pipeline.queue.queue_urls, "default": pipeline.queue.queue_urls["default"] + "-gone"}
    try:
        code, retried, _ = pipeline.call("POST", f"/jobs/{job_id}/retry")
    finally:
        pipeline.queue.queue_urls = dict(pipeline.resources.queue_urls)
    assert (code, retried["status"]) == (202, "QUEUED")
    assert pipeline.depth() == (0, 0)

    stored = pipeline.store.get(job_id, tenant="tenant-a")
    assert stored is not None and stored.sweep_at is not None
    pipeline.overrides.clock = _At(stored.sweep_at + timedelta(seconds=1))  # the sweeper's services are built now
    pipeline.sweep()

    assert pipeline.depth()[0] == 1


class _At:
    def __init__(self, when: datetime) -> None:
        self.when = when

    def now(self) -> datetime:
        return self.when


# -- the jobs that schedules made ---------------------------------------------------------------


def test_an_admin_lists_the_jobs_that_schedules_made(pipeline: Pipeline) -> None:
    code, fired, _ = pipeline.call("POST", "/schedules/nightly-cleanup/trigger", scopes=ADMIN)
    assert code == 202

    code, page, _ = pipeline.call("GET", "/jobs?tenant=system", scopes=ADMIN)
    _, own, _ = pipeline.call("GET", "/jobs", scopes=ADMIN)

    assert code == 200
    assert [j["job_id"] for j in page["jobs"]] == [fired["job_id"]]
    assert fired["job_id"] not in [j["job_id"] for j in own["jobs"]]


def test_an_admin_retries_a_job_that_a_schedule_made_and_a_tenant_cannot(pipeline: Pipeline) -> None:
    _, fired, _ = pipeline.call("POST", "/schedules/nightly-cleanup/trigger", scopes=ADMIN)
    job_id = fired["job_id"]
    now = datetime.now(UTC)
    pipeline.store.cancel(job_id, tenant=SYSTEM_TENANT, now=now, expires_at=now + timedelta(days=1))

    refused, _, _ = pipeline.call("POST", f"/jobs/{job_id}/retry")
    code, retried, _ = pipeline.call("POST", f"/jobs/{job_id}/retry", scopes=ADMIN)

    assert (refused, code, retried["status"], retried["retries"]) == (404, 202, "QUEUED", 1)


def test_a_tenant_cannot_list_the_jobs_that_schedules_made(pipeline: Pipeline) -> None:
    code, body, _ = pipeline.call("GET", "/jobs?tenant=system")

    assert (code, body["error"]["code"]) == (403, "forbidden")


def test_no_one_lists_another_tenants_jobs(pipeline: Pipeline) -> None:
    pipeline.submit("demo.echo", {"n": 1}, tenant="tenant-b")

    code, body, _ = pipeline.call("GET", "/jobs?tenant=tenant-b", scopes=ADMIN)

    assert (code, body["error"]["field"]) == (422, "tenant")


def test_a_schedule_shows_its_next_five_firings_in_its_zone(pipeline: Pipeline) -> None:
    code, body, _ = pipeline.call("GET", "/schedules", scopes=ADMIN)

    assert code == 200
    [nightly] = [s for s in body["schedules"] if s["name"] == "nightly-cleanup"]
    firings = [datetime.fromisoformat(t) for t in nightly["next_firings"]]
    assert len(firings) == 5
    assert nightly["next_firings"][0] == nightly["next_firing"]
    assert all(t.hour == 3 and t.minute == 0 for t in firings), "03:00 Europe/Prague, in Prague's offset"
    assert [b.date() - a.date() for a, b in itertools.pairwise(firings)] == [timedelta(days=1)] * 4


# -- GET /stats ------------------------------------------------------------------------------------


@dataclasses.dataclass
class FixedStats:
    rows: list[MinuteStats]
    asked: list[tuple[datetime, datetime]] = dataclasses.field(default_factory=list)

    def minutes(self, *, start: datetime, end: datetime) -> list[MinuteStats]:
        self.asked.append((start, end))
        return self.rows


def with_sources(pipeline: Pipeline, **sources: Any) -> Pipeline:
    pipeline.api_services = dataclasses.replace(pipeline.api_services, **sources)
    return pipeline


def test_an_admin_reads_the_per_minute_statistics(pipeline: Pipeline) -> None:
    row = MinuteStats(T0, "default", "demo.echo", 3, 2, 1, 1, 1, 0.012, 0.05, 0.2, 0.9, expired=4)
    stats = FixedStats([row])
    with_sources(pipeline, stats=stats)

    code, body, _ = pipeline.call("GET", "/stats?minutes=15", scopes=ADMIN)

    assert code == 200
    assert body["minutes"] == [
        {
            "minute": "2026-12-01T09:00:00Z",
            "queue": "default",
            "job_type": "demo.echo",
            "submitted": 3,
            "succeeded": 2,
            "failed": 1,
            "retried": 1,
            "dead_lettered": 1,
            "expired": 4,
            "duration_p50_s": 0.012,
            "duration_p95_s": 0.05,
            "queue_wait_p50_s": 0.2,
            "queue_wait_p95_s": 0.9,
        }
    ]
    [(start, end)] = stats.asked
    assert end - start == timedelta(minutes=15)


def test_the_statistics_need_the_admin_scope(pipeline: Pipeline) -> None:
    with_sources(pipeline, stats=FixedStats([]))

    code, body, _ = pipeline.call("GET", "/stats?minutes=1")

    assert (code, body["error"]["code"]) == (403, "forbidden")


@pytest.mark.parametrize("minutes", ["0", "1441", "ten", "1.5", "-5", "%C2%B2"])
def test_a_bad_minutes_is_refused_naming_it(pipeline: Pipeline, minutes: str) -> None:
    with_sources(pipeline, stats=FixedStats([]))

    code, body, _ = pipeline.call("GET", f"/stats?minutes={minutes}", scopes=ADMIN)

    assert (code, body["error"]["field"]) == (422, "minutes")


def test_statistics_cloudwatch_cannot_give_are_a_503_not_a_stack_trace(pipeline: Pipeline) -> None:
    from offpath.domain.errors import MetricsUnavailableError

    class Failing:
        def minutes(self, *, start: datetime, end: datetime) -> list[MinuteStats]:
            raise MetricsUnavailableError("CloudWatch Throttling")

    with_sources(pipeline, stats=Failing())

    code, body, headers = pipeline.call("GET", "/stats", scopes=ADMIN)

    assert (code, body["error"]["code"], headers.get("Retry-After")) == (503, "unavailable", "2")


# -- GET /alarms -----------------------------------------------------------------------------------


def test_an_admin_reads_the_stacks_alarms_from_cloudwatch(pipeline: Pipeline) -> None:
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    for name in ("offpath-default-dlq-depth", "offpath-api-5xx", "another-stack-api-5xx"):
        cloudwatch.put_metric_alarm(
            AlarmName=name,
            AlarmDescription=f"about {name}",
            Namespace="AWS/SQS",
            MetricName="ApproximateNumberOfMessagesVisible",
            Statistic="Maximum",
            Period=60,
            EvaluationPeriods=1,
            Threshold=1,
            ComparisonOperator="GreaterThanOrEqualToThreshold",
        )
    cloudwatch.set_alarm_state(AlarmName="offpath-default-dlq-depth", StateValue="ALARM", StateReason="3 >= 1")
    alarms = CloudWatchAlarms("offpath", client=cloudwatch)
    # moto has no DescribeAlarmHistory: the changes come from a stand-in here (tests/unit/test_cloudwatch.py
    # reads them from DescribeAlarmHistory answers).
    change = AlarmChange(T0, "offpath-default-dlq-depth", "OK", "ALARM", "3 >= 1")
    with_sources(pipeline, alarms=_WithChanges(alarms, [change]))

    code, body, _ = pipeline.call("GET", "/alarms", scopes=ADMIN)

    assert code == 200
    assert [(a["name"], a["state"]) for a in body["alarms"]] == [
        ("offpath-api-5xx", "OK"),
        ("offpath-default-dlq-depth", "ALARM"),
    ]
    assert body["alarms"][1]["reason"] == "3 >= 1"
    assert body["alarms"][1]["description"] == "about offpath-default-dlq-depth"
    assert body["changes"] == [
        {
            "time": "2026-12-01T09:00:00Z",
            "alarm": "offpath-default-dlq-depth",
            "old_state": "OK",
            "new_state": "ALARM",
            "reason": "3 >= 1",
        }
    ]


def test_the_alarms_need_the_admin_scope(pipeline: Pipeline) -> None:
    code, body, _ = pipeline.call("GET", "/alarms")

    assert (code, body["error"]["code"]) == (403, "forbidden")


@dataclasses.dataclass
class _WithChanges:
    inner: CloudWatchAlarms
    recorded: list[AlarmChange]

    def alarms(self) -> list[AlarmState]:
        return self.inner.alarms()

    def changes(self, *, limit: int) -> list[AlarmChange]:
        return self.recorded[:limit]
