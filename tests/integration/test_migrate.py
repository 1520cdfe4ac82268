"""`offpath migrate`: the v1 items (tests/fixtures/items/v1) copied from a retained old table into the table the
current stack creates, upcast, then carried on by this release's handlers."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from offpath.adapters.item_formats import format_of
from offpath.domain.job import JobStatus
from offpath.domain.ports import JobMessage
from offpath_local import cli
from offpath_local.resources import create_table
from offpath_tools.clocks import ManualClock
from tests.integration.conftest import Pipeline
from tests.integration.test_upgrade_from_v1 import IDS, TENANT, V1, clock, v1_items, view_of

__all__ = ["clock"]  # the upgrade test's clock fixture: two hours after v1 wrote its items

OLD_TABLE = "offpath-jobs-v1"


@pytest.fixture
def old_table(timed: Pipeline) -> str:
    """The old stack's table, retained beside the new one, holding what v1 wrote."""
    client = timed.clients["dynamodb"]
    create_table(client, OLD_TABLE)
    for path in sorted(V1.glob("*.json")):
        if path.name != "context.json":
            for item in json.loads(path.read_text()).values():
                client.put_item(TableName=OLD_TABLE, Item=item)
    return OLD_TABLE


@pytest.fixture
def timed(resources: Any, clients: dict[str, Any], registry: Any, metrics: Any, clock: Any) -> Pipeline:
    return Pipeline(resources, clients, registry, metrics, clock=clock)


def migrate(pipeline: Pipeline, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, Any]]:
    code = cli.main(
        ["migrate", "--from-table", OLD_TABLE, "--to-table", pipeline.resources.table_name, "--json", *extra]
    )
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def all_items(pipeline: Pipeline, table: str) -> list[dict[str, Any]]:
    pages = pipeline.clients["dynamodb"].get_paginator("scan").paginate(TableName=table)
    return [item for page in pages for item in page["Items"]]


EVERY_KIND = {
    "idempotency key record": 2,
    "job": 9,
    "once mark": 1,
    "quota rate bucket": 1,
    "quota usage counter": 1,
    "schedule state": 1,
    "webhook delivery log": 1,
    "webhook endpoints": 1,
}


def test_a_dry_run_counts_every_item_by_kind_and_version_and_writes_nothing(
    timed: Pipeline, old_table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = migrate(timed, capsys, "--dry-run")

    assert code == 0
    assert {kind: k["written"] for kind, k in report["kinds"].items()} == EVERY_KIND
    assert all(k["from_versions"] == {"1": k["read"]} for k in report["kinds"].values())
    assert all_items(timed, timed.resources.table_name) == []


def test_the_migration_copies_every_item_upcast_and_leaves_the_old_table_as_it_was(
    timed: Pipeline, old_table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = all_items(timed, OLD_TABLE)

    code, report = migrate(timed, capsys)

    assert code == 0
    assert {kind: k["written"] for kind, k in report["kinds"].items()} == EVERY_KIND
    copied = {(i["pk"]["S"], i["sk"]["S"]): i for i in all_items(timed, timed.resources.table_name)}
    assert len(copied) == 17
    swept = set()
    for item in before:
        # The same item, in the current format: its version was added (the upcast from v1 to v2), and an
        # unfinished job outside the sweep index entered it.
        found = dict(copied[(item["pk"]["S"], item["sk"]["S"])])
        if "sweep_at" in found and "sweep_at" not in item:
            swept.add(item["sk"]["S"])
            del found["sweep_at"], found["sweep_pk"]
        kind = format_of(item["pk"]["S"])
        assert kind is not None
        assert found == {**item, "v": {"N": str(kind.version)}}
    assert swept == {IDS[label] for label in ("QUEUED", "KEYED", "RETRYING", "FIRED")}
    assert report["kinds"]["job"]["swept"] == 4
    assert all_items(timed, OLD_TABLE) == before


def test_migrated_jobs_run_on_in_the_new_table(
    timed: Pipeline, old_table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrate(timed, capsys)
    queued = timed.store.get(IDS["QUEUED"], tenant=TENANT)
    assert queued is not None
    timed.queue.send(queued.queue, JobMessage.of(queued))

    report = timed.sweep()
    timed.drain()

    assert report["requeued"] == 1  # the RUNNING job whose lease expired (the sweep index is the new table's)
    assert view_of(timed, "QUEUED")["status"] == "SUCCEEDED"
    assert view_of(timed, "RUNNING")["status"] == "SUCCEEDED"
    assert view_of(timed, "SUCCEEDED")["result"] == {"greeting": "hello"}


def test_jobs_whose_messages_the_new_workers_dropped_before_the_copy_are_sent_again_by_the_sweeper(
    timed: Pipeline, old_table: str, capsys: pytest.CaptureFixture[str], clock: ManualClock
) -> None:
    # The new stack's workers met the v1 messages before the jobs were copied, and dropped them: no message is left.
    migrate(timed, capsys)
    clock.set(datetime.now(UTC) + timedelta(minutes=3))  # past the migration's sweep time and the sweep's grace

    report = timed.sweep()
    timed.drain()
    timed.drain("bulk")

    assert (report["resent"], report["requeued"], report["enqueued"]) == (4, 1, 1)
    for label in ("QUEUED", "KEYED", "RETRYING", "RUNNING", "SCHEDULED"):
        assert view_of(timed, label)["status"] == "SUCCEEDED", label
    fired = timed.store.get(IDS["FIRED"], tenant="system")
    assert fired is not None and fired.status is JobStatus.SUCCEEDED


def test_a_second_run_leaves_what_the_new_stack_changed_and_copies_nothing_twice(
    timed: Pipeline, old_table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrate(timed, capsys)
    code, cancelled, _ = timed.call("POST", f"/jobs/{IDS['QUEUED']}/cancel", tenant=TENANT)
    assert (code, cancelled["status"]) == (200, "CANCELLED")

    code, report = migrate(timed, capsys)

    assert code == 0
    assert {kind: k["present"] for kind, k in report["kinds"].items()} == EVERY_KIND
    assert sum(k["written"] for k in report["kinds"].values()) == 0
    assert view_of(timed, "QUEUED")["status"] == "CANCELLED"


def test_an_item_of_a_kind_this_release_does_not_know_is_copied_as_it_is(
    timed: Pipeline, old_table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    stranger = {"pk": {"S": "LATER#1"}, "sk": {"S": "#"}, "note": {"S": "kept"}}
    timed.clients["dynamodb"].put_item(TableName=OLD_TABLE, Item=stranger)

    code, report = migrate(timed, capsys)

    assert code == 0
    assert report["kinds"]["unknown kind"]["written"] == 1
    key = {"pk": stranger["pk"], "sk": stranger["sk"]}
    assert timed.clients["dynamodb"].get_item(TableName=timed.resources.table_name, Key=key)["Item"] == stranger


def test_an_item_that_cannot_be_upcast_is_named_and_the_others_are_copied(
    timed: Pipeline, old_table: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from offpath.adapters import item_formats

    [usage_key] = v1_items("quota_usage_counters")

    def broken(item: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("tat")

    # A release whose usage counters' upcaster fails on what v1 wrote.
    usage = item_formats.QUOTA_USAGE
    failing = item_formats.ItemFormat(usage.kind, usage.prefix, version=2, upcasters=(broken,))
    monkeypatch.setattr(item_formats, "_BY_PREFIX", [failing if f is usage else f for f in item_formats._BY_PREFIX])

    code, report = migrate(timed, capsys)

    assert code == 1
    assert list(report["failed"]) == [usage_key]
    assert sum(k["written"] for k in report["kinds"].values()) == 16


def test_the_two_tables_must_differ(timed: Pipeline, capsys: pytest.CaptureFixture[str]) -> None:
    name = timed.resources.table_name

    code = cli.main(["migrate", "--from-table", name, "--to-table", name])

    assert code == 2
    assert "must be two tables" in capsys.readouterr().err


def test_a_dry_run_needs_only_the_old_table(
    timed: Pipeline, old_table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["migrate", "--from-table", OLD_TABLE, "--to-table", "made-by-the-next-deploy", "--dry-run"])

    assert code == 0
    assert "would copy 17 items; 0 not copied" in capsys.readouterr().out


def test_a_missing_table_is_named_and_nothing_is_read(timed: Pipeline, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["migrate", "--from-table", "no-such-table", "--to-table", timed.resources.table_name])

    assert code == 2
    assert "cannot read table no-such-table" in capsys.readouterr().err
