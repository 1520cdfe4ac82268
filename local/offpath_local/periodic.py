"""A part of the runtime that does one step every interval on its own thread, until stopped."""

from __future__ import annotations

import logging
import threading

logger = logging.getLogger("offpath.local")


class Periodic:
    """Subclasses implement `step()`; `start`, `request_stop` and `stop` are shared."""

    thread_name = "periodic"

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)

    def step(self) -> object:
        raise NotImplementedError

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        """Begin stopping without waiting (the runtime asks every part first, then waits for each)."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception:
                if not self._stop.is_set():
                    logger.exception("%s: a step failed; the next one follows", self.thread_name)
            self._stop.wait(self.interval_s)
