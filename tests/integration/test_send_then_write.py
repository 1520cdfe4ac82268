"""The api sends before it writes (TESTPLAN 10, 11): the gap between the two, with the real handlers on moto.

The message of a job whose write has not landed carries SQS's SentTimestamp; the worker returns it until
the bound (the longest a submitting function runs, and a margin) has passed, then drops it as never accepted.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from offpath.domain.ports import JobMessage
from offpath.domain.registry import UNWRITTEN_BOUND_S
from offpath.logic.submit import SubmitRequest, build_job
from offpath_tools.clocks import ManualClock
from tests.integration.conftest import Answer, Pipeline, RecordingMetrics, operation_of


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime.now(UTC).replace(microsecond=0))


def test_a_message_received_before_its_job_is_written_runs_the_job_once_it_is(
    resources: Any, clients: dict[str, Any], registry: Any, metrics: RecordingMetrics, clock: ManualClock
) -> None:
    timed = Pipeline(resources, clients, registry, metrics, clock=clock)
    job = build_job(
        SubmitRequest(tenant="tenant-a", type="demo.echo", payload={"k": 1}),
        timed.ports,
        timed.api_services.policy,
        clock.now(),
    ).replace(sweep_at=None)
    timed.queue.send(job.queue, JobMessage.of(job))  # the api's send; its write has not landed yet

    [early] = timed.receive()
    first = timed.invoke_worker([early])
    assert timed.depth() == (0, 1)  # back on the queue, invisible for the short wait the worker set
    timed.store.create(job)  # the write lands
    clients["sqs"].change_message_visibility(  # that wait passes
        QueueUrl=resources.queue_urls["default"], ReceiptHandle=early["ReceiptHandle"], VisibilityTimeout=0
    )
    [message] = timed.receive()
    response = timed.invoke_worker([message])

    assert len(first["batchItemFailures"]) == 1
    assert response == {"batchItemFailures": []}
    assert int(message["Attributes"]["ApproximateReceiveCount"]) == 2
    assert timed.call("GET", f"/jobs/{job.job_id}")[1]["status"] == "SUCCEEDED"


def test_a_submit_whose_write_fails_after_its_send_is_refused_and_its_message_dropped_after_the_bound(
    resources: Any,
    clients: dict[str, Any],
    registry: Any,
    metrics: RecordingMetrics,
    clock: ManualClock,
    aws_answers: list[Any],
) -> None:
    timed = Pipeline(resources, clients, registry, metrics, clock=clock)

    def throttle_puts(request: Any) -> Answer | None:
        if operation_of(request).endswith(".PutItem"):
            body = '{"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException", "message": "slow down"}'
            return 400, {"Content-Type": "application/x-amz-json-1.0"}, body
        return None

    aws_answers.append(throttle_puts)
    status, body, _ = timed.submit("demo.echo", {"n": 1})
    aws_answers.clear()
    assert status == 503, body
    assert timed.depth() == (1, 0)  # the message went out first

    # The bound is counted from SQS's SentTimestamp, real time: the manual clock is moved past it from wherever real
    # time is now (the fixture's clock may be behind it by a slow setup on a loaded machine).
    behind_s = max(0.0, datetime.now(UTC).timestamp() - clock.now().timestamp())
    clock.advance(UNWRITTEN_BOUND_S + 1 + behind_s)
    timed.drain()

    assert timed.depth() == (0, 0)
    assert metrics.counts["MessagesUnwritten"] == 1
    assert timed.call("GET", "/jobs")[1]["jobs"] == []
