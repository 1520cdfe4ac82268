"""The emulator's TransactWriteItems: a refused transaction leaves the table as it was (its items, its stream, its
index) and costs what its own items cost, not what the whole table holds (moto backed up the table, every item and
every stream record, before each transaction: the batch ledger's thousand members took the runtime past 20 GB)."""

from __future__ import annotations

from tests.e2e.conftest import emulator_scenario


def test_a_refused_transaction_changes_nothing_and_copies_only_its_own_items() -> None:
    seen = emulator_scenario("tests.e2e.emulator_transactions")

    # Refused by its third write's condition: the first write and the new item are undone, no stream record stays.
    assert seen["refused"] == "ConditionalCheckFailed"
    assert (seen["n1"], seen["n2"], seen["new_item"], seen["stream_added"]) == (1, 2, False, 0)
    # Its cost: the items it names (and moto's own copy of the updated one), not the table's 2,000 items and
    # 2,000 stream records.
    assert seen["items_copied"] <= 4, seen
    assert seen["same_table"] and seen["still_same_table"]
    # Applied: both writes, two stream records, the index whole.
    assert (seen["applied"], seen["stream_added_after_applied"], seen["swept"]) == ([101, 201], 2, 2000)
