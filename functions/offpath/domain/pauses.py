"""Pause and resume (docs/flow-control.md): what is paused, since when and why, and the ports that keep it.

A queue class or a job type is paused by an admin (POST /queues/{name}/pause, POST /job-types/{name}/pause).
Its jobs stay queued and spend no attempt: the worker's admission step (logic/admission.py) sends a paused job's
message back for later, and a paused queue class is not polled at all (on AWS its event source mapping is
disabled; locally its poller stops). The pause state is one item of the jobs table (`PauseStore`), the source of
truth; the switch (`QueueSwitch`) follows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

PauseKind = Literal["queue", "job_type"]
# A pause's reason, as given (bounded: it is kept on the pause item and shown by every listing).
MAX_REASON_CHARS = 200


@dataclass(frozen=True)
class Pause:
    kind: PauseKind
    name: str
    paused_at: datetime
    reason: str | None = None


@dataclass(frozen=True)
class Pauses:
    """Every pause in force, by kind and name (nothing paused: both empty)."""

    queues: dict[str, Pause] = field(default_factory=dict)
    job_types: dict[str, Pause] = field(default_factory=dict)

    def of(self, kind: PauseKind, name: str) -> Pause | None:
        return (self.queues if kind == "queue" else self.job_types).get(name)


class PauseStore(Protocol):
    def pauses(self) -> Pauses:
        """Every pause in force (one read)."""

    def pause(self, pause: Pause) -> tuple[Pause, bool]:
        """Pause, unless already paused: (the pause in force, True when this call paused it). An earlier pause is
        kept as it is (its `paused_at` and reason)."""

    def resume(self, kind: PauseKind, name: str) -> Pause | None:
        """Lift the pause; the pause that was in force (None: it was not paused)."""


class QueueSwitch(Protocol):
    """What follows a queue class's pause state outside the table: its polling (the event source mapping on AWS,
    the poller locally) and its age alarm's actions. Idempotent: applying the same state again changes nothing."""

    def apply(self, queue: str, *, paused: bool) -> None: ...
