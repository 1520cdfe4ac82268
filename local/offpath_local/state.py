"""The runtime's data directory: who uses it (a lock) and what survives a restart (a snapshot).

The lock. A data directory belongs to one `offpath local` at a time: an exclusive `flock` on its
`lock` file, taken before anything in the directory is read or written and held until the process
ends. A second instance started on the same directory fails to take it, says which instance holds it
(the URL in `local.json`) and exits without changing anything.

The snapshot. The emulator (moto) keeps everything in memory, so the runtime writes what offpath needs
to `state.json` in the data directory, and loads it into the fresh emulator at start, before anything
is served:
- the jobs table's items, read from and put back into moto's table while no DynamoDB request runs (a
  Scan through the emulator's server took 14 s for 5,000 jobs on a loaded machine, and held up every
  other request meanwhile);
- every message of every queue of the stack (the queue classes' queues and DLQs, the Scheduler's DLQ
  and the asynchronous failures queue): body, message attributes, system attributes, receive count,
  first-sent and first-received times, and the times it becomes visible and stops being delayed. A
  message in flight cannot be read through the SQS API without receiving it (which would count as a
  receive and change its visibility), so messages are read from and put back into moto's queue objects:
  this relies on moto's internals, as the emulator's queue measurements do (emulator.py). Times are
  wall-clock instants: a message that was in flight when the runtime stopped becomes visible at the
  instant it would have; if that has passed at the restart, at once;
- the schedules of the schedule group the registry does not declare (the one-time `at()` schedules the
  api made for delayed jobs; the declared ones and the sweeper's are created from the registry at every
  start);
- the alarms' states (so a restart does not record a change that did not happen).

It is written atomically (a temporary file, then a rename) when the runtime stops, after the work in
flight has finished or been given up, and every few seconds while something changed. Between two snapshots
every change is in the journal (journal.py), on disk before its request is answered; at start the journal is
replayed over the snapshot, so a crash (even SIGKILL) loses nothing that was acknowledged. A snapshot that
cannot be read stops the start with an error naming it (`--fresh` starts empty): the runtime never serves an
empty system in place of a damaged one.

The directory is the user's alone (0700) and its files 0600: `events.jsonl` and `offpath.log` hold every
tenant's results. Not kept: CloudWatch metric data (the evaluator publishes afresh),
redrive tasks in progress, and Lambda's queue of asynchronous invocations not yet run (the sweeper sends
a job whose message never left).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from offpath.naming import TABLE_KEY
from offpath_local.journal import Journal
from offpath_local.periodic import Periodic

logger = logging.getLogger("offpath.local.state")

LOCK_FILE = "lock"
SNAPSHOT_FILE = "state.json"
SERVER_FILE = "local.json"
FORMAT = 1
SAVE_EVERY_S = 5.0
# A job item's partition key starts with this (offpath.adapters.dynamodb_store); every other item is a record.
JOB_PREFIX = "JOB#"
# A save never takes more than this share of the runtime's time (a large table takes a while to write out).
SAVE_SHARE = 0.2
# What a schedule's description says and the Scheduler returns, as create_schedule takes it back.
SCHEDULE_FIELDS = (
    "ScheduleExpression",
    "ScheduleExpressionTimezone",
    "FlexibleTimeWindow",
    "Target",
    "State",
    "Description",
    "ActionAfterCompletion",
)


class DataDirectoryInUse(Exception):
    """Another instance holds the data directory's lock."""


class UnreadableSnapshot(Exception):
    """The data directory's snapshot exists but cannot be read: the runtime does not start."""


def private_directory(path: Path) -> None:
    """The data directory, made (or made again) readable by its owner only."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)


class DataLock:
    """The exclusive lock of a data directory, held from `acquire` to `release` (or the end of the process)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Raises DataDirectoryInUse, having changed nothing in the directory, when another instance holds it."""
        private_directory(self.data_dir)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise DataDirectoryInUse(self._held_by()) from None
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def _held_by(self) -> str:
        try:
            server = json.loads((self.data_dir / SERVER_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            server = {}
        url = server.get("url") if isinstance(server, dict) else None
        pid = server.get("pid") if isinstance(server, dict) else None
        running = f"it serves {url}" + (f" (pid {pid})" if pid else "") if url else "it is still starting"
        return (
            f"the data directory {self.data_dir} is in use by another offpath local: {running}. "
            "Stop that one first, or give this one another --data directory."
        )


# -- the snapshot -----------------------------------------------------------------------------


@dataclass(frozen=True)
class StateSources:
    """Where the state lives in a running emulator."""

    scheduler: Any
    table_name: str
    queue_names: tuple[str, ...]
    schedule_group: str
    declared_schedules: frozenset[str]
    # moto's table and queues: their items and messages, and the reverse (emulator.py).
    read_items: Callable[[str], list[dict[str, Any]]]
    write_items: Callable[[str, list[dict[str, Any]]], int]
    read_messages: Callable[[str], list[dict[str, Any]] | None]
    write_messages: Callable[[str, list[dict[str, Any]]], int]
    alarm_states: Callable[[], dict[str, str]]


def capture(sources: StateSources) -> dict[str, Any]:
    """The state, queues first: a job whose message is captured is then found in the table (the api writes the
    job before it sends its message; the worker records an outcome before it deletes the message)."""
    queues: dict[str, list[dict[str, Any]]] = {}
    for name in sources.queue_names:
        messages = sources.read_messages(name)
        if messages is not None:
            queues[name] = messages
    return {
        "format": FORMAT,
        "saved_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "queues": queues,
        "table": {"name": sources.table_name, "items": sources.read_items(sources.table_name)},
        "schedules": _schedules(sources),
        "alarms": dict(sources.alarm_states()),
    }


def empty_state(table_name: str) -> dict[str, Any]:
    """The state of a data directory with no snapshot yet (its journal is replayed over it)."""
    return {"format": FORMAT, "queues": {}, "table": {"name": table_name, "items": []}, "schedules": [], "alarms": {}}


def restore(sources: StateSources, state: dict[str, Any]) -> dict[str, int]:
    """Puts a captured state into a fresh emulator (its resources already created). Returns what was restored,
    by kind: `jobs` counts the jobs, `records` the table's other items (idempotency keys, `ctx.once` marks,
    webhook endpoints...)."""
    saved = list((state.get("table") or {}).get("items") or [])
    # A snapshot made before the table's sort key (2026-12-01) holds items the table's key no longer fits.
    items = [item for item in saved if all(name in item for name in TABLE_KEY)]
    if len(items) < len(saved):
        logger.warning(
            "%d items of a snapshot made before the table's sort key were left out (the table's key changed)",
            len(saved) - len(items),
        )
    sources.write_items(sources.table_name, items)
    messages = 0
    for name, records in (state.get("queues") or {}).items():
        if name in sources.queue_names:
            messages += sources.write_messages(name, list(records))
    schedules = 0
    for schedule in state.get("schedules") or []:
        if _create_schedule(sources, schedule):
            schedules += 1
    jobs = sum(1 for item in items if str((item.get(TABLE_KEY[0]) or {}).get("S", "")).startswith(JOB_PREFIX))
    return {"jobs": jobs, "records": len(items) - jobs, "messages": messages, "schedules": schedules}


def _schedules(sources: StateSources) -> list[dict[str, Any]]:
    names: list[str] = []
    request: dict[str, Any] = {"GroupName": sources.schedule_group}
    while True:
        response = sources.scheduler.list_schedules(**request)
        names += [s["Name"] for s in response.get("Schedules", []) if s["Name"] not in sources.declared_schedules]
        token = response.get("NextToken")
        if not token:
            break
        request["NextToken"] = token
    schedules = []
    for name in names:
        try:
            detail = sources.scheduler.get_schedule(Name=name, GroupName=sources.schedule_group)
        except Exception as error:  # deleted meanwhile (a one-time schedule that fired)
            if _error_code(error) == "ResourceNotFoundException":
                continue
            raise
        schedules.append({"Name": name, **{k: detail[k] for k in SCHEDULE_FIELDS if detail.get(k) is not None}})
    return schedules


def _create_schedule(sources: StateSources, schedule: dict[str, Any]) -> bool:
    try:
        sources.scheduler.create_schedule(GroupName=sources.schedule_group, **schedule)
    except Exception as error:
        if _error_code(error) == "ConflictException":
            return False
        raise
    return True


def _error_code(error: Exception) -> str:
    response = getattr(error, "response", None)
    return str((response or {}).get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


class Snapshot:
    """The snapshot file of a data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / SNAPSHOT_FILE

    def load(self) -> dict[str, Any] | None:
        """The saved state; None when there is none. A file that cannot be read raises UnreadableSnapshot and is
        left as it is (nothing is served in place of what it held)."""
        if not self.path.exists():
            return None
        try:
            state = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(state, dict) or state.get("format") != FORMAT:
                raise ValueError(f"not a state of format {FORMAT}")
        except (OSError, ValueError) as error:
            raise UnreadableSnapshot(
                f"the saved state {self.path} cannot be read ({error}); nothing was started, so as not to serve an "
                "empty system in its place. Repair or restore that file, or start with --fresh to start empty "
                "(it discards the saved jobs)."
            ) from None
        return state

    def write(self, state: dict[str, Any]) -> None:
        temporary = self.path.with_name(f".{SNAPSHOT_FILE}.{os.getpid()}.tmp")
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump(state, file, separators=(",", ":"))
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o600)
        temporary.replace(self.path)
        directory = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename is on disk before the journal files it covers are deleted
        finally:
            os.close(directory)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


class StateSaver(Periodic):
    """Writes the snapshot every `interval_s` while the emulator's state changes (`version` says when it did),
    and never more often than keeps the time spent saving under SAVE_SHARE."""

    thread_name = "state-saver"

    def __init__(
        self,
        sources: StateSources,
        snapshot: Snapshot,
        version: Callable[[], Any],
        interval_s: float = SAVE_EVERY_S,
        journal: Journal | None = None,
    ) -> None:
        super().__init__(interval_s)
        self.journal = journal
        self.sources = sources
        self.snapshot = snapshot
        self.version = version
        self._saved_version: Any = None
        self._not_before = 0.0
        self.saves = 0

    def step(self) -> object:
        if time.monotonic() < self._not_before or self.version() == self._saved_version:
            return None
        return self.save()

    def save(self) -> dict[str, Any]:
        started = time.monotonic()
        version = self.version()
        # The journal moves to a new file first: the snapshot covers every record of the older ones.
        segment = self.journal.rotate() if self.journal is not None else None
        state = capture(self.sources)
        self.snapshot.write(state)
        if self.journal is not None and segment is not None:
            self.journal.remove_before(segment)
        self._saved_version = version
        self.saves += 1
        took = time.monotonic() - started
        self._not_before = started + took / SAVE_SHARE
        return state
