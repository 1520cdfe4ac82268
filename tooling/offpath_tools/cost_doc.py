"""The cost model's section of docs/benchmarks.md (`make bench-calls` writes it): prices, assumptions, the
default configuration's breakdown, how each knob moves it, and the same work on Step Functions and Temporal Cloud."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from offpath_tools.cost import (
    ASSUMPTIONS,
    BATCH_WRITERS,
    DEFAULT_TARGET_PER_MILLION,
    FULL_VCPU_MB,
    MILLION,
    PRICES,
    PRICES_TAKEN,
    TARGET_PER_MILLION,
    Config,
    alternatives,
    cheapest,
    describe,
    estimate,
    knobs,
    money,
    price,
)


def markdown(measured: Mapping[str, Any], base: Config | None = None) -> str:
    """The cost model's part of docs/benchmarks.md."""
    base = base or Config()
    a = ASSUMPTIONS
    default = estimate(measured, base)
    lines = [
        "## What a million jobs cost",
        "",
        f"`offpath cost` (tooling/offpath_tools/cost.py) prices the counts above. Prices are us-east-1 list prices "
        f"taken {PRICES_TAKEN}, without free tiers:",
        "",
        "| price | list price | page | note |",
        "|---|---|---|---|",
    ]
    for p in PRICES.values():
        lines.append(f"| `{p.item}` | {p.shown} | {p.source} | {p.note} |")
    lines += [
        "",
        "Measured (docs/measured_calls.json): the calls, invocations, messages, write and read units with every "
        "item's size, the log bytes of each function, the handlers' CPU time. Assumed (stated here, not measured):",
        "",
        f"- Lambda duration = the handlers' measured CPU time x {a.cpu_factor} (a Graviton2 vCPU against the "
        f"measuring machine's core) x {FULL_VCPU_MB} MB / memory (the CPU share below one vCPU) + the waits for "
        "AWS calls ("
        + ", ".join(f"{k} {v:g} ms" for k, v in a.latency_ms.items())
        + f"; a batch's writes {BATCH_WRITERS} at a time) + {a.invocation_overhead_ms:g} ms per invocation; "
        f"{a.cold_start_share:.1%} of invocations start cold ({a.init_ms_full_cpu:g} ms of init on a full vCPU, "
        "billed).",
        f"- Memory as the CDK stack sets it: api {base.api_memory_mb} MB, worker {base.worker_memory_mb} MB "
        f"(infra/workers.py), enqueue {base.enqueue_memory_mb} MB; arm64.",
        f"- Batch size: {base.batch_size} messages per worker invocation, that is full batches. A queue without a "
        "batching window (the `default` class) gets full batches only under load: at a million jobs a month spread "
        "evenly (0.4 jobs/s) a poll finds about one message, which the batch size 1 row prices.",
        "- Logs: the JSON lines at the level (on Lambda offpath's JSON handler replaces the runtime's own, so "
        "each record is written once), EMF lines, "
        f"{a.platform_log_bytes} bytes of START/END/REPORT per invocation only where they are kept (the stack sets "
        f"the system log level to WARN, which drops them) and a {a.access_log_bytes}-byte API "
        f"access log line per request; stored {base.log_retention_days} days (billed on compressed bytes: an upper "
        "bound).",
        "- X-Ray (only with the stack's `tracing` option on; off by default): one trace per sampled invocation "
        "(an upper bound), "
        f"sampled by the default rule ({a.xray_reservoir_per_s:g} a second, then {a.xray_rate:.0%}) at the month's "
        "average rate, so below about 1 job a second every invocation is traced.",
        f"- DynamoDB storage: the finished item plus {a.item_overhead_bytes} bytes of overhead, kept "
        f"{base.retention_days} days (no index entry: a finished job is in no index; a keyed job's idempotency "
        "record, ~200 bytes kept a day longer, is not counted in the default, unkeyed configuration).",
        "- Fixed each month whatever the volume: the sweeper (every minute), the event source mapping's long "
        "polls of an idle queue (~5 pollers x 3 receives a minute), EMF custom metrics (each name per queue and "
        "job type, per queue and overall), the stack's alarms and dashboard.",
        "- Not included: data transfer out of AWS, free tiers, KMS (the queues use SQS-managed keys, the table "
        "an AWS-owned key).",
        "",
        f"### The default configuration: {describe(base, measured.get('payload_bytes'))}",
        "",
        f"{base.jobs_per_month:,.0f} plain jobs a month (submit, run, succeed):",
        "",
        "| service | per million jobs | usage per job |",
        "|---|---|---|",
    ]
    u = default.usage
    usage_text = {
        "API Gateway": f"{u['api_requests']:.3g} request",
        "Lambda": ", ".join(
            f"{k.split(':')[1]} {u[k]:.3g}" for k in sorted(u) if k.startswith("lambda_requests:") and u[k]
        )
        + " invocations"
        + f"; {sum(v for k, v in u.items() if k.startswith('lambda_gb_s:')):.3g} GB-s",
        "SQS": f"{u['sqs_requests']:.3g} requests",
        "DynamoDB": f"{u['wru']:.3g} WRU, {u['rru']:.3g} RRU",
        "EventBridge Scheduler": f"{u['scheduler_invocations']:.3g} invocations",
        "CloudWatch Logs": f"{u['log_bytes']:,.0f} bytes",
        "X-Ray": f"{u['traces']:.3g} traces",
    }
    for service, cost in default.per_job.items():
        lines.append(f"| {service} | {money(cost * MILLION)} | {usage_text[service]} |")
    lines.append(f"| **total** | **{money(default.per_million)}** | |")
    fixed_total = sum(default.fixed_monthly.values())
    lines += [
        "",
        "Fixed per month: "
        + ", ".join(f"{item} {money(cost)}" for item, cost in default.fixed_monthly.items())
        + f": {money(fixed_total)}.",
        "",
    ]
    verdict = (
        f"**The default configuration does not meet its {money(DEFAULT_TARGET_PER_MILLION)} target: "
        f"{money(default.per_million)} per million jobs.**"
        if default.per_million > DEFAULT_TARGET_PER_MILLION
        else f"The default configuration meets its {money(DEFAULT_TARGET_PER_MILLION)} target: "
        f"{money(default.per_million)}."
    )
    cheapest_estimate = estimate(measured, cheapest(base))
    verdict += (
        f" The cheapest documented configuration (`offpath cost --cheapest`: submits in batches of 100, DynamoDB "
        f"provisioned at 70% use, logs at WARNING) costs {money(cheapest_estimate.per_million)} against its "
        f"{money(TARGET_PER_MILLION)} target."
    )
    lines += [
        verdict,
        "",
        "### How each knob moves it",
        "",
        "| change | per million jobs | against default |",
        "|---|---|---|",
    ]
    reaching = []
    for label, config in knobs(base):
        e = estimate(measured, config)
        delta = e.per_million - default.per_million
        sign = "+" if delta >= 0 else "-"
        lines.append(f"| {label} | {money(e.per_million)} | {sign}{money(abs(delta))} |")
        if e.per_million <= TARGET_PER_MILLION and label != "default":
            reaching.append(label)
    plain = measured["scenarios"]["plain"]["dynamodb"]
    index_units = plain["index_write_units"]
    wru_price = price("dynamodb_wru") * MILLION
    lines += [
        "",
        (
            "Reaching the target: " + "; ".join(f"*{r}*" for r in reaching) + "."
            if reaching
            else "No single knob in this table reaches the target."
        ),
        "",
        f"Beyond these knobs, the largest lines are design choices. Each write unit a job pays costs "
        f"${wru_price:.3f} per million jobs on demand; a plain job pays {plain['write_units']}: "
        f"{plain['table_write_units']} in the table (submit, claim, success) and "
        + ", ".join(f"{n} in `{name}`" for name, n in index_units.items())
        + " (there is no listing index: a tenant's listing queries the table's own key, `JOB#<tenant>#<shard>` "
        "and the time-ordered job id; a keyed submit adds one unit for its idempotency key's record; the sparse "
        "`sweep` index holds only jobs whose message may be missing: a job whose send failed, a delayed job, one "
        "requeued, redriven or retried by hand, one claimed on its message's last receives; a plain job's message "
        "goes out before its write, so it is never in it). A scheduled job also "
        "rewrites its schedule's item of 20 firings (about 3 KB: 3 write units) and reads it twice. X-Ray active "
        "tracing, off by default, would record about one trace per invocation below one job a second: at "
        f"{money(price('xray_trace') * MILLION)} per million traces it would cost about as much as DynamoDB.",
        "",
        "### The same work on Step Functions Standard and Temporal Cloud",
        "",
        "| on | per job | fees per million jobs | with what it still needs, per million | |",
        "|---|---|---|---|---|",
    ]
    for alt in alternatives(measured, base):
        lines.append(
            f"| {alt.name} | {alt.units_per_job:g} {alt.unit} | {money(alt.fees_per_million)} | "
            f"{money(alt.total_per_million)} | {alt.note} |"
        )
    lines += [
        f"| offpath (default) | see above | - | {money(default.per_million)} | + {money(fixed_total)} a month fixed |",
        "",
        "Step Functions: the minimal equivalent state machine is Start -> Task (invoke the job's function, with a "
        "Retry policy) -> Succeed: 2 state transitions a job, +1 per retry, +1 for a Wait state of a delayed job. "
        "The execution name serves as the idempotency key and the execution as the status, so it needs no table "
        "and no queue. Temporal Cloud: a workflow with one activity: 2 actions (workflow started, activity "
        "started), +1 per retry, +1 per schedule firing, +1 per durable timer; its workers run on your own "
        "compute. `offpath cost` prints these for your volumes.",
    ]
    return "\n".join(lines) + "\n"
