"""The item formats' versions and upcasters (offpath.adapters.item_formats), and the v1 fixtures read by them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from offpath.adapters.dynamodb_limits import bucket_key, slots_key
from offpath.adapters.dynamodb_quotas import rate_key, usage_key
from offpath.adapters.dynamodb_store import (
    from_item,
    idempotency_partition,
    job_partition,
    key_record_from_item,
    key_record_to_item,
    plain_values,
    schedule_key,
    schedule_state_from_item,
    schedule_state_to_item,
    to_item,
)
from offpath.adapters.item_formats import (
    FORMATS,
    JOB,
    KEY_RECORD,
    LIMIT_RATE,
    LIMIT_SLOTS,
    ONCE_MARK,
    QUOTA_RATE,
    QUOTA_USAGE,
    SCHEDULE_STATE,
    WEBHOOK_ENDPOINTS,
    WEBHOOK_LOG,
    ItemFormat,
    format_of,
)
from offpath.adapters.webhook_store import endpoint_from_json, endpoints_key, log_key
from offpath.domain.ids import new_job_id
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import KeyRecord, ScheduleState

V1 = Path(__file__).resolve().parents[1] / "fixtures" / "items" / "v1"
NOW = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


def test_the_item_kinds_and_their_current_versions() -> None:
    assert {f.kind: (f.prefix, f.version) for f in FORMATS} == {
        "job": ("JOB#", 4),
        "idempotency key record": ("IDEM#", 2),
        "schedule state": ("SCHEDULE#", 2),
        "once mark": ("ONCE#", 2),
        "quota rate bucket": ("QUOTA#RATE#", 2),
        "quota usage counter": ("QUOTA#USE#", 2),
        "webhook endpoints": ("WEBHOOKS#", 3),
        "webhook delivery log": ("WEBHOOKLOG#", 3),
        "batch": ("BATCH#", 1),
        "batch page": ("BATCHPAGE#", 1),
        "batch key record": ("BATCHKEY#", 1),
        "concurrency slots": ("LIMIT#SLOTS#", 1),
        "rate limit bucket": ("LIMIT#RATE#", 1),
        "bulk operation": ("BULK#", 1),
        "open bulk operations": ("BULKOPEN#", 1),
        "debounce record": ("DEBOUNCE#", 1),
        "pauses": ("PAUSES", 1),
    }


# A made-up kind with two format changes: 1 -> 2 renames `a` to `b`, 2 -> 3 makes `b` the number `c`.
RENAMED = ItemFormat(
    "example",
    "EX#",
    version=3,
    upcasters=(
        lambda item: {**{k: v for k, v in item.items() if k != "a"}, "b": item["a"]},
        lambda item: {**{k: v for k, v in item.items() if k != "b"}, "c": int(item["b"])},
    ),
)


def test_an_item_without_a_version_is_version_1_and_goes_through_every_upcaster_in_order() -> None:
    assert RENAMED.read({"pk": "EX#1", "a": "7"}) == {"pk": "EX#1", "c": 7, "v": 3}


def test_an_item_is_upcast_from_its_own_version_only() -> None:
    assert RENAMED.read({"pk": "EX#1", "b": "8", "v": 2}) == {"pk": "EX#1", "c": 8, "v": 3}
    assert RENAMED.read({"pk": "EX#1", "c": 9, "v": 3}) == {"pk": "EX#1", "c": 9, "v": 3}


def test_an_item_of_a_newer_version_than_the_code_knows_is_read_as_it_is() -> None:
    assert RENAMED.read({"pk": "EX#1", "c": 9, "d": "new", "v": 4}) == {"pk": "EX#1", "c": 9, "d": "new", "v": 4}


def test_a_format_needs_exactly_one_upcaster_per_earlier_version() -> None:
    with pytest.raises(ValueError, match="one upcaster per earlier version"):
        ItemFormat("example", "EX#", version=3, upcasters=())


def test_every_key_the_stores_make_names_its_items_format() -> None:
    assert format_of(job_partition("tenant-a", 3)) is JOB
    assert format_of(idempotency_partition("tenant-a", "k")) is KEY_RECORD
    assert format_of(schedule_key("nightly")) is SCHEDULE_STATE
    assert format_of(f"ONCE#{'a' * 32}#welcome") is ONCE_MARK
    assert format_of(rate_key("tenant-a", 0)) is QUOTA_RATE
    assert format_of(usage_key("tenant-a", 0)) is QUOTA_USAGE
    assert format_of(endpoints_key("tenant-a")) is WEBHOOK_ENDPOINTS
    assert format_of(log_key("tenant-a", "orders")) is WEBHOOK_LOG
    assert format_of(slots_key("demo.limited#ab12")) is LIMIT_SLOTS
    assert format_of(bucket_key("demo.rated#ab12", 0)) is LIMIT_RATE
    assert format_of("SOMETHING#ELSE") is None


def test_whole_items_written_now_carry_their_format_version() -> None:
    job = Job(
        job_id=new_job_id(NOW),
        tenant="tenant-a",
        type="demo.echo",
        queue="default",
        payload={},
        payload_hash="h",
        status=JobStatus.QUEUED,
        created_at=NOW,
        updated_at=NOW,
        max_attempts=3,
    )
    record = KeyRecord(job.job_id, NOW, "f", "s")

    assert to_item(job)["v"] == {"N": "4"}
    assert key_record_to_item("tenant-a", "k", record, NOW)["v"] == {"N": "2"}
    assert schedule_state_to_item(ScheduleState("nightly", None, (), version=1))["v"] == {"N": "2"}


def v1(kind: str) -> dict[str, dict[str, Any]]:
    items: dict[str, dict[str, Any]] = json.loads((V1 / f"{kind}.json").read_text())
    return items


def test_every_v1_item_has_no_version_and_a_kind_this_release_knows() -> None:
    kinds = {}
    for path in sorted(V1.glob("*.json")):
        if path.name == "context.json":
            continue
        for item in json.loads(path.read_text()).values():
            assert "v" not in item
            found = format_of(item["pk"]["S"])
            assert found is not None, item["pk"]
            kinds[path.stem] = found.kind
    assert kinds == {
        "idempotency_records": "idempotency key record",
        "jobs": "job",
        "once_marks": "once mark",
        "quota_rate_buckets": "quota rate bucket",
        "quota_usage_counters": "quota usage counter",
        "schedule_states": "schedule state",
        "webhook_delivery_logs": "webhook delivery log",
        "webhook_endpoints": "webhook endpoints",
    }


def test_v1_jobs_key_records_and_schedule_states_are_read_by_this_releases_readers() -> None:
    jobs = {label: from_item(item) for label, item in v1("jobs").items()}
    records = [key_record_from_item(item) for item in v1("idempotency_records").values()]
    [state] = [schedule_state_from_item("nightly-cleanup", item) for item in v1("schedule_states").values()]

    assert {label: job.status.value for label, job in jobs.items()} == {
        "CANCELLED": "CANCELLED",
        "FAILED": "FAILED",
        "FIRED": "QUEUED",
        "KEYED": "QUEUED",
        "QUEUED": "QUEUED",
        "RETRYING": "RETRYING",
        "RUNNING": "RUNNING",
        "SCHEDULED": "SCHEDULED",
        "SUCCEEDED": "SUCCEEDED",
    }
    assert sorted(r.job_id for r in records) == sorted([jobs["KEYED"].job_id, jobs["FIRED"].job_id])
    assert [f.job_id for f in state.firings] == [jobs["FIRED"].job_id]


def test_v1_webhook_endpoints_keep_both_secrets_of_their_rotation() -> None:
    [item] = v1("webhook_endpoints").values()
    endpoints = json.loads(WEBHOOK_ENDPOINTS.read(plain_values(item))["endpoints_json"])

    orders = endpoint_from_json("orders", endpoints["orders"])

    assert [s.expires_at is None for s in orders.secrets] == [True, False]
    assert all(s.value.startswith("whsec_") for s in orders.secrets)
