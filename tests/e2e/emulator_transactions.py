"""Transactions on the emulator's jobs table, with many items and a long stream behind them: prints (JSON) what a
refused and an applied TransactWriteItems left (the items, the stream's length, the sweep index, whether the table
is the same object every request sees).

Run in a process of its own (`python -m tests.e2e.emulator_transactions`) by tests/e2e/test_emulator_queues.py:
the emulator is moto's server in the process that starts it, and its corrections are made to moto's classes there.
"""

from __future__ import annotations

import json
from typing import Any

from offpath.adapters.dynamodb_store import key_of
from tests.e2e.emulator_start import emulator_with_jobs_table

ITEMS = 2_000


def main() -> None:
    from offpath_local.emulator import _dynamodb_backend

    with emulator_with_jobs_table() as (_, dynamodb, table_name):
        print(json.dumps(transactions(dynamodb, table_name, lambda: _dynamodb_backend().tables[table_name])))


def transactions(dynamodb: Any, table_name: str, table: Any) -> dict[str, Any]:
    for n in range(ITEMS):
        dynamodb.put_item(
            TableName=table_name,
            Item={**key_of(f"ITEM#{n}"), "n": {"N": str(n)}, "sweep_pk": {"S": "0"}, "sweep_at": {"S": f"{n:06d}"}},
        )
    before = table()
    stream_before = len(before.stream_shard.items)

    def update(n: int, value: int, condition: str | None = None) -> dict[str, Any]:
        write: dict[str, Any] = {
            "TableName": table_name,
            "Key": key_of(f"ITEM#{n}"),
            "UpdateExpression": "SET n = :v",
            "ExpressionAttributeValues": {":v": {"N": str(value)}},
        }
        if condition:
            write["ConditionExpression"] = condition
            write["ExpressionAttributeValues"][":zero"] = {"N": "0"}
        return {"Update": write}

    def n_of(n: int) -> int:
        return int(
            dynamodb.get_item(TableName=table_name, Key=key_of(f"ITEM#{n}"), ConsistentRead=True)["Item"]["n"]["N"]
        )

    from moto.dynamodb.models.dynamo_type import Item

    copies = 0
    deepcopy = Item.__deepcopy__

    def counted(item: Any, memo: dict[int, Any]) -> Any:
        nonlocal copies
        copies += 1
        return deepcopy(item, memo)

    Item.__deepcopy__ = counted  # type: ignore[method-assign]
    refused = ""
    try:
        # The first write applies inside moto before the second's condition fails: it must be rolled back.
        new_item = {"Put": {"TableName": table_name, "Item": {**key_of("ITEM#new"), "n": {"N": "1"}}}}
        dynamodb.transact_write_items(TransactItems=[update(1, 100), new_item, update(2, 200, "n = :zero")])
    except dynamodb.exceptions.TransactionCanceledException as error:
        refused = str(error.response["CancellationReasons"][2]["Code"])
    Item.__deepcopy__ = deepcopy  # type: ignore[method-assign]
    after_refused = {
        "refused": refused,
        "items_copied": copies,
        "n1": n_of(1),
        "n2": n_of(2),
        "new_item": "Item" in dynamodb.get_item(TableName=table_name, Key=key_of("ITEM#new"), ConsistentRead=True),
        "stream_added": len(table().stream_shard.items) - stream_before,
        "same_table": table() is before,
    }
    dynamodb.transact_write_items(TransactItems=[update(1, 101), update(2, 201)])
    swept = dynamodb.query(
        TableName=table_name,
        IndexName="sweep",
        KeyConditionExpression="sweep_pk = :p",
        ExpressionAttributeValues={":p": {"S": "0"}},
        Select="COUNT",
    )["Count"]
    return {
        **after_refused,
        "applied": [n_of(1), n_of(2)],
        "stream_added_after_applied": len(table().stream_shard.items) - stream_before,
        "swept": swept,
        "still_same_table": table() is before,
    }


if __name__ == "__main__":
    main()
