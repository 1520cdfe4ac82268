"""Every message offpath puts on a queue carries its tenant as `MessageGroupId`: on a standard queue that is
what makes SQS deliver it fairly across tenants (an SQS fair queue)."""

from __future__ import annotations

from typing import Any

from offpath.adapters.sqs_queue import MESSAGE_GROUP_ID_MAX, SqsJobQueue, SqsRedriver, message_group_of
from offpath.domain.ports import JobMessage
from offpath_local.resources import Resources


def groups(clients: dict[str, Any], url: str) -> dict[str, str]:
    """job id -> MessageGroupId of every visible message on the queue."""
    found: dict[str, str] = {}
    while True:
        messages = (
            clients["sqs"]
            .receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["MessageGroupId"])
            .get("Messages", [])
        )
        if not messages:
            return found
        for message in messages:
            found[JobMessage.from_body(message["Body"]).job_id] = message.get("Attributes", {}).get("MessageGroupId")


def test_sends_carry_the_tenant_as_message_group(queue: SqsJobQueue, clients: dict[str, Any]) -> None:
    queue.send("default", JobMessage("j1", "demo.echo", "tenant-a"))
    queue.send("default", JobMessage("j2", "demo.echo", "tenant-b"), delay_s=0)
    unsent = queue.send_batch("default", [JobMessage(f"b{n}", "demo.echo", f"tenant-{n % 2}") for n in range(12)])

    assert unsent == []
    found = groups(clients, queue.queue_urls["default"])
    assert found["j1"] == "tenant-a" and found["j2"] == "tenant-b"
    assert {found[f"b{n}"] for n in range(12)} == {"tenant-0", "tenant-1"}
    assert all(found[f"b{n}"] == f"tenant-{n % 2}" for n in range(12))


def test_a_dead_letter_and_its_redrive_keep_the_tenant(
    queue: SqsJobQueue, clients: dict[str, Any], resources: Resources
) -> None:
    queue.send_to_dlq("default", JobMessage("j1", "demo.echo", "tenant-a"), reason="boom")
    redriver = SqsRedriver(resources.queue_urls, resources.dlq_urls, mode="copy", client=clients["sqs"])

    task = redriver.start("default", max_per_second=None)

    assert task.moved == 1
    assert groups(clients, queue.queue_urls["default"]) == {"j1": "tenant-a"}


def test_a_tenant_longer_than_sqs_allows_gets_a_stable_distinct_group() -> None:
    principal = "arn:aws:sts::123456789012:assumed-role/" + "r" * 200
    other = principal[:-1] + "s"

    group = message_group_of(principal)

    assert len(group) == MESSAGE_GROUP_ID_MAX
    assert group == message_group_of(principal)
    assert group != message_group_of(other)
    assert message_group_of("tenant-a") == "tenant-a"


def test_sqs_accepts_the_group_of_a_long_tenant(queue: SqsJobQueue, clients: dict[str, Any]) -> None:
    principal = "arn:aws:sts::123456789012:assumed-role/" + "r" * 200

    queue.send("default", JobMessage("j1", "demo.echo", principal))

    assert groups(clients, queue.queue_urls["default"]) == {"j1": message_group_of(principal)}
