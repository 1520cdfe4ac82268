"""Run the benchmarks and write their results into docs/benchmarks.md.

Sections, each between its own markers (`<!-- NAME:begin -->` ... `<!-- NAME:end -->`):

  machine     what the numbers were measured on: cores, CPU, Python, OS, package versions, date, load,
              and the command that reruns each section
  coldstart   scripts/coldstart.py: each handler's init + first request against `import boto3`, the clients and
              the same AWS calls on a moto server (and the import-only numbers beside it)
  throughput  scripts/bench_local.py: the embedded runtime end to end against the floor of the same AWS calls
  overhead    scripts/bench_worker_overhead.py: the worker's logic per no-op job against a direct call

Only these sections are replaced; every other part of the file (the `calls` and `ledger` sections, written by
their own scripts) is kept byte for byte. A missing section of ours is inserted before `<!-- calls:begin -->`
(after the machine section), or at the end. Without the file, it is created with all five marker pairs.

    .venv/bin/python scripts/write_benchmarks.py [--only coldstart,throughput,overhead] [--quick] [--coldstart-runs N]
    make bench
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS_MD = ROOT / "docs" / "benchmarks.md"
PACKAGES = ("boto3", "botocore", "moto", "pydantic", "aws-lambda-powertools")
OURS = ("coldstart", "throughput", "overhead")
ALL_SECTIONS = ("machine", *OURS, "calls", "ledger")
# Each of our sections: the script and its arguments (full run, --quick run).
COMMANDS: dict[str, tuple[list[str], list[str]]] = {
    "coldstart": (
        ["scripts/coldstart.py", "--runs", "21", "--json"],
        ["scripts/coldstart.py", "--runs", "3", "--json"],
    ),
    "throughput": (
        ["scripts/bench_local.py", "--jobs", "400", "--clients", "8", "--rounds", "2", "--json"],
        ["scripts/bench_local.py", "--jobs", "100", "--clients", "8", "--rounds", "1", "--json"],
    ),
    "overhead": (
        ["scripts/bench_worker_overhead.py", "--jobs", "2000", "--runs", "7", "--json"],
        ["scripts/bench_worker_overhead.py", "--jobs", "500", "--runs", "3", "--json"],
    ),
}
OTHER_COMMANDS = {"calls": "make bench-calls", "ledger": "make bench-ledger"}


def begin(name: str) -> str:
    return f"<!-- {name}:begin -->"


def end(name: str) -> str:
    return f"<!-- {name}:end -->"


# -- running ------------------------------------------------------------------------------------


def run_script(arguments: list[str]) -> str:
    """Runs a benchmark script with this interpreter; its progress (stderr) goes to the console."""
    print(f"$ python {' '.join(arguments)}", file=sys.stderr, flush=True)
    done = subprocess.run(
        [sys.executable, *arguments], cwd=ROOT, stdout=subprocess.PIPE, stderr=None, text=True, check=True
    )
    return done.stdout


def command_line(arguments: list[str]) -> str:
    return "`.venv/bin/python " + " ".join(arguments) + "`"


def coldstart(arguments: list[str]) -> dict[str, Any]:
    """coldstart.py --json: per handler the init + first request and the import-only medians."""
    return from_json(arguments)


def from_json(arguments: list[str]) -> dict[str, Any]:
    output = run_script(arguments)
    result: dict[str, Any] = json.loads(output[output.index("{") :])
    return result


# -- sections -----------------------------------------------------------------------------------


def machine_section(measured: list[str], loads: tuple[float, float], started: datetime, quick: bool) -> str:
    cpu = _cpu_model()
    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    versions = ", ".join(f"{name} {_version(name)}" for name in PACKAGES)
    lines = [
        begin("machine"),
        f"Measured on {cores} cores ({usable} usable; {cpu}), Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()} ({platform.machine()}); {versions}.",
        "",
        f"Last run {started:%Y-%m-%d %H:%M} UTC ({', '.join(measured)}{', quick settings' if quick else ''}): "
        f"1-minute load average {loads[0]:.2f} before, {loads[1]:.2f} after. The machine is shared: other work "
        "runs beside the benchmarks, so each script interleaves its rounds and reports medians; expect the "
        "numbers to move by 10-30% between runs.",
        "",
        "To rerun a section (`scripts/write_benchmarks.py` reruns the first three, `--only NAME` one of them):",
        "",
    ]
    for name in OURS:
        lines.append(f"- {name}: {command_line(COMMANDS[name][0])}")
    for name, command in OTHER_COMMANDS.items():
        lines.append(f"- {name}: `{command}`")
    lines.append(end("machine"))
    return "\n".join(lines)


def coldstart_section(result: dict[str, Any], arguments: list[str], when: datetime) -> str:
    before, after = result["load_average_1m"]
    lines = [
        begin("coldstart"),
        "## Cold start: init + first request against the floor of the same AWS calls",
        "",
        f"Measured {when:%Y-%m-%d} by {command_line(arguments)}, Python {result['python']}, {result['runs']} runs "
        f"each, interleaved, medians; 1-minute load average {before:.2f} before and {after:.2f} after on "
        f"{result['cpus']} CPUs. What runs is the function asset as the stack bundles it (offpath and the pinned "
        "infra/lambda-requirements.txt, with the unchecked-hash bytecode Python 3.13 compiled for them), bundled "
        "for this machine's architecture from the same pinned versions (the AWS asset's pydantic_core is an arm64 "
        "build), on the functions' Python, 3.13, writing no bytecode (PYTHONDONTWRITEBYTECODE=1: /var/task is "
        f"read-only){'' if result.get('bytecode', True) else ', its bytecode stripped'}. "
        "A fresh process imports the handler and serves one request against a moto server "
        "on 127.0.0.1 holding the stack's table and queues (api: `POST /jobs` answered 202; worker: one SQS record "
        "of that job, no batch item failure); the floor is a fresh process doing `import boto3`, creating the "
        "clients its calls need and making the same calls (api: PutItem + SendMessage; worker: two UpdateItem, "
        "then an SQS client made on first use and one ChangeMessageVisibilityBatch, the hold of its batch for the "
        "lease, as the worker makes them). "
        "Wall clock is what the caller waits for; the process's CPU time beside it is steadier on a loaded "
        "machine. Import only: the handler's import + `default_services()` against `import boto3` + those "
        "clients. Every process runs with Lambda's `AWS_LAMBDA_FUNCTION_NAME` set, so a handler pauses the garbage "
        "collector during its init as it does on Lambda (offpath.collector). "
        "SnapStart (`-c snapstart=true`) cannot be measured here: it needs Lambda's snapshots.",
        "",
        "| handler | first request: floor ms | handler ms | ratio | CPU ratio | import only: floor ms | handler ms "
        "| ratio | CPU ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    worst = 0.0
    for row in result["rows"]:
        first, first_cpu = row.get("first_request"), row.get("first_request_cpu")
        only, only_cpu = row["import_only"], row["import_only_cpu"]
        head = (
            f"{first['floor_ms']} | {first['handler_ms']} | {first['ratio']:.2f} | {first_cpu['ratio']:.2f}"
            if first and first_cpu
            else "- | - | - | -"
        )
        if first:
            worst = max(worst, first["ratio"])
        name = (
            f"{row['handler']} (no handler: pydantic and one model, no offpath code)"
            if row.get("reference")
            else row["handler"]
        )
        lines.append(
            f"| {name} | {head} | {only['floor_ms']} | {only['handler_ms']} | {only['ratio']:.2f} "
            f"| {only_cpu['ratio']:.2f} |"
        )
    lines += ["", f"Worst init + first request ratio {worst:.2f} (target ≤ {result['target']:.2f}).", end("coldstart")]
    return "\n".join(lines)


def throughput_section(result: dict[str, Any], arguments: list[str], when: datetime) -> str:
    latency, idle, startup = result["submit_latency_ms"], result["idle_submit_latency_ms"], result["startup_s"]
    lines = [
        begin("throughput"),
        "## Throughput of the embedded runtime",
        "",
        f"Measured {when:%Y-%m-%d} by {command_line(arguments)}: `demo.echo` jobs submitted over HTTP "
        f"({result['clients']} clients, {result['jobs_per_round']} jobs a round, {result['rounds']} rounds) until "
        "each is SUCCEEDED, against the floor: the same AWS calls (PutItem + SendMessage, ReceiveMessage, two "
        "UpdateItem, DeleteMessageBatch) issued directly on the same emulator. Rounds alternate; medians. Both "
        "share one Python process with moto, which sets the pace (docs/local.md).",
        "",
        "| | |",
        "|---|---|",
        f"| offpath, submit over HTTP → SUCCEEDED | {result['offpath_jobs_per_s']} jobs/s |",
        f"| floor, the same AWS calls on the same emulator | {result['floor_jobs_per_s']} jobs/s |",
        f"| ratio | {result['ratio']:.0%} (target ≥ 70%) |",
        f"| submit latency, {result['clients']} clients at full load "
        f"| p50 {latency['p50']} ms, p99 {latency['p99']} ms |",
        f"| submit latency, one client | p50 {idle['p50']} ms, p99 {idle['p99']} ms |",
        f"| start-up | {startup['cold']} s cold (new process until /health answers), {startup['warm']} s warm |",
        end("throughput"),
    ]
    return "\n".join(lines)


def overhead_section(result: dict[str, Any], arguments: list[str], when: datetime) -> str:
    low, high = result["worker_us_range"]
    logs_low, logs_high = result["worker_with_logs_us_range"]
    lines = [
        begin("overhead"),
        "## Worker overhead per job",
        "",
        f"Measured {when:%Y-%m-%d} by {command_line(arguments)}: {result['jobs']} no-op jobs through "
        f"`offpath.logic.process.process_batch` in batches of {result['batch_size']}, with the in-memory fakes "
        "of the store, queue and metrics (tooling/offpath_tools/fakes.py) and on the main thread (the job's timeout "
        "is a SIGALRM timer, as in Lambda), against calling the job function directly as often; "
        f"{result['runs']} alternating runs, medians. No AWS call is made: on AWS the claim and the success are "
        "two DynamoDB UpdateItem calls, milliseconds each, so this is the CPU offpath adds around them.",
        "",
        "| | µs per job |",
        "|---|---|",
        f"| the job function called directly | {result['direct_us_per_job']} |",
        f"| through process_batch | {result['worker_us_per_job']} (runs: {low}-{high}) |",
        f"| **worker overhead** | **{result['overhead_us_per_job']}** |",
        f"| worker overhead with INFO JSON logs and EMF metric lines (to /dev/null) | "
        f"{result['overhead_with_logs_us_per_job']} (runs: {logs_low}-{logs_high}) |",
        end("overhead"),
    ]
    return "\n".join(lines)


# -- the file -----------------------------------------------------------------------------------


def new_document() -> str:
    pairs = "\n\n".join(f"{begin(name)}\n{end(name)}" for name in ALL_SECTIONS)
    return f"# Benchmarks\n\n{pairs}\n"


def replace_section(text: str, name: str, section: str) -> str:
    """Replaces the text between a section's markers (the markers included); inserts the section if the file
    has none. Nothing outside the markers changes."""
    if begin(name) in text and end(name) in text:
        head, rest = text.split(begin(name), 1)
        return head + section + rest.split(end(name), 1)[1]
    if name == "machine":
        title, newline, body = text.partition("\n")
        if title.startswith("# "):
            return f"{title}{newline}\n{section}\n{body}"
        return f"{section}\n\n{text}"
    anchor = begin("calls")
    if anchor in text:
        head, tail = text.split(anchor, 1)
        return f"{head}{section}\n\n{anchor}{tail}"
    return text.rstrip("\n") + f"\n\n{section}\n"


def write(path: Path, sections: dict[str, str]) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else new_document()
    for name in ALL_SECTIONS:  # in document order, so inserted sections land in order
        if name in sections:
            text = replace_section(text, name, sections[name])
    path.write_text(text, encoding="utf-8")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(OURS), help=f"sections to run, of {', '.join(OURS)}")
    parser.add_argument("--quick", action="store_true", help="fewer runs and jobs (a smoke run; noisier numbers)")
    parser.add_argument("--file", type=Path, default=BENCHMARKS_MD, help="the document to write")
    parser.add_argument("--coldstart-runs", type=int, help="the cold start's rounds (fewer on a busy machine)")
    args = parser.parse_args()
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = set(chosen) - set(OURS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")

    started = datetime.now(UTC)
    load_before = os.getloadavg()[0]
    clock = time.perf_counter()
    sections: dict[str, str] = {}
    for name in OURS:
        if name not in chosen:
            continue
        arguments = COMMANDS[name][1 if args.quick else 0]
        if name == "coldstart" and args.coldstart_runs:
            arguments = [*arguments[:2], str(args.coldstart_runs), *arguments[3:]]
        when = datetime.now(UTC)
        if name == "coldstart":
            sections[name] = coldstart_section(coldstart(arguments), arguments, when)
        elif name == "throughput":
            sections[name] = throughput_section(from_json(arguments), arguments, when)
        else:
            sections[name] = overhead_section(from_json(arguments), arguments, when)
        print(sections[name], file=sys.stderr)
    sections["machine"] = machine_section(chosen, (load_before, os.getloadavg()[0]), started, args.quick)
    write(args.file, sections)
    print(f"wrote {', '.join(chosen)} to {args.file} in {time.perf_counter() - clock:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
