"""The embedded runtime's player of the job table's stream gives up on a record as the stack's event source
mapping does (offpath.naming.NOTIFIER_MAPPING: retries, bisection, on-failure destination): a record the
notifier keeps failing on goes to the on-failure destination, and the records behind it are played."""

from __future__ import annotations

import threading
import time
from typing import Any

from offpath.naming import NOTIFIER_MAPPING, StreamMapping
from offpath_local.streams import StreamPlayer

ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/offpath-jobs/stream/2026-12-02T00:00:00.000"
MATCH_ALL: dict[str, Any] = {}


class OneShard:
    """A stream of one shard holding `records` (sequence numbers "1".."n"), read once."""

    def __init__(self, count: int) -> None:
        self.records = [
            {"eventName": "MODIFY", "dynamodb": {"SequenceNumber": str(n), "ApproximateCreationDateTime": time.time()}}
            for n in range(1, count + 1)
        ]

    def describe_stream(self, **_: Any) -> dict[str, Any]:
        return {"StreamDescription": {"Shards": [{"ShardId": "shard-1"}]}}

    def get_shard_iterator(self, **_: Any) -> dict[str, Any]:
        return {"ShardIterator": "it"}

    def get_records(self, **_: Any) -> dict[str, Any]:
        records, self.records = self.records, []
        return {"Records": records, "NextShardIterator": "it"}


class FailingOn:
    """A notifier reporting record `bad` failed whenever it is in the batch; records before it are done."""

    def __init__(self, bad: str) -> None:
        self.bad = bad
        self.done: list[str] = []
        self.batches: list[list[str]] = []
        self.lock = threading.Lock()

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        numbers = [r["dynamodb"]["SequenceNumber"] for r in event["Records"]]
        with self.lock:
            self.batches.append(numbers)
            if self.bad in numbers:
                self.done += numbers[: numbers.index(self.bad)]
                return {"batchItemFailures": [{"itemIdentifier": self.bad}]}
            self.done += numbers
        return {"batchItemFailures": []}


def play(count: int, bad: str, mapping: StreamMapping) -> tuple[FailingOn, list[dict[str, Any]], StreamPlayer]:
    notifier, given_up = FailingOn(bad), []
    player = StreamPlayer(
        OneShard(count),
        ARN,
        notifier,
        function_name="offpath-notifier",
        filter_pattern=MATCH_ALL,
        poll_s=0.01,
        mapping=mapping,
        on_failure=given_up.append,
        retry_pauses_s=(0.0,),
    )
    player.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (player.pending or not notifier.batches):
            time.sleep(0.01)
    finally:
        player.stop()
    return notifier, given_up, player


def test_the_player_plays_the_stacks_mapping() -> None:
    player = StreamPlayer(OneShard(0), ARN, FailingOn("x"), function_name="offpath-notifier")

    assert player.mapping is NOTIFIER_MAPPING and player.batch_size == 100
    literal = StreamMapping(batch_size=100, retry_attempts=10, bisect_on_error=True, max_record_age_s=21600)
    assert literal == player.mapping


def test_a_record_failing_every_retry_goes_to_the_on_failure_destination_and_the_rest_are_played() -> None:
    mapping = StreamMapping(batch_size=10, retry_attempts=2, bisect_on_error=True, max_record_age_s=3600)

    notifier, given_up, player = play(6, "3", mapping)

    assert notifier.done == ["1", "2", "4", "5", "6"]
    # Bisected at each retry: the batch from the failing record, halved, then the record alone.
    assert notifier.batches == [["1", "2", "3", "4", "5", "6"], ["3", "4"], ["3"], ["4", "5", "6"]]
    (record,) = given_up
    info = record["DDBStreamBatchInfo"]
    assert (info["startSequenceNumber"], info["endSequenceNumber"], info["batchSize"]) == ("3", "3", 1)
    assert info["streamArn"] == ARN and record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert player.pending == 0 and player.given_up == 1


def test_the_retry_limit_is_the_mappings() -> None:
    mapping = StreamMapping(batch_size=1, retry_attempts=4, bisect_on_error=False, max_record_age_s=3600)

    notifier, given_up, _ = play(2, "1", mapping)

    assert notifier.batches == [["1"]] * 5 + [["2"]]
    assert notifier.done == ["2"] and len(given_up) == 1
