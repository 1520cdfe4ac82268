"""The local event source mapping's poller: one receive fills every free invocation slot (batch size 1 and no
batching window: up to ten one-message invocations from one receive), and never receives for a slot in use."""

from __future__ import annotations

import threading
import time
from typing import Any

from offpath_local.event_source import PollResult
from offpath_local.pollers import QueuePoller


class HeldSource:
    """A stand-in for SqsEventSource: `pending` messages, invocations that run until `finish` is set."""

    def __init__(self, pending: int, *, batch_size: int = 1, batching_window_s: float = 0) -> None:
        self.batch_size = batch_size
        self.batching_window_s = batching_window_s
        self.pending = [{"MessageId": f"m{n}"} for n in range(pending)]
        self.asked: list[int] = []  # the batches each receive asked for
        self.invoked: list[list[str]] = []
        self.finish = threading.Event()
        self.lock = threading.Lock()

    def batches_per_receive(self) -> int:
        return 1 if self.batching_window_s > 0 else max(1, 10 // self.batch_size)

    def receive(self, wait_s: float = 0.0, batches: int = 1) -> list[dict[str, Any]]:
        with self.lock:
            self.asked.append(batches)
            taken, self.pending = self.pending[: batches * self.batch_size], self.pending[batches * self.batch_size :]
        if not taken:
            time.sleep(0.01)
        return taken

    def invoke(self, messages: list[dict[str, Any]]) -> PollResult:
        with self.lock:
            self.invoked.append([m["MessageId"] for m in messages])
        self.finish.wait(5)
        return PollResult(len(messages), len(messages), 0, errored=False)


def until(predicate: Any, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_one_receive_fills_every_free_slot_with_one_message_invocations() -> None:
    source = HeldSource(pending=5)
    poller = QueuePoller(source, queue_class="critical", max_concurrency=3)  # type: ignore[arg-type]
    poller.start()
    try:
        until(lambda: len(source.invoked) == 3)
        time.sleep(0.05)  # no fourth invocation comes while the three run
        assert source.invoked == [["m0"], ["m1"], ["m2"]]
        assert source.asked[0] == 3  # the first receive asked for the three free slots at once
        assert all(asked >= 1 for asked in source.asked)
        assert len(source.pending) == 2  # nothing received for a slot in use
        source.finish.set()
        until(lambda: not source.pending and poller.in_flight == 0)
        assert sorted(m for batch in source.invoked for m in batch) == ["m0", "m1", "m2", "m3", "m4"]
    finally:
        source.finish.set()
        poller.stop(timeout_s=5)


def test_a_batching_window_keeps_one_batch_a_receive() -> None:
    source = HeldSource(pending=25, batch_size=10, batching_window_s=1)
    poller = QueuePoller(source, queue_class="bulk", max_concurrency=2)  # type: ignore[arg-type]
    poller.start()
    try:
        until(lambda: len(source.invoked) == 2)
        time.sleep(0.05)  # no third batch comes while the two run
        assert source.invoked == [[f"m{n}" for n in range(10)], [f"m{n}" for n in range(10, 20)]]
        assert set(source.asked) == {1}
    finally:
        source.finish.set()
        poller.stop(timeout_s=5)
