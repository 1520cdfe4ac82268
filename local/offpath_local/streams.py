"""The job table's stream and the notifier's event source mapping, as Lambda plays them for DynamoDB Streams.

moto's server records the table's stream (new and old images); this player reads its shard from the
moment it starts (LATEST: what a restored snapshot wrote is not news), keeps the records of the mapping's
filter criteria (offpath.naming.NOTIFIER_STREAM_FILTER; the others are dropped, as Lambda drops them), and
invokes the notifier with the event Lambda sends (`{"Records": [...]}`, up to `batch_size` records, in
order). With partial batch responses: the records before the first reported one are done; the batch is
retried from the reported record (after a pause that doubles up to a few seconds); a notifier that raises
has its whole batch retried the same way. Records are kept until they are done, as the mapping's iterator
waits on its shard (AWS keeps stream records 24 h; with no maximum retry attempts, a failing record holds its
shard until it succeeds).

Subscribers (`subscribe`) get each record's job events once, when the record is read (before the notifier is
invoked): the realtime feeds of the embedded runtime take them from here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from offpath.adapters.dynamodb_store import from_item
from offpath.domain.events import JobEvent
from offpath.logic.notify import StreamRecord, events_of_record
from offpath.naming import NOTIFIER_STREAM_FILTER
from offpath_local.lambda_context import LocalLambdaContext

logger = logging.getLogger("offpath.local.streams")

Handler = Callable[[dict[str, Any], Any], Any]
Subscriber = Callable[[Sequence[JobEvent]], None]
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
        batch_size: int = 100,
        function_timeout_s: float = 60.0,
        filter_pattern: Mapping[str, Any] = NOTIFIER_STREAM_FILTER,
        poll_s: float = POLL_S,
    ) -> None:
        self.streams = streams
        self.stream_arn = stream_arn
        self.handler = handler
        self.function_name = function_name
        self.batch_size = batch_size
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
            self._stop.wait(RETRY_PAUSE_S[min(failures, len(RETRY_PAUSE_S) - 1)])
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
        """One invocation with the oldest pending records; True when every record of it is done."""
        batch = self._pending[: self.batch_size]
        context = LocalLambdaContext(self.function_name, self.function_timeout_s)
        self.invocations += 1
        try:
            response = self.handler({"Records": batch}, context)
        except Exception:
            logger.exception("the notifier raised: its batch is retried")
            return False
        failed = _first_failure(response, batch)
        if failed is None:
            del self._pending[: len(batch)]
            return True
        del self._pending[:failed]
        return False


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
