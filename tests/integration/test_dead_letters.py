"""Finding one job's dead letter in an SQS DLQ (moto): the match is deleted, the others are visible again at once,
and the search is bounded (docs/architecture.md, "Dead letters")."""

from __future__ import annotations

from typing import Any

from offpath.adapters.sqs_queue import SqsJobQueue
from offpath.domain.ports import JobMessage
from tests.integration.conftest import aws_calls


def dlq_depth(queue: SqsJobQueue, clients: dict[str, Any]) -> tuple[int, int]:
    """(visible, in flight) messages on the default DLQ."""
    attributes = clients["sqs"].get_queue_attributes(
        QueueUrl=queue.dlq_urls["default"],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(attributes["ApproximateNumberOfMessagesNotVisible"])


def dead_letters(queue: SqsJobQueue, count: int) -> list[str]:
    ids = [f"{n:032x}" for n in range(count)]
    for job_id in ids:
        queue.send_to_dlq("default", JobMessage(job_id, "demo.poison", "tenant-a"), reason="broken")
    return ids


def test_the_jobs_dead_letter_is_deleted_and_the_others_are_released_at_once(
    queue: SqsJobQueue, clients: dict[str, Any]
) -> None:
    ids = dead_letters(queue, 25)

    removed = queue.remove_dead_letter("default", ids[17])

    assert removed == JobMessage(ids[17], "demo.poison", "tenant-a")
    assert dlq_depth(queue, clients) == (24, 0)


def test_a_job_beyond_the_search_bound_keeps_its_dead_letter_and_the_dlq_is_left_as_it_was(
    queue: SqsJobQueue, clients: dict[str, Any]
) -> None:
    dead_letters(queue, 30)
    calls = aws_calls(clients["sqs"])

    removed = queue.remove_dead_letter("default", "f" * 32, max_receives=2)

    assert removed is None
    assert calls["SQS.ReceiveMessage"] == 2, "at most max_receives receives"
    assert dlq_depth(queue, clients) == (30, 0), "every message passed over is visible again"


def test_an_empty_dlq_costs_one_receive(queue: SqsJobQueue, clients: dict[str, Any]) -> None:
    calls = aws_calls(clients["sqs"])

    assert queue.remove_dead_letter("default", "f" * 32) is None
    assert dict(calls) == {"SQS.ReceiveMessage": 1}


def test_a_removal_found_once_is_not_found_again(queue: SqsJobQueue, clients: dict[str, Any]) -> None:
    ids = dead_letters(queue, 3)

    first = queue.remove_dead_letter("default", ids[0])
    second = queue.remove_dead_letter("default", ids[0])

    assert (first is not None, second) == (True, None)
    assert dlq_depth(queue, clients) == (2, 0)
