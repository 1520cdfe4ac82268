"""`offpath bulk retry|cancel [filters]`: a dry run's preview (the count and a sample), a question (or `--yes`),
then the operation's progress (GET /jobs/bulk/{id}) until it is over.

Exit codes: 0 the operation finished (or a dry run, or nothing matched), 1 it was refused, stopped, some jobs
failed, or the answer was no; 2 a question that cannot be asked (the input is not a terminal and no `--yes`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from offpath_local.client import Answer, ApiClient

OK, REFUSED, USAGE = 0, 1, 2
POLL_S = 1.0


def run_bulk(
    client: ApiClient,
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
    refused: Callable[[Answer], int],
    *,
    ask: Callable[[str], str] | None = None,
    interactive: Callable[[], bool] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    wanted = {"status": args.status, "type": args.type, "tag": args.tag, "tenant": args.tenant}
    bulk_filter = {name: value for name, value in wanted.items() if value}
    preview = client.call("POST", "/jobs/bulk", body={"action": args.action, "filter": bulk_filter, "dry_run": True})
    if not preview.ok:
        return refused(preview)
    count = int(preview.body["count"])
    shown = count if preview.body["exact"] else f"at least {count}"
    out.write(f"{args.action}: {shown} job(s) match {_described(preview.body['filter'])}\n")
    if not preview.body["exact"]:
        out.write(f"(one operation acts on at most {preview.body['limit']} jobs)\n")
    _sample(preview.body["sample"], count, out)
    if args.dry_run:
        return OK
    if count == 0:
        out.write("nothing to do\n")
        return OK
    if not args.yes:
        question = f"{args.action} {shown} job(s)? [y/N] "
        if not (interactive() if interactive is not None else sys.stdin.isatty()):
            err.write(f"offpath: add --yes to {args.action} {shown} job(s) without a question\n")
            return USAGE
        answer = ask(question) if ask is not None else input(question)
        if answer.strip().lower() not in ("y", "yes"):
            out.write("nothing done\n")
            return REFUSED
    started = client.call("POST", "/jobs/bulk", body={"action": args.action, "filter": bulk_filter})
    if not started.ok:
        return refused(started)
    return _follow(client, started.body, out, args.timeout, sleep)


def _described(bulk_filter: dict[str, Any]) -> str:
    parts = [f"{name} {bulk_filter[name]}" for name in ("tenant", "status", "type", "tag") if bulk_filter.get(name)]
    return "(" + ", ".join(parts) + ")"


def _sample(sample: list[dict[str, Any]], count: int, out: TextIO) -> None:
    if not sample:
        return
    rows = [["JOB_ID", "TYPE", "STATUS", "CREATED"]]
    rows += [[job["job_id"], job["type"], job["status"], job["created_at"]] for job in sample]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        out.write("  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() + "\n")
    if count > len(sample):
        out.write(f"  ... and {count - len(sample)} more\n")


def _follow(
    client: ApiClient, operation: dict[str, Any], out: TextIO, timeout_s: float | None, sleep: Callable[[float], None]
) -> int:
    path = f"/jobs/bulk/{operation['operation_id']}"
    out.write(f"operation {operation['operation_id']}\n")
    deadline = time.monotonic() + timeout_s if timeout_s else None
    last = ""
    while True:
        line = _progress_line(operation)
        if line != last:
            out.write(line + "\n")
            out.flush()
            last = line
        if operation["status"] != "running":
            break
        if deadline is not None and time.monotonic() >= deadline:
            out.write(f"still running after {timeout_s:g} s; follow it at GET {path}\n")
            return REFUSED
        sleep(POLL_S)
        answer = client.call("GET", path)
        if answer.ok:
            operation = answer.body
    for reason, skipped in sorted(operation.get("skipped_reasons", {}).items()):
        out.write(f"  skipped {skipped}: {reason}\n")
    for failure in operation.get("failures", []):
        out.write(f"  failed {failure['job_id']}: {failure['error']}\n")
    if operation.get("limit_reached"):
        out.write(f"  stopped at the limit of {operation['limit']} jobs; run it again for the rest\n")
    if operation["status"] == "stopped":
        out.write(f"  stopped: {operation.get('stop_reason')}\n")
    return OK if operation["status"] == "finished" and not operation["failed"] else REFUSED


def _progress_line(operation: dict[str, Any]) -> str:
    return (
        f"{operation['status']}: {operation['matched']} matched, {operation['done']} done, "
        f"{operation['skipped']} skipped, {operation['failed']} failed"
    )
