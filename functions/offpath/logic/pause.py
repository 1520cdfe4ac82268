"""Pause and resume a queue class or a job type (admin), and the worker's pause flag (docs/flow-control.md).

The pause state is one item of the jobs table (`PauseStore`): the source of truth, what GET /queues and
GET /job-types show. A queue class's switch (`QueueSwitch`: its event source mapping and its age alarm's actions on
AWS, its poller locally) follows it, in the order that leaves the table's state in force if the second step fails:
a pause writes the item, then switches polling off; a resume switches polling on, then removes the item. A failure
between the two is answered 503 and healed by the next pause or resume of the queue, which applies the switch again
whatever the item says (both steps are idempotent). Meanwhile the worker enforces the item itself: a paused queue
class whose mapping is still on has its jobs' messages sent back unclaimed, as a paused job type's are.

The worker reads the item through `PauseFlags`, cached for `PAUSE_FLAGS_TTL_S` per execution environment: one
GetItem per environment every 10 s, shared by every job it runs; a pause or a resume reaches every worker within
that bound. A paused job type's message comes back after `PAUSED_WAIT_S`, so a resumed job type's jobs start
within PAUSE_FLAGS_TTL_S + PAUSED_WAIT_S; a paused queue class's, which arrives only while its polling is being
switched, after `PAUSED_QUEUE_WAIT_S`, and the worker reads the item again before it believes that pause.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from offpath.domain.errors import OffpathError, StoreUnavailableError
from offpath.domain.pauses import MAX_REASON_CHARS, Pause, PauseKind, Pauses, PauseStore, QueueSwitch

if TYPE_CHECKING:
    from offpath.domain.clock import Clock
    from offpath.domain.registry import Registry
    from offpath.logic.admission import Wait

logger = logging.getLogger("offpath.pause")

# How stale a worker's view of the pauses may be (seconds): its cached flag is read again after this long.
PAUSE_FLAGS_TTL_S = 10.0
# A paused job type's message comes back after this long (SQS visibility), unclaimed.
PAUSED_WAIT_S = 30
# A paused queue class's message reaches a worker only while its polling is being switched (a pause whose switch
# is still settling, or a resume that switched polling on a moment before it lifted the item): it comes back
# sooner, and the worker reads the pause item again (at most once per QUEUE_RECHECK_S) before it believes a pause
# of its own queue class. A resumed queue's jobs then start within seconds, not after PAUSED_WAIT_S.
PAUSED_QUEUE_WAIT_S = 5
QUEUE_RECHECK_S = 1.0


class UnknownPauseTargetError(OffpathError):
    """No queue class or job type of that name (404)."""

    def __init__(self, kind: PauseKind) -> None:
        super().__init__("no such queue" if kind == "queue" else "no such job type")
        self.kind = kind


def _known(kind: PauseKind, name: str, registry: Registry) -> None:
    names = registry.queues if kind == "queue" else registry.job_types
    if name not in names:
        raise UnknownPauseTargetError(kind)


def pause(
    kind: PauseKind,
    name: str,
    *,
    reason: str | None,
    registry: Registry,
    store: PauseStore,
    switch: QueueSwitch | None,
    clock: Clock,
) -> tuple[Pause, bool]:
    """The pause in force and whether this call made it (a second pause keeps the first one's `paused_at`)."""
    _known(kind, name, registry)
    text = reason[:MAX_REASON_CHARS] if reason else None
    state, made = store.pause(Pause(kind, name, clock.now(), text))
    if kind == "queue" and switch is not None:
        switch.apply(name, paused=True)  # again on a repeated pause: heals a switch an earlier failure left on
    logger.info("%s %s paused", kind, name, extra={"new": made})
    return state, made


def resume(
    kind: PauseKind, name: str, *, registry: Registry, store: PauseStore, switch: QueueSwitch | None
) -> Pause | None:
    """Lift the pause; the one that was in force (None: it was not paused, nothing changed but the switch)."""
    _known(kind, name, registry)
    if kind == "queue" and switch is not None:
        switch.apply(name, paused=False)  # first: if it fails, the queue stays paused as the table says
    lifted = store.resume(kind, name)
    logger.info("%s %s resumed", kind, name, extra={"was_paused": lifted is not None})
    return lifted


class PauseFlags:
    """The worker's view of the pauses: the pause item read at most once per `ttl_s` (shared by the threads of one
    environment). A read that fails keeps the last view (none at first: nothing paused) and is tried again at the
    next lookup after `retry_s`: an outage of the table never stops a worker that runs jobs."""

    def __init__(
        self,
        store: PauseStore,
        *,
        queue: str | None = None,
        ttl_s: float = PAUSE_FLAGS_TTL_S,
        retry_s: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.queue = queue
        self.ttl_s = ttl_s
        self.retry_s = retry_s
        self.monotonic = monotonic
        self._view = Pauses()
        self._until = float("-inf")
        self._read_at = float("-inf")  # when the item was last read (or a read was tried)
        self._lock = threading.Lock()
        self.reads = 0

    def current(self) -> Pauses:
        with self._lock:
            now = self.monotonic()
            if now < self._until:
                return self._view
            self._read_at = now
            try:
                self.reads += 1
                self._view = self.store.pauses()
                self._until = now + self.ttl_s
            except StoreUnavailableError:
                logger.warning("the pause flags could not be read; the last view stands", exc_info=True)
                self._until = now + self.retry_s
            return self._view

    def reason(self, job_type: str) -> str | None:
        """Why a job of this type on this worker's queue class waits (None: it does not)."""
        view = self.current()
        if self.queue is not None and self.queue in view.queues:
            view = self._again()
        if self.queue is not None and self.queue in view.queues:
            return f"queue {self.queue} is paused"
        if job_type in view.job_types:
            return f"job type {job_type} is paused"
        return None

    def _again(self) -> Pauses:
        """The view read again if it is older than QUEUE_RECHECK_S: a message of a queue class the view says is
        paused arrived, so its polling is on, and the pause may have been lifted since the view was read."""
        with self._lock:
            if self.monotonic() - self._read_at >= QUEUE_RECHECK_S:
                self._until = float("-inf")
        return self.current()


def paused(message: Any, job_type: Any, ports: Any, *, now: datetime) -> Wait | None:
    """Admission step: a job of a paused job type (or on a paused queue class) waits, unclaimed."""
    flags: PauseFlags | None = getattr(ports, "pauses", None)
    if flags is None:
        return None
    why = flags.reason(job_type.name)
    if why is None:
        return None
    from offpath.logic.admission import Wait

    wait_s = PAUSED_QUEUE_WAIT_S if why.startswith("queue ") else PAUSED_WAIT_S
    logger.info("the job waits: %s", why, extra={"retry_in_s": wait_s})
    return Wait(wait_s, "paused")
