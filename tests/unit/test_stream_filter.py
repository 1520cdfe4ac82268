"""The notifier's stream filter (offpath.naming.NOTIFIER_STREAM_FILTER) keeps exactly the job items: every other
item kind of the table (a key's record, a once mark, a schedule, quota and webhook items) is left out. Matched as
Lambda matches it, by the local runtime's `streams.matches`, against the store's own items."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from offpath.adapters.dynamodb_quotas import usage_key
from offpath.adapters.dynamodb_store import (
    attribute_values,
    item_key,
    key_record_to_item,
    schedule_state_to_item,
    to_item,
)
from offpath.adapters.webhook_store import endpoints_key, log_key
from offpath.domain.ids import new_job_id
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import KeyRecord, ScheduleState
from offpath.naming import NOTIFIER_STREAM_FILTER
from offpath_local.streams import matches

NOW = datetime(2026, 12, 1, tzinfo=UTC)
JOB = Job(
    job_id=new_job_id(NOW),
    tenant="tenant-a",
    type="demo.echo",
    queue="default",
    payload={},
    payload_hash="0" * 64,
    status=JobStatus.QUEUED,
    created_at=NOW,
    updated_at=NOW,
    max_attempts=3,
)


def record(image: dict[str, Any], event: str = "INSERT") -> dict[str, Any]:
    return {"eventName": event, "dynamodb": {"NewImage": image}}


@pytest.mark.parametrize("event", ["INSERT", "MODIFY"])
def test_a_job_item_is_kept(event: str) -> None:
    assert matches(NOTIFIER_STREAM_FILTER, record(to_item(JOB), event))


def test_a_removed_job_item_is_left_out() -> None:
    assert not matches(NOTIFIER_STREAM_FILTER, {"eventName": "REMOVE", "dynamodb": {"OldImage": to_item(JOB)}})


@pytest.mark.parametrize(
    "image",
    [
        key_record_to_item("tenant-a", "order-42", KeyRecord(JOB.job_id, NOW, "f", "s"), NOW),
        attribute_values({**item_key(f"ONCE#{JOB.job_id}#charge"), "mark_token": "t"}),
        schedule_state_to_item(ScheduleState("nightly", None, ())),
        attribute_values({**item_key(usage_key("tenant-a", 3)), "open_jobs": 1}),
        attribute_values({**item_key(endpoints_key("tenant-a")), "endpoints_json": "{}"}),
        attribute_values({**item_key(log_key("tenant-a", "hook")), "attempts_json": "[]"}),
    ],
    ids=["key-record", "once-mark", "schedule", "quota", "webhooks", "webhook-log"],
)
def test_every_other_item_is_left_out(image: dict[str, Any]) -> None:
    assert not matches(NOTIFIER_STREAM_FILTER, record(image))
    assert not matches(NOTIFIER_STREAM_FILTER, record(image, "MODIFY"))
