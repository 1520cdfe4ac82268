"""Receives from the emulator's queues while one tenant holds many messages in flight: prints (JSON) the tenants of
the messages the next receive returned, once with 40 of the noisy tenant's messages in flight and once with 20
(under the 30 a noisy tenant needs: fair delivery does not kick in).

Run in a process of its own (`python -m tests.e2e.fair_queue_scenario`) by tests/e2e/test_emulator_queues.py:
the emulator is moto's server in the process that starts it, and moto's state is per process.
"""

from __future__ import annotations

import json
from typing import Any


def main() -> None:
    from offpath_local.emulator import Emulator

    emulator = Emulator()
    emulator.start()
    try:
        sqs = emulator.client("sqs")
        print(
            json.dumps(
                {"in_flight_40": next_receive(sqs, "fair-40", 40), "in_flight_20": next_receive(sqs, "fair-20", 20)}
            )
        )
    finally:
        emulator.stop()


def next_receive(sqs: Any, name: str, noisy_in_flight: int) -> list[str]:
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "600"})["QueueUrl"]
    send(sqs, url, "a", 100)
    for _ in range(noisy_in_flight // 10):
        assert len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]) == 10
    send(sqs, url, "b", 5)
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    return [str(message["Body"]) for message in messages]


def send(sqs: Any, url: str, tenant: str, count: int) -> None:
    for start in range(0, count, 10):
        entries = [
            {"Id": str(i), "MessageBody": f"{tenant}-{start + i}", "MessageGroupId": tenant}
            for i in range(min(10, count - start))
        ]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)


if __name__ == "__main__":
    main()
