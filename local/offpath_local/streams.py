"""The job table's stream and the notifier's event source mapping, as Lambda plays them for DynamoDB Streams.

moto's server records the table's stream (new and old images); this player reads its shard from the
moment it starts (LATEST: what a restored snapshot wrote is not news), keeps the records of the mapping's
filter criteria (offpath.naming.NOTIFIER_STREAM_FILTER; the others are dropped, as Lambda drops them), and
invokes the notifier with the event Lambda sends (`{"Records": [...]}`, up to `batch_size` records, in
order). With partial batch responses: the records before the first reported one are done; the batch is
retried from the reported record (after a pause that doubles up to a few seconds); a notifier that raises
has its whole batch retried the same way. The mapping's settings are the stack's (offpath.naming's
NOTIFIER_MAPPING): a failing batch is split in two (bisection) at each retry, and once its retries are spent
(or its oldest record is older than the maximum record age) a record of it, as Lambda writes one
(`DDBStreamBatchInfo`), goes to the on-failure queue, its records are dropped and the shard moves on: one
record that keeps failing never holds every record behind it.

Subscribers (`subscribe`) get each record's job events once, when the record is read (before the notifier is
invoked): the realtime feeds of the embedded runtime take them from here.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from offpath.adapters.dynamodb_store import from_item
from offpath.domain.events import JobEvent
from offpath.logic.notify import StreamRecord, events_of_record
from offpath.naming import NOTIFIER_MAPPING, NOTIFIER_STREAM_FILTER, StreamMapping
from offpath_local.lambda_context import LocalLambdaContext

logger = logging.getLogger("offpath.local.streams")

Handler = Callable[[dict[str, Any], Any], Any]
Subscriber = Callable[[Sequence[JobEvent]], None]
# The on-failure destination: takes the record of a batch given up on (Lambda's JSON for a stream batch).
OnFailure = Callable[[dict[str, Any]], None]
# Lambda polls a DynamoDB stream's shards four times a second; so does the stand-in (each poll is a GetRecords
# per shard on the emulator: an idle runtime spends most of its CPU on them).
POLL_S = 0.25
RETRY_PAUSE_S = (0.2, 0.5, 1.0, 2.0, 4.0)


def matches(pattern: Any, value: Any) -> bool:
    """An event pattern of Lambda's filter criteria against a record: a mapping matches key by key (every key
    present), a list of alternatives matches when one does (a literal, or `{"prefix": ...}`)."""
    if isinstance(pattern, Mapping):
        return isinstance(value, Mapping) and all(k in value and matches(p, value[k]) for k, p in pattern.items())
    if isinstance(pattern, list):
        return any(_alternative(option, value) for option in pattern)
    return bool(pattern == value)


def _alternative(option: Any, value: Any) -> bool:
    if isinstance(option, Mapping):
        if "prefix" in option:
            return isinstance(value, str) and value.startswith(str(option["prefix"]))
        return matches(option, value)
    return bool(option == value)


def lambda_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """A record of GetRecords as Lambda hands it to a function: the time as epoch seconds, the stream's ARN."""
    change = dict(record.get("dynamodb") or {})
    created = change.get("ApproximateCreationDateTime")
    if hasattr(created, "timestamp"):
        change["ApproximateCreationDateTime"] = float(int(created.timestamp()))
    return {**record, "eventVersion": "1.1", "dynamodb": change, "eventSourceARN": stream_arn}


class StreamPlayer:
    def __init__(
        self,
        streams: Any,
        stream_arn: str,
        handler: Handler,
        *,
        function_name: str,
        batch_size: int = 0,
        function_timeout_s: float = 60.0,
        filter_pattern: Mapping[str, Any] = NOTIFIER_STREAM_FILTER,
        poll_s: float = POLL_S,
        mapping: StreamMapping = NOTIFIER_MAPPING,
        on_failure: OnFailure | None = None,
        retry_pauses_s: Sequence[float] = RETRY_PAUSE_S,
    ) -> None:
        """`batch_size` and the retries are the mapping's unless given; `on_failure`: where the record of a
        batch given up on goes (None: it is logged)."""
        self.streams = streams
        self.stream_arn = stream_arn
        self.handler = handler
        self.function_name = function_name
        self.batch_size = batch_size or mapping.batch_size
        self.mapping = mapping
        self.on_failure = on_failure
        self.retry_pauses_s = tuple(retry_pauses_s) or (0.0,)
        self._size = self.batch_size  # the next batch's size: halved by each failure (bisection)
        self._failures = 0  # failed invocations of the batch at the head of the shard
        self.given_up = 0
        self.function_timeout_s = function_timeout_s
        self.filter_pattern = filter_pattern
        self.poll_s = poll_s
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="stream-notifier", daemon=True)
        self._iterators: dict[str, str] = {}
        self._pending: list[dict[str, Any]] = []
        self.invocations = 0
        self.retries = 0

    # -- subscribers ------------------------------------------------------------------------

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """`subscriber` gets the job events of every record read (a list per read); returns the unsubscriber."""
        with self._lock:
            self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            with self._lock:
                if subscriber in self._subscribers:
                    self._subscribers.remove(subscriber)

        return unsubscribe

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Iterators at LATEST on every shard, taken now: only changes made from here on are played."""
        description = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]
        for shard in description.get("Shards", []):
            self._iterators[shard["ShardId"]] = self.streams.get_shard_iterator(
                StreamArn=self.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="LATEST"
            )["ShardIterator"]
        self._thread.start()

    def request_stop(self) -> None:
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    @property
    def pending(self) -> int:
        return len(self._pending)

    # -- the loop ---------------------------------------------------------------------------

    def _loop(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                self._read()
            except Exception:
                if self._stop.is_set():
                    return
                logger.warning("reading the table's stream failed; trying again", exc_info=True)
            if not self._pending:
                self._stop.wait(self.poll_s)
                continue
            if self._invoke_once():
                failures = 0
                if not self._pending:  # caught up: the next read after the poll interval, as Lambda polls
                    self._stop.wait(self.poll_s)
                continue
            self.retries += 1
            self._stop.wait(self.retry_pauses_s[min(failures, len(self.retry_pauses_s) - 1)])
            failures += 1

    def _read(self) -> None:
        for shard, iterator in list(self._iterators.items()):
            response = self.streams.get_records(ShardIterator=iterator, Limit=1000)
            self._iterators[shard] = response.get("NextShardIterator") or iterator
            records = [lambda_record(r, self.stream_arn) for r in response.get("Records", [])]
            kept = [r for r in records if matches(self.filter_pattern, r)]
            if kept:
                self._pending.extend(kept)
                self._tell_subscribers(kept)

    def _tell_subscribers(self, records: list[dict[str, Any]]) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        if not subscribers:
            return
        events = [e for r in records for e in events_of_record(StreamRecord.of(r), from_item)]
        if not events:
            return
        for subscriber in subscribers:
            try:
                subscriber(events)
            except Exception:
                logger.exception("a stream subscriber failed; it keeps its subscription")

    def _invoke_once(self) -> bool:
        """One invocation with the oldest pending records; True when every record of it is done (or, its
        retries spent, given up on)."""
        batch = self._pending[: self._size]
        context = LocalLambdaContext(self.function_name, self.function_timeout_s)
        self.invocations += 1
        try:
            response = self.handler({"Records": batch}, context)
            failed = _first_failure(response, batch)
        except Exception:
            logger.exception("the notifier raised: its batch is retried")
            failed = 0
        if failed is None:
            del self._pending[: len(batch)]
            self._size, self._failures = self.batch_size, 0
            return True
        del self._pending[:failed]
        failing = batch[failed:]
        self._failures = 1 if failed else self._failures + 1
        if self._failures > self.mapping.retry_attempts or self._too_old(failing[0]):
            self._give_up(failing)
            return True
        if self.mapping.bisect_on_error and len(failing) > 1:
            self._size = (len(failing) + 1) // 2
        return False

    def _too_old(self, record: dict[str, Any]) -> bool:
        created = (record.get("dynamodb") or {}).get("ApproximateCreationDateTime")
        return isinstance(created, int | float) and time.time() - created > self.mapping.max_record_age_s

    def _give_up(self, records: list[dict[str, Any]]) -> None:
        """The batch's retries are spent: its record to the on-failure destination, its records dropped."""
        del self._pending[: len(records)]
        self._size, self._failures = self.batch_size, 0
        self.given_up += len(records)
        record = failure_record(records, self.stream_arn, self.function_name, self.mapping.retry_attempts + 1)
        logger.error("the notifier's retries of a stream batch are spent: it goes to the on-failure queue")
        if self.on_failure is not None:
            try:
                self.on_failure(record)
            except Exception:
                logger.exception("the on-failure destination refused the record of a batch given up on")


def failure_sender(sqs: Any, queue_url: str | None) -> OnFailure | None:
    """The on-failure destination: a message on the notifier's failures queue (which alarms)."""
    if not queue_url:
        return None

    def send(record: dict[str, Any]) -> None:
        sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(record, separators=(",", ":")))

    return send


def failure_record(records: list[dict[str, Any]], stream_arn: str, function_name: str, invokes: int) -> dict[str, Any]:
    """What Lambda sends an on-failure destination for a stream batch: where it is, not its records."""
    changes = [r.get("dynamodb") or {} for r in records]
    stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    return {
        "requestContext": {
            "functionArn": function_name,
            "condition": "RetryAttemptsExhausted",
            "approximateInvokeCount": invokes,
        },
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "version": "1.0",
        "timestamp": stamp,
        "DDBStreamBatchInfo": {
            "startSequenceNumber": str(changes[0].get("SequenceNumber")),
            "endSequenceNumber": str(changes[-1].get("SequenceNumber")),
            "approximateArrivalOfFirstRecord": changes[0].get("ApproximateCreationDateTime"),
            "approximateArrivalOfLastRecord": changes[-1].get("ApproximateCreationDateTime"),
            "batchSize": len(records),
            "streamArn": stream_arn,
        },
    }


def _first_failure(response: Any, batch: list[dict[str, Any]]) -> int | None:
    """The index of the first record reported failed; an identifier not in the batch fails the whole batch."""
    reported = response.get("batchItemFailures") if isinstance(response, dict) else None
    if not reported:
        return None
    numbers = [str((r.get("dynamodb") or {}).get("SequenceNumber")) for r in batch]
    indexes = []
    for item in reported:
        identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
        if identifier not in numbers:
            logger.error("invalid itemIdentifier in the notifier's batchItemFailures: the whole batch is retried")
            return 0
        indexes.append(numbers.index(identifier))
    return min(indexes)
