"""`offpath clock`: the scheduler clock of the embedded runtime, pointed at a deployment whose EventBridge
Scheduler never fires (LocalStack, where the Scheduler keeps schedules but never invokes their targets).

It reads the schedules of the deployment's group (`<prefix>-schedules`: one per declared schedule, the
sweeper's every minute, and the one-time schedules the api makes for delayed jobs) and, when a slot comes,
invokes the schedule's target function asynchronously (`InvocationType=Event`) with the schedule's input,
its context attributes substituted, as the Scheduler would (scheduler_clock.py). One-time schedules are
deleted after they fire when they ask for it. It runs until stopped (Ctrl-C).

Never point it at an AWS account whose Scheduler fires: every slot would then run twice.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any, TextIO

from offpath.naming import schedule_group_name
from offpath_local.scheduler_clock import SchedulerClock, VirtualTime

DEFAULT_ENDPOINT = "http://localhost:4566"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--endpoint",
        metavar="URL",
        default=DEFAULT_ENDPOINT,
        help=f"the AWS endpoint of the deployment (default: LocalStack's, {DEFAULT_ENDPOINT})",
    )
    parser.add_argument("--prefix", default="offpath", help="the stack's prefix option (default offpath)")
    parser.add_argument("--region", help="the deployment's region (default: your AWS configuration, else us-east-1)")
    parser.add_argument("--tick", type=float, default=5.0, metavar="S", help="seconds between ticks (default 5)")


def lambda_invoker(client: Any, out: TextIO) -> Any:
    """An asynchronous invoke of the target, as the Scheduler makes it; one line per firing."""

    def invoke(target_arn: str, event: dict[str, Any]) -> None:
        client.invoke(FunctionName=target_arn, InvocationType="Event", Payload=json.dumps(event).encode())
        what = (event.get("schedule") or event.get("kind")) if isinstance(event, dict) else None
        slot = event.get("scheduled_time") if isinstance(event, dict) else None
        print(f"fired {target_arn.rsplit(':', 1)[-1]} ({what}, slot {slot})", file=out, flush=True)

    return invoke


def build_clock(
    scheduler: Any,
    lambda_client: Any,
    prefix: str,
    *,
    tick_s: float,
    out: TextIO,
    time_source: VirtualTime | None = None,
) -> SchedulerClock:
    return SchedulerClock(
        scheduler,
        schedule_group_name(prefix),
        lambda_invoker(lambda_client, out),
        time_source=time_source,
        tick_s=tick_s,
    )


def run(args: argparse.Namespace) -> int:
    import boto3

    if args.tick <= 0:
        print("offpath clock: --tick must be positive", file=sys.stderr)
        return 2
    session = boto3.session.Session(region_name=args.region)
    region = session.region_name or "us-east-1"
    scheduler = session.client("scheduler", endpoint_url=args.endpoint, region_name=region)
    lambda_client = session.client("lambda", endpoint_url=args.endpoint, region_name=region)
    clock = build_clock(scheduler, lambda_client, args.prefix, tick_s=args.tick, out=sys.stdout)
    print(
        f"offpath clock: firing the schedules of {schedule_group_name(args.prefix)} at {args.endpoint} "
        f"every {args.tick:g} s (Ctrl-C stops)",
        flush=True,
    )
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        clock.start()
        while not stop.wait(0.2):
            pass
    finally:
        clock.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print("offpath clock: stopped", file=sys.stderr)
    return 0
