"""Pollers that run a queue class's worker as the Lambda event source mapping for SQS does.

Per queue class: batches of its `batch_size` gathered within its batching window (see
event_source.py for one batch: partial batch responses, errors, timeouts), at most
`max_concurrency` batches in flight at once. A batch is received only when an invocation slot is
free, so no message is received and left waiting: every receive counts towards the redrive policy.
While a batch is in flight its messages stay invisible (the queue's visibility timeout).

A paused queue class (offpath_local.queue_switch) is not polled, as its disabled mapping is not on AWS; the
batches in flight when it is paused finish.

A receive without a batching window asks for as many batches as there are free invocation slots (up to 10
messages), each batch its own invocation, as AWS's pollers split what they receive.

Differences from AWS: the mapping starts at its maximum concurrency at once (AWS starts at five
concurrent batches and adds up to 300 a minute), and the receive is one long poll at a time per queue.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from offpath_local.event_source import PollResult, SqsEventSource

logger = logging.getLogger("offpath.local.pollers")

LONG_POLL_S = 1
ERROR_PAUSE_S = 1.0
# How often a paused poller looks whether its queue class was resumed.
PAUSED_LOOK_S = 0.2


class QueuePoller:
    def __init__(
        self,
        source: SqsEventSource,
        *,
        queue_class: str,
        max_concurrency: int,
        on_result: Callable[[str, PollResult], None] | None = None,
        paused: Callable[[], bool] | None = None,
    ) -> None:
        """`paused`: true while the queue class is paused (its mapping disabled): nothing is received."""
        self.source = source
        self.paused = paused
        self.queue_class = queue_class
        self.max_concurrency = max(1, max_concurrency)
        self.on_result = on_result
        self._slots = threading.BoundedSemaphore(self.max_concurrency)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"poller-{queue_class}", daemon=True)
        self._in_flight = 0
        self._lock = threading.Lock()

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        """Begin stopping without waiting (the runtime asks every part first, then waits for each)."""
        self._stop.set()

    def stop(self, timeout_s: float = 10.0) -> None:
        """No new batch is received; batches in flight finish (up to `timeout_s`)."""
        self.request_stop()
        self.wait(time.monotonic() + timeout_s)
        self.shutdown()

    def wait(self, deadline: float, hurry: threading.Event | None = None) -> int:
        """After `request_stop`: waits until the receiving loop has ended and no batch is in flight, until the
        `deadline` (time.monotonic()) or until `hurry` is set. Returns the batches still in flight."""
        self._thread.join(timeout=max(0.0, min(LONG_POLL_S * 3, deadline - time.monotonic())))
        while time.monotonic() < deadline and not (hurry is not None and hurry.is_set()):
            if self.in_flight == 0 and not self._thread.is_alive():
                break
            time.sleep(0.05)
        return self.in_flight

    def shutdown(self) -> None:
        """Lets go of the batches still in flight: their daemon threads end when their function returns, or with
        the process, and their messages return to the queue when their visibility timeout ends."""
        self._thread.join(timeout=LONG_POLL_S * 3)

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self.paused is not None and self.paused():
                self._stop.wait(PAUSED_LOOK_S)
                continue
            if not self._slots.acquire(timeout=0.5):
                continue
            held = 1 + self._more_slots(self.source.batches_per_receive() - 1)
            try:
                messages = self.source.receive(wait_s=LONG_POLL_S, batches=held)
            except Exception:
                self._release(held)
                if not self._stop.is_set():
                    logger.warning("receive from the %s queue failed; retrying", self.queue_class, exc_info=True)
                    self._stop.wait(ERROR_PAUSE_S)
                continue
            size = self.source.batch_size
            batches = [messages[at : at + size] for at in range(0, len(messages), size)]
            self._release(held - len(batches))
            for batch in batches:
                with self._lock:
                    self._in_flight += 1
                # A daemon thread per batch (the slots bound them): one still running when the runtime stops is
                # abandoned, as Lambda ends an environment, instead of holding the process until its job's timeout.
                threading.Thread(
                    target=self._invoke, args=(batch,), name=f"worker-{self.queue_class}", daemon=True
                ).start()

    def _more_slots(self, most: int) -> int:
        """Takes up to `most` further free invocation slots without waiting: one receive fills them all."""
        taken = 0
        while taken < most and self._slots.acquire(blocking=False):
            taken += 1
        return taken

    def _release(self, count: int) -> None:
        for _ in range(count):
            self._slots.release()

    def _invoke(self, messages: list[dict[str, Any]]) -> None:
        try:
            result = self.source.invoke(messages)
            if self.on_result:
                self.on_result(self.queue_class, result)
        except Exception:
            if not self._stop.is_set():
                logger.exception("the %s worker's batch could not be completed", self.queue_class)
        finally:
            self._done()

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1
        self._slots.release()
