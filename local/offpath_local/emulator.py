"""The AWS emulator: moto's server on a loopback port, in this process.

Two things are added in front of moto's WSGI application, both to reproduce AWS behaviours the pipeline
relies on (shared AWS-SEMANTICS.md):
- DynamoDB requests are applied one at a time, so a conditional write is atomic with respect to every
  other request, as a single-item conditional write is on DynamoDB (moto evaluates the condition and
  writes in two steps, and its server runs requests on many threads);
- SQS `StartMessageMoveTask`, `ListMessageMoveTasks` and `CancelMessageMoveTask`, which moto lacks, are
  answered by `MessageMoveTasks` (see move_tasks.py).

Two corrections to moto's queues, made where they are defined: a queue's messages are added and deleted
one change at a time (moto's server could lose a message sent while another was deleted, or bring a deleted
one back); and, for speed only, they count their visible, in-flight and delayed messages reading the clock
once per count rather than once per message (with thousands of messages queued, each receive took a second).
One correction to moto's DynamoDB: a TransactWriteItems backs up only its own items before it applies, not the
whole table (moto's deep copy of the table, its items and its stream for every transaction made each one cost
what the table had ever held; see `_roll_transactions_back_item_by_item`).
Two more, for speed only, with nothing a client sees changed (tests/e2e/test_emulator_reads.py): an update
expression is parsed once per distinct text (moto parsed it twice per UpdateItem), and GetRecords writes a
stream's records out as moto keeps them (moto serialized each image again, attribute by attribute: the largest
cost per job of the local runtime after the writes themselves).
One addition: a standard queue hands out its visible messages as an SQS fair queue does, quiet tenants'
(`MessageGroupId`) before a noisy one's; a stand-in, described with its differences in fair_queues.py.

`QueuePeek` reads queue depths and message ages from moto's own state, without receiving any message
(a receive would count towards the redrive policy's maxReceiveCount). `export_messages` and
`import_messages` read and put back a queue's messages, in flight or not, and `Emulator.export_items` and
`import_items` a table's items, for the snapshot of the data directory (state.py); `Emulator.version` says
whether anything that snapshot keeps may have changed.

Every change to what the data directory keeps is journaled (journal.py) when the runtime gives the emulator a
journal: the hooks below record the backend's state after each change, and a request is answered only once its
records are on disk.

The emulator answers only the runtime: every request's path starts with a secret prefix made at each start
(part of the endpoint URL the runtime's clients and functions are given); any other request, `/moto-api/reset`
included, is refused 403 before moto sees it.
"""

from __future__ import annotations

import base64
import calendar
import contextlib
import copy
import functools
import hmac
import io
import json
import logging
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.config import Config

from offpath_local.fair_queues import fair_order
from offpath_local.journal import Journal
from offpath_local.move_tasks import MOVE_TASK_TARGETS, MessageMoveTasks
from offpath_local.resources import ACCOUNT_ID, REGION

logger = logging.getLogger("offpath.local.emulator")

CREDENTIALS = {"aws_access_key_id": "local", "aws_secret_access_key": "local", "aws_session_token": "local"}
CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3},
    max_pool_connections=64,
    connect_timeout=2,
    read_timeout=30,
)
DYNAMODB_TARGET_PREFIX = "DynamoDB_20120810."
# ApproximateAgeOfOldestMessage skips a message received this often (it moves to the back of the queue).
AGE_RECEIVE_LIMIT = 3

# Update expressions whose parsed tree is kept (`_parse_each_update_expression_once`): offpath writes a few dozen.
UPDATE_EXPRESSIONS_KEPT = 512
SQS_TARGET_PREFIX = "AmazonSQS."
# Requests that change nothing the data directory's snapshot keeps (everything else is counted as a change).
READ_OPERATIONS = frozenset(
    {
        "GetItem",
        "BatchGetItem",
        "Query",
        "Scan",
        "DescribeTable",
        "DescribeTimeToLive",
        "ListTables",
        "GetQueueAttributes",
        "GetQueueUrl",
        "ListQueues",
        "ListQueueTags",
        "ListDeadLetterSourceQueues",
        "ListMessageMoveTasks",
    }
)
SCHEDULER_PATHS = ("/schedules", "/schedule-groups")
# DynamoDB requests whose changes are journaled (tables and their settings are made afresh at every start).
ITEM_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})
REFUSED_BODY = json.dumps(
    {"error": {"code": "forbidden", "message": "the emulator answers only the offpath local runtime that started it"}}
).encode()

# The journal the hooks record into (one emulator per process: moto's state is per process), and the sequence
# number of the last record each request thread appended.
_journal: Journal | None = None
_appended = threading.local()


def _note(record: dict[str, Any]) -> None:
    journal = _journal
    if journal is None or not journal.active:
        return
    sequence = journal.append(record)
    if sequence:
        _appended.sequence = sequence


def _journaling() -> bool:
    journal = _journal
    return journal is not None and journal.active


def _wait_until_journaled() -> None:
    """Returns once the records this thread's request appended are on disk (group commit)."""
    sequence = getattr(_appended, "sequence", 0)
    if sequence and _journal is not None:
        _appended.sequence = 0
        _journal.wait(sequence)


StartResponse = Callable[..., Any]


class _EmulatorApp:
    def __init__(self, app: Callable[..., Iterable[bytes]], move_tasks: MessageMoveTasks, prefix: str) -> None:
        self.app = app
        self.move_tasks = move_tasks
        self.prefix = prefix
        self.dynamodb_lock = threading.Lock()
        # Requests that may have changed the table, a queue or a schedule, counted once they are applied.
        self.changes = 0

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO", ""))
        given, _, rest = path.partition("/")[2].partition("/")
        if not hmac.compare_digest(given.encode(), self.prefix.encode()):
            start_response(
                "403 Forbidden", [("Content-Type", "application/json"), ("Content-Length", str(len(REFUSED_BODY)))]
            )
            return [REFUSED_BODY]
        environ["PATH_INFO"] = "/" + rest
        for name in ("RAW_URI", "REQUEST_URI"):  # moto matches some services' paths on the raw URI
            raw = environ.get(name)
            if raw:
                environ[name] = raw.replace(f"/{self.prefix}", "", 1) or "/"
        journal = _journal
        if journal is not None and journal.active:
            # Answered once every change made before it began is on disk too: what a caller reads (a job
            # SUCCEEDED) is never taken back by a crash.
            _appended.sequence = journal.appended
        try:
            return self._answer(environ, start_response)
        finally:
            _wait_until_journaled()

    def _answer(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        operation = target.rpartition(".")[2]
        if target.startswith(DYNAMODB_TARGET_PREFIX):
            request = None
            if operation in ITEM_WRITES and _journaling():
                length = int(environ.get("CONTENT_LENGTH") or 0)
                request = environ["wsgi.input"].read(length) if length else b""
                environ["wsgi.input"] = io.BytesIO(request)
            status: list[str] = []

            def started(code: str, headers: Any, *rest: Any) -> Any:
                status.append(code)
                return start_response(code, headers, *rest)

            with self.dynamodb_lock:
                body = list(self.app(environ, started))
                if request is not None and status and status[0].startswith("200"):
                    _journal_items(operation, request)
            if operation not in READ_OPERATIONS:
                self.changes += 1
            return body
        if target in MOVE_TASK_TARGETS:
            return self.move_tasks.handle(target, environ, start_response)
        if target.startswith(SQS_TARGET_PREFIX):
            body = list(self.app(environ, start_response))
            # An empty receive changes nothing; one that returns messages changes their receive counts.
            if operation not in READ_OPERATIONS and (
                operation != "ReceiveMessage" or any(b'"Messages"' in chunk for chunk in body)
            ):
                self.changes += 1
            return body
        body = list(self.app(environ, start_response))
        if environ.get("REQUEST_METHOD") in {"POST", "PUT", "PATCH", "DELETE"} and str(
            environ.get("PATH_INFO", "")
        ).startswith(SCHEDULER_PATHS):
            self.changes += 1
        return body


class Emulator:
    """moto's ThreadedMotoServer on 127.0.0.1 (a free port unless one is given)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, journal: Journal | None = None) -> None:
        self.host = host
        self.port = port
        self.endpoint = ""  # the URL the runtime's clients use: the address and the secret prefix
        self.address = ""  # the address alone (a request to it without the prefix is refused)
        self.journal = journal
        self._prefix = secrets.token_hex(16)
        self._server: Any = None
        self._app: _EmulatorApp | None = None
        self.move_tasks = MessageMoveTasks(self.client)

    def start(self) -> None:
        from moto.server import ThreadedMotoServer

        # moto's server logs every request through werkzeug's logger.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server = ThreadedMotoServer(ip_address=self.host, port=self.port, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.port = port
        self.address = f"http://{host}:{port}"
        self.endpoint = f"{self.address}/{self._prefix}"
        wsgi_server = self._server._server
        dispatcher = wsgi_server.app
        # moto finds a request's service by listing its own package directory and trying every URL pattern,
        # on every request; the answer for a host never changes.
        if hasattr(dispatcher, "get_backend_for_host"):
            dispatcher.get_backend_for_host = functools.lru_cache(maxsize=512)(dispatcher.get_backend_for_host)
        self._app = _EmulatorApp(dispatcher, self.move_tasks, self._prefix)
        wsgi_server.app = self._app
        _count_queue_messages_at_one_instant()
        _hand_out_quiet_tenants_first()
        _change_queue_messages_one_at_a_time()
        _roll_transactions_back_item_by_item()
        _parse_each_update_expression_once()
        _answer_stream_records_as_they_are()
        _journal_receives_and_schedules()
        global _journal
        _journal = self.journal
        # moto keeps its state per process: start from nothing.
        import urllib.request

        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")  # noqa: S310 - loopback
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback emulator
            response.read()

    def stop(self) -> None:
        self.move_tasks.stop()
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self.journal is not None:
            self.journal.stop()

    def stream_reader(self) -> StreamReader:
        """The tables' streams, read in this process (the stream player's reads)."""
        return StreamReader(self._dynamodb_lock)

    def client(self, service: str) -> Any:
        return boto3.session.Session().client(
            service, endpoint_url=self.endpoint, region_name=REGION, config=CLIENT_CONFIG, **CREDENTIALS
        )

    def export_items(self, table_name: str) -> list[dict[str, Any]]:
        """Every item of a table (DynamoDB JSON), read from moto's table while no DynamoDB request runs. A Scan
        through the server took 14 s for 5,000 jobs on a loaded machine, holding up every other request; this
        takes milliseconds."""
        table = _dynamodb_backend().get_table(table_name)
        with self._dynamodb_lock():
            return [item.to_json()["Attributes"] for item in table.all_items()]

    def import_items(self, table_name: str, items: list[dict[str, Any]]) -> int:
        """Puts items (DynamoDB JSON) into a table as PutItem would, validated by moto."""
        backend = _dynamodb_backend()
        with self._dynamodb_lock():
            for item in items:
                backend.put_item(table_name, item, overwrite=True)
        return len(items)

    def _dynamodb_lock(self) -> Any:
        return self._app.dynamodb_lock if self._app is not None else contextlib.nullcontext()

    def version(self, queue_names: Iterable[str] = ()) -> tuple[int, tuple[int, ...]]:
        """Changes when the table, a queue or a schedule may have changed: the requests that change them, and
        the queues' message counts (a receive can move a message to its DLQ without returning any)."""
        changes = self._app.changes if self._app is not None else 0
        backend = _sqs_backend()
        counts = tuple(
            len(queue._messages) if (queue := backend.queues.get(name) if backend else None) is not None else -1
            for name in queue_names
        )
        return changes, counts


class StreamReader:
    """A table's stream, read in this process: DescribeStream, GetShardIterator and GetRecords as a boto3 client
    parses their answers (what the stream player needs of them), without the HTTP round trip, the answer's JSON
    or botocore's parsing of it (together about 5% of the local runtime's work per job). An iterator is a
    position in moto's shard, kept here until it is used (moto keeps every iterator it ever made). Only LATEST
    and TRIM_HORIZON iterators are made (the player's). The shard is read while no DynamoDB request runs
    (`applying`: the emulator's lock), so a read never sees the records of a transaction that is then refused
    and its records dropped (a position past them would skip the records written next).
    tests/e2e/test_emulator_reads.py compares the records with what a client reads."""

    def __init__(self, applying: Callable[[], Any] = contextlib.nullcontext) -> None:
        self._positions: dict[str, tuple[str, int]] = {}
        self._lock = threading.Lock()
        self._applying = applying

    def describe_stream(self, StreamArn: str) -> dict[str, Any]:
        shard = self._shard(StreamArn)
        return {"StreamDescription": {"StreamArn": StreamArn, "Shards": [shard.to_json()] if shard else []}}

    def get_shard_iterator(self, StreamArn: str, ShardId: str, ShardIteratorType: str) -> dict[str, Any]:
        shard = self._shard(StreamArn)
        if shard is None or shard.id != ShardId:
            raise ValueError(f"no shard {ShardId} on {StreamArn}")
        if ShardIteratorType == "TRIM_HORIZON":
            position = shard.starting_sequence_number
        elif ShardIteratorType == "LATEST":
            with self._applying():
                position = shard.starting_sequence_number + len(shard.items)
        else:
            raise ValueError(f"only LATEST and TRIM_HORIZON iterators are made here, not {ShardIteratorType}")
        return {"ShardIterator": self._iterator(StreamArn, position)}

    def get_records(self, ShardIterator: str, Limit: int = 1000) -> dict[str, Any]:
        with self._lock:
            stream_arn, position = self._positions[ShardIterator]
        shard = self._shard(stream_arn)
        with self._applying():
            kept = shard.get(position, Limit) if shard is not None else []
        records = [_as_parsed(record) for record in kept]
        answer = {"Records": records, "NextShardIterator": self._iterator(stream_arn, position + len(records))}
        with self._lock:  # used: the next read starts at the answer's iterator (a failed read keeps this one)
            del self._positions[ShardIterator]
        return answer

    def _iterator(self, stream_arn: str, position: int) -> str:
        iterator = secrets.token_hex(16)
        with self._lock:
            self._positions[iterator] = (stream_arn, position)
        return iterator

    @staticmethod
    def _shard(stream_arn: str) -> Any:
        table_name = stream_arn.split(":", 6)[5].split("/")[1]
        return _dynamodb_backend().get_table(table_name).stream_shard


def _as_parsed(record: dict[str, Any]) -> dict[str, Any]:
    """A copy of moto's record as boto3 parses GetRecords' answer: its time an aware datetime cut to the
    millisecond (the JSON protocol's precision); the images copied, so nothing done with them changes moto's."""
    change = record["dynamodb"]
    created = change["ApproximateCreationDateTime"]
    created = (created if created.tzinfo else created.replace(tzinfo=UTC)).replace(
        microsecond=created.microsecond // 1000 * 1000
    )
    return {**record, "dynamodb": {**_copied(change), "ApproximateCreationDateTime": created}}


def _copied(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copied(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_copied(inner) for inner in value]
    return value


def _dynamodb_backend(account_id: str = ACCOUNT_ID, region: str = REGION) -> Any:
    from moto.dynamodb.models import dynamodb_backends

    return dynamodb_backends[account_id][region]


def _sqs_backend(account_id: str = ACCOUNT_ID, region: str = REGION) -> Any:
    try:
        from moto.sqs.models import sqs_backends

        return sqs_backends[account_id][region]
    except Exception:
        return None


# A message's state in moto, as the snapshot keeps it (JSON values only).
_MESSAGE_FIELDS = (
    "approximate_receive_count",
    "sent_timestamp",
    "approximate_first_receive_timestamp",
    "visible_at",
    "delayed_until",
    "deduplication_id",
    "group_id",
    "sequence_number",
)


def export_messages(queue_name: str) -> list[dict[str, Any]] | None:
    """Every message of a queue (visible, in flight or delayed), oldest first; None if the queue is not in moto.
    Relies on moto's queue objects: SQS has no call that reads a message in flight."""
    backend = _sqs_backend()
    queue = backend.queues.get(queue_name) if backend is not None else None
    if queue is None:
        return None
    return [_message_record(message) for message in list(queue._messages)]


def _message_record(message: Any) -> dict[str, Any]:
    record = {"id": message.id, "body": message.body}
    record["message_attributes"] = dict(message.message_attributes or {})
    record["system_attributes"] = dict(message.system_attributes or {})
    record.update({field: getattr(message, field, None) for field in _MESSAGE_FIELDS})
    return record


def import_messages(queue_name: str, records: list[dict[str, Any]]) -> int:
    """Puts exported messages back into a queue as they were (identifiers, receive counts, times). A message that
    had been received gets a new receipt handle: the old one belonged to a process that is gone."""
    from moto.sqs.models import Message
    from moto.sqs.utils import generate_receipt_handle

    backend = _sqs_backend()
    queue = backend.queues.get(queue_name) if backend is not None else None
    if queue is None:
        return 0
    for record in records:
        message = Message(str(record["id"]), str(record["body"]), dict(record.get("system_attributes") or {}))
        message.message_attributes = dict(record.get("message_attributes") or {})
        for field in _MESSAGE_FIELDS:
            if record.get(field) is not None:
                setattr(message, field, record[field])
        if message.approximate_receive_count:
            message.receipt_handle = generate_receipt_handle()
        queue.add_message(message)
    return len(records)


def _count_queue_messages_at_one_instant() -> None:
    """moto decides whether each message is visible (or delayed) by reading the clock once per message, and a
    receive lists the queue's messages and counts them several times: with thousands of messages queued (a
    burst) a receive took over a second. The same lists, with the clock read once per list. The semantics
    are unchanged: visible means received before now minus the visibility timeout, delayed means delayed
    past now."""
    try:
        from moto.core.utils import unix_time_millis
        from moto.sqs.models import Queue
    except ImportError:  # another moto layout: left as it is
        return
    if getattr(Queue, "_offpath_counts_at_one_instant", False):
        return

    def messages(queue: Any) -> list[Any]:
        now = unix_time_millis()
        return [m for m in queue._messages if now > m.visible_at and not now < m.delayed_until]

    def delayed(queue: Any) -> int:
        now = unix_time_millis()
        return sum(1 for m in queue._messages if now < m.delayed_until)

    def not_visible(queue: Any) -> int:
        now = unix_time_millis()
        return sum(1 for m in queue._messages if not now > m.visible_at)

    Queue.messages = property(messages)
    Queue.approximate_number_of_messages_delayed = property(delayed)
    Queue.approximate_number_of_messages_not_visible = property(not_visible)
    Queue._offpath_counts_at_one_instant = True


def _hand_out_quiet_tenants_first() -> None:
    """The stand-in for SQS fair queues (fair_queues.py). moto's receive takes a queue's visible messages in the
    order of `Queue.messages`: on a standard queue that order is the fair one, computed from the messages in
    flight per `MessageGroupId` in the same pass that lists the visible ones (the clock read once). FIFO queues
    keep moto's order (their groups are ordering groups, not fair-queue tenants)."""
    try:
        from moto.core.utils import unix_time_millis
        from moto.sqs.models import Queue
    except ImportError:  # another moto layout: left as it is
        return
    if getattr(Queue, "_offpath_fair_delivery", False):
        return

    def messages(queue: Any) -> list[Any]:
        now = unix_time_millis()
        visible: list[Any] = []
        in_flight: Counter[str] = Counter()
        for message in queue._messages:
            if now < message.delayed_until:
                continue
            if now > message.visible_at:
                visible.append(message)
            elif message.group_id:
                in_flight[message.group_id] += 1
        if queue.fifo_queue or not in_flight or not visible:
            return visible
        return fair_order(visible, in_flight, _group_of)

    Queue.messages = property(messages)
    Queue._offpath_fair_delivery = True


def _group_of(message: Any) -> str | None:
    group = message.group_id
    return str(group) if group else None


def _change_queue_messages_one_at_a_time() -> None:
    """moto deletes a message by rebuilding its queue's list of messages from a copy and puts the new list
    in place of the old one; its server runs requests on many threads. A message sent, or another deleted,
    while a delete rebuilds the list was lost, or came back from the dead to be delivered again (a worker's
    batch deletes, a burst's sends and the other batches' deletes do meet). SQS does neither: here a
    queue's messages are added and deleted one change at a time."""
    try:
        from moto.sqs.models import Queue
    except ImportError:  # another moto layout: left as it is
        return
    if getattr(Queue, "_offpath_one_change_at_a_time", False):
        return
    lock = threading.RLock()
    add, delete = Queue.add_message, Queue.delete_message

    def add_message(queue: Any, message: Any) -> None:
        with lock:
            add(queue, message)
            if _journaling() and any(m is message for m in reversed(queue._messages)):
                _note({"k": "msg", "queue": queue.name, "m": _message_record(message)})

    def delete_message(queue: Any, receipt_handle: str) -> None:
        with lock:
            gone = [m.id for m in queue._messages if m.had_receipt_handle(receipt_handle)] if _journaling() else []
            delete(queue, receipt_handle)
            for message_id in gone:
                _note({"k": "del", "queue": queue.name, "id": message_id})

    Queue.add_message = add_message
    Queue.delete_message = delete_message
    Queue._offpath_one_change_at_a_time = True


def _roll_transactions_back_item_by_item() -> None:
    """moto backs up every table a TransactWriteItems touches before applying it, to put the backup in place if one
    of its writes is refused: a deep copy of the table, every item and every record its stream ever held. Each
    transaction then cost time and memory in proportion to all the table had seen (the batch ledger's thousand
    members, each counted in a transaction, took the runtime past 20 GB). Here the backup is the transaction's own
    items (at most 100) and the length of each stream: a refused transaction puts those items back and drops the
    stream records its writes added, and leaves the table as DynamoDB does, unchanged (the same table object, as
    every other request sees it). DynamoDB requests are applied one at a time (above): nothing else changes the
    table while a transaction runs."""
    try:
        from moto.dynamodb.models import DynamoDBBackend
        from moto.dynamodb.models.dynamo_type import DynamoType
        from moto.dynamodb.models.table import Table
    except ImportError:  # another moto layout: left as it is
        return
    if getattr(DynamoDBBackend, "_offpath_item_rollback", False) or hasattr(Table, "__deepcopy__"):
        return
    lock = threading.RLock()
    transact = DynamoDBBackend.transact_write_items

    def itself(table: Any, memo: dict[int, Any]) -> Any:
        return table  # moto's whole-table backup, while a transaction runs: the items are kept below instead

    def transact_write_items(backend: Any, transact_items: list[dict[str, Any]]) -> None:
        saved: list[tuple[Any, Any, Any, Any]] = []
        streams: dict[int, tuple[Any, int]] = {}
        for entry in transact_items:
            for kind, op in entry.items() if isinstance(entry, dict) else ():
                table = backend.tables.get(op.get("TableName")) if isinstance(op, dict) else None
                keys = op.get("Item" if kind == "Put" else "Key") if table is not None else None
                if not isinstance(keys, dict) or table.hash_key_attr not in keys:
                    continue  # moto refuses it, before any write
                hash_key = DynamoType(keys[table.hash_key_attr])
                range_key = DynamoType(keys[table.range_key_attr]) if keys.get(table.range_key_attr) else None
                if table.has_range_key and range_key is None:
                    continue
                saved.append((table, hash_key, range_key, copy.deepcopy(table.get_item(hash_key, range_key))))
                if table.stream_shard is not None:
                    streams.setdefault(id(table), (table.stream_shard, len(table.stream_shard.items)))
        with lock:
            Table.__deepcopy__ = itself  # type: ignore[attr-defined]
            try:
                transact(backend, transact_items)
            except Exception:
                for table, hash_key, range_key, item in reversed(saved):
                    _put_back(table, hash_key, range_key, item)
                for shard, length in streams.values():
                    del shard.items[length:]
                raise
            finally:
                del Table.__deepcopy__  # type: ignore[attr-defined]

    DynamoDBBackend.transact_write_items = transact_write_items
    DynamoDBBackend._offpath_item_rollback = True


def _put_back(table: Any, hash_key: Any, range_key: Any, item: Any) -> None:
    """The item as it was before a refused transaction (None: there was none)."""
    if range_key is not None:
        if item is None:
            table.items[hash_key].pop(range_key, None)
        else:
            table.items[hash_key][range_key] = item
    elif item is None:
        table.items.pop(hash_key, None)
    else:
        table.items[hash_key] = item


def _journal_items(operation: str, raw: bytes) -> None:
    """Journals the items a DynamoDB write may have changed, as they are now (called under the DynamoDB lock)."""
    try:
        request = json.loads(raw or b"{}")
    except ValueError:
        return
    changed: list[tuple[str, dict[str, Any], bool]] = []  # table, item or key, whether it is a whole item
    if operation == "PutItem":
        changed.append((request["TableName"], request["Item"], True))
    elif operation in ("UpdateItem", "DeleteItem"):
        changed.append((request["TableName"], request["Key"], False))
    elif operation == "BatchWriteItem":
        for table, writes in (request.get("RequestItems") or {}).items():
            for write in writes:
                if "PutRequest" in write:
                    changed.append((table, write["PutRequest"]["Item"], True))
                elif "DeleteRequest" in write:
                    changed.append((table, write["DeleteRequest"]["Key"], False))
    elif operation == "TransactWriteItems":
        for entry in request.get("TransactItems") or []:
            for kind, action in entry.items():
                if kind == "Put":
                    changed.append((action["TableName"], action["Item"], True))
                elif kind in ("Update", "Delete"):
                    changed.append((action["TableName"], action["Key"], False))
    backend = _dynamodb_backend()
    for table_name, attributes, whole in changed:
        table = backend.get_table(table_name)
        names = [table.hash_key_attr, *([table.range_key_attr] if table.range_key_attr else [])]
        key = {name: attributes[name] for name in names} if whole else attributes
        item = backend.get_item(table_name, key)
        _note({"k": "item", "table": table_name, "key": key, "item": item.to_json()["Attributes"] if item else None})


def _parse_each_update_expression_once() -> None:
    """For speed only: moto parses an UpdateItem's update expression twice per request (once to check its
    placeholders, once to apply it), token by token; a job's writes use a few dozen expressions, each with its
    values in placeholders, so the text alone decides the tree. Here each text is parsed once and its tree kept
    (up to `UPDATE_EXPRESSIONS_KEPT`). A kept tree is never changed: moto's validator works on a deep copy of it,
    and the placeholder check only reads it. A text moto refuses is refused every time (nothing is kept)."""
    try:
        from moto.dynamodb.parsing.expressions import UpdateExpressionParser
    except ImportError:  # another moto layout: left as it is
        return
    if getattr(UpdateExpressionParser, "_offpath_parsed_once", False):
        return
    parse = UpdateExpressionParser.make

    @functools.lru_cache(maxsize=UPDATE_EXPRESSIONS_KEPT)
    def make(expression: str) -> Any:
        return parse(expression)

    UpdateExpressionParser.make = staticmethod(make)
    UpdateExpressionParser._offpath_parsed_once = True


def _answer_stream_records_as_they_are() -> None:
    """For speed only: moto keeps a stream's records as the JSON its GetRecords answers with (images in
    DynamoDB's attribute-value form), then serializes them again shape by shape, attribute by attribute, for
    each read: with a job's item in both images, about 4 ms a record, the local runtime's largest cost per job
    after its writes. Here the records are written out as they are, with the two kinds of value that are not
    JSON written as the JSON protocol writes them (`_as_json_protocol`). What a
    client reads is the same (tests/e2e/test_emulator_reads.py compares it with moto's own answer)."""
    try:
        from moto.dynamodbstreams.responses import DynamoDBStreamsHandler
    except ImportError:  # another moto layout: left as it is
        return
    if getattr(DynamoDBStreamsHandler, "_offpath_records_as_they_are", False):
        return

    def get_records(handler: Any) -> str:
        limit = handler._get_param("Limit")
        result = handler.backend.get_records(handler._get_param("ShardIterator"), 1000 if limit is None else limit)
        return json.dumps(result, default=_as_json_protocol)

    DynamoDBStreamsHandler.moto_get_records = DynamoDBStreamsHandler.get_records
    DynamoDBStreamsHandler.get_records = get_records
    DynamoDBStreamsHandler._offpath_records_as_they_are = True


def _as_json_protocol(value: Any) -> float | str:
    """The two values of a stream record that are not JSON, as the JSON protocol writes them: its time (moto's
    naive UTC datetime) as epoch seconds cut to the millisecond, a binary attribute's bytes in base64."""
    if isinstance(value, datetime):
        return calendar.timegm(value.utctimetuple()) + (value.microsecond // 1000) / 1000
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _journal_receives_and_schedules() -> None:
    """Journal hooks on moto's messages (a receive, a change of visibility), its queues' purges and its schedules.
    Adding and deleting messages are journaled where they are made one change at a time (above)."""
    try:
        from moto.scheduler.models import EventBridgeSchedulerBackend
        from moto.sqs.models import Message, SQSBackend
    except ImportError:  # another moto layout: left as it is
        return
    if getattr(Message, "_offpath_journaled", False):
        return
    mark_received, change_visibility = Message.mark_received, Message.change_visibility

    def received(message: Any, visibility_timeout: int | None = None) -> None:
        mark_received(message, visibility_timeout)
        fields = {
            "approximate_receive_count": message.approximate_receive_count,
            "approximate_first_receive_timestamp": message.approximate_first_receive_timestamp,
            "visible_at": message.visible_at,
        }
        _note({"k": "recv", "id": message.id, "fields": fields})

    def visibility_changed(message: Any, visibility_timeout: int) -> None:
        change_visibility(message, visibility_timeout)
        _note({"k": "vis", "id": message.id, "fields": {"visible_at": message.visible_at}})

    purge = SQSBackend.purge_queue

    def purged(backend: Any, queue_name: str) -> None:
        purge(backend, queue_name)
        _note({"k": "purge", "queue": queue_name})

    create, update, delete = (
        EventBridgeSchedulerBackend.create_schedule,
        EventBridgeSchedulerBackend.update_schedule,
        EventBridgeSchedulerBackend.delete_schedule,
    )

    def note_schedule(schedule: Any) -> None:
        from offpath_local.state import SCHEDULE_FIELDS

        detail = schedule.to_dict()
        kept = {"Name": schedule.name, **{k: detail[k] for k in SCHEDULE_FIELDS if detail.get(k) is not None}}
        _note({"k": "sched", "group": schedule.group_name or "default", "name": schedule.name, "s": kept})

    def created(backend: Any, *args: Any, **kwargs: Any) -> Any:
        schedule = create(backend, *args, **kwargs)
        note_schedule(schedule)
        return schedule

    def updated(backend: Any, *args: Any, **kwargs: Any) -> Any:
        schedule = update(backend, *args, **kwargs)
        note_schedule(schedule)
        return schedule

    def deleted(backend: Any, group_name: str | None, name: str) -> None:
        delete(backend, group_name, name)
        _note({"k": "sched", "group": group_name or "default", "name": name, "s": None})

    Message.mark_received = received
    Message.change_visibility = visibility_changed
    SQSBackend.purge_queue = purged
    EventBridgeSchedulerBackend.create_schedule = created
    EventBridgeSchedulerBackend.update_schedule = updated
    EventBridgeSchedulerBackend.delete_schedule = deleted
    Message._offpath_journaled = True


@dataclass(frozen=True)
class QueueDepth:
    visible: int
    in_flight: int
    delayed: int
    oldest_age_s: float | None  # None: no message to be old (an empty queue, or only delayed ones)


class QueuePeek:
    """Queue depths and the oldest message's age from moto's state (no receive, no side effect).

    The age follows SQS: the oldest message not yet deleted, in flight or not, counted from when it was
    first sent (a DLQ keeps that time); a message received three times or more is skipped. Delayed
    messages are not counted in the age (they are not yet available). A queue without such a message has
    no age (None), rather than a number left over from messages that are gone."""

    def __init__(self, sqs: Any, account_id: str = ACCOUNT_ID, region: str = REGION) -> None:
        self.sqs = sqs
        self.account_id = account_id
        self.region = region
        self._warned = False

    def depths(self, queue_urls: Iterable[str]) -> dict[str, QueueDepth]:
        """Per queue name."""
        result: dict[str, QueueDepth] = {}
        backend = self._backend()
        now_ms = time.time() * 1000
        for url in queue_urls:
            name = url.rstrip("/").rsplit("/", 1)[-1]
            queue = backend.queues.get(name) if backend is not None else None
            if queue is None:
                result[name] = self._from_attributes(url)
                continue
            visible = in_flight = delayed = 0
            oldest: float | None = None
            for message in list(queue._messages):
                if message.delayed:
                    delayed += 1
                    continue
                if message.visible:
                    visible += 1
                else:
                    in_flight += 1
                sent = message.sent_timestamp
                if sent is not None and message.approximate_receive_count < AGE_RECEIVE_LIMIT:
                    oldest = sent if oldest is None else min(oldest, sent)
            age = round(max(0.0, (now_ms - oldest) / 1000), 3) if oldest is not None else None
            result[name] = QueueDepth(visible, in_flight, delayed, age)
        return result

    def _backend(self) -> Any:
        try:
            from moto.sqs.models import sqs_backends

            return sqs_backends[self.account_id][self.region]
        except Exception:  # a moto without this layout: fall back to the API, without ages
            if not self._warned:
                logger.warning("cannot read moto's queues; oldest message ages are not measured")
                self._warned = True
            return None

    def _from_attributes(self, url: str) -> QueueDepth:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        return QueueDepth(
            int(attributes.get("ApproximateNumberOfMessages", 0)),
            int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
            int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)),
            None,
        )


def prune_metric_data(max_age_s: float, account_id: str = ACCOUNT_ID, region: str = REGION) -> int:
    """Drop CloudWatch data points older than `max_age_s` from moto (it keeps every one, and scans them
    all on each GetMetricData). Returns how many were dropped."""
    from datetime import UTC, datetime, timedelta

    try:
        from moto.cloudwatch.models import cloudwatch_backends

        backend = cloudwatch_backends[account_id][region]
        cutoff = datetime.now(UTC) - timedelta(seconds=max_age_s)
        before = len(backend.metric_data)
        backend.metric_data = [
            datum
            for datum in backend.metric_data
            if _aware(datum.timestamp) is None or _aware(datum.timestamp) >= cutoff
        ]
        return before - len(backend.metric_data)
    except Exception:
        return 0


def keep_latest_metric_point(namespace: str, metric_name: str, dimensions: dict[str, str], *, keep: bool = True) -> int:
    """Drop a metric's earlier data points from moto, keeping its latest one (`keep`) or none. For a gauge the
    runtime publishes, such as a queue's oldest message age: GetMetricData's Maximum over a period sees every
    point of the period, so an age measured a minute ago would still be read after its message was deleted.
    Returns how many were dropped."""
    try:
        from moto.cloudwatch.models import cloudwatch_backends

        backend = cloudwatch_backends[ACCOUNT_ID][REGION]
        wanted = sorted(dimensions.items())

        def matches(datum: Any) -> bool:
            return (
                datum.namespace == namespace
                and datum.name == metric_name
                and sorted((d.name, d.value) for d in datum.dimensions) == wanted
            )

        data = list(backend.metric_data)
        found = [i for i, datum in enumerate(data) if matches(datum)]
        drop = set(found[:-1] if keep else found)
        if drop:
            backend.metric_data = [datum for i, datum in enumerate(data) if i not in drop]
        return len(drop)
    except Exception:
        return 0


def _aware(value: Any) -> Any:
    from datetime import UTC, datetime

    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value if isinstance(value, datetime) else None
