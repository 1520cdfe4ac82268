"""`offpath migrate --from-table OLD --to-table NEW [--dry-run]`: copies every item of a jobs table into a new
one, each brought to its kind's current format by the upcasters (offpath.adapters.item_formats). It is the
upgrade path of a release that changes the table's key schema: the new stack creates a new table beside the
old one, which it retains, and this command carries the old table's items over (docs/deploy.md, "Upgrading").

- Every item is read by a consistent Scan of the old table, page by page; nothing in the old table changes.
- An item of a kind this release knows is upcast (its key included: an upcaster of a key-schema change sets
  the new key) and written with its current version; an item of no known kind is copied as it is, and counted.
- Each write is conditional (the key must be new in the new table): an item the new stack has written or
  changed since is left alone and counted as present, so the command can be run again after a failure, or
  once more after the new stack took over, to pick up what the old stack wrote meanwhile.
- Every unfinished job the old table holds outside the sweep index (QUEUED, RETRYING, RUNNING: their messages
  are on the queues) enters it, due at once: a worker of the new stack that met the job's message before the job
  was copied dropped the message (a message of a job that does not exist is dropped), and the sweeper sends
  a message again for such a job (deferred while its queue holds a backlog; a duplicate is harmless).
- `--dry-run` reads and upcasts every item and writes nothing: the counts say what a run would copy, and an
  item that cannot be upcast is named (by key) before anything is written.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from offpath.adapters.dynamodb_store import (
    NEW_ITEM,
    ConditionFailed,
    attribute_values,
    call,
    iso,
    plain_key,
    plain_values,
    sweep_shard,
)
from offpath.adapters.item_formats import JOB, format_of, version_of
from offpath.domain.errors import StoreUnavailableError
from offpath.domain.job import JobStatus
from offpath.naming import TABLE_PARTITION_KEY

UNKNOWN = "unknown kind"
FAILED = 1


@dataclass
class KindReport:
    read: int = 0
    written: int = 0  # or, in a dry run, would be written
    present: int = 0  # already in the new table: left as it is
    swept: int = 0  # unfinished jobs entered in the sweep index
    from_versions: Counter[int] = field(default_factory=Counter)


@dataclass
class MigrationReport:
    from_table: str
    to_table: str
    dry_run: bool
    now: datetime
    kinds: dict[str, KindReport] = field(default_factory=dict)
    # The keys ("pk/sk") of items that could not be upcast or written, with the reason.
    failed: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "from_table": self.from_table,
            "to_table": self.to_table,
            "dry_run": self.dry_run,
            "kinds": {
                kind: {
                    "read": k.read,
                    "written": k.written,
                    "present": k.present,
                    "swept": k.swept,
                    "from_versions": {str(v): n for v, n in sorted(k.from_versions.items())},
                }
                for kind, k in sorted(self.kinds.items())
            },
            "failed": self.failed,
        }


def migrate(
    client: Any, from_table: str, to_table: str, *, dry_run: bool, now: datetime | None = None
) -> MigrationReport:
    """Copies (or, dry, only reads and upcasts) every item of `from_table` into `to_table`."""
    report = MigrationReport(from_table, to_table, dry_run, now or datetime.now(UTC))
    request: dict[str, Any] = {"TableName": from_table, "ConsistentRead": True}
    while True:
        page = call(client.scan, **request)
        for item in page.get("Items", []):
            _copy(client, item, report)
        if "LastEvaluatedKey" not in page:
            return report
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _copy(client: Any, item: dict[str, Any], report: MigrationReport) -> None:
    key = "/".join(plain_key(item))
    plain = plain_values(item)
    item_format = format_of(str(plain.get(TABLE_PARTITION_KEY, "")))
    kind = report.kinds.setdefault(item_format.kind if item_format else UNKNOWN, KindReport())
    kind.read += 1
    kind.from_versions[version_of(plain)] += 1
    try:
        upcast = item_format.read(plain) if item_format else plain
        if item_format is JOB and not JobStatus(upcast["status"]).is_final and not upcast.get("sweep_at"):
            upcast = {**upcast, "sweep_pk": sweep_shard(upcast["job_id"]), "sweep_at": iso(report.now)}
            kind.swept += 1
        written = attribute_values(upcast)
    except Exception as error:  # an upcaster that cannot read this item: named, never half-copied
        report.failed[key] = f"upcast: {type(error).__name__}: {error}"[:300]
        return
    if report.dry_run:
        kind.written += 1
        return
    try:
        call(client.put_item, TableName=report.to_table, Item=written, ConditionExpression=NEW_ITEM)
        kind.written += 1
    except ConditionFailed:
        kind.present += 1
    except StoreUnavailableError as error:
        report.failed[key] = f"write: {error}"[:300]


def run(args: argparse.Namespace, client: Any = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    if args.from_table == args.to_table:
        print("offpath migrate: --from-table and --to-table must be two tables", file=sys.stderr)
        return 2
    if client is None:
        import boto3

        from offpath.adapters.dynamodb_store import SDK_CONFIG

        client = boto3.client("dynamodb", region_name=args.region, endpoint_url=args.endpoint, config=SDK_CONFIG)
    # A dry run reads the old table only: it can run before the deploy that creates the new one.
    for table in (args.from_table,) if args.dry_run else (args.from_table, args.to_table):
        try:
            call(client.describe_table, TableName=table)
        except StoreUnavailableError as error:
            print(f"offpath migrate: cannot read table {table}: {error}", file=sys.stderr)
            return 2
    report = migrate(client, args.from_table, args.to_table, dry_run=args.dry_run)
    if args.json:
        print(json.dumps(report.as_json(), indent=2), file=out)
    else:
        _print(report, out)
    return FAILED if report.failed else 0


def _print(report: MigrationReport, out: TextIO) -> None:
    verb = "would copy" if report.dry_run else "copied"
    print(
        f"offpath migrate: {report.from_table} -> {report.to_table}{' (dry run)' if report.dry_run else ''}", file=out
    )
    for kind, k in sorted(report.kinds.items()):
        versions = ", ".join(f"v{v}: {n}" for v, n in sorted(k.from_versions.items()))
        present = f", {k.present} already there" if k.present else ""
        swept = f", {k.swept} unfinished entered in the sweep index" if k.swept else ""
        print(f"  {kind}: read {k.read} ({versions}), {verb} {k.written}{present}{swept}", file=out)
    for key, reason in sorted(report.failed.items()):
        print(f"  NOT COPIED {key}: {reason}", file=out)
    total = sum(k.written for k in report.kinds.values())
    print(f"{verb} {total} items; {len(report.failed)} not copied", file=out)
