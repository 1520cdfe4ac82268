"""The formats of the jobs table's items, versioned: one declaration per item kind (its key prefix, its current
version and the upcasters that bring each earlier version to the next), used by the stores on every whole-item
write (`stamp`) and every read (`read`), and by `offpath migrate` when it copies items to a new table.

An item carries its format's version in the attribute `v`; an item without it was written by release v1 (whose
items are kept in tests/fixtures/items/v1, never regenerated). `read` applies the upcasters from the item's
version to the current one, in order, on the item's plain values (boto3's TypeDeserializer output), so the code
past it only ever sees the current format. How a format changes: docs/decisions.md (2026-12-02, "Item formats
are versioned").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from offpath.naming import JOB_ITEM_PREFIX, PAUSES_ITEM_KEY

logger = logging.getLogger(__name__)

# The attribute that holds an item's format version (a number).
FORMAT_ATTRIBUTE = "v"
# The version of an item without FORMAT_ATTRIBUTE: every item release v1 wrote.
FIRST_VERSION = 1

Plain = dict[str, Any]
Upcaster = Callable[[Plain], Plain]


@dataclass(frozen=True)
class ItemFormat:
    """One kind of item: `upcasters[i]` turns an item of version FIRST_VERSION + i into one of the next version,
    so there is exactly one upcaster per version before `version`."""

    kind: str
    prefix: str  # the partition key's prefix, which tells the kind of an item
    version: int
    upcasters: tuple[Upcaster, ...]

    def __post_init__(self) -> None:
        if len(self.upcasters) != self.version - FIRST_VERSION:
            raise ValueError(f"{self.kind}: version {self.version} needs one upcaster per earlier version")

    @property
    def stamp(self) -> Plain:
        """What marks a whole item written now with the current version (spread into the item: `**JOB.stamp`)."""
        return {FORMAT_ATTRIBUTE: self.version}

    def read(self, plain: Mapping[str, Any]) -> Plain:
        """An item as read, brought to the current version. A newer version (written by a later release, before
        a rollback) is read as it is: a format change keeps what the release before reads (docs/decisions.md)."""
        version = version_of(plain)
        item = dict(plain)
        if version > self.version:
            logger.warning("an item of a newer format; read as version %d", self.version, extra={"kind": self.kind})
            return item
        for upcast in self.upcasters[version - FIRST_VERSION :]:
            item = upcast(item)
        item[FORMAT_ATTRIBUTE] = self.version
        return item


def version_of(plain: Mapping[str, Any]) -> int:
    value = plain.get(FORMAT_ATTRIBUTE)
    return FIRST_VERSION if value is None else int(value)


def v2_adds_the_version(plain: Plain) -> Plain:
    """1 -> 2: version 2 is version 1 with its version written (FORMAT_ATTRIBUTE, set by `read`)."""
    return plain


# -- the item kinds, one declaration each ----------------------------------------------------------------------


def v3_adds_the_tags(plain: Plain) -> Plain:
    """2 -> 3: a job may carry `tags` (a map of text), `trace_id` (its W3C trace) and `discarded_at` (its dead letter
    discarded by an operator), and an attempt's error in
    `attempts_json` may be an object (type, message, traceback); a job written before has no tags and no trace,
    and its attempts' errors are text (read as a message without type or traceback, `attempts_from_json`)."""
    return plain


def v4_adds_groups_and_flow_control(plain: Plain) -> Plain:
    """3 -> 4: a job may carry its chain (`then_json`, `parent_job_id`, `next_job_id`), its batch (`batch_id`,
    `batch_counted`, `callback_of`), the bulk operation that last moved it (`bulk_operation_id`), its expiry
    (`start_by`), its debounce (`debounce_key`, `debounce_s`) and why it was cancelled (`cancel_reason`,
    `superseded_by`), and its last hand retry's time (`retried_at`); a job written before has none of them, which
    reads as a job in no chain or batch, without expiry or debounce, never retried by hand since it was kept."""
    return plain


JOB = ItemFormat(
    "job",
    JOB_ITEM_PREFIX,
    version=4,
    upcasters=(v2_adds_the_version, v3_adds_the_tags, v4_adds_groups_and_flow_control),
)
KEY_RECORD = ItemFormat("idempotency key record", "IDEM#", version=2, upcasters=(v2_adds_the_version,))
SCHEDULE_STATE = ItemFormat("schedule state", "SCHEDULE#", version=2, upcasters=(v2_adds_the_version,))
ONCE_MARK = ItemFormat("once mark", "ONCE#", version=2, upcasters=(v2_adds_the_version,))
# A debounce key's record (logic/debounce.py): new with this release, so its first version is FIRST_VERSION.
DEBOUNCE_RECORD = ItemFormat("debounce record", "DEBOUNCE#", version=FIRST_VERSION, upcasters=())
QUOTA_RATE = ItemFormat("quota rate bucket", "QUOTA#RATE#", version=2, upcasters=(v2_adds_the_version,))
QUOTA_USAGE = ItemFormat("quota usage counter", "QUOTA#USE#", version=2, upcasters=(v2_adds_the_version,))

# The job types' flow limits (adapters/dynamodb_limits.py): one key's concurrency slots, one key's token bucket.
LIMIT_SLOTS = ItemFormat("concurrency slots", "LIMIT#SLOTS#", version=1, upcasters=())
LIMIT_RATE = ItemFormat("rate limit bucket", "LIMIT#RATE#", version=1, upcasters=())


def v3_seals_the_secrets(plain: Plain) -> Plain:
    """2 -> 3: an endpoint's signing secrets are sealed (KMS on AWS, the local key file) instead of kept in clear;
    a clear secret of an older item is read as it is and sealed at the item's next write."""
    return plain


WEBHOOK_ENDPOINTS = ItemFormat(
    "webhook endpoints", "WEBHOOKS#", version=3, upcasters=(v2_adds_the_version, v3_seals_the_secrets)
)


def v3_names_the_job(plain: Plain) -> Plain:
    """2 -> 3: each attempt in a delivery log's `attempts_json` may name the job it was about (`job_id`); an attempt
    written before has none (read as null)."""
    return plain


WEBHOOK_LOG = ItemFormat(
    "webhook delivery log", "WEBHOOKLOG#", version=3, upcasters=(v2_adds_the_version, v3_names_the_job)
)

# A batch (its counts and callbacks), a page of its members' ids, and a batch's idempotency key record.
BATCH = ItemFormat("batch", "BATCH#", version=1, upcasters=())
BATCH_PAGE = ItemFormat("batch page", "BATCHPAGE#", version=1, upcasters=())
BATCH_KEY = ItemFormat("batch key record", "BATCHKEY#", version=1, upcasters=())
# A bulk operation (POST /jobs/bulk: adapters/dynamodb_bulk.py), and the one item naming the running ones.
BULK_OPERATION = ItemFormat("bulk operation", "BULK#", version=1, upcasters=())
BULK_OPEN = ItemFormat("open bulk operations", "BULKOPEN#", version=1, upcasters=())
# Every pause in force (adapters/dynamodb_pauses.py): one item, one attribute per paused queue class or job type.
PAUSES = ItemFormat("pauses", PAUSES_ITEM_KEY, version=1, upcasters=())

FORMATS = (
    JOB,
    KEY_RECORD,
    SCHEDULE_STATE,
    ONCE_MARK,
    QUOTA_RATE,
    QUOTA_USAGE,
    WEBHOOK_ENDPOINTS,
    WEBHOOK_LOG,
    BATCH,
    BATCH_PAGE,
    BATCH_KEY,
    LIMIT_SLOTS,
    LIMIT_RATE,
    BULK_OPERATION,
    BULK_OPEN,
    DEBOUNCE_RECORD,
    PAUSES,
)
# Longest prefix first: `QUOTA#RATE#` before any shorter prefix it starts with.
_BY_PREFIX = sorted(FORMATS, key=lambda f: len(f.prefix), reverse=True)


def format_of(partition_key: str) -> ItemFormat | None:
    """The format of an item by its partition key; None for a key no store of this release writes."""
    return next((f for f in _BY_PREFIX if partition_key.startswith(f.prefix)), None)
