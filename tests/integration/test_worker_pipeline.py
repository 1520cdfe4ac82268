"""The worker under faults (TESTPLAN 13-17, 19, 20, 22), through the api and worker handlers against moto.

The queue's own time is real (moto): a test that needs a visibility timeout to pass says so with
`Pipeline.visibility_timeout_passes`, and a lease is made to expire by moving the pipeline's clock.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import threading
import time
import types
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import botocore.endpoint
import pytest
from botocore.awsrequest import AWSPreparedRequest

from offpath.adapters.dynamodb_store import DynamoDbJobStore, job_key
from offpath.domain.backoff import Backoff
from offpath.domain.registry import JobType, Registry
from offpath.handlers import worker
from offpath.jobs import welcome_email
from offpath.logic.process import WorkerPolicy
from offpath.observability import EmfMetrics, JsonFormatter
from offpath_local.lambda_context import LocalLambdaContext
from offpath_local.resources import Resources
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import (
    SCRIPTED_TYPE,
    AnyPayload,
    CeilingJitter,
    ScriptedJob,
    registry_with,
)
from tests.integration.conftest import Answer, Pipeline, RecordingMetrics, aws_calls, operation_of, sqs_event

WAIT_S = 10


class WorkerDied(BaseException):
    """Stands for the worker's process ending at that point (a BaseException: the worker contains
    every Exception of one record, but nothing survives its process ending)."""


def lease_s(registry: Registry, queue_class: str = "default") -> float:
    """The lease a claim takes in an invocation with all its time left: it outlives the worker
    function's timeout (from the registry) by the lease margin."""
    return registry.worker_timeout_s(queue_class) + WorkerPolicy(queue=queue_class).lease_margin.total_seconds()


@pytest.fixture
def scripted() -> ScriptedJob:
    return ScriptedJob()


@pytest.fixture
def registry(scripted: ScriptedJob) -> Registry:
    return registry_with(scripted)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
def timed(
    resources: Resources, clients: dict[str, Any], registry: Registry, metrics: RecordingMetrics, clock: ManualClock
) -> Pipeline:
    """A pipeline whose clock (leases, backoff) moves only when the test says."""
    return Pipeline(resources, clients, registry, metrics, clock=clock)


@pytest.fixture
def email_transport(monkeypatch: pytest.MonkeyPatch) -> welcome_email.LoggingEmailTransportStub:
    transport = welcome_email.LoggingEmailTransportStub()
    monkeypatch.setattr(welcome_email, "transport", transport)
    return transport


def view_of(pipeline: Pipeline, job_id: str) -> dict[str, Any]:
    status, view, _ = pipeline.call("GET", f"/jobs/{job_id}")
    assert status == 200, view
    return view


def submit(pipeline: Pipeline, payload: dict[str, Any] | None = None, job_type: str = SCRIPTED_TYPE) -> str:
    status, job, _ = pipeline.submit(job_type, payload or {})
    assert status == 202, job
    return str(job["job_id"])


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(call()))
    thread.start()
    return thread, result


def blocking_first_attempt(scripted: ScriptedJob) -> tuple[threading.Event, threading.Event]:
    """Attempt 1 signals `started`, then waits for `release`; later attempts return at once."""
    started, release = threading.Event(), threading.Event()

    def action(payload: Any, ctx: Any) -> dict[str, int]:
        if ctx.attempt == 1:
            started.set()
            release.wait(WAIT_S)
        return {"attempt": ctx.attempt}

    scripted.action = action
    return started, release


# -- 13: duplicate delivery ---------------------------------------------------------------------


def test_a_message_delivered_twice_runs_its_job_once(
    pipeline: Pipeline, scripted: ScriptedJob, metrics: RecordingMetrics
) -> None:
    job_id = submit(pipeline)
    messages = pipeline.receive()

    first = pipeline.invoke_worker(messages)
    second = pipeline.invoke_worker(messages)

    assert first == second == {"batchItemFailures": []}
    assert scripted.runs_of(job_id) == 1
    assert view_of(pipeline, job_id)["status"] == "SUCCEEDED"
    assert metrics.counts["DuplicateDeliveries"] == 1


def test_a_message_delivered_to_two_workers_at_once_runs_its_job_once(
    pipeline: Pipeline, scripted: ScriptedJob
) -> None:
    job_id = submit(pipeline)
    messages = pipeline.receive()
    started, release = blocking_first_attempt(scripted)

    first, first_answer = in_thread(lambda: pipeline.invoke_worker(messages))
    assert started.wait(WAIT_S)
    second, second_answer = in_thread(lambda: pipeline.invoke_worker(messages))
    second.join(WAIT_S)
    release.set()
    first.join(WAIT_S)

    # The second worker found the job held and left its copy on the queue until the lease ends.
    assert second_answer == [{"batchItemFailures": [{"itemIdentifier": messages[0]["MessageId"]}]}]
    assert first_answer == [{"batchItemFailures": []}]
    assert scripted.runs_of(job_id) == 1
    assert view_of(pipeline, job_id)["status"] == "SUCCEEDED"


# -- 14: a crash after the side effect ----------------------------------------------------------


class DiesBeforeRecordingSuccess(DynamoDbJobStore):
    def __init__(self, store: DynamoDbJobStore) -> None:
        super().__init__(store.table_name, client=store.client)
        self.died = False

    def record_success(self, job: Any, **kwargs: Any) -> None:
        if not self.died:
            self.died = True
            raise WorkerDied
        super().record_success(job, **kwargs)


def test_a_worker_that_dies_after_the_side_effect_does_not_repeat_it_on_redelivery(
    timed: Pipeline, clock: ManualClock, email_transport: welcome_email.LoggingEmailTransportStub
) -> None:
    job_id = submit(timed, {"user_id": "u-1", "email": "u-1@example.com"}, job_type="send_welcome_email")
    timed.store = DiesBeforeRecordingSuccess(timed.store)
    timed.drain()
    assert view_of(timed, job_id)["status"] == "RUNNING"
    assert len(email_transport.sent) == 1

    # The dead worker's lease and the message's visibility timeout both run out.
    clock.advance(lease_s(timed.registry) + 1)
    timed.visibility_timeout_passes()
    timed.drain()

    view = view_of(timed, job_id)
    assert (view["status"], view["attempts"]) == ("SUCCEEDED", 2)
    assert len(email_transport.sent) == 1


QUICK_TYPE = "test.quick"


def test_a_worker_that_dies_after_claiming_is_run_again_once_its_lease_has_passed_not_the_visibility_timeout(
    pipeline: Pipeline, scripted: ScriptedJob, registry: Registry
) -> None:
    """The invocation sets its messages' visibility to its claims' lease (ChangeMessageVisibilityBatch):
    moto's SQS returns the dead worker's message seconds after the lease, where the queue's visibility
    timeout would have kept it for 70 minutes."""
    registry.add_job_type(
        JobType(
            name=QUICK_TYPE,
            function=scripted,
            payload_model=AnyPayload,
            queue="default",
            max_attempts=3,
            timeout_s=1,
            backoff=Backoff(),
        )
    )
    job_id = submit(pipeline, job_type=QUICK_TYPE)
    pipeline.store = DiesBeforeRecordingSuccess(pipeline.store)
    services = pipeline.worker_services("default")
    # An invocation of 2 s with a lease margin of 1 s: its claims' lease ends 3 s after it starts.
    services.policy = dataclasses.replace(services.policy, lease_margin=timedelta(seconds=1), start_margin_ms=0)
    queue_visibility_s = int(
        pipeline.clients["sqs"].get_queue_attributes(
            QueueUrl=pipeline.resources.queue_urls["default"], AttributeNames=["VisibilityTimeout"]
        )["Attributes"]["VisibilityTimeout"]
    )
    messages = pipeline.receive()
    with pytest.raises(WorkerDied):
        worker.handler(sqs_event(messages), LocalLambdaContext("worker-default", 2), services=services)
    assert view_of(pipeline, job_id)["status"] == "RUNNING"

    again = (
        pipeline.clients["sqs"]
        .receive_message(QueueUrl=pipeline.resources.queue_urls["default"], AttributeNames=["All"], WaitTimeSeconds=20)
        .get("Messages", [])
    )

    assert queue_visibility_s >= 600  # what the message would have waited for without the hold
    assert [m["MessageId"] for m in again] == [messages[0]["MessageId"]]
    assert again[0]["Attributes"]["ApproximateReceiveCount"] == "2"
    assert worker.handler(sqs_event(again), None, services=services) == {"batchItemFailures": []}
    view = view_of(pipeline, job_id)
    assert (view["status"], view["attempts"]) == ("SUCCEEDED", 2)
    assert scripted.runs_of(job_id) == 2


# -- 15, 16: batches ----------------------------------------------------------------------------


def test_one_bad_record_in_a_batch_of_ten_is_the_only_failure_reported(
    pipeline: Pipeline, scripted: ScriptedJob
) -> None:
    job_ids = [submit(pipeline, {"n": n}) for n in range(9)]
    queue_url = pipeline.resources.queue_urls["default"]
    bad_id = pipeline.clients["sqs"].send_message(QueueUrl=queue_url, MessageBody="not a job message")["MessageId"]

    pipeline.drain()

    assert len(pipeline.delivered["default"]) == 10
    assert pipeline.worker_responses[0] == {"batchItemFailures": [{"itemIdentifier": bad_id}]}
    assert {view_of(pipeline, job_id)["status"] for job_id in job_ids} == {"SUCCEEDED"}
    assert pipeline.depth() == (0, 1)  # the bad one waits for its visibility timeout, then the DLQ


def test_a_record_whose_job_item_cannot_be_read_fails_alone_and_the_rest_of_its_batch_runs(
    pipeline: Pipeline, scripted: ScriptedJob, metrics: RecordingMetrics
) -> None:
    """TESTPLAN 31: other tenants' jobs in the same batch run as if the unreadable one were not there."""
    job_ids = [submit(pipeline, {"n": n}) for n in range(10)]
    unreadable = job_ids[4]
    # Written past the store, as any item offpath cannot read (the unpadded year "999" of earlier versions was).
    pipeline.clients["dynamodb"].update_item(
        TableName=pipeline.resources.table_name,
        Key=job_key("tenant-a", unreadable),
        UpdateExpression="SET created_at = :unreadable",
        ExpressionAttributeValues={":unreadable": {"S": "not a time"}},
    )

    pipeline.drain()

    assert len(pipeline.delivered["default"]) == 10
    assert [len(response["batchItemFailures"]) for response in pipeline.worker_responses] == [1]
    others = [job_id for job_id in job_ids if job_id != unreadable]
    assert {view_of(pipeline, job_id)["status"] for job_id in others} == {"SUCCEEDED"}
    assert [scripted.runs_of(job_id) for job_id in others] == [1] * 9
    assert scripted.runs_of(unreadable) == 0
    assert metrics.counts["RecordsFailed"] == 1
    assert pipeline.depth() == (0, 1)  # it waits for its visibility timeout, and in the end for the DLQ


class FailsAtClaim(DynamoDbJobStore):
    """The `n`-th claim raises something the worker does not expect, once."""

    def __init__(self, store: DynamoDbJobStore, n: int) -> None:
        super().__init__(store.table_name, client=store.client)
        self.claims = 0
        self.n = n

    def claim(self, job_id: str, **kwargs: Any) -> Any:
        self.claims += 1
        if self.claims == self.n:
            raise WorkerDied
        return super().claim(job_id, **kwargs)


def test_an_invocation_that_raises_mid_batch_loses_nothing_and_redoes_nothing(
    pipeline: Pipeline, scripted: ScriptedJob
) -> None:
    job_ids = [submit(pipeline, {"n": n}) for n in range(10)]
    pipeline.store = FailsAtClaim(pipeline.store, n=6)

    pipeline.drain()

    assert len(pipeline.delivered["default"]) == 10
    assert pipeline.depth() == (0, 10)  # nothing was deleted
    assert sorted(view_of(pipeline, job_id)["status"] for job_id in job_ids) == ["QUEUED"] * 5 + ["SUCCEEDED"] * 5

    pipeline.visibility_timeout_passes()
    pipeline.drain()

    assert {view_of(pipeline, job_id)["status"] for job_id in job_ids} == {"SUCCEEDED"}
    assert [scripted.runs_of(job_id) for job_id in job_ids] == [1] * 10
    assert pipeline.depth() == (0, 0)


# -- 17, 19: poison and permanent errors --------------------------------------------------------


@pytest.fixture
def visibility_timeouts(pipeline: Pipeline) -> list[int]:
    """The timeouts the worker asks for with ChangeMessageVisibility; SQS is then told 0, so the
    retry is due at once and the test need not wait out the backoff."""
    asked: list[int] = []

    def record_and_shorten(params: dict[str, Any], **kwargs: Any) -> None:
        asked.append(params["VisibilityTimeout"])
        params["VisibilityTimeout"] = 0

    pipeline.clients["sqs"].meta.events.register(
        "before-parameter-build.sqs.ChangeMessageVisibility", record_and_shorten
    )
    return asked


def test_a_job_that_always_fails_gets_max_attempts_with_growing_delays_then_the_dlq(
    pipeline: Pipeline, visibility_timeouts: list[int]
) -> None:
    pipeline.rng = CeilingJitter()
    job_id = submit(pipeline, {"fail_first": 100}, job_type="demo.flaky")

    pipeline.drain()

    # demo.flaky: 5 attempts, backoff base 1 s capped at 5 s; the delay after attempt n is at most 2**(n-1).
    assert visibility_timeouts == [1, 2, 4, 5]
    view = view_of(pipeline, job_id)
    reason = "attempts exhausted (5): RuntimeError: flaky failure on attempt 5 of the first 100"
    assert (view["status"], view["attempts"], view["error"]) == ("FAILED", 5, reason)
    assert [(d["job_id"], d["reason"]) for d in pipeline.dlq_bodies()] == [(job_id, reason)]
    assert pipeline.depth() == (0, 0)


def test_a_permanent_error_fails_the_job_at_once_into_the_dlq(
    pipeline: Pipeline, visibility_timeouts: list[int]
) -> None:
    job_id = submit(pipeline, {"reason": "bad input"}, job_type="demo.poison")

    pipeline.drain()

    view = view_of(pipeline, job_id)
    assert (view["status"], view["attempts"], view["error"]) == ("FAILED", 1, "permanent error: bad input")
    assert visibility_timeouts == []
    assert [(d["job_id"], d["reason"]) for d in pipeline.dlq_bodies()] == [(job_id, "permanent error: bad input")]
    assert pipeline.depth() == (0, 0)


# -- 20: fencing --------------------------------------------------------------------------------


def test_a_late_worker_cannot_overwrite_the_outcome_of_a_newer_attempt(
    timed: Pipeline, clock: ManualClock, scripted: ScriptedJob
) -> None:
    job_id = submit(timed)
    messages = timed.receive()
    started, release = blocking_first_attempt(scripted)
    late, late_answer = in_thread(lambda: timed.invoke_worker(messages))
    assert started.wait(WAIT_S)

    # Attempt 1's lease runs out while it is still working; the redelivered message is attempt 2.
    clock.advance(lease_s(timed.registry) + 1)
    newer = timed.invoke_worker(messages)
    release.set()
    late.join(WAIT_S)

    assert newer == {"batchItemFailures": []}
    assert late_answer == [{"batchItemFailures": []}]  # acked: its result is discarded
    view = view_of(timed, job_id)
    assert (view["status"], view["attempts"], view["result"]) == ("SUCCEEDED", 2, {"attempt": 2})


# -- 22: cancel ---------------------------------------------------------------------------------


def test_a_cancelled_job_is_never_run(pipeline: Pipeline, scripted: ScriptedJob) -> None:
    job_id = submit(pipeline)

    status, view, _ = pipeline.call("POST", f"/jobs/{job_id}/cancel")
    pipeline.drain()

    assert (status, view["status"]) == (200, "CANCELLED")
    assert scripted.calls == []
    assert view_of(pipeline, job_id)["status"] == "CANCELLED"
    assert pipeline.depth() == (0, 0)


def test_a_job_waiting_to_retry_can_be_cancelled_and_is_not_run_again(
    pipeline: Pipeline, scripted: ScriptedJob
) -> None:
    def fail(payload: Any, ctx: Any) -> None:
        raise RuntimeError("not yet")

    scripted.action = fail
    job_id = submit(pipeline)
    pipeline.drain(max_polls=1)
    assert view_of(pipeline, job_id)["status"] == "RETRYING"

    status, _, _ = pipeline.call("POST", f"/jobs/{job_id}/cancel")
    pipeline.drain()

    assert status == 200
    assert len(scripted.calls) == 1
    assert view_of(pipeline, job_id)["status"] == "CANCELLED"


def test_a_running_job_cannot_be_cancelled(pipeline: Pipeline, scripted: ScriptedJob) -> None:
    job_id = submit(pipeline)
    started, release = blocking_first_attempt(scripted)
    running, _ = in_thread(lambda: pipeline.invoke_worker(pipeline.receive()))
    assert started.wait(WAIT_S)

    status, body, _ = pipeline.call("POST", f"/jobs/{job_id}/cancel")
    release.set()
    running.join(WAIT_S)

    assert status == 409
    assert body["error"]["code"] == "conflict"
    assert view_of(pipeline, job_id)["status"] == "SUCCEEDED"


def test_a_finished_job_cannot_be_cancelled(pipeline: Pipeline) -> None:
    job_id = submit(pipeline)
    pipeline.drain()

    status, body, _ = pipeline.call("POST", f"/jobs/{job_id}/cancel")

    assert status == 409
    assert body["error"]["code"] == "conflict"
    assert view_of(pipeline, job_id)["status"] == "SUCCEEDED"


# -- what a job costs ---------------------------------------------------------------------------


@pytest.fixture
def calls_from_new_clients() -> Iterator[Any]:
    """Counts the calls of every client created from now on (such as a CloudWatch client)."""
    session = boto3.DEFAULT_SESSION or boto3.setup_default_session() or boto3.DEFAULT_SESSION
    assert session is not None
    calls: list[str] = []

    def count(model: Any, **kwargs: Any) -> None:
        calls.append(f"{model.service_model.service_id}.{model.name}")

    session.events.register("before-call", count)
    try:
        yield calls
    finally:
        session.events.unregister("before-call", count)


def test_a_job_costs_the_worker_two_writes_no_metric_calls_and_no_read_past_the_cached_pause_flags(
    pipeline: Pipeline, calls_from_new_clients: list[str]
) -> None:
    services = pipeline.worker_services("default")
    emf = io.StringIO()
    services.ports.metrics = EmfMetrics("worker-default", stream=emf)
    submit(pipeline, {"n": 0}, job_type="demo.echo")
    worker.handler(sqs_event(pipeline.receive()), None, services=services)  # reads the pause flags (cached 10 s)
    submit(pipeline, {"n": 1}, job_type="demo.echo")
    messages = pipeline.receive()
    calls = aws_calls(pipeline.clients["dynamodb"], pipeline.clients["sqs"])

    answer = worker.handler(sqs_event(messages), None, services=services)

    assert answer == {"batchItemFailures": []}
    # The claim and the success, and the batch's visibility set to the lease (one request per 10 messages); the
    # pause flags come from the environment's cache (one GetItem per 10 s, made by the first job above).
    assert calls == {"DynamoDB.UpdateItem": 2, "SQS.ChangeMessageVisibilityBatch": 1}
    assert services.ports.pauses is not None and services.ports.pauses.reads == 1
    assert not [call for call in calls_from_new_clients if call.startswith("CloudWatch")]
    assert emf.getvalue() == ""  # a job that simply succeeds writes no metric line: the notifier counts it


# -- logs ---------------------------------------------------------------------------------------


@pytest.fixture
def worker_log() -> Iterator[io.StringIO]:
    lines = io.StringIO()
    handler = logging.StreamHandler(lines)
    handler.setFormatter(JsonFormatter("worker"))
    handler.setLevel(logging.INFO)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@pytest.mark.parametrize("where", ["main thread (Lambda)", "worker thread (local runtime)"])
def test_every_line_logged_while_a_job_runs_carries_its_id_and_none_of_its_payload(
    pipeline: Pipeline, email_transport: Any, worker_log: io.StringIO, where: str
) -> None:
    payload = {"user_id": "user-7f3a9c", "email": "secret.person@example.org"}
    job_id = submit(pipeline, payload, job_type="send_welcome_email")
    messages = pipeline.receive()
    worker_log.truncate(0)
    worker_log.seek(0)

    if where.startswith("main"):
        pipeline.invoke_worker(messages)
    else:
        thread, _ = in_thread(lambda: pipeline.invoke_worker(messages))
        thread.join(WAIT_S)

    lines = [json.loads(line) for line in worker_log.getvalue().splitlines()]
    loggers = {line["logger"] for line in lines}
    assert {"offpath.worker", "offpath.email.stub"} <= loggers  # the worker's lines and the job's own
    assert all(line.get("job_id") == job_id for line in lines), lines
    assert not any(value in worker_log.getvalue() for value in payload.values())


# -- 33: a timeout that cannot be swallowed -----------------------------------------------------


def catches_exception(payload: Any, ctx: Any) -> str:
    try:
        time.sleep(WAIT_S)
    except Exception:
        return "carried on"
    return "slept"


def test_a_job_function_that_catches_exception_still_times_out(pipeline: Pipeline) -> None:
    pipeline.registry.add_job_type(
        JobType(
            name="test.careless",
            function=catches_exception,
            payload_model=AnyPayload,
            queue="default",
            max_attempts=2,
            timeout_s=1,
            backoff=Backoff(base_s=1, cap_s=1),
        )
    )
    job_id = submit(pipeline, job_type="test.careless")
    messages = pipeline.receive()

    answer = pipeline.invoke_worker(messages)  # on the main thread, as on Lambda: the SIGALRM path

    assert answer == {"batchItemFailures": [{"itemIdentifier": messages[0]["MessageId"]}]}
    view = view_of(pipeline, job_id)
    assert (view["status"], view["attempts"], view["error"]) == ("RETRYING", 1, "job ran past its timeout of 1 s")
    assert view["result"] is None


# -- an outcome write through a store outage ----------------------------------------------------


def test_a_success_write_during_a_store_outage_is_retried_and_the_job_succeeds(
    pipeline: Pipeline, aws_answers: list[Any], metrics: RecordingMetrics, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = submit(pipeline)
    messages = pipeline.receive()
    refused: list[str] = []

    def outage_for_four_success_writes(request: AWSPreparedRequest) -> Answer | None:
        body = request.body.decode() if isinstance(request.body, bytes) else str(request.body or "")
        if operation_of(request) != "DynamoDB_20120810.UpdateItem" or '"SUCCEEDED"' not in body or len(refused) >= 4:
            return None
        refused.append("InternalServerError")
        error = {"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError", "message": "try again later"}
        return 500, {"Content-Type": "application/x-amz-json-1.0"}, json.dumps(error)

    aws_answers.append(outage_for_four_success_writes)
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=lambda seconds: None))

    answer = pipeline.invoke_worker(messages)

    # The SDK's own three attempts failed, then the worker's retry met the outage once more, then it landed.
    assert len(refused) == 4
    assert answer == {"batchItemFailures": []}
    view = view_of(pipeline, job_id)
    assert (view["status"], view["attempts"], view["result"]) == ("SUCCEEDED", 1, {"done": True})
    assert metrics.counts["OutcomeWriteRetries"] == 1
