"""Sends and deletes at once on one queue of the emulator, with a backlog, as a burst makes them: prints (JSON)
how many messages were sent, received, never received, and left in flight although deleted.

Run in a process of its own (`python -m tests.e2e.emulator_queues`) by tests/e2e/test_emulator_queues.py:
the emulator is moto's server in the process that starts it, and moto's state is per process.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

BACKLOG_BATCHES = 400  # 4,000 messages queued before the race: the longer the queue, the wider moto's window
CONSUMER_BATCHES = 20
SENDER_BATCHES = 30


def main() -> None:
    from offpath_local.emulator import Emulator

    emulator = Emulator()
    emulator.start()
    try:
        print(json.dumps(race(emulator)))
    finally:
        emulator.stop()


def race(emulator: Any) -> dict[str, int]:
    sqs = emulator.client("sqs")
    url = sqs.create_queue(QueueName="race", Attributes={"VisibilityTimeout": "600"})["QueueUrl"]
    for batch in range(BACKLOG_BATCHES):
        entries = [{"Id": str(i), "MessageBody": f"backlog-{batch}-{i}"} for i in range(10)]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    received: list[str] = []
    lock = threading.Lock()

    def consume() -> None:
        client = emulator.client("sqs")
        for _ in range(CONSUMER_BATCHES):
            messages = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
            if entries:
                client.delete_message_batch(QueueUrl=url, Entries=entries)
            with lock:
                received.extend(m["Body"] for m in messages)

    def send() -> None:
        client = emulator.client("sqs")
        for batch in range(SENDER_BATCHES):
            entries = [{"Id": str(i), "MessageBody": f"new-{batch}-{i}"} for i in range(10)]
            client.send_message_batch(QueueUrl=url, Entries=entries)

    threads = [threading.Thread(target=consume) for _ in range(3)] + [threading.Thread(target=send)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    resurrected = int(
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"])["Attributes"][
            "ApproximateNumberOfMessagesNotVisible"
        ]
    )
    while True:  # what is left and visible
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            break
        received.extend(m["Body"] for m in messages)
        sqs.delete_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
        )
    sent = (BACKLOG_BATCHES + SENDER_BATCHES) * 10
    return {"sent": sent, "received": len(set(received)), "lost": sent - len(set(received)), "resurrected": resurrected}


if __name__ == "__main__":
    sys.exit(main())
