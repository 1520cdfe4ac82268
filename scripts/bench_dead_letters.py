"""What finding one job's dead letter costs (`SqsJobQueue.remove_dead_letter`: a hand retry, a discard), in moto.

For DLQs of several depths and where the job's message sits (first, last, beyond the search's bound, absent), the
SQS requests the search makes and its wall time on this machine (moto answers in-process: the time is the
client's and moto's work, not SQS's network round trips; each empty receive long-polls DEAD_LETTER_WAIT_S).

    .venv/bin/python scripts/bench_dead_letters.py
"""

from __future__ import annotations

import time
from collections import Counter

import boto3
from moto import mock_aws

from offpath.adapters.sqs_queue import DEAD_LETTER_RECEIVES, SDK_CONFIG, SqsJobQueue
from offpath.domain.ports import JobMessage


def measure(depth: int, position: str) -> tuple[Counter[str], float, bool]:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1", config=SDK_CONFIG)
        url = sqs.create_queue(QueueName="bench-dlq")["QueueUrl"]
        queue = SqsJobQueue({"default": url}, {"default": url}, client=sqs)
        ids = [f"{n:032x}" for n in range(depth)]
        for job_id in ids:
            queue.send_to_dlq("default", JobMessage(job_id, "demo.poison", "tenant-a"), reason="broken")
        target = {"first": ids[0] if ids else "", "last": ids[-1] if ids else "", "absent": "f" * 32}[position]
        calls: Counter[str] = Counter()
        sqs.meta.events.register("before-call", lambda model, **_: calls.update([model.name]))
        started = time.perf_counter()
        found = queue.remove_dead_letter("default", target) is not None
        return calls, time.perf_counter() - started, found


def main() -> None:
    print(f"bound: {DEAD_LETTER_RECEIVES} receives of 10 messages")
    print(f"{'DLQ depth':>9} {'job':>7} {'found':>5} {'requests':>8} {'seconds':>7}  calls")
    for depth, position in [(0, "absent"), (1, "first"), (20, "last"), (100, "last"), (300, "absent")]:
        calls, elapsed, found = measure(depth, position)
        detail = ", ".join(f"{name} {count}" for name, count in sorted(calls.items()))
        print(f"{depth:>9} {position:>7} {found!s:>5} {sum(calls.values()):>8} {elapsed:>7.2f}  {detail}")


if __name__ == "__main__":
    main()
