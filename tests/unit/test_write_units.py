"""The capacity meter's pricing rules, on hand-made before and after images (DynamoDB's documented rules)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from offpath.adapters.dynamodb_store import to_item
from offpath.domain.ids import new_job_id
from offpath.domain.job import Job, JobStatus
from offpath.naming import TABLE_INDEXES, TableIndex
from offpath_tools.write_units import (
    index_entry,
    item_size,
    number_size,
    read_units_for,
    value_size,
    write_cost,
    write_units_for,
)

BY_TENANT = TableIndex("by_tenant", "gsi1pk", "gsi_sk", "INCLUDE", ("status", "type"))
SWEEP = TableIndex("sweep", "sweep_pk", "sweep_at", "KEYS_ONLY")
EVERYTHING = TableIndex("everything", "gsi1pk", "gsi_sk", "ALL")
INDEXES = (BY_TENANT, SWEEP)


def s(text: str) -> dict[str, str]:
    return {"S": text}


def job(**changes: Any) -> dict[str, Any]:
    """A small job item in both indexes; keyword arguments set (or, with None, remove) attributes."""
    item: dict[str, Any] = {
        "pk": s("JOB#1"),
        "status": s("QUEUED"),
        "type": s("demo.echo"),
        "payload_json": s("{}"),
        "gsi1pk": s("tenant-a"),
        "gsi_sk": s("2026-01-01T00:00:00.000000Z#1"),
        "sweep_pk": s("SWEEP#1"),
        "sweep_at": s("2026-01-01T00:02:00.000000Z"),
    }
    for name, value in changes.items():
        if value is None:
            item.pop(name, None)
        else:
            item[name] = value
    return item


def padded(size: int, **changes: Any) -> dict[str, Any]:
    """A job item of exactly `size` bytes (its `pad` attribute fills the difference)."""
    item = job(**changes)
    item["pad"] = s("")
    item["pad"] = s("x" * (size - item_size(item)))
    assert item_size(item) == size
    return item


# -- sizes ------------------------------------------------------------------------------------


def test_a_string_attribute_is_its_name_plus_its_utf8_bytes() -> None:
    assert item_size({"name": s("abc")}) == 4 + 3
    assert item_size({"name": s("é")}) == 4 + 2


@pytest.mark.parametrize(
    ("number", "size"),
    [("0", 1), ("7", 2), ("12", 2), ("123", 3), ("1000", 2), ("0.001", 2), ("-12.50", 3), ("1.5e10", 2)],
)
def test_a_number_is_one_byte_per_two_significant_digits_plus_one(number: str, size: int) -> None:
    assert number_size(number) == size


def test_booleans_nulls_and_binaries_have_their_documented_sizes() -> None:
    assert value_size({"BOOL": True}) == 1
    assert value_size({"NULL": True}) == 1
    assert value_size({"B": b"\x00\x01\x02"}) == 3


def test_lists_and_maps_cost_three_bytes_plus_one_per_element() -> None:
    assert value_size({"L": [s("ab"), {"N": "1"}]}) == 3 + (1 + 2) + (1 + 2)
    assert value_size({"M": {"k": s("ab")}}) == 3 + (1 + 1 + 2)
    assert value_size({"M": {}}) == 3


def test_sets_are_the_sum_of_their_elements() -> None:
    assert value_size({"SS": ["ab", "c"]}) == 3
    assert value_size({"NS": ["1", "22"]}) == 2 + 2


def test_write_units_start_a_new_unit_at_each_started_kib() -> None:
    assert [write_units_for(n) for n in (0, 1, 1024, 1025, 2048, 2049)] == [1, 1, 1, 2, 2, 3]


def test_read_units_are_per_started_4_kib_and_half_when_eventually_consistent() -> None:
    assert read_units_for(0, consistent=True) == 1
    assert read_units_for(4096, consistent=True) == 1
    assert read_units_for(4097, consistent=True) == 2
    assert read_units_for(4097, consistent=False) == 1
    assert read_units_for(100, consistent=False) == 0.5


# -- index entries ----------------------------------------------------------------------------


def test_an_include_entry_holds_the_keys_and_the_projected_attributes_only() -> None:
    entry = index_entry(job(), BY_TENANT)

    assert entry is not None
    assert set(entry) == {"pk", "gsi1pk", "gsi_sk", "status", "type"}


def test_a_keys_only_entry_holds_the_keys_only() -> None:
    entry = index_entry(job(), SWEEP)

    assert entry is not None
    assert set(entry) == {"pk", "sweep_pk", "sweep_at"}


def test_an_item_without_an_index_key_is_not_in_a_sparse_index() -> None:
    assert index_entry(job(sweep_at=None), SWEEP) is None


# -- table write units ------------------------------------------------------------------------


def test_a_write_costs_the_larger_of_the_item_before_and_after() -> None:
    cost = write_cost(padded(1500), padded(900), ())

    assert cost.table == 2


def test_a_new_item_costs_its_own_size() -> None:
    assert write_cost(None, padded(3000), ()).table == 3


def test_a_delete_of_a_missing_item_costs_one_unit() -> None:
    assert write_cost(None, None, INDEXES).total == 1


def test_a_failed_condition_costs_the_existing_item_and_nothing_in_the_indexes() -> None:
    cost = write_cost(padded(2100), padded(200), INDEXES, condition_failed=True)

    assert cost.table == 3
    assert cost.indexes == {"by_tenant": 0, "sweep": 0}


def test_a_failed_condition_on_a_missing_item_costs_one_unit() -> None:
    assert write_cost(None, None, INDEXES, condition_failed=True).total == 1


# -- index write units ------------------------------------------------------------------------


def test_an_item_entering_an_index_costs_one_put() -> None:
    cost = write_cost(None, job(), INDEXES)

    assert cost.indexes == {"by_tenant": 1, "sweep": 1}
    assert cost.total == 3


def test_an_item_leaving_an_index_costs_one_delete() -> None:
    cost = write_cost(job(status=s("RUNNING")), job(status=s("SUCCEEDED"), sweep_pk=None, sweep_at=None), INDEXES)

    assert cost.indexes["sweep"] == 1


def test_an_item_in_an_index_neither_before_nor_after_costs_that_index_nothing() -> None:
    before = job(sweep_pk=None, sweep_at=None)
    after = job(sweep_pk=None, sweep_at=None, status=s("CANCELLED"))

    assert write_cost(before, after, INDEXES).indexes["sweep"] == 0


def test_a_change_of_a_projected_attribute_costs_one_put() -> None:
    cost = write_cost(job(), job(status=s("RUNNING")), INDEXES)

    assert cost.indexes == {"by_tenant": 1, "sweep": 0}


def test_a_change_of_an_attribute_that_is_not_projected_costs_the_index_nothing() -> None:
    cost = write_cost(job(), job(payload_json=s('{"n": 2}'), lease_until=s("later")), INDEXES)

    assert cost.indexes == {"by_tenant": 0, "sweep": 0}
    assert cost.table == 1


def test_a_change_of_an_index_key_costs_a_delete_and_a_put() -> None:
    cost = write_cost(job(), job(sweep_at=s("2026-01-01T00:04:00.000000Z")), INDEXES)

    assert cost.indexes == {"by_tenant": 0, "sweep": 2}


def test_index_units_follow_the_size_of_the_index_entry_not_of_the_item() -> None:
    big_before, big_after = padded(5000), padded(5000, status=s("RUNNING"))

    cost = write_cost(big_before, big_after, (BY_TENANT, EVERYTHING))

    assert cost.table == 5
    assert cost.indexes == {"by_tenant": 1, "everything": 5}


def test_a_large_projected_entry_whose_key_changes_costs_both_entries() -> None:
    cost = write_cost(padded(1500), padded(2500, gsi_sk=s("later")), (EVERYTHING,))

    assert cost.indexes == {"everything": 2 + 3}


def test_a_job_in_the_sweep_index_costs_five_write_units_from_submit_to_success() -> None:
    """With the table's own indexes (the sweep index only): a job written with its sweep time (its send failed)
    enters the sweep index and leaves it when it succeeds."""
    created = job(gsi1pk=None, gsi_sk=None)
    running = job(gsi1pk=None, gsi_sk=None, status=s("RUNNING"), lease_until=s("soon"), attempt={"N": "1"})
    succeeded = job(gsi1pk=None, gsi_sk=None, status=s("SUCCEEDED"), result_json=s("{}"), sweep_pk=None, sweep_at=None)

    costs = [write_cost(None, created), write_cost(created, running), write_cost(running, succeeded)]

    assert [c.table for c in costs] == [1, 1, 1]
    assert [c.indexes for c in costs] == [{"sweep": 1}, {"sweep": 0}, {"sweep": 1}]
    assert sum(c.total for c in costs) == 5


def test_a_plain_job_writes_no_index_entry_and_costs_three_write_units_from_submit_to_success() -> None:
    """The store's own items: a plain job sent before it is written has no sweep time, and no listing index
    exists (a tenant's listing queries the table's key): the job's three writes are all it costs."""
    now = datetime(2026, 12, 1, tzinfo=UTC)
    created = Job(
        job_id=new_job_id(now),
        tenant="tenant-a",
        type="demo.echo",
        queue="default",
        payload={"message": "hello"},
        payload_hash="0" * 64,
        status=JobStatus.QUEUED,
        created_at=now,
        updated_at=now,
        max_attempts=3,
    )
    running = created.replace(status=JobStatus.RUNNING, attempt=1, lease_until=now, started_at=now)
    succeeded = running.replace(status=JobStatus.SUCCEEDED, result={"message": "hello"}, lease_until=None)
    items = [to_item(created), to_item(running), to_item(succeeded)]

    costs = [write_cost(None, items[0]), write_cost(items[0], items[1]), write_cost(items[1], items[2])]

    assert [index.name for index in TABLE_INDEXES] == ["sweep"]
    assert [c.table for c in costs] == [1, 1, 1]
    assert [c.indexes for c in costs] == [{"sweep": 0}] * 3
    assert sum(c.total for c in costs) == 3
