"""The capacity meter attached to the store's DynamoDB client, while the real handlers run a job."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from offpath.domain.errors import QueueUnavailableError
from offpath.logic.sweep import SweepPolicy, sweep
from offpath_tools.clocks import ManualClock
from offpath_tools.write_units import CapacityMeter
from tests.integration.conftest import Pipeline, aws_calls


@pytest.fixture
def meter(pipeline: Pipeline) -> Iterator[CapacityMeter]:
    meter = CapacityMeter(pipeline.clients["dynamodb"], boto3.client("dynamodb")).attach()
    try:
        yield meter
    finally:
        meter.detach()


def test_a_plain_job_from_submit_to_success_costs_three_write_units_and_writes_no_index_entry(
    pipeline: Pipeline, meter: CapacityMeter
) -> None:
    """No listing index (a tenant's listing queries the table's key) and no sweep entry (sent before written)."""
    _, job, _ = pipeline.submit("demo.echo", {"n": 1})
    pipeline.drain()

    assert pipeline.store.get(job["job_id"], tenant="tenant-a").status.value == "SUCCEEDED"  # type: ignore[union-attr]
    assert [w.operation for w in meter.writes] == ["PutItem", "UpdateItem", "UpdateItem"]
    assert meter.usage.table_write_units == 3
    assert dict(meter.usage.index_write_units) == {"sweep": 0}
    assert meter.usage.write_units == 3


def test_a_keyed_job_from_submit_to_success_costs_four_write_units_its_keys_record_one_of_them(
    pipeline: Pipeline, meter: CapacityMeter
) -> None:
    _, job, _ = pipeline.submit("demo.echo", {"n": 1}, headers={"Idempotency-Key": "k-1"})
    pipeline.drain()

    assert pipeline.store.get(job["job_id"], tenant="tenant-a").status.value == "SUCCEEDED"  # type: ignore[union-attr]
    assert [(w.operation, w.key.split("#", 1)[0]) for w in meter.writes] == [
        ("PutItem", "pk=IDEM"),
        ("PutItem", "pk=JOB"),
        ("UpdateItem", "pk=JOB"),
        ("UpdateItem", "pk=JOB"),
    ]
    assert dict(meter.usage.index_write_units) == {"sweep": 0}
    assert meter.usage.write_units == 4


def test_a_job_whose_send_failed_is_in_the_sweep_index_until_it_succeeds(
    pipeline: Pipeline, meter: CapacityMeter
) -> None:
    def fail(*args: Any, **kwargs: Any) -> None:
        raise QueueUnavailableError("SQS unreachable")

    sends = pipeline.queue.send
    pipeline.queue.send = fail  # type: ignore[method-assign]
    _, job, _ = pipeline.submit("demo.echo", {"n": 1})
    pipeline.queue.send = sends  # type: ignore[method-assign]
    later = ManualClock(datetime.now(UTC) + timedelta(hours=1))
    sweep(dataclasses.replace(pipeline.ports, clock=later), SweepPolicy())
    pipeline.drain()

    assert pipeline.store.get(job["job_id"], tenant="tenant-a").status.value == "SUCCEEDED"  # type: ignore[union-attr]
    # Entering (1), the sweeper moving its sweep time on as it sends (2: the old entry out, the new one in),
    # leaving at the success (1).
    assert meter.usage.index_write_units["sweep"] == 4


def test_a_replayed_submit_costs_the_existing_items_size_and_no_index_units(
    pipeline: Pipeline, meter: CapacityMeter
) -> None:
    pipeline.submit("demo.echo", {"n": 1}, headers={"Idempotency-Key": "k-1"})
    meter.reset()

    status, _, _ = pipeline.submit("demo.echo", {"n": 1}, headers={"Idempotency-Key": "k-1"})

    assert status == 200
    assert meter.usage.failed_conditions == 1  # the key's record, which names the job (then read: one unit)
    assert meter.usage.write_units == 1
    assert meter.usage.read_units == 1


def test_a_consistent_read_of_a_small_job_costs_one_read_unit(pipeline: Pipeline, meter: CapacityMeter) -> None:
    _, job, _ = pipeline.submit("demo.echo", {"n": 1})
    meter.reset()
    # The first read of a due job in an environment also reads the pause state (why it waits, if it does); the
    # environment keeps it for 10 s.
    pipeline.call("GET", f"/jobs/{job['job_id']}")
    assert (meter.usage.reads, meter.usage.read_units) == (2, 2)
    meter.reset()

    pipeline.call("GET", f"/jobs/{job['job_id']}")

    assert meter.usage.read_units == 1
    assert meter.usage.writes == 0


def test_the_meters_own_reads_are_not_counted_as_the_clients_calls(pipeline: Pipeline, meter: CapacityMeter) -> None:
    calls = aws_calls(pipeline.clients["dynamodb"])

    pipeline.submit("demo.echo", {"n": 1})

    assert calls == {"DynamoDB.PutItem": 1}
    assert meter.usage.writes == 1


def test_a_job_that_fails_once_with_a_traceback_then_succeeds_costs_one_write_unit_a_write(
    pipeline: Pipeline, meter: CapacityMeter
) -> None:
    """The failed attempt's type, message and traceback (two frames) keep every write of the job item within
    one KiB: submit, claim, retry, claim, success (docs/decisions.md, "Tracebacks")."""
    _, job, _ = pipeline.submit("demo.flaky", {"fail_first": 1})
    pipeline.drain()

    assert pipeline.store.get(job["job_id"], tenant="tenant-a").status.value == "SUCCEEDED"  # type: ignore[union-attr]
    assert [w.operation for w in meter.writes] == ["PutItem"] + ["UpdateItem"] * 4
    assert max(w.after_bytes for w in meter.writes) < 1024
    assert meter.usage.table_write_units == 5
