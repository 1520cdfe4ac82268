"""The `offpath` command line.

    offpath local                       the whole pipeline on this machine (see docs/local.md)
    offpath submit TYPE --payload JSON  submit a job (--wait: follow it to its end)
    offpath status ID | jobs | queues | redrive QUEUE | schedules | trigger NAME | cancel ID
    offpath discard QUEUE ID            remove a FAILED job's dead letter (it stays FAILED, marked discarded)
    offpath bulk retry|cancel [filters] retry or cancel every job a filter matches (preview, confirm, progress)
    offpath pause queue|type NAME       pause a queue class or a job type: its jobs wait (resume: run again)
    offpath console --api URL           the web console for a deployed API, on 127.0.0.1:8080
    offpath clock --endpoint URL        fire a deployment's schedules where its Scheduler does not (LocalStack)
    offpath smoke --api URL             check a live stack after a deploy (docs/deploy.md)

The client commands talk to the local server by default (its URL and token are in the data
directory it writes), or to a deployed API with `--api URL` (SigV4-signed with the standard AWS
credential chain, or `--token` for a JWT-authorised API).

Exit codes: 0 ok, 1 the job failed or the request was refused, 2 usage, 3 cannot connect.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from offpath.logic.waiting import MAX_WAIT_S
from offpath_local.client import Answer, ApiClient, CannotConnectError, MissingCredentialsError

OK, REFUSED, USAGE, CANNOT_CONNECT = 0, 1, 2, 3
DEFAULT_DATA = ".offpath"
DEFAULT_URL = "http://127.0.0.1:8000"
FINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED"})
POLL_S = 0.25
# Each request of --wait waits this long for the job (GET /jobs/{id}?wait=N, the longest wait the API takes).
LONG_POLL_S = MAX_WAIT_S


class UsageError(Exception):
    pass


# -- arguments --------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="offpath",
        description="offpath: background jobs on AWS serverless. Run the pipeline locally, submit and inspect jobs.",
        epilog="Exit codes: 0 ok, 1 job failed or request refused, 2 usage, 3 cannot connect.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    client = argparse.ArgumentParser(add_help=False)
    target = client.add_argument_group("target")
    target.add_argument("--api", metavar="URL", help="a deployed API (default: the local server)")
    target.add_argument(
        "--token", help="bearer token (default: $OFFPATH_TOKEN, else the local server's, from its data directory)"
    )
    target.add_argument("--data", metavar="DIR", default=DEFAULT_DATA, help=f"local data directory ({DEFAULT_DATA})")
    target.add_argument("--json", action="store_true", help="print the API's JSON answers")

    local = commands.add_parser("local", help="run the whole pipeline on this machine (127.0.0.1)")
    local.add_argument("--port", type=int, default=8000, help="HTTP port of the API (default 8000; 0: any free port)")
    local.add_argument("--data", metavar="DIR", default=DEFAULT_DATA, help=f"data directory ({DEFAULT_DATA})")
    local.add_argument(
        "--token",
        metavar="TENANT:SECRET",
        action="append",
        default=[],
        help="a tenant and its bearer token (repeatable; default: tenant 'dev' with a random token)",
    )
    local.add_argument(
        "--admin",
        metavar="TENANT",
        action="append",
        default=[],
        help="tenant with the admin scope (default: the first)",
    )
    local.add_argument(
        "--fresh", action="store_true", help="start empty: forget the jobs, messages and schedules the data keeps"
    )
    local.add_argument(
        "--stop-grace",
        type=float,
        default=10.0,
        metavar="S",
        help="at stop, seconds the batches in flight get to finish (default 10)",
    )
    local.add_argument("--verbose", action="store_true", help="the functions' JSON log lines on the console too")
    local.add_argument("--quiet", action="store_true", help="no line per job state change")
    local.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    local.add_argument(
        "--load", metavar="MODULE", action="append", default=[], help="import a module of extra job types or schedules"
    )
    local.add_argument(
        "--quota",
        metavar="TENANT:submits_per_s=N,open_jobs=M[,delayed_jobs=K]",
        action="append",
        default=[],
        help="a tenant's quotas (repeatable; * for every tenant without its own; also burst=B)",
    )
    local.add_argument(
        "--webhook-port",
        metavar="N",
        type=int,
        action="append",
        default=[],
        help="a port of 127.0.0.1 where webhook receivers may listen (repeatable; default none)",
    )
    tuning = local.add_argument_group("timing (tests and demos)")
    tuning.add_argument("--clock-speed", type=float, default=1.0, help="scheduler clock speed (60: a minute a second)")
    tuning.add_argument("--clock-tick", type=float, default=1.0, help="seconds between scheduler clock ticks")
    tuning.add_argument("--alarm-interval", type=float, default=5.0, help="seconds between alarm evaluations")
    tuning.add_argument(
        "--timeout-scale", type=float, default=1.0, metavar="F", help="tests only: job, lease and worker timeouts x F"
    )
    tuning.add_argument(
        "--visibility-scale", type=float, default=1.0, metavar="F", help="tests only: queue visibility timeouts x F"
    )
    faults = local.add_argument_group("injected faults (off by default; docs/local.md)")
    faults.add_argument("--faults", type=int, metavar="SEED", help="inject random faults, seeded")
    faults.add_argument("--fault-rate", type=float, metavar="X", help="probability of each kind per eligible call")
    faults.add_argument("--fault", metavar="KIND[=RATE]", action="append", default=[], help="only these kinds")
    faults.add_argument(
        "--fault-job", metavar="KIND:JOB_ID", action="append", default=[], help="force a fault on that job"
    )

    submit = commands.add_parser("submit", parents=[client], help="submit a job")
    submit.add_argument("type", help="job type, e.g. demo.echo")
    submit.add_argument("--payload", default="{}", help="the payload, a JSON object (default {})")
    submit.add_argument("--key", help="Idempotency-Key: the same key and payload give the same job")
    submit.add_argument("--run-at", metavar="TIME", help="ISO 8601 time to run at, e.g. 2026-01-31T09:00:00Z")
    submit.add_argument("--queue", help="the job type's queue class (checked)")
    submit.add_argument(
        "--expires-at", metavar="TIME", help="not started by this ISO 8601 time, the job ends EXPIRED without running"
    )
    submit.add_argument(
        "--debounce",
        metavar="KEY:SECONDS",
        help="a later submit under KEY within SECONDS supersedes this job; the last runs SECONDS after it",
    )
    submit.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE", help="a tag (repeatable, up to 10)")
    submit.add_argument("--wait", action="store_true", help="follow the job to a final state (progress bar)")
    submit.add_argument("--timeout", type=float, metavar="S", help="with --wait: give up after S seconds (exit 1)")

    status = commands.add_parser("status", parents=[client], help="a job's status")
    status.add_argument("job_id")
    status.add_argument("--wait", action="store_true", help="wait for the job to be final (progress bar)")
    status.add_argument("--timeout", type=float, metavar="S", help="with --wait: give up after S seconds (exit 1)")

    jobs = commands.add_parser("jobs", parents=[client], help="your jobs, newest first")
    jobs.add_argument(
        "--status",
        type=str.upper,
        help="QUEUED, SCHEDULED, RUNNING, RETRYING, SUCCEEDED, FAILED, CANCELLED or EXPIRED (any case)",
    )
    jobs.add_argument("--type", help="a job type")
    jobs.add_argument("--limit", type=int, default=20)
    jobs.add_argument("--cursor")
    jobs.add_argument("--tenant", choices=["system"], help="admin: system lists the jobs that schedules made")
    jobs.add_argument("--tag", metavar="KEY:VALUE", help="only the jobs with this tag")

    batches = commands.add_parser("batches", parents=[client], help="your batches, newest first; with an id, one batch")
    batches.add_argument("batch_id", nargs="?", help="a batch: its counts, progress, callbacks and its jobs")
    batches.add_argument("--limit", type=int, default=20, help="batches (or, with an id, its jobs) shown")
    batches.add_argument("--cursor")

    commands.add_parser("queues", parents=[client], help="depth, in flight, oldest age and DLQ depth per queue")

    redrive = commands.add_parser("redrive", parents=[client], help="move a queue's DLQ messages back (admin)")
    redrive.add_argument("queue")
    redrive.add_argument("--max-per-second", type=int)

    discard = commands.add_parser(
        "discard", parents=[client], help="remove a FAILED job's dead letter; the job stays FAILED (admin)"
    )
    discard.add_argument("queue")
    discard.add_argument("job_id")

    for verb, what in (("pause", "its jobs wait, queued, no attempt spent"), ("resume", "its waiting jobs run")):
        switch = commands.add_parser(verb, parents=[client], help=f"{verb} a queue class or a job type: {what} (admin)")
        switch.add_argument("kind", choices=sorted(PAUSE_PATHS), help="queue (a queue class) or type (a job type)")
        switch.add_argument("name")
        if verb == "pause":
            switch.add_argument("--reason", help="why (shown with the pause; up to 200 characters)")

    commands.add_parser("schedules", parents=[client], help="declared schedules and their next firing")

    trigger = commands.add_parser("trigger", parents=[client], help="fire a declared schedule now (admin)")
    trigger.add_argument("schedule")

    cancel = commands.add_parser("cancel", parents=[client], help="cancel a job that has not started")
    cancel.add_argument("job_id")

    retry = commands.add_parser("retry", parents=[client], help="run a FAILED, CANCELLED or EXPIRED job again")
    retry.add_argument("job_id")
    retry.add_argument(
        "--now", action="store_true", help="run now, even a cancelled job whose run_at is still ahead (it keeps it)"
    )

    bulk = commands.add_parser(
        "bulk", parents=[client], help="retry or cancel every job a filter matches: a preview, a question, progress"
    )
    bulk.add_argument("action", choices=["retry", "cancel"])
    bulk.add_argument("--status", type=str.upper, help="only jobs in this state (any case)")
    bulk.add_argument("--type", help="only jobs of this type")
    bulk.add_argument("--tag", metavar="KEY:VALUE", help="only the jobs with this tag")
    bulk.add_argument("--tenant", help="admin: another tenant's jobs")
    bulk.add_argument("--dry-run", action="store_true", help="show what matches, change nothing")
    bulk.add_argument("--yes", action="store_true", help="no question (needed when the input is not a terminal)")
    bulk.add_argument("--timeout", type=float, metavar="S", help="stop following the progress after S seconds")

    commands.add_parser("job-types", parents=[client], help="the job types: queue, limits, who may submit")
    commands.add_parser("alarms", parents=[client], help="the alarms, those in ALARM first (admin)")
    stats = commands.add_parser("stats", parents=[client], help="per queue and job type: counts of the last minutes")
    stats.add_argument("--minutes", type=int, default=60, help="how many minutes back (1 to 1440, default 60)")

    # Listed here; its options belong to the measurement tooling, which parses them (see `main`).
    commands.add_parser("cost", help="what offpath costs on AWS for your volumes (us-east-1 list prices)")
    from offpath_local.console import proxy

    proxy.add_arguments(
        commands.add_parser("console", help="the web console for a deployed API, served on 127.0.0.1 (signs its calls)")
    )
    from offpath_local import deployed_clock, smoke

    deployed_clock.add_arguments(
        commands.add_parser("clock", help="fire a deployment's schedules and sweeper where its Scheduler does not")
    )
    smoke.add_arguments(commands.add_parser("smoke", help="check a live stack after a deploy, with a report"))
    # offpath_local/migrate.py (imported when it runs: it loads boto3).
    migrate = commands.add_parser("migrate", help="copy a jobs table's items into a new table, upcast (docs/deploy.md)")
    migrate.add_argument("--from-table", required=True, metavar="NAME", help="the table the old stack wrote")
    migrate.add_argument("--to-table", required=True, metavar="NAME", help="the new stack's table")
    migrate.add_argument("--dry-run", action="store_true", help="read and upcast every item, write nothing")
    migrate.add_argument("--region", help="the tables' region (default: your AWS configuration)")
    migrate.add_argument("--endpoint", metavar="URL", help="a DynamoDB endpoint other than AWS's (LocalStack)")
    migrate.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def entry() -> NoReturn:
    """The `offpath` command (and `python -m offpath_local`)."""
    sys.exit(main(standalone=True))


def main(argv: Sequence[str] | None = None, *, standalone: bool = False) -> int:
    """`standalone`: this process is the command; after `offpath local` has stopped, it ends at once."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["cost"]:
        return run_cost(words[1:])
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0) if isinstance(exit_.code, int) else USAGE
    try:
        if args.command == "local":
            code = run_local(args)
            if standalone:
                _end_process(code)
            return code
        if args.command == "console":
            from offpath_local.console import proxy

            return proxy.run(args)
        if args.command == "clock":
            from offpath_local import deployed_clock

            return deployed_clock.run(args)
        if args.command == "smoke":
            from offpath_local import smoke

            return smoke.run(args)
        if args.command == "migrate":
            from offpath_local import migrate

            return migrate.run(args)
        return run_client(args)
    except (UsageError, MissingCredentialsError) as error:
        print(f"offpath: {error}", file=sys.stderr)
        return USAGE
    except CannotConnectError as error:
        hint = "" if getattr(args, "api", None) else " (is `offpath local` running?)"
        print(f"offpath: {error}{hint}", file=sys.stderr)
        return CANNOT_CONNECT
    except KeyboardInterrupt:
        return 130


def run_cost(argv: list[str]) -> int:
    """`offpath cost`: the cost model is measurement tooling (offpath_tools), imported for this command only."""
    from offpath_tools import cost_command

    return cost_command.main(argv)


# -- offpath local ----------------------------------------------------------------------------


def run_local(args: argparse.Namespace) -> int:
    from offpath.domain.errors import TenantRefusedError
    from offpath.tenancy import checked_tenant
    from offpath_local.runtime import LocalConfig, LocalRuntime

    if os.environ.get("OFFPATH_RECORD_AWS_CALLS"):  # the functions' AWS calls, recorded for `make iam-check`
        from offpath_local import aws_calls

        aws_calls.install_from_environment()
    tokens: dict[str, str] = {}
    for item in args.token:
        tenant, sep, secret = item.partition(":")
        if not sep or not tenant.strip() or not secret.strip():
            raise UsageError(f"--token takes TENANT:SECRET, got {item[:40]!r}")
        try:
            checked = checked_tenant(tenant.strip(), "tenant")
        except TenantRefusedError as error:
            raise UsageError(f"--token {tenant.strip()[:40]!r}: {error}") from None
        tokens[checked] = secret.strip()
    unknown = [a for a in args.admin if tokens and a not in tokens]
    if unknown:
        raise UsageError(f"--admin {unknown[0]!r} is not a tenant given with --token")
    from offpath_local.faults import FaultConfig

    try:
        fault_config = FaultConfig.from_options(args.faults, args.fault_rate, args.fault, args.fault_job)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if not (0 < args.timeout_scale <= 1 and 0 < args.visibility_scale <= 1):
        raise UsageError("--timeout-scale and --visibility-scale must be in (0, 1]")
    if args.clock_speed <= 0 or args.clock_tick <= 0 or args.alarm_interval <= 0:
        raise UsageError("--clock-speed, --clock-tick and --alarm-interval must be positive")
    if args.stop_grace < 0:
        raise UsageError("--stop-grace must be 0 or more")
    if any(not 0 < port < 65536 for port in args.webhook_port) or args.port in args.webhook_port:
        raise UsageError("--webhook-port must be a port from 1 to 65535, other than the API's --port")
    config = LocalConfig(
        quotas=_quotas(args.quota),
        port=args.port,
        data_dir=Path(args.data),
        tokens=tokens,
        admins=tuple(args.admin),
        verbose=args.verbose,
        quiet=args.quiet,
        log_level=args.log_level,
        clock_speed=args.clock_speed,
        clock_tick_s=args.clock_tick,
        alarm_interval_s=args.alarm_interval,
        load_modules=tuple(args.load),
        faults=fault_config,
        timeout_scale=args.timeout_scale,
        visibility_scale=args.visibility_scale,
        fresh=args.fresh,
        stop_grace_s=args.stop_grace,
        webhook_ports=tuple(args.webhook_port),
    )
    from offpath_local.state import DataDirectoryInUse, UnreadableSnapshot

    stop = threading.Event()
    runtime = LocalRuntime(config)

    def on_signal(signum: int, frame: Any) -> None:
        if stop.is_set():  # a second one: do not wait for the batches in flight
            runtime.hurry()
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            runtime.start()
        except (DataDirectoryInUse, UnreadableSnapshot) as error:
            print(f"offpath local: cannot start: {error}", file=sys.stderr)
            return REFUSED
        except OSError as error:
            hint = " (is another program using this port? try --port)" if error.errno == errno.EADDRINUSE else ""
            print(f"offpath local: cannot start: {error}{hint}", file=sys.stderr)
            return REFUSED
        runtime.output.say(runtime.banner())
        while not stop.wait(0.2):
            pass
        runtime.output.say("offpath local: stopping (again to stop at once)")
    finally:
        runtime.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(f"offpath local: stopped; the state is in {runtime.snapshot.path}", file=sys.stderr)
    return OK


def _quotas(options: list[str]) -> str | None:
    """The `--quota` options as one text (None: none given, the environment's OFFPATH_QUOTAS applies)."""
    if not options:
        return None
    from offpath.domain.quotas import QuotaBook, QuotaSpecError, parse_entry

    entries = {}
    for option in options:
        try:
            tenant, quota = parse_entry(option)
        except QuotaSpecError as error:
            raise UsageError(f"--quota {error}") from None
        entries[tenant] = quota
    return QuotaBook().with_entries(entries).text()


def _end_process(code: int) -> NoReturn:
    """Everything is stopped and the state written: the process ends here. The batches given up at stop run on
    threads Python cannot stop (the interpreter would wait for them), and tearing down moto's objects takes
    the interpreter seconds."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# -- client commands --------------------------------------------------------------------------


def _client(args: argparse.Namespace) -> ApiClient:
    token = args.token or os.environ.get("OFFPATH_TOKEN") or None
    if args.api:
        return ApiClient(args.api, token=token, sign=token is None)
    state = _local_state(Path(args.data))
    url = os.environ.get("OFFPATH_URL") or state.get("url") or DEFAULT_URL
    return ApiClient(url, token=token or state.get("token"))


def _local_state(data_dir: Path) -> dict[str, Any]:
    try:
        state = json.loads((data_dir / "local.json").read_text(encoding="utf-8"))
        return state if isinstance(state, dict) else {}
    except (OSError, ValueError):
        return {}


def run_client(args: argparse.Namespace) -> int:
    client = _client(args)
    out = sys.stdout
    command = args.command
    if command == "submit":
        return _submit(client, args, out)
    if command == "status":
        answer = client.call("GET", f"/jobs/{_path_part(args.job_id)}")
        if not answer.ok:
            return _refused(answer)
        job = answer.body
        if args.wait:
            final = _follow(client, job, args.timeout, sys.stderr)
            if final is None:
                print(f"offpath: job {job['job_id']} is still not finished after {args.timeout:g} s", file=sys.stderr)
                return REFUSED
            job = final
        _print_job(job, out, args.json)
        return REFUSED if job.get("status") == "FAILED" else OK
    if command == "jobs":
        query = {
            "status": args.status,
            "type": args.type,
            "limit": str(args.limit),
            "cursor": args.cursor,
            "tenant": args.tenant,
            "tag": args.tag,
        }
        answer = client.call("GET", "/jobs", query={k: v for k, v in query.items() if v})
        if not answer.ok:
            return _refused(answer)
        if args.json:
            _json(answer.body, out)
        else:
            _table(
                out,
                ["JOB_ID", "TYPE", "STATUS", "ATTEMPTS", "CREATED"],
                [
                    [j["job_id"], j["type"], j["status"], f"{j['attempts']}/{j['max_attempts']}", j["created_at"]]
                    for j in answer.body.get("jobs", [])
                ],
            )
            if answer.body.get("cursor"):
                out.write(f"more: --cursor {answer.body['cursor']}\n")
        return OK
    if command == "batches":
        return _batches(client, args, out)
    if command == "queues":
        answer = client.call("GET", "/queues")
        if not answer.ok:
            return _refused(answer)
        if args.json:
            _json(answer.body, out)
        else:
            rows = []
            for q in answer.body.get("queues", []):
                age = q.get("oldest_age_s")
                redrive = q.get("redrive") or {}
                rows.append(
                    [
                        q["name"],
                        q["visible"],
                        q["in_flight"],
                        q.get("delayed", 0),
                        "-" if age is None else f"{age:g}s",
                        q["dlq_depth"],
                        redrive.get("status", "-") if redrive else "-",
                        _paused_since(q),
                    ]
                )
            _table(out, ["QUEUE", "VISIBLE", "IN_FLIGHT", "DELAYED", "OLDEST", "DLQ", "REDRIVE", "PAUSED"], rows)
        return OK
    if command == "redrive":
        query = {"max_per_second": str(args.max_per_second)} if args.max_per_second else None
        answer = client.call("POST", f"/queues/{_path_part(args.queue)}/redrive", query=query)
        if not answer.ok:
            return _refused(answer)
        if args.json:
            _json(answer.body, out)
        else:
            task = answer.body.get("redrive", {})
            moved = f", {task['moved']} moved" if task.get("moved") is not None else ""
            out.write(f"redrive of {args.queue}: {task.get('status', '?')}{moved}\n")
        return OK
    if command == "discard":
        answer = client.call("DELETE", f"/queues/{_path_part(args.queue)}/dead-letters/{_path_part(args.job_id)}")
        if not answer.ok:
            return _refused(answer)
        _print_job(answer.body, out, args.json)
        return OK
    if command in ("pause", "resume"):
        body = {"reason": args.reason} if command == "pause" and args.reason else None
        answer = client.call("POST", f"{PAUSE_PATHS[args.kind]}/{_path_part(args.name)}/{command}", body=body)
        if not answer.ok:
            return _refused(answer)
        if args.json:
            _json(answer.body, out)
        else:
            out.write(pause_line(answer.body) + "\n")
        return OK
    if command == "schedules":
        answer = client.call("GET", "/schedules")
        if not answer.ok:
            return _refused(answer)
        if args.json:
            _json(answer.body, out)
        else:
            rows = []
            for s in answer.body.get("schedules", []):
                last = (s.get("last_firings") or [{}])[0]
                rows.append(
                    [
                        s["name"],
                        s["expression"],
                        s["timezone"],
                        s["job"],
                        s.get("next_firing") or "-",
                        last.get("slot", "-"),
                    ]
                )
            _table(out, ["SCHEDULE", "EXPRESSION", "TIME_ZONE", "JOB", "NEXT", "LAST_SLOT"], rows)
        return OK
    if command == "trigger":
        answer = client.call("POST", f"/schedules/{_path_part(args.schedule)}/trigger")
        if not answer.ok:
            return _refused(answer)
        if args.json:
            _json(answer.body, out)
        else:
            body = answer.body
            if body.get("job_id") and not body.get("skipped_reason"):
                out.write(f"schedule {args.schedule} fired: job {body['job_id']}\n")
            else:
                out.write(f"schedule {args.schedule} skipped: {body.get('skipped_reason')}\n")
        return OK
    if command in ("cancel", "retry"):
        query = {"now": "true"} if command == "retry" and args.now else None
        answer = client.call("POST", f"/jobs/{_path_part(args.job_id)}/{command}", query=query)
        if not answer.ok:
            return _refused(answer)
        _print_job(answer.body, out, args.json)
        return OK
    if command == "bulk":
        from offpath_local.bulk_command import run_bulk

        return run_bulk(client, args, out, sys.stderr, _refused)
    if command == "job-types":
        return _listing(client, "/job-types", None, out, args.json, _job_type_rows)
    if command == "alarms":
        return _listing(client, "/alarms", None, out, args.json, _alarm_rows)
    if command == "stats":
        return _listing(client, "/stats", {"minutes": str(args.minutes)}, out, args.json, _stats_rows)
    raise UsageError(f"unknown command {command}")


Rows = tuple[list[str], list[list[Any]]]
BAR_WIDTH = 30


def _batches(client: ApiClient, args: argparse.Namespace, out: TextIO) -> int:
    """`offpath batches`: the caller's batches; `offpath batches ID`: one batch with a progress bar, its callbacks
    and a page of its jobs."""
    query = {"limit": str(args.limit), **({"cursor": args.cursor} if args.cursor else {})}
    if args.batch_id is None:
        answer = client.call("GET", "/batches", query=query)
        if not answer.ok:
            return _refused(answer)
        if args.json:
            _json(answer.body, out)
            return OK
        _table(out, *_batch_rows(answer.body))
        if answer.body.get("cursor"):
            out.write(f"more: --cursor {answer.body['cursor']}\n")
        return OK
    path = f"/batches/{_path_part(args.batch_id)}"
    answer = client.call("GET", path)
    if not answer.ok:
        return _refused(answer)
    jobs = client.call("GET", f"{path}/jobs", query=query)
    if not jobs.ok:
        return _refused(jobs)
    if args.json:
        _json({"batch": answer.body, "jobs": jobs.body}, out)
        return OK
    _print_batch(answer.body, jobs.body, out)
    return OK


def _batch_rows(body: dict[str, Any]) -> Rows:
    return (
        ["BATCH_ID", "STATUS", "TOTAL", "PENDING", "SUCCEEDED", "FAILED", "CANCELLED", "CREATED"],
        [
            [
                b["batch_id"],
                b["status"],
                b["total"],
                b["pending"],
                b["succeeded"],
                b["failed"],
                b["cancelled"],
                b["created_at"],
            ]
            for b in body.get("batches", [])
        ],
    )


def progress_bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    """`[#######.......]  7/20` (an empty batch shows an empty bar)."""
    filled = width * done // total if total else 0
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}"


def _print_batch(batch: dict[str, Any], jobs: dict[str, Any], out: TextIO) -> None:
    finished = batch["total"] - batch["pending"]
    out.write(f"batch      {batch['batch_id']}\n")
    out.write(f"status     {batch['status']}\n")
    out.write(f"progress   {progress_bar(finished, batch['total'])}\n")
    counts = ", ".join(f"{name.lower()} {n}" for name, n in sorted(batch.get("counts", {}).items())) or "none final"
    out.write(f"counts     pending {batch['pending']}; {counts}\n")
    for name in ("on_complete", "on_success"):
        spec = batch.get(name)
        if spec is None:
            continue
        job_id = batch.get(f"{name}_job_id") or "not yet"
        out.write(f"{name:<10} {spec['type']}: {job_id}\n")
    out.write("\n")
    _table(
        out,
        ["JOB_ID", "TYPE", "STATUS", "ATTEMPTS"],
        [[j["job_id"], j["type"], j["status"], f"{j['attempts']}/{j['max_attempts']}"] for j in jobs.get("jobs", [])],
    )
    if jobs.get("cursor"):
        out.write(f"more: --cursor {jobs['cursor']}\n")


def _listing(
    client: ApiClient,
    path: str,
    query: dict[str, str] | None,
    out: TextIO,
    as_json: bool,
    rows: Callable[[dict[str, Any]], Rows],
) -> int:
    answer = client.call("GET", path, query=query)
    if not answer.ok:
        return _refused(answer)
    if as_json:
        _json(answer.body, out)
    else:
        _table(out, *rows(answer.body))
    return OK


def _job_type_rows(body: dict[str, Any]) -> Rows:
    return ["JOB_TYPE", "QUEUE", "MAX_ATTEMPTS", "TIMEOUT", "SUBMITTED_BY", "PAUSED", "LIMITS"], [
        [
            t["name"],
            t["queue"],
            t["max_attempts"],
            f"{t['timeout_s']}s",
            t["submitted_by"],
            _paused_since(t),
            _limits_text(t.get("limits")),
        ]
        for t in body.get("job_types", [])
    ]


def _limits_text(limits: dict[str, Any] | None) -> str:
    """A job type's flow limits in a few words: "2 at once, 10/s per account" ("-": none)."""
    if not limits:
        return "-"
    parts = [f"{limits['max_concurrency']} at once"] if limits.get("max_concurrency") else []
    parts += [str(limits["rate_limit"])] if limits.get("rate_limit") else []
    key = limits.get("concurrency_key")
    return ", ".join(parts) + (f" per {key}" if key else " per type")


# `offpath pause queue NAME` / `offpath pause type NAME`: the API's paths.
PAUSE_PATHS = {"queue": "/queues", "type": "/job-types"}


def _paused_since(view: dict[str, Any]) -> str:
    """A listing's PAUSED column: since when (`-`: not paused)."""
    return f"since {view.get('paused_at')}" if view.get("paused") else "-"


def pause_line(body: dict[str, Any]) -> str:
    """What `offpath pause` and `offpath resume` print: the state, and whether this call changed it."""
    what = f"{'queue' if body.get('kind') == 'queue' else 'job type'} {body.get('name')}"
    waiting = body.get("waiting")
    jobs = f"; {waiting} job{'s' if waiting != 1 else ''} waiting" if waiting is not None else ""
    if not body.get("paused"):
        return f"{what} resumed" if body.get("changed") else f"{what} was not paused"
    reason = f" ({body['pause_reason']})" if body.get("pause_reason") else ""
    state = "paused" if body.get("changed") else "already paused"
    return f"{what} {state} since {body.get('paused_at')}{reason}{jobs}"


def _alarm_rows(body: dict[str, Any]) -> Rows:
    """Trouble first: the alarms in ALARM, then those without data, then the rest; by name within each."""
    order = {"ALARM": 0, "INSUFFICIENT_DATA": 1}
    alarms = sorted(body.get("alarms", []), key=lambda a: (order.get(a["state"], 2), a["name"]))
    return ["STATE", "ALARM", "SINCE", "REASON"], [
        [a["state"], a["name"], a.get("updated_at") or "-", (a.get("reason") or "")[:80]] for a in alarms
    ]


def _stats_rows(body: dict[str, Any]) -> Rows:
    """The minutes' counts added up per queue class and job type."""
    counted = ("submitted", "succeeded", "failed", "retried", "dead_lettered", "expired")
    totals: dict[tuple[str, str], list[int]] = {}
    for minute in body.get("minutes", []):
        row = totals.setdefault((minute["queue"], minute["job_type"]), [0] * len(counted))
        for i, name in enumerate(counted):
            row[i] += int(minute.get(name) or 0)
    header = ["QUEUE", "JOB_TYPE", *(name.upper() for name in counted)]
    return header, [[queue, job_type, *counts] for (queue, job_type), counts in sorted(totals.items())]


def _submit(client: ApiClient, args: argparse.Namespace, out: TextIO) -> int:
    try:
        payload = json.loads(args.payload)
    except ValueError as error:
        raise UsageError(f"--payload is not valid JSON: {error}") from None
    if not isinstance(payload, dict):
        raise UsageError("--payload must be a JSON object")
    body: dict[str, Any] = {"type": args.type, "payload": payload}
    if args.run_at:
        body["run_at"] = args.run_at
    if args.queue:
        body["queue"] = args.queue
    if args.expires_at:
        body["expires_at"] = args.expires_at
    if args.debounce:
        key, sep, seconds = args.debounce.rpartition(":")
        if not sep or not key or not seconds.isdigit():
            raise UsageError("--debounce takes KEY:SECONDS")
        body["debounce"] = {"key": key, "seconds": int(seconds)}
    if args.tag:
        pairs = [tag.partition("=") for tag in args.tag]
        if any(not sep for _, sep, _ in pairs):
            raise UsageError("--tag takes KEY=VALUE")
        body["tags"] = {key: value for key, _, value in pairs}
    headers = {"Idempotency-Key": args.key} if args.key else None
    answer = client.call("POST", "/jobs", body=body, headers=headers)
    if not answer.ok:
        return _refused(answer)
    job = answer.body
    replayed = answer.headers.get("idempotent-replayed") == "true"
    if args.json and not args.wait:
        _json(job, out)
        return OK
    if not args.json:
        note = " (replayed: same key and payload as an earlier submission)" if replayed else ""
        out.write(f"{job['status']:<9}  {job['type']}  job {job['job_id']}{note}\n")
        out.flush()
    if not args.wait:
        return OK
    final = _follow(client, job, args.timeout, sys.stderr)
    if final is None:
        print(f"offpath: job {job['job_id']} is still not finished after {args.timeout:g} s", file=sys.stderr)
        return REFUSED
    if args.json:
        _json(final, out)
    else:
        _print_outcome(final, out)
    return OK if final["status"] == "SUCCEEDED" else REFUSED


def _follow(client: ApiClient, job: dict[str, Any], timeout_s: float | None, err: TextIO) -> dict[str, Any] | None:
    """Wait for the job with long polls (`GET /jobs/{id}?wait=N`, N up to 20 s: the API answers as soon as the
    job is final), drawing its progress at each answer; None on timeout. A 10-second job takes one or two
    requests. An answer that comes back at once unfinished (an error, or an API without `wait`) is followed
    by a pause, never by a request at once."""
    deadline = time.monotonic() + timeout_s if timeout_s else None
    bar = _ProgressBar(err)
    path = f"/jobs/{job['job_id']}"
    current = job
    try:
        while True:
            bar.show(current)
            if current["status"] in FINAL_STATES:
                return current
            wait = LONG_POLL_S
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    return None
            asked = time.monotonic()
            answer = client.call("GET", path, query={"wait": f"{max(wait, 0.1):.1f}"})
            if answer.ok:
                current = answer.body
            if current["status"] not in FINAL_STATES and time.monotonic() - asked < min(wait, POLL_S):
                time.sleep(POLL_S)
    finally:
        bar.close()


class _ProgressBar:
    WIDTH = 30

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self._last = ""
        self._drawn = False

    def show(self, job: dict[str, Any]) -> None:
        progress = job.get("progress") or {}
        fraction = 1.0 if job["status"] == "SUCCEEDED" else float(progress.get("fraction") or 0.0)
        filled = round(fraction * self.WIDTH)
        attempt = f" attempt {job['attempts']}/{job['max_attempts']}" if job.get("attempts") else ""
        message = progress.get("message") or ""
        text = f"[{'#' * filled}{'-' * (self.WIDTH - filled)}] {fraction:4.0%}  {job['status']}{attempt}  {message}"
        if text == self._last:
            return
        self._last = text
        if self.tty:
            self.stream.write("\r\x1b[2K" + text[:200])
            self._drawn = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()


def _print_outcome(job: dict[str, Any], out: TextIO) -> None:
    out.write(f"{job['status']:<9}  {job['type']}  job {job['job_id']}  after {job['attempts']} attempt(s)\n")
    if job["status"] == "SUCCEEDED":
        out.write(f"result: {json.dumps(job.get('result'))}\n")
    elif job.get("error"):
        out.write(f"error: {job['error']}\n")


def _print_job(job: dict[str, Any], out: TextIO, as_json: bool) -> None:
    if as_json:
        _json(job, out)
        return
    progress = job.get("progress")
    fields = [
        ("job_id", job.get("job_id")),
        ("type", job.get("type")),
        ("queue", job.get("queue")),
        ("status", job.get("status")),
        ("waiting on", _holdup_text(job.get("waiting_on"))),
        ("attempts", f"{job.get('attempts')}/{job.get('max_attempts')}"),
        ("progress", f"{progress['fraction']:.0%} {progress.get('message', '')}".strip() if progress else None),
        ("result", json.dumps(job.get("result")) if job.get("result") is not None else None),
        ("error", job.get("error")),
        ("run_at", job.get("run_at")),
        ("expires_at", job.get("expires_at")),
        ("superseded_by", job.get("superseded_by")),
        ("created_at", job.get("created_at")),
        ("started_at", job.get("started_at")),
        ("finished_at", job.get("finished_at")),
        ("next_attempt_at", job.get("next_attempt_at")),
        ("lease_until", job.get("lease_until")),
        ("redrives", job.get("redrives") or None),
        ("tags", ", ".join(f"{k}={v}" for k, v in job["tags"].items()) if job.get("tags") else None),
        ("trace_id", job.get("trace_id")),
        ("discarded_at", job.get("discarded_at")),
    ]
    for name, value in fields:
        if value is not None:
            out.write(f"{name:<16} {value}\n")
    _print_attempts(job.get("attempt_history") or [], out)


def _holdup_text(holdup: Any) -> str | None:
    """Why a due job does not start (the job view's `waiting_on`), with the jobs holding its key's slots."""
    if not isinstance(holdup, dict):
        return None
    holders = holdup.get("holders") or []
    return str(holdup.get("message")) + (f" (running: {', '.join(holders)})" if holders else "")


def _print_attempts(history: list[dict[str, Any]], out: TextIO) -> None:
    """Each attempt's end, and the traceback an attempt kept (the job code's frames), indented under it."""
    for entry in history:
        error = entry.get("error")
        if isinstance(error, dict):
            text = f"{error['type']}: {error.get('message')}" if error.get("type") else str(error.get("message"))
        else:
            text = str(error) if error is not None else ""
        out.write(f"{'attempt ' + str(entry.get('attempt')):<16} {entry.get('outcome')} {text}".rstrip() + "\n")
        traceback = error.get("traceback") if isinstance(error, dict) else None
        if traceback:
            out.write("".join(f"{'':<18}{line}\n" for line in str(traceback).splitlines()))


def _refused(answer: Answer) -> int:
    retry_after = answer.headers.get("retry-after")
    later = f" (retry after {retry_after} s)" if answer.status in (429, 503) and retry_after else ""
    print(f"offpath: {answer.status} {answer.error_text()}{later}", file=sys.stderr)
    return REFUSED


def _json(value: Any, out: TextIO) -> None:
    out.write(json.dumps(value, indent=2) + "\n")


def _table(out: TextIO, header: list[str], rows: list[list[Any]]) -> None:
    cells = [header, *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        out.write("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() + "\n")


def _path_part(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")


if __name__ == "__main__":
    entry()
