"""The redrive request SQS gets: a message move task from the DLQ to the queue, by name."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from offpath.adapters.sqs_queue import SqsRedriver
from offpath.domain.errors import RedriveInProgressError

QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/offpath-default"
DLQ_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/offpath-default-dlq"
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:offpath-default"
DLQ_ARN = "arn:aws:sqs:us-east-1:123456789012:offpath-default-dlq"


def redriver_with(stubber_setup: list[tuple[str, dict[str, object], dict[str, object]]]) -> SqsRedriver:
    client = boto3.client("sqs", region_name="us-east-1")
    stubber = Stubber(client)
    for operation, response, params in stubber_setup:
        stubber.add_response(operation, response, params)
    stubber.activate()
    return SqsRedriver({"default": QUEUE_URL}, {"default": DLQ_URL}, client=client)


def arn_lookups() -> list[tuple[str, dict[str, object], dict[str, object]]]:
    return [
        (
            "get_queue_attributes",
            {"Attributes": {"QueueArn": DLQ_ARN}},
            {"QueueUrl": DLQ_URL, "AttributeNames": ["QueueArn"]},
        ),
        (
            "get_queue_attributes",
            {"Attributes": {"QueueArn": QUEUE_ARN}},
            {"QueueUrl": QUEUE_URL, "AttributeNames": ["QueueArn"]},
        ),
    ]


def test_redrive_starts_a_move_task_from_the_dlq_to_its_queue_at_the_asked_rate() -> None:
    redriver = redriver_with(
        [
            *arn_lookups(),
            (
                "start_message_move_task",
                {"TaskHandle": "handle-1"},
                {"SourceArn": DLQ_ARN, "DestinationArn": QUEUE_ARN, "MaxNumberOfMessagesPerSecond": 20},
            ),
        ]
    )

    task = redriver.start("default", max_per_second=20)

    assert (task.status, task.task_id) == ("RUNNING", "handle-1")


def test_a_second_redrive_while_one_runs_is_refused() -> None:
    client = boto3.client("sqs", region_name="us-east-1")
    stubber = Stubber(client)
    for operation, response, params in arn_lookups():
        stubber.add_response(operation, response, params)
    stubber.add_client_error(
        "start_message_move_task",
        service_error_code="UnsupportedOperation",
        service_message="There is already a task running. Only one active task is allowed for a source queue.",
    )
    stubber.activate()
    redriver = SqsRedriver({"default": QUEUE_URL}, {"default": DLQ_URL}, client=client)

    with pytest.raises(RedriveInProgressError):
        redriver.start("default", max_per_second=None)
