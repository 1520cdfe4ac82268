"""Two of the emulator's speed corrections, seen from a client: prints (JSON) what GetRecords answered with the
records written out as they are and what moto's own serializer answered for the same records, and what two
UpdateItems of one update expression with different values, and two of an expression moto refuses, left.

Run in a process of its own (`python -m tests.e2e.emulator_reads`) by tests/e2e/test_emulator_reads.py: the
emulator is moto's server in the process that starts it, and its corrections are made to moto's classes there.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from offpath.adapters.dynamodb_store import key_of
from tests.e2e.emulator_start import emulator_with_jobs_table

# Every kind of attribute value a stream image may hold, a non-ASCII string and a binary one among them.
ODD_ITEM = {
    "n": {"N": "1"},
    "m": {
        "M": {
            "x": {"L": [{"S": "é✓"}, {"B": b"\x00\xff"}, {"BOOL": True}, {"NULL": True}, {"SS": ["a", "b"]}]},
            "bs": {"BS": [b"\x01", b"\x02"]},
            "ns": {"NS": ["1", "2.5"]},
        }
    },
}
SET_BOTH = "SET a = :a, b = :b, updated_at = :now REMOVE gone"


def main() -> None:
    with emulator_with_jobs_table() as (emulator, dynamodb, table_name):
        seen = updates(dynamodb, table_name)
        seen |= stream_answers(dynamodb, emulator.client("dynamodbstreams"), table_name)
        print(json.dumps(seen, default=str))


def updates(dynamodb: Any, table_name: str) -> dict[str, Any]:
    """One expression, two items, different values: each item gets its own (a tree kept from the first parse is
    never filled with the first request's values). A refused expression is refused each time."""
    for name, a, b in (("ONE", "a1", "b1"), ("TWO", "a2", "b2")):
        dynamodb.put_item(TableName=table_name, Item={**key_of(name), "gone": {"S": "x"}})
        dynamodb.update_item(
            TableName=table_name,
            Key=key_of(name),
            UpdateExpression=SET_BOTH,
            ExpressionAttributeValues={":a": {"S": a}, ":b": {"S": b}, ":now": {"S": name}},
        )
    items = {
        name: dynamodb.get_item(TableName=table_name, Key=key_of(name), ConsistentRead=True)["Item"]
        for name in ("ONE", "TWO")
    }
    refusals = []
    for _ in range(2):
        try:
            dynamodb.update_item(
                TableName=table_name,
                Key=key_of("ONE"),
                UpdateExpression="SET a = :a,",
                ExpressionAttributeValues={":a": {"S": "never"}},
            )
            refusals.append("applied")
        except ClientError as error:
            refusals.append(error.response["Error"]["Code"])
    after = dynamodb.get_item(TableName=table_name, Key=key_of("ONE"), ConsistentRead=True)["Item"]["a"]["S"]
    return {
        "one": {key: value.get("S") for key, value in items["ONE"].items() if key in ("a", "b", "updated_at", "gone")},
        "two": {key: value.get("S") for key, value in items["TWO"].items() if key in ("a", "b", "updated_at", "gone")},
        "refusals": refusals,
        "one_after_refusals": after,
    }


def stream_answers(dynamodb: Any, streams: Any, table_name: str) -> dict[str, Any]:
    """The stream's records as a client reads them, answered both ways from the same shard."""
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

    from offpath_local.emulator import StreamReader

    dynamodb.put_item(TableName=table_name, Item={**key_of("ODD"), **ODD_ITEM})
    dynamodb.update_item(
        TableName=table_name,
        Key=key_of("ODD"),
        UpdateExpression="SET n = n + :one REMOVE m",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    stream_arn = dynamodb.describe_table(TableName=table_name)["Table"]["LatestStreamArn"]
    shard_id = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]

    def read() -> dict[str, Any]:
        iterator = streams.get_shard_iterator(StreamArn=stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON")
        answer = streams.get_records(ShardIterator=iterator["ShardIterator"])
        return {"records": answer["Records"], "has_next": bool(answer.get("NextShardIterator"))}

    as_they_are = read()
    reader = StreamReader()
    in_process = reader.get_records(
        ShardIterator=reader.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
    )
    corrected = DynamoDBStreamsHandler.get_records
    DynamoDBStreamsHandler.get_records = DynamoDBStreamsHandler.moto_get_records
    try:
        by_moto = read()
    finally:
        DynamoDBStreamsHandler.get_records = corrected
    odd = [record for record in as_they_are["records"] if record["dynamodb"]["Keys"] == key_of("ODD")]
    # Read in this process, then again from where that read ended: nothing more.
    again = reader.get_records(ShardIterator=in_process["NextShardIterator"])
    for record in in_process["Records"]:  # what the player does with a record changes nothing in moto's
        record["dynamodb"]["NewImage"] = {"changed": {"S": "by the reader"}}
    reread = reader.get_records(
        ShardIterator=reader.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
    )
    return {
        "same_answer": as_they_are == by_moto,
        "same_in_process": reread["Records"] == as_they_are["records"],
        "in_process_records": len(in_process["Records"]),
        "nothing_more": again["Records"],
        "latest_is_empty": reader.get_records(
            ShardIterator=reader.get_shard_iterator(StreamArn=stream_arn, ShardId=shard_id, ShardIteratorType="LATEST")[
                "ShardIterator"
            ]
        )["Records"],
        "records": len(as_they_are["records"]),
        "has_next": as_they_are["has_next"],
        "odd_events": [record["eventName"] for record in odd],
        "odd_old_image": repr(odd[-1]["dynamodb"]["OldImage"]["m"]),
        "odd_time_is_aware": all(record["dynamodb"]["ApproximateCreationDateTime"].tzinfo for record in odd),
    }


if __name__ == "__main__":
    main()
