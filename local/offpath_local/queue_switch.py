"""The embedded runtime's side of a queue class's pause (offpath.domain.pauses.QueueSwitch): the queue class's
poller (the stand-in for its event source mapping) receives nothing while the queue is paused, and its age alarm's
actions are disabled on the emulator's CloudWatch, as the stack's switch does on AWS (offpath.adapters.queue_switch).

The table's pause item stays the source of truth: the runtime applies it to this switch when it starts (a pause
survives a restart), and every pause or resume through the API applies it again.
"""

from __future__ import annotations

import threading
from typing import Any


class LocalQueueSwitch:
    def __init__(self, alarms: Any = None) -> None:
        """`alarms`: the switch of the alarms' actions (an AwsQueueSwitch without mappings), or None."""
        self.alarms = alarms
        self._paused: set[str] = set()
        self._lock = threading.Lock()

    def apply(self, queue: str, *, paused: bool) -> None:
        with self._lock:
            if paused:
                self._paused.add(queue)
            else:
                self._paused.discard(queue)
        if self.alarms is not None:
            self.alarms.apply(queue, paused=paused)

    def is_paused(self, queue: str) -> bool:
        with self._lock:
            return queue in self._paused
