"""The emulator's journal: every change to what the data directory keeps is on disk before it is answered.

moto keeps everything in memory; the snapshot (state.py) is written every few seconds. Between two snapshots,
the journal: an append-only log of the emulator's state changes, in files `journal.<n>` of the data directory.
A request that changes the table, a queue or a schedule is answered only once its records are written and
fsync'd (group commit: one writer thread writes and fsyncs whatever the request threads appended meanwhile,
so concurrent requests share an fsync). A 202 from the local API therefore means what it says: the api's
writes and its SendMessage were on disk before the api function answered.

What is recorded is the backend's state after a change, not the request that made it, so that a replay is
deterministic and needs no moto (moto makes message ids and receipt handles afresh for every request):
- `item`: a table item as it is after a PutItem, UpdateItem, DeleteItem, BatchWriteItem or TransactWriteItems
  (or its absence), read from moto's table under the emulator's DynamoDB lock;
- `msg`: a message as it is when added to a queue (a send, or moto's move to the DLQ after maxReceiveCount
  receives: the same id, now in the DLQ);
- `recv`: a receive: the message's receive count, first-receive time and the instant it becomes visible again,
  so a message in flight at a crash stays in flight until its visibility timeout ends (as on SQS) and a poison
  message's receives still count towards its redrive; `vis`: ChangeMessageVisibility;
- `del`: a message deleted; `purge`: a queue purged;
- `sched`: a schedule as it is after a create or update (or its absence after a delete).

Replay applies the records, in order, to the snapshot's data (`apply`) before it is put into the fresh
emulator: each record is the state of one item, message or schedule, so applying a record twice, or one the
snapshot already holds, changes nothing. Compaction: before a snapshot is captured the journal moves to a new
file; once the snapshot is written the files before it are deleted. A crash between the two replays both files,
to the same result. A last line cut short by the crash was never acknowledged (its request had not been
answered) and is ignored.

Reads are not journaled; every request, a read too, is answered only once the changes made before it began are
on disk, so what a caller has read (a job SUCCEEDED) is never taken back by a crash. CloudWatch data and alarm
states are in the snapshot only.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

logger = logging.getLogger("offpath.local.journal")

PREFIX = "journal."
_ROTATE = object()


class Journal:
    """The journal files of a data directory, and the writer thread that makes appended records durable."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self._cond = threading.Condition()
        self._pending: list[Any] = []
        self._appended = 0
        self._durable = 0
        self._segment = 0
        self._file: Any = None
        self._thread: threading.Thread | None = None
        self._closing = False
        self.active = False
        self.fsyncs = 0

    # -- files --------------------------------------------------------------------------------

    def segments(self) -> list[int]:
        numbers = []
        for path in self.data_dir.glob(f"{PREFIX}*"):
            suffix = path.name[len(PREFIX) :]
            if suffix.isdigit():
                numbers.append(int(suffix))
        return sorted(numbers)

    def path(self, segment: int) -> Path:
        return self.data_dir / f"{PREFIX}{segment}"

    def records(self) -> Iterator[dict[str, Any]]:
        """Every complete record of the files on disk, oldest first."""
        for segment in self.segments():
            with open(self.path(segment), "rb") as file:
                for line in file:
                    if not line.endswith(b"\n"):
                        break  # cut short by a crash: never acknowledged
                    try:
                        record = json.loads(line)
                    except ValueError:
                        logger.warning("%s: a damaged record; the rest of the file is ignored", self.path(segment))
                        break
                    if isinstance(record, dict):
                        yield record

    def remove_all(self) -> None:
        for segment in self.segments():
            self.path(segment).unlink(missing_ok=True)

    def remove_before(self, segment: int) -> None:
        for number in self.segments():
            if number < segment:
                self.path(number).unlink(missing_ok=True)

    # -- writing ------------------------------------------------------------------------------

    def start(self) -> None:
        """Records are taken from now on, into a file after those on disk."""
        existing = self.segments()
        self._segment = (existing[-1] + 1) if existing else 1
        self._file = self._open(self._segment)
        self._closing = False
        self._thread = threading.Thread(target=self._write_loop, name="journal", daemon=True)
        self._thread.start()
        self.active = True

    def _open(self, segment: int) -> Any:
        fd = os.open(self.path(segment), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        _fsync_directory(self.data_dir)
        return os.fdopen(fd, "ab", buffering=0)

    def append(self, record: dict[str, Any]) -> int:
        """The record's sequence number (0: not journaled, the journal is not taking records)."""
        if not self.active:
            return 0
        line = json.dumps(record, separators=(",", ":")).encode() + b"\n"
        with self._cond:
            if not self.active:
                return 0
            self._pending.append(line)
            self._appended += 1
            self._cond.notify_all()
            return self._appended

    @property
    def appended(self) -> int:
        """The sequence number of the last record appended (on disk or not yet)."""
        return self._appended

    def wait(self, sequence: int) -> None:
        """Returns once the record `sequence` and every one before it are on disk."""
        if sequence <= self._durable:
            return
        with self._cond:
            while self._durable < sequence and self._thread is not None:
                self._cond.wait(1.0)

    def rotate(self) -> int:
        """Moves on to a new file; every record appended before is on disk in the older ones. Returns the new
        file's number (the files before it are covered by a snapshot captured from now on)."""
        with self._cond:
            if self._thread is None:
                return self._segment
            self._pending.append(_ROTATE)
            self._appended += 1
            target = self._appended
            self._cond.notify_all()
        self.wait(target)
        return self._segment

    def stop(self) -> None:
        with self._cond:
            self.active = False
            self._closing = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._cond:
            self._thread = None
            self._cond.notify_all()
        if self._file is not None:
            self._file.close()
            self._file = None

    def _write_loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    self._cond.wait()
                if not self._pending and self._closing:
                    return
                batch, self._pending = self._pending, []
                upto = self._appended
            try:
                self._write(batch)
            except OSError:
                logger.exception("the journal could not be written")
            with self._cond:
                self._durable = upto
                self._cond.notify_all()

    def _write(self, batch: list[Any]) -> None:
        lines: list[bytes] = []
        for entry in batch:
            if entry is _ROTATE:
                self._sync(lines)
                lines = []
                self._file.close()
                self._segment += 1
                self._file = self._open(self._segment)
            else:
                lines.append(entry)
        self._sync(lines)

    def _sync(self, lines: list[bytes]) -> None:
        if not lines:
            return
        self._file.write(b"".join(lines))
        os.fsync(self._file.fileno())
        self.fsyncs += 1


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- replay -----------------------------------------------------------------------------------


def apply(
    state: dict[str, Any], records: Iterable[dict[str, Any]], table_key: tuple[str, ...], schedule_group: str
) -> int:
    """Applies journal records, in order, to a snapshot's data (state.py's `capture` format), in place.
    Returns how many records were applied."""
    table = state.setdefault("table", {})
    table_name = table.get("name")
    items = {_item_key(item, table_key): item for item in table.get("items") or []}
    queues: dict[str, dict[str, dict[str, Any]]] = {
        name: {str(m["id"]): m for m in messages} for name, messages in (state.get("queues") or {}).items()
    }
    where = {message_id: name for name, messages in queues.items() for message_id in messages}
    schedules = {s["Name"]: s for s in state.get("schedules") or []}
    applied = 0
    for record in records:
        kind = record.get("k")
        applied += 1
        if kind == "item":
            if table_name is None:
                table_name = table["name"] = record["table"]
            if record["table"] != table_name:
                continue
            key = _item_key(record["key"], table_key)
            if record.get("item") is None:
                items.pop(key, None)
            else:
                items[key] = record["item"]
        elif kind == "msg":
            message = record["m"]
            message_id = str(message["id"])
            previous = where.get(message_id)
            if previous is not None and previous != record["queue"]:
                queues[previous].pop(message_id, None)
            queues.setdefault(record["queue"], {})[message_id] = message
            where[message_id] = record["queue"]
        elif kind in ("recv", "vis"):
            found = where.get(str(record["id"]))
            message = queues[found].get(str(record["id"])) if found is not None else None
            if message is not None:
                message.update(record["fields"])
        elif kind == "del":
            queues.get(record["queue"], {}).pop(str(record["id"]), None)
            where.pop(str(record["id"]), None)
        elif kind == "purge":
            for message_id in queues.pop(record["queue"], {}):
                where.pop(message_id, None)
        elif kind == "sched":
            if record.get("group") != schedule_group:
                continue
            if record.get("s") is None:
                schedules.pop(record["name"], None)
            else:
                schedules[record["name"]] = record["s"]
        else:
            applied -= 1
    table["items"] = list(items.values())
    state["queues"] = {name: list(messages.values()) for name, messages in queues.items()}
    state["schedules"] = list(schedules.values())
    return applied


def _item_key(item: dict[str, Any], table_key: tuple[str, ...]) -> str:
    return json.dumps([item.get(name) for name in table_key], sort_keys=True)
