"""What each DynamoDB request really costs in capacity units, by DynamoDB's own rules.

`CapacityMeter(client, reader)` attaches to a DynamoDB client with botocore hooks. For every write it reads
the item as it was before and as it is after (with `reader`, a second client the meter does not watch) and
prices the write; for every read it prices what came back. The rules, from the DynamoDB Developer Guide
("DynamoDB read and write operations", "DynamoDB item sizes and formats", "Global secondary indexes:
provisioned throughput considerations", "Condition expressions"):

Writes (PutItem, UpdateItem, DeleteItem)
- Table: 1 write unit per started KiB of the larger of the item before and the item after the write
  (at least 1; a delete of a missing item costs 1).
- Each global secondary index, from the item's index entry before and after (its table key, the index keys
  and the projected attributes; an item is in a sparse index only while it has both index key attributes):
  nothing when the item is in the index neither before nor after, or when no index key and no projected
  attribute changed; one put (1 unit per started KiB of the entry) when the item enters the index, one delete
  when it leaves, one put when a projected attribute changes (sized by the larger entry); a delete and a put
  when an index key changes.
- A write whose condition fails still costs 1 unit per started KiB of the existing item (1 when there is
  none), and nothing in any index. Other failed requests cost nothing.

Reads
- GetItem: 1 read unit per started 4 KiB of the item, strongly consistent; half for eventually consistent
  reads. A missing item still costs the minimum.
- BatchGetItem: each item is priced as its own GetItem (rounded up per item), keys not found included;
  unprocessed keys cost nothing.
- Query and Scan: the returned items' sizes are summed, then rounded up to the next 4 KiB (at least 1 unit);
  index queries are sized by the index entries. DynamoDB charges what it read before a FilterExpression is
  applied; the meter sees only what came back, so a filtered request is scaled by ScannedCount / Count and
  recorded as approximate.

Item size: the sum, over attributes, of the UTF-8 bytes of the name plus the value's size. Strings: UTF-8
bytes. Binary: raw bytes. Boolean and null: 1 byte. Numbers: DynamoDB stores up to 38 significant digits in
a variable-length form; the size used here is 1 byte per two significant digits (leading and trailing zeros
trimmed, rounded up) plus 1 byte. That is the documented approximation: the real encoding can differ by a
byte, which only matters for an item within a byte of a KiB boundary. Lists and maps: 3 bytes plus 1 byte per
element plus the elements' sizes (a map element's name counts). Sets: the sum of their elements. The 100
bytes of per-item overhead in DynamoDB's storage billing are not part of capacity units and are not counted.
"""

from __future__ import annotations

import base64
import math
import re
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from offpath.naming import TABLE_INDEXES, TABLE_KEY, TableIndex
from offpath_local.aws_calls import outside_functions

Item = Mapping[str, Mapping[str, Any]]

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
WRITE_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem"})
READ_OPERATIONS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan"})
# Writes the meter does not price (offpath makes none of them); they are counted so a caller can tell.
UNPRICED_OPERATIONS = frozenset(
    {"BatchWriteItem", "TransactWriteItems", "TransactGetItems", "ExecuteStatement", "BatchExecuteStatement"}
)
CONDITION_FAILED = "ConditionalCheckFailedException"


# -- sizes ------------------------------------------------------------------------------------


def number_size(text: str) -> int:
    """Bytes of a DynamoDB number: 1 per two significant digits, plus 1 (see the module's docstring)."""
    mantissa = re.split("[eE]", text.strip().lstrip("+-"), maxsplit=1)[0]
    digits = mantissa.replace(".", "").lstrip("0").rstrip("0")
    return math.ceil(len(digits) / 2) + 1


def _binary_size(value: Any) -> int:
    if isinstance(value, bytes | bytearray):
        return len(value)
    return len(base64.b64decode(str(value)))


def value_size(value: Mapping[str, Any]) -> int:
    """The size of one attribute value in the low-level form (`{"S": "text"}`), without its name."""
    ((kind, content),) = value.items()
    if kind == "S":
        return len(str(content).encode())
    if kind == "N":
        return number_size(str(content))
    if kind == "B":
        return _binary_size(content)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(s).encode()) for s in content)
    if kind == "NS":
        return sum(number_size(str(n)) for n in content)
    if kind == "BS":
        return sum(_binary_size(b) for b in content)
    if kind == "L":
        return 3 + sum(1 + value_size(element) for element in content)
    if kind == "M":
        return 3 + sum(1 + len(name.encode()) + value_size(element) for name, element in content.items())
    raise ValueError(f"unknown DynamoDB type {kind!r}")


def item_size(item: Item | None) -> int:
    """Bytes of an item by DynamoDB's size rules (0 for no item)."""
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def write_units_for(size_bytes: int) -> int:
    """Write units of one item write: 1 per started KiB, at least 1."""
    return max(1, math.ceil(size_bytes / WRITE_UNIT_BYTES))


def read_units_for(size_bytes: int, *, consistent: bool) -> float:
    """Read units of one read of `size_bytes`: 1 per started 4 KiB (at least 1), half if eventually consistent."""
    units = max(1, math.ceil(size_bytes / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2


# -- index entries ----------------------------------------------------------------------------


def index_entry(item: Item | None, index: TableIndex, table_key: Sequence[str] = TABLE_KEY) -> dict[str, Any] | None:
    """The item's entry in `index`: None when the item lacks an index key attribute (a sparse index)."""
    if not item or index.partition_key not in item or index.sort_key not in item:
        return None
    if index.projection == "ALL":
        return dict(item)
    names = {*table_key, index.partition_key, index.sort_key}
    if index.projection == "INCLUDE":
        names |= set(index.attributes)
    return {name: value for name, value in item.items() if name in names}


@dataclass(frozen=True)
class WriteCost:
    table: int
    indexes: dict[str, int]

    @property
    def total(self) -> int:
        return self.table + sum(self.indexes.values())


def index_write_units(before: dict[str, Any] | None, after: dict[str, Any] | None, index: TableIndex) -> int:
    """Write units of one index for a write that changed its entry from `before` to `after`."""
    if before is None and after is None:
        return 0
    if before is None:
        return write_units_for(item_size(after))  # the item enters the index: one put
    if after is None:
        return write_units_for(item_size(before))  # it leaves: one delete
    keys = (index.partition_key, index.sort_key)
    if any(before.get(k) != after.get(k) for k in keys):
        # An index key changed: the old entry is deleted and the new one put.
        return write_units_for(item_size(before)) + write_units_for(item_size(after))
    if before == after:
        return 0  # no key and no projected attribute changed
    return write_units_for(max(item_size(before), item_size(after)))


def write_cost(
    before: Item | None,
    after: Item | None,
    indexes: Iterable[TableIndex] = TABLE_INDEXES,
    *,
    condition_failed: bool = False,
    table_key: Sequence[str] = TABLE_KEY,
) -> WriteCost:
    """What one PutItem, UpdateItem or DeleteItem costs, from the item before and after it.

    A failed condition leaves the item as it was (`after` is ignored): it costs the existing item's size in
    the table and nothing in the indexes."""
    indexes = tuple(indexes)
    if condition_failed:
        return WriteCost(write_units_for(item_size(before)), {index.name: 0 for index in indexes})
    table = write_units_for(max(item_size(before), item_size(after)))
    return WriteCost(
        table,
        {
            index.name: index_write_units(
                index_entry(before, index, table_key), index_entry(after, index, table_key), index
            )
            for index in indexes
        },
    )


# -- the meter --------------------------------------------------------------------------------


@dataclass(frozen=True)
class WriteRecord:
    """One priced write. Sizes are in bytes; `*_attribute_bytes` are the sizes of chosen attributes'
    values (for example a job's payload), so a cost model can price the same write with other sizes."""

    operation: str
    key: str
    before_bytes: int
    after_bytes: int
    condition_failed: bool
    cost: WriteCost
    before_attribute_bytes: dict[str, int] = field(default_factory=dict)
    after_attribute_bytes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ReadRecord:
    """One priced read: the sizes of the items it read (and of their chosen attributes' values)."""

    operation: str
    consistent: bool
    item_bytes: tuple[int, ...]
    units: float
    approximate: bool = False
    attribute_bytes: tuple[dict[str, int], ...] = ()


@dataclass
class Usage:
    """Totals since the meter was attached or last reset."""

    table_write_units: int = 0
    index_write_units: Counter[str] = field(default_factory=Counter)
    read_units: float = 0.0
    writes: int = 0
    failed_conditions: int = 0
    reads: int = 0
    unpriced: Counter[str] = field(default_factory=Counter)

    @property
    def write_units(self) -> int:
        return self.table_write_units + sum(self.index_write_units.values())


class CapacityMeter:
    """Prices every request `client` makes. `reader` reads the items before and after each write: a client
    of the same table that the meter does not watch (its reads are not priced or counted)."""

    def __init__(
        self,
        client: Any,
        reader: Any,
        *,
        indexes: Iterable[TableIndex] = TABLE_INDEXES,
        table_key: Sequence[str] = TABLE_KEY,
        attributes: Sequence[str] = (),
    ) -> None:
        if client is reader:
            raise ValueError("the reader must be another client: its own reads would be metered")
        self.client = client
        self.reader = reader
        self.indexes = tuple(indexes)
        self.table_key = tuple(table_key)
        self.attributes = tuple(attributes)
        self.writes: list[WriteRecord] = []
        self.reads: list[ReadRecord] = []
        self.usage = Usage()
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._attached = False

    # -- attaching ----------------------------------------------------------------------------

    def attach(self) -> CapacityMeter:
        if not self._attached:
            events = self.client.meta.events
            events.register("before-parameter-build.dynamodb", self._remember_params)
            events.register("before-call.dynamodb", self._before_call)
            events.register("after-call.dynamodb", self._after_call)
            events.register("after-call-error.dynamodb", self._after_call_error)
            self._attached = True
        return self

    def detach(self) -> None:
        if self._attached:
            events = self.client.meta.events
            events.unregister("before-parameter-build.dynamodb", self._remember_params)
            events.unregister("before-call.dynamodb", self._before_call)
            events.unregister("after-call.dynamodb", self._after_call)
            events.unregister("after-call-error.dynamodb", self._after_call_error)
            self._attached = False

    def reset(self) -> Usage:
        """Start counting afresh; returns what was counted until now."""
        with self._lock:
            usage, self.usage = self.usage, Usage()
            self.writes, self.reads = [], []
        return usage

    # -- hooks --------------------------------------------------------------------------------

    def _remember_params(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        context["offpath_meter"] = {"operation": model.name, "params": params}

    def _before_call(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        state = context.get("offpath_meter")
        if state is None or model.name not in WRITE_OPERATIONS:
            return
        params = state["params"]
        key = self._key_of(params)
        # One write of an item at a time through this meter, so its before and after images bracket it.
        lock = self._key_lock(params["TableName"], key)
        lock.acquire()
        state["lock"] = lock
        state["key"] = key
        state["before"] = self._read(params["TableName"], key)

    def _after_call(self, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        state = context.get("offpath_meter")
        if state is None:
            return
        try:
            error = (parsed.get("Error") or {}).get("Code")
            if model.name in WRITE_OPERATIONS:
                self._price_write(state, error)
            elif model.name in READ_OPERATIONS and not error:
                self._price_read(model.name, state["params"], parsed)
            elif model.name in UNPRICED_OPERATIONS:
                with self._lock:
                    self.usage.unpriced[model.name] += 1
        finally:
            self._release(state)

    def _after_call_error(self, context: dict[str, Any], **_: Any) -> None:
        state = context.get("offpath_meter")
        if state is not None:
            self._release(state)

    # -- pricing ------------------------------------------------------------------------------

    def _price_write(self, state: dict[str, Any], error: str | None) -> None:
        if error and error != CONDITION_FAILED:
            return  # throttled, invalid, ...: DynamoDB charges nothing
        params, before = state["params"], state["before"]
        failed = error == CONDITION_FAILED
        after = before if failed else self._read(params["TableName"], state["key"])
        cost = write_cost(before, after, self.indexes, condition_failed=failed, table_key=self.table_key)
        record = WriteRecord(
            operation=state["operation"],
            key=_key_text(state["key"]),
            before_bytes=item_size(before),
            after_bytes=item_size(after),
            condition_failed=failed,
            cost=cost,
            before_attribute_bytes=self._attribute_bytes(before),
            after_attribute_bytes=self._attribute_bytes(after),
        )
        with self._lock:
            self.writes.append(record)
            self.usage.writes += 1
            self.usage.failed_conditions += int(failed)
            self.usage.table_write_units += cost.table
            self.usage.index_write_units.update(cost.indexes)

    def _price_read(self, operation: str, params: dict[str, Any], parsed: dict[str, Any]) -> None:
        records: list[ReadRecord] = []
        if operation == "GetItem":
            consistent = bool(params.get("ConsistentRead"))
            item = parsed.get("Item")
            size = item_size(item)
            records.append(
                ReadRecord(
                    operation,
                    consistent,
                    (size,),
                    read_units_for(size, consistent=consistent),
                    attribute_bytes=(self._attribute_bytes(item),),
                )
            )
        elif operation == "BatchGetItem":
            for table, request in params.get("RequestItems", {}).items():
                consistent = bool(request.get("ConsistentRead"))
                items = parsed.get("Responses", {}).get(table, [])
                unprocessed = len(parsed.get("UnprocessedKeys", {}).get(table, {}).get("Keys", []))
                missing = max(0, len(request.get("Keys", [])) - unprocessed - len(items))
                sizes = (*(item_size(item) for item in items), *([0] * missing))
                units = sum(read_units_for(size, consistent=consistent) for size in sizes)
                attributes = (*(self._attribute_bytes(item) for item in items), *({} for _ in range(missing)))
                records.append(ReadRecord(operation, consistent, tuple(sizes), units, attribute_bytes=attributes))
        else:  # Query, Scan
            consistent = bool(params.get("ConsistentRead"))
            index = next((i for i in self.indexes if i.name == params.get("IndexName")), None)
            items = parsed.get("Items", [])
            # Sized as index entries, whatever the emulator returns for an index query.
            sizes = tuple(
                item_size((index_entry(item, index, self.table_key) if index else None) or item) for item in items
            )
            total = float(sum(sizes))
            count, scanned = int(parsed.get("Count", len(items))), int(parsed.get("ScannedCount", len(items)))
            approximate = "FilterExpression" in params and scanned > count
            if approximate and count:
                total = total * scanned / count
            units = read_units_for(math.ceil(total), consistent=consistent)
            records.append(
                ReadRecord(
                    operation,
                    consistent,
                    sizes,
                    units,
                    approximate,
                    tuple(self._attribute_bytes(item) for item in items),
                )
            )
        with self._lock:
            self.reads.extend(records)
            self.usage.reads += 1
            self.usage.read_units += sum(r.units for r in records)

    # -- plumbing -----------------------------------------------------------------------------

    def _key_of(self, params: dict[str, Any]) -> dict[str, Any]:
        if "Key" in params:
            return dict(params["Key"])
        item = params.get("Item", {})
        return {name: item[name] for name in self.table_key if name in item}

    def _key_lock(self, table: str, key: dict[str, Any]) -> threading.Lock:
        name = f"{table}\0{_key_text(key)}"
        with self._lock:
            return self._key_locks.setdefault(name, threading.Lock())

    def _read(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        with outside_functions():  # the meter's read, not the function's (offpath_local.aws_calls)
            response = self.reader.get_item(TableName=table, Key=key, ConsistentRead=True)
        item: dict[str, Any] | None = response.get("Item")
        return item

    def _attribute_bytes(self, item: Item | None) -> dict[str, int]:
        if not item:
            return {}
        return {name: value_size(item[name]) for name in self.attributes if name in item}

    @staticmethod
    def _release(state: dict[str, Any]) -> None:
        lock = state.pop("lock", None)
        if lock is not None:
            lock.release()


def _key_text(key: Mapping[str, Mapping[str, Any]]) -> str:
    return "|".join(f"{name}={next(iter(value.values()))}" for name, value in sorted(key.items()))
