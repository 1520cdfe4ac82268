"""The fault ledger (TESTPLAN 12) at 1,000 jobs and the burst (TESTPLAN 21) at 5,000, written into docs/benchmarks.md.

Ledger: `offpath local --faults SEED --fault-rate X` (every kind of local/offpath_local/faults.py) with the test
timings, JOBS jobs submitted over HTTP with idempotency keys (eight in ten welcome e-mails guarded by `ctx.once`,
one flaky job, one poison job), followed to their final states; then every outcome is accounted for: lost,
duplicate and missing side effects, faults by kind, retries, sweeper re-sends (tooling/offpath_tools/ledger.py).

Burst (`--burst N`): a second runtime, without faults and with the stack's own timings; N jobs submitted in
batches of 100 to the `bulk` queue class (maximum concurrency 2); every one must succeed and the DLQ stay empty.

The results replace the section between `<!-- ledger:begin -->` and `<!-- ledger:end -->` of docs/benchmarks.md
(appended at the end when the markers are missing); the rest of the file belongs to other scripts and is kept.
Exit status 1 when a job was lost, ended in an unexpected state or repeated or missed its side effect, or when
the burst did not all succeed.

    .venv/bin/python scripts/ledger.py [--jobs 1000] [--seed 7] [--fault-rate 0.03] [--burst 5000] [--no-write]
    .venv/bin/python scripts/ledger.py --batches [--batch-count 50 --batch-size 20 --chains 20 --steps 5] [--seed N]

`--batches`: the batch section instead (tooling/offpath_tools/ledger_batches.py): batches with on_complete and
on_success callbacks, a seeded share of failing members (some retried by hand), and chains, under the same faults;
printed only (docs/benchmarks.md is left alone). Without `--seed` a seed is drawn and printed, to rerun with.
    make bench-ledger (part of make bench)
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from offpath_tools.ledger import (
    FLOW_ACCOUNTS,
    LIMITED_AT_ONCE,
    SWEEP_GRACE_S,
    TIMEOUT_SCALE,
    VISIBILITY_SCALE,
    Burst,
    Ledger,
    LedgerRuntime,
    run_burst,
    run_ledger,
)
from offpath_tools.ledger_batches import run_batch_ledger

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS_MD = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- ledger:begin -->", "<!-- ledger:end -->"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000, help="jobs in the ledger (0: no ledger)")
    parser.add_argument("--seed", type=int, default=None, help="7 for the ledger; drawn and printed for --batches")
    parser.add_argument("--fault-rate", type=float, default=0.03, help="probability of each kind per eligible call")
    parser.add_argument("--clients", type=int, default=4, help="HTTP clients submitting at once")
    parser.add_argument("--burst", type=int, default=0, metavar="N", help="also the burst of N jobs (0: no burst)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--keep", metavar="DIR", help="keep the runtimes' data directories (logs, faults) in DIR")
    parser.add_argument(
        "--flow-control",
        action="store_true",
        help="the ledger's jobs are e2e.limited (at most 2 at once per account): none over the limit, none lost",
    )
    parser.add_argument("--batches", action="store_true", help="the batch section: batches, callbacks and chains")
    parser.add_argument("--batch-count", type=int, default=50, help="batches in the batch section")
    parser.add_argument("--batch-size", type=int, default=20, help="jobs in each batch")
    parser.add_argument("--chains", type=int, default=20, help="chains in the batch section")
    parser.add_argument("--steps", type=int, default=5, help="steps in each chain")
    args = parser.parse_args()
    if args.batches:
        return batch_section(args)

    if args.seed is None:
        args.seed = 7
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="offpath-ledger-"))
    ledger: Ledger | None = None
    burst: Burst | None = None
    command = (
        f"scripts/ledger.py --jobs {args.jobs} --seed {args.seed} --fault-rate {args.fault_rate:g}"
        + (f" --burst {args.burst}" if args.burst else "")
        + (" --flow-control" if args.flow_control else "")
    )
    if args.jobs:
        local = LedgerRuntime.launch(base / "ledger", seed=args.seed, fault_rate=args.fault_rate)
        try:
            ledger = run_ledger(
                local,
                args.jobs,
                seed=args.seed,
                fault_rate=args.fault_rate,
                clients=args.clients,
                timeout_s=max(300.0, args.jobs * 0.6),
                flow_control=args.flow_control,
            )
        finally:
            local.stop()
        print("\n".join(ledger.lines()), flush=True)
        _details(ledger)
    if args.burst:
        # The stack's timings, and the sweeper once a minute as on AWS.
        local = LedgerRuntime.launch(
            base / "burst", test_timing=False, sweep_grace_s=120, clock_speed=1, alarm_interval_s=5
        )
        try:
            burst = run_burst(local, args.burst, timeout_s=max(600.0, args.burst * 0.6), poll_s=5.0)
        finally:
            local.stop()
        print("\n".join(burst.lines()), flush=True)
    if args.keep:
        print(f"data directories kept in {base}")
    if not args.no_write and (ledger or burst):
        write_section(section(ledger, burst, command))
        print(f"written into {BENCHMARKS_MD.relative_to(ROOT)}")
    ok = (ledger is None or ledger.clean) and (
        burst is None or (burst.succeeded == burst.jobs and burst.dlq_depth == 0)
    )
    return 0 if ok else 1


def batch_section(args: argparse.Namespace) -> int:
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 1_000_000)
    print(
        f"scripts/ledger.py --batches --batch-count {args.batch_count} --batch-size {args.batch_size}"
        f" --chains {args.chains} --steps {args.steps} --seed {seed} --fault-rate {args.fault_rate:g}",
        flush=True,
    )
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="offpath-ledger-"))
    local = LedgerRuntime.launch(base / "batches", seed=seed, fault_rate=args.fault_rate)
    try:
        result = run_batch_ledger(
            local,
            batches=args.batch_count,
            members=args.batch_size,
            chains=args.chains,
            steps=args.steps,
            seed=seed,
            fault_rate=args.fault_rate,
            timeout_s=max(600.0, args.batch_count * args.batch_size * 0.6),
        )
    finally:
        local.stop()
    print("\n".join(result.lines()), flush=True)
    for name, tags in (
        ("lost", result.lost),
        ("on_complete not once", result.on_complete_wrong),
        ("on_success wrong", result.on_success_wrong),
        ("counts wrong", result.counts_wrong),
        ("chain wrong", result.steps_wrong),
    ):
        for tag in tags[:10]:
            print(f"  {name}: {tag} {result.views.get(tag, {})}")
    if args.keep:
        print(f"data directory kept in {base}")
    return 0 if result.clean else 1


def _details(ledger: Ledger) -> None:
    for name, job_ids in (
        ("lost", ledger.lost),
        ("not as expected", ledger.unexpected),
        ("duplicate side effects", ledger.duplicate_effects),
        ("missing side effects", ledger.missing_effects),
        ("over the limit", sorted(ledger.over_limit)),
    ):
        for job_id in job_ids[:10]:
            view = ledger.views.get(job_id, {})
            print(
                f"  {name}: {job_id} {view.get('type')} {view.get('status')} attempts {view.get('attempts')}"
                f" {view.get('error') or ''}"
            )


def section(ledger: Ledger | None, burst: Burst | None, command: str) -> str:
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        BEGIN,
        "## Fault ledger and burst",
        "",
        f"Last run {when} by `make bench-ledger` (`.venv/bin/python {command}`), on the machine above; "
        "the runtime is `offpath local` in a child process, driven over HTTP (tooling/offpath_tools/ledger.py).",
        "",
    ]
    if ledger is not None:
        lines += [
            f"### Ledger (TESTPLAN 12): {ledger.jobs:,} jobs with injected faults",
            "",
            f"`offpath local --faults {ledger.seed} --fault-rate {ledger.fault_rate:g}`: each kind of fault "
            "(local/offpath_local/faults.py) with that probability per eligible DynamoDB or SQS call. Test timings "
            f"(`--timeout-scale {TIMEOUT_SCALE:g} --visibility-scale {VISIBILITY_SCALE:g}`, sweep grace "
            f"{SWEEP_GRACE_S} s, the sweeper every second), so a dead worker's job is taken up within two minutes. "
            "Eight in ten jobs send a welcome e-mail guarded by `ctx.once` (the e-mails are counted in a file), "
            "one in ten is `demo.flaky` failing its first attempt, one in ten `demo.poison` (expected FAILED). "
            "Submits carry idempotency keys and are retried on 503, as a client should."
            + (
                f" Flow control (`--flow-control`): every job is `e2e.limited` of one of {FLOW_ACCOUNTS} accounts, "
                f"at most {LIMITED_AT_ONCE} running at once per account (docs/flow-control.md)."
                if ledger.flow_control
                else ""
            ),
            "",
            "| | |",
            "|---|---|",
            *[f"| {name} | {value} |" for name, value in ledger.markdown_rows()],
            "",
        ]
    if burst is not None:
        rate = burst.succeeded / burst.elapsed_s if burst.elapsed_s else 0.0
        lines += [
            f"### Burst (TESTPLAN 21): {burst.jobs:,} jobs on a queue with maximum concurrency 2",
            "",
            "No faults, the stack's timings. Jobs submitted with `POST /jobs/batch` (100 a request, two clients) "
            "to the `bulk` queue class (batches of 10, a 5 s batching window, maximum concurrency 2).",
            "",
            "| | |",
            "|---|---|",
            f"| accepted / succeeded / not succeeded | {burst.accepted} / {burst.succeeded} / "
            f"{len(burst.not_succeeded)} |",
            f"| jobs that needed more than one attempt | {burst.retried} |",
            f"| **bulk DLQ depth at the end** | **{burst.dlq_depth}** |",
            f"| sweeper re-sends (jobs still queued after the 120 s sweep grace) / duplicate deliveries | "
            f"{burst.sweeper_resends} / {burst.duplicate_deliveries} |",
            f"| submitted in | {burst.submit_s:.1f} s |",
            f"| first submit until every job final | {burst.elapsed_s:.1f} s ({rate:.0f} jobs/s) |",
            "",
        ]
    lines.append(END)
    return "\n".join(lines)


def write_section(text: str) -> None:
    current = BENCHMARKS_MD.read_text(encoding="utf-8") if BENCHMARKS_MD.exists() else "# Benchmarks\n"
    start, stop = current.find(BEGIN), current.find(END)
    if start != -1 and stop > start:
        updated = current[:start] + text + current[stop + len(END) :]
    else:
        updated = current.rstrip("\n") + "\n\n" + text + "\n"
    BENCHMARKS_MD.write_text(updated, encoding="utf-8")


if __name__ == "__main__":
    started = time.monotonic()
    status = main()
    print(f"({time.monotonic() - started:.0f} s)")
    sys.exit(status)
