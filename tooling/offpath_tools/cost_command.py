"""`offpath cost`: what offpath costs on AWS for a user's own volumes (the model is offpath_tools.cost).

The estimate comes first, then the target it is measured against and what separates them, then the
breakdown by service, the fixed monthly costs, and the same work on Step Functions and Temporal Cloud.
Exit status: 0 printed, 2 the inputs cannot be priced.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from offpath_tools.cost import (
    CONSOLE_HOURS_PER_MONTH,
    DEFAULT_TARGET_PER_MILLION,
    LIMIT_KINDS,
    MILLION,
    PRICES_TAKEN,
    QUOTA_KINDS,
    SECONDS_PER_MONTH,
    STATS_METRICS_PER_PAIR,
    TARGET_PER_MILLION,
    Config,
    alternatives,
    batch_cost,
    chain_cost_per_job,
    cheapest,
    describe,
    estimate,
    flow_control_cost_per_job,
    limits_cost_per_job,
    limits_units_per_job,
    load_measured,
    long_poll_cost,
    money,
    notices_rows,
    problems,
    quota_cost_per_job,
    realtime_cost,
    stats_call_cost,
)

USAGE = 2
DEFAULTS = Config()


def parser() -> argparse.ArgumentParser:
    cost = argparse.ArgumentParser(
        prog="offpath cost", description="what offpath costs on AWS for your volumes (us-east-1 list prices)"
    )
    add_arguments(cost)
    return cost


def add_arguments(parser: argparse.ArgumentParser) -> None:
    volume = parser.add_argument_group("volume")
    volume.add_argument("--jobs-per-month", type=float, default=DEFAULTS.jobs_per_month, metavar="N")
    volume.add_argument("--retried-share", type=float, default=0.0, metavar="X", help="jobs retried once (0..1)")
    volume.add_argument("--scheduled-share", type=float, default=0.0, metavar="X", help="jobs fired by schedules")
    volume.add_argument("--delayed-share", type=float, default=0.0, metavar="X", help="jobs with run_at > 15 min")
    volume.add_argument("--batched-share", type=float, default=0.0, metavar="X", help="jobs sent 100 per batch")
    volume.add_argument(
        "--deduplicated-share", type=float, default=0.0, metavar="X", help="replayed submits per job (0..1)"
    )
    setup = parser.add_argument_group("configuration")
    setup.add_argument("--api-memory", type=int, default=DEFAULTS.api_memory_mb, metavar="MB")
    setup.add_argument("--worker-memory", type=int, default=DEFAULTS.worker_memory_mb, metavar="MB")
    setup.add_argument("--batch-size", type=int, default=DEFAULTS.batch_size, help="messages per worker invocation")
    setup.add_argument("--payload-bytes", type=int, help="the payload's JSON size (default: as measured)")
    setup.add_argument("--result-bytes", type=int, help="the stored result's size (default: as measured)")
    setup.add_argument("--capacity", choices=["on-demand", "provisioned"], default=DEFAULTS.capacity_mode)
    setup.add_argument("--utilisation", type=float, default=DEFAULTS.utilisation, help="provisioned capacity used")
    setup.add_argument("--log-level", choices=["INFO", "WARNING"], default=DEFAULTS.log_level)
    setup.add_argument("--api-type", choices=["http", "rest"], default=DEFAULTS.api_type)
    setup.add_argument("--tracing", action="store_true", help="X-Ray active tracing on (the stack's tracing option)")
    setup.add_argument(
        "--otel",
        action="store_true",
        help="OpenTelemetry via the ADOT layer on (the stack's otel option): X-Ray traces, priced only when on",
    )
    setup.add_argument("--platform-logs", action="store_true", help="Lambda's START/END/REPORT lines kept")
    setup.add_argument("--snapstart", action="store_true", help="SnapStart on (the stack's snapstart option)")
    setup.add_argument("--job-types", type=int, default=DEFAULTS.job_types, help="job types in use (metrics)")
    setup.add_argument(
        "--metrics-by-job-type", action="store_true", help="EMF metrics per (queue, job type) too (opt-in)"
    )
    setup.add_argument(
        "--cheapest", action="store_true", help="price the cheapest documented configuration (batches, provisioned)"
    )
    setup.add_argument("--measured", type=Path, metavar="FILE", help="measured counts (docs/measured_calls.json)")
    setup.add_argument(
        "--quotas",
        choices=QUOTA_KINDS,
        default="none",
        help="per-tenant quotas on every job: the submit rate, the open/delayed counts, or all (default none)",
    )
    setup.add_argument(
        "--quota-readers",
        type=float,
        default=10.0,
        metavar="N",
        help="api environments x counted tenants submitting each second (their counts' reads; default 10)",
    )
    volume.add_argument(
        "--chained-share",
        type=float,
        default=0.0,
        metavar="X",
        help="jobs that are a chain step with a next job (`then`): 1 write unit each (0..1)",
    )
    setup.add_argument(
        "--limits",
        choices=LIMIT_KINDS,
        default="none",
        help="the job type's flow limits: a concurrency limit, a rate limit, or both (default none)",
    )
    setup.add_argument(
        "--limit-waits",
        type=float,
        default=0.0,
        metavar="N",
        help="how often a job waits for its limits before it runs, on average (default 0)",
    )
    setup.add_argument(
        "--debounced-share",
        type=float,
        default=0.0,
        metavar="S",
        help="share of the jobs submitted with a debounce (one record write each; default 0)",
    )
    setup.add_argument(
        "--superseded-share",
        type=float,
        default=0.0,
        metavar="S",
        help="share of the jobs superseded by a later debounced submit (one cancel write each; default 0)",
    )
    setup.add_argument("--json", action="store_true", help="print the estimate as JSON")


def config_from(args: argparse.Namespace) -> Config:
    return Config(
        jobs_per_month=args.jobs_per_month,
        retried_share=args.retried_share,
        scheduled_share=args.scheduled_share,
        delayed_share=args.delayed_share,
        batched_share=args.batched_share,
        deduplicated_share=args.deduplicated_share,
        api_memory_mb=args.api_memory,
        worker_memory_mb=args.worker_memory,
        batch_size=args.batch_size,
        payload_bytes=args.payload_bytes,
        result_bytes=args.result_bytes,
        capacity_mode=args.capacity,
        utilisation=args.utilisation,
        log_level=args.log_level,
        api_type=args.api_type,
        tracing=args.tracing,
        otel=args.otel,
        job_types=args.job_types,
        platform_logs=args.platform_logs,
        snapstart=args.snapstart,
        metrics_by_job_type=args.metrics_by_job_type,
    )


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else USAGE
    return run(args, out)


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """`offpath cost`: 0 printed, 2 the inputs cannot be priced."""
    out = out or sys.stdout
    try:
        config = config_from(args)
        chains = chain_cost_per_job(config, args.chained_share)
        if args.cheapest:
            config = cheapest(config)
        measured = load_measured(args.measured)
    except ValidationError as error:
        print(f"offpath cost: {problems(error)}", file=sys.stderr)
        return USAGE
    except (ValueError, FileNotFoundError) as error:
        print(f"offpath cost: {error}", file=sys.stderr)
        return USAGE
    batches = batch_cost(config)
    try:
        debounce = flow_control_cost_per_job(
            config, debounced_share=args.debounced_share, superseded_share=args.superseded_share
        )
    except ValueError as error:
        print(f"offpath cost: {error}", file=sys.stderr)
        return USAGE
    if args.json:
        result = estimate(measured, config)
        cheapest_config = cheapest(config)
        document = {
            "prices_taken": PRICES_TAKEN,
            "config": config.model_dump(),
            "per_million_jobs": {k: v * MILLION for k, v in result.per_job.items()},
            "total_per_million_jobs": result.per_million,
            "target_per_million_jobs": DEFAULT_TARGET_PER_MILLION,
            "cheapest_per_million_jobs": estimate(measured, cheapest_config).per_million,
            "cheapest_target_per_million_jobs": TARGET_PER_MILLION,
            "cheapest_config": cheapest_config.model_dump(),
            "fixed_monthly": result.fixed_monthly,
            "total_monthly": result.monthly,
            "usage_per_job": result.usage,
            "alternatives": [asdict(a) for a in alternatives(measured, config)],
            "quotas": args.quotas,
            "quotas_per_million_jobs": quota_cost_per_job(config, args.quotas, readers=args.quota_readers) * MILLION,
            "batches": {**asdict(batches), "per_million_members": batches.per_million_members, "plain_job_extra": 0.0},
            "chained_share": args.chained_share,
            "chains_per_million_jobs": chains * MILLION,
            "limits": args.limits,
            "limits_write_units_per_job": limits_units_per_job(args.limits, waits=args.limit_waits)[0],
            "limits_read_units_per_job": limits_units_per_job(args.limits, waits=args.limit_waits)[1],
            "limits_per_million_jobs": limits_cost_per_job(config, args.limits, waits=args.limit_waits) * MILLION,
            "expiry_per_million_jobs": 0.0,
            "debounce_per_million_jobs": debounce * MILLION,
        }
        out.write(json.dumps(document, indent=2) + "\n")
        return 0
    render_text(measured, config, out)
    quotas = quota_cost_per_job(config, args.quotas, readers=args.quota_readers)
    monthly = money(quotas * config.jobs_per_month)
    out.write(
        f"\nquotas ({args.quotas}): {money(quotas * MILLION)} per million jobs, {monthly} "
        "a month on top of the above (DynamoDB: 1 write unit per submit for the rate, 2 per job for the open "
        "count, 1 per delayed job, 8 read units per count read; --quotas, docs/decisions.md)\n\n"
    )
    _table(
        out,
        ["BATCHES (over the same jobs without a batch; a plain job: 0 extra)", "WRITE UNITS", "READ UNITS", "COST"],
        [
            [
                "per member (its page, its count, its sweep time cleared)",
                f"{batches.member_write_units:g}",
                f"{batches.member_read_units:g}",
                f"{money(batches.per_million_members)} per million members",
            ],
            [
                "per callback (on_complete, on_success)",
                f"{batches.callback_write_units:g}",
                "0",
                f"{money(batches.per_callback * MILLION)} per million callbacks",
            ],
        ],
    )
    out.write(
        f"chains ({args.chained_share:g} of the jobs a step with a next job): {money(chains * MILLION)} per million "
        f"jobs, {money(chains * config.jobs_per_month)} a month on top of the above (DynamoDB: 1 write unit per chain "
        "step, 1 read unit per ctx.parent read; a plain job 0; --chained-share, docs/workflows.md)\n"
    )
    limits = limits_cost_per_job(config, args.limits, waits=args.limit_waits)
    writes, reads = limits_units_per_job(args.limits, waits=args.limit_waits)
    out.write(
        f"limits ({args.limits}): {writes:g} write units and {reads:g} read units a job, {money(limits * MILLION)} "
        f"per million jobs, {money(limits * config.jobs_per_month)} a month on top of the above (a concurrency slot: "
        "2 writes, taken and given back; a rate limit: 1; the job read before its claim: 1 read unit; each wait: "
        "one more of each and 2 SQS requests; 0 for a type without limits; --limits, docs/flow-control.md)\n"
        f"expiry: {money(0.0)} per million jobs (its time rides on the job's item and message); debounce "
        f"({args.debounced_share:g} of the jobs debounced, {args.superseded_share:g} superseded): "
        f"{money(debounce * MILLION)} per million jobs, {money(debounce * config.jobs_per_month)} a month (1 write "
        "unit per debounced submit for its key's record; per superseded job its cancel, a read of the record and at "
        "most one more write of its item; "
        "docs/flow-control.md)\n"
    )
    return 0


def headline(per_million: float, config: Config, cheapest_per_million: float | None = None) -> list[str]:
    """The estimate, then the target and how far the estimate is from it (and the cheapest documented
    configuration against its own target)."""
    which = "default configuration" if config == DEFAULTS else "your configuration"
    gap = per_million - DEFAULT_TARGET_PER_MILLION
    if gap > 0:
        verdict = (
            f"{money(gap)} over it. The largest lines below say where the money goes; docs/benchmarks.md "
            "(What a million jobs cost) shows what each knob changes."
        )
    else:
        verdict = f"{money(-gap)} under it."
    target = (
        f"target: {money(DEFAULT_TARGET_PER_MILLION)} per million jobs, set for the default configuration (HTTP API, "
        "arm64, batch size 10, items up to 1 KB) and counting what each job pays, not the fixed monthly costs or "
        f"free tiers; this estimate is {verdict}"
    )
    if cheapest_per_million is not None:
        target += (
            f" The cheapest documented configuration (--cheapest: submits in batches of 100, DynamoDB provisioned "
            f"at 70% use, logs at WARNING) costs {money(cheapest_per_million)}, against its "
            f"{money(TARGET_PER_MILLION)} target."
        )
    return [f"{money(per_million)} per million jobs ({which})", "", *textwrap.wrap(target, width=100)]


def render_text(measured: Mapping[str, Any], config: Config, out: TextIO) -> None:
    result = estimate(measured, config)
    rate = config.jobs_per_month / SECONDS_PER_MONTH
    cheapest_per_million = estimate(measured, cheapest(config)).per_million
    out.write("\n".join(headline(result.per_million, config, cheapest_per_million)) + "\n\n")
    out.write(
        f"prices   us-east-1 list prices taken {PRICES_TAKEN}; calls and units measured "
        f"{measured.get('generated', '?')} (docs/measured_calls.json)\n"
    )
    out.write(
        f"volume   {config.jobs_per_month:,.0f} jobs a month ({rate:.2f}/s); retried {config.retried_share:.0%}, "
        f"scheduled {config.scheduled_share:.0%}, delayed {config.delayed_share:.0%}, batched "
        f"{config.batched_share:.0%}, replayed submits {config.deduplicated_share:.0%}\n"
    )
    out.write(f"config   {describe(config, measured.get('payload_bytes'))}\n\n")
    rows = [
        [service, money(cost * MILLION), money(cost * config.jobs_per_month)]
        for service, cost in result.per_job.items()
    ]
    rows.append(["total per million jobs", money(result.per_million), money(result.variable_monthly)])
    _table(out, ["SERVICE", "PER MILLION JOBS", "PER MONTH"], rows)
    out.write("\n")
    fixed = [[item, money(cost)] for item, cost in result.fixed_monthly.items()]
    fixed.append(["total fixed", money(sum(result.fixed_monthly.values()))])
    _table(out, ["FIXED PER MONTH", "COST"], fixed)
    out.write(f"\ntotal per month: {money(result.monthly)}\n")
    call = stats_call_cost(config.job_types)
    hour = 60 * call
    out.write(
        f"GET /stats (the console's charts): {config.job_types * STATS_METRICS_PER_PAIR} metrics per call "
        f"(GetMetricData, {config.job_types} queue and job type pair(s)) = {money(call)} a call; the console asks "
        f"once a minute while its overview is open: {money(hour)} an hour, {money(hour * CONSOLE_HOURS_PER_MONTH)} "
        f"a month open {CONSOLE_HOURS_PER_MONTH} h\n\n"
    )
    render_waiting(config, out)
    others = [
        [a.name, f"{a.units_per_job:g} {a.unit}", money(a.fees_per_million), money(a.total_per_million), a.note]
        for a in alternatives(measured, config)
    ]
    _table(out, ["SAME WORK ON", "PER JOB", "FEES PER MILLION", "TOTAL PER MILLION", ""], others)
    out.write("\n")
    _table(
        out,
        ["NOTICES (one webhook endpoint; apart from the total)", "PER MILLION JOBS"],
        [[part, money(cost)] for part, cost in notices_rows()],
    )


def render_waiting(config: Config, out: TextIO) -> None:
    """What waiting for a job costs (`--wait`, GET /jobs/{id}?wait=N), and realtime events to browsers
    (the stack's `realtime` option, off by default), per million: neither is in the estimate above."""
    polls = []
    for seconds in (1.0, 10.0, 20.0):
        poll = long_poll_cost(seconds, config)
        polls.append([f"job final after {seconds:g} s", str(poll.reads), money(poll.per_million)])
    _table(out, ["GET /jobs/{id}?wait=20", "READS", "PER MILLION WAITS"], polls)
    out.write("\n")
    live = []
    for share in (0.0, 0.1, 1.0):
        cost = realtime_cost(share, config)
        live.append([f"{share:.0%}", money(cost.appsync_per_job * MILLION), money(cost.websocket_per_job * MILLION)])
    _table(out, ["REALTIME: JOBS WATCHED", "APPSYNC EVENTS PER MILLION JOBS", "WEBSOCKET API INSTEAD"], live)
    out.write("\n")


def _table(out: TextIO, header: list[str], rows: list[list[str]]) -> None:
    cells = [header, *rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        out.write("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
