"""`offpath smoke` (`make smoke URL=...`): a short, read-mostly check of a live stack after a deploy.

In order: `GET /health`; a `demo.echo` job submitted and followed to SUCCEEDED; a `demo.poison` job (one that
fails its first run only) followed to FAILED and its message in the queue's DLQ; the DLQ's depth alarm in ALARM
(CloudWatch); a redrive of the DLQ that runs the job again, and it succeeds (its message leaves the DLQ, so the
alarm returns to OK); the CloudWatch dashboard present. Each step is printed with ✓ (PASS), ✗ (FAIL) or
- (SKIP) and how long it took, then the ids the smoke made and what it cleaned up: a report to paste into a
ticket. The exit code is 0 when nothing failed, 1 otherwise.

It touches only what it made: two jobs of its own (finished jobs expire with the table's TTL), and the alarm's
state for a few minutes (it notifies the alarm topic). A redrive moves every message of the DLQ back, so it runs
only when the DLQ held nothing before the smoke's own message; otherwise it is skipped (not failed), and the
poison job is retried by hand instead (`POST /jobs/{id}/retry`): it succeeds, and the retry takes its message
out of the DLQ (one the retry's bounded search misses is acknowledged as a duplicate by whichever redrive comes
next). The smoke never receives a DLQ's messages itself: some of them would be other tenants'.

The API is called with SigV4 (the standard AWS credential chain) or a bearer token (`--token`: a JWT-authorised
stage, or the embedded runtime); CloudWatch with the AWS credentials, at `--aws-endpoint` if given
(the embedded runtime's emulator stands in for AWS in the project's own tests).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO, TypeVar

from offpath.naming import dlq_name
from offpath_local.client import EXECUTE_API_HOST, ApiClient, CannotConnectError

T = TypeVar("T")
PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"
MARKS = {PASS: "✓", FAIL: "✗", SKIP: "-"}
FINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api", metavar="URL", required=True, help="the stack's ApiUrl output")
    parser.add_argument("--token", help="bearer token of an admin (default: $OFFPATH_TOKEN, else SigV4 signing)")
    parser.add_argument("--prefix", default="offpath", help="the stack's prefix option (default offpath)")
    parser.add_argument("--queue", default="default", help="the queue class of demo.poison (default default)")
    parser.add_argument("--region", help="the stack's region (default: from the URL, else your AWS configuration)")
    parser.add_argument("--profile", help="the AWS profile to use (default: the standard credential chain)")
    parser.add_argument("--aws-endpoint", metavar="URL", help="CloudWatch at this endpoint (an emulator)")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="S", help="per job step (default 300)")
    parser.add_argument(
        "--alarm-timeout", type=float, default=900.0, metavar="S", help="for the DLQ alarm to fire (default 900)"
    )
    parser.add_argument("--poll", type=float, default=2.0, metavar="S", help="seconds between polls (default 2)")


@dataclass
class Check:
    name: str
    status: str
    detail: str
    seconds: float = 0.0

    def line(self) -> str:
        return f"  {MARKS[self.status]} {self.status}  {self.name:<10} {self.seconds:6.1f} s  {self.detail}"


@dataclass
class Report:
    """What a person pastes into a ticket: the target, when, each check, the ids made, what was cleaned up."""

    target: str
    started: str = ""
    seconds: float = 0.0
    checks: list[Check] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    cleaned: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL]

    def summary(self) -> str:
        counts = {s: sum(c.status == s for c in self.checks) for s in (PASS, FAIL, SKIP)}
        return f"offpath smoke: {counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIP]} skipped"

    def lines(self) -> list[str]:
        return [
            f"offpath smoke: {self.target}",
            f"  time     {self.started} ({self.seconds:.1f} s)",
            *(c.line() for c in self.checks),
            f"  created  {'; '.join(self.created) or 'nothing'}",
            f"  cleaned  {'; '.join(self.cleaned) or 'nothing'}",
            f"  left     {'; '.join(self.left) or 'nothing'}",
            self.summary(),
        ]


class StepFailed(Exception):
    pass


class Smoke:
    def __init__(
        self,
        api: ApiClient,
        cloudwatch: Any,
        *,
        prefix: str = "offpath",
        queue: str = "default",
        timeout_s: float = 300.0,
        alarm_timeout_s: float = 900.0,
        poll_s: float = 2.0,
        out: TextIO | None = None,
    ) -> None:
        self.api = api
        self.cloudwatch = cloudwatch
        self.prefix = prefix
        self.queue = queue
        self.timeout_s = timeout_s
        self.alarm_timeout_s = alarm_timeout_s
        self.poll_s = poll_s
        self.out = out
        self.run_id = uuid.uuid4().hex[:12]
        self.report = Report(f"{api.base_url} (prefix {prefix}, queue {queue}, run {self.run_id})")
        self._detail = ""

    @property
    def alarm_name(self) -> str:
        return f"{self.prefix}-{self.queue}-dlq-depth"

    def run(self) -> Report:
        started = time.monotonic()
        self.report.started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        try:
            self._run()
        finally:
            self.report.seconds = time.monotonic() - started
        return self.report

    def _run(self) -> None:
        if self._step("health", self._health) is None:
            for name in ("submit", "poison", "dlq", "alarm", "redrive", "dashboard", "cleanup"):
                self._skip(name, "the API did not answer")
            return
        self._step("submit", self._submit)
        dlq_before = self._dlq_depth()
        poison = self._step("poison", self._poison)
        in_dlq = self._step("dlq", lambda: self._dlq(dlq_before)) if poison else None
        if not poison:
            self._skip("dlq", "no FAILED job")
        if in_dlq:
            self._step("alarm", self._alarm)
        else:
            self._skip("alarm", "nothing reached the DLQ")
        redriven = None
        if not in_dlq:
            self._skip("redrive", "nothing reached the DLQ")
        elif dlq_before:
            self._skip(
                "redrive", f"the DLQ held {dlq_before} message(s) before this run; a redrive would move them too"
            )
        else:
            redriven = self._step("redrive", lambda: self._redrive(str(poison)))
        self._step("dashboard", self._dashboard)
        if redriven:
            self._skip("cleanup", "nothing to clean: the redrive took the smoke's message out of the DLQ")
        elif poison:
            self._step("cleanup", lambda: self._cleanup(str(poison), int(in_dlq or 0)))
        else:
            self._skip("cleanup", "no job of this run failed")

    # -- steps: each returns something on success or raises StepFailed --------------------------------

    def _health(self) -> str:
        answer = self.api.call("GET", "/health")
        if answer.status != 200 or answer.body != {"status": "ok"}:
            raise StepFailed(f"GET /health answered {answer.status}: {answer.body}")
        self._note("GET /health answered 200")
        return "ok"

    def _submit(self) -> str:
        job = self._run_job("demo.echo", {"smoke": self.run_id})
        if job["status"] != "SUCCEEDED" or job.get("result") != {"smoke": self.run_id}:
            raise StepFailed(f"demo.echo job {job['job_id']} ended {job['status']}: {job.get('error')}")
        self._note(f"demo.echo job {job['job_id']} SUCCEEDED after {job['attempts']} attempt(s)")
        return str(job["job_id"])

    def _poison(self) -> str:
        job = self._run_job("demo.poison", {"reason": f"offpath smoke {self.run_id}", "first_run_only": True})
        if job["status"] != "FAILED":
            raise StepFailed(f"demo.poison job {job['job_id']} ended {job['status']}, not FAILED")
        self._note(f"demo.poison job {job['job_id']} FAILED: {job.get('error')}")
        return str(job["job_id"])

    def _dlq(self, before: int) -> int:
        depth = self._until(lambda: _at_least(self._dlq_depth(), before + 1), self.timeout_s, "the DLQ's depth to grow")
        self._note(f"{dlq_name(self.prefix, self.queue)} holds {depth} message(s) (before: {before})")
        return depth

    def _alarm(self) -> str:
        def state() -> str | None:
            alarms = self.cloudwatch.describe_alarms(AlarmNames=[self.alarm_name]).get("MetricAlarms", [])
            if not alarms:
                raise StepFailed(f"no alarm named {self.alarm_name}")
            return "ALARM" if alarms[0]["StateValue"] == "ALARM" else None

        self._until(state, self.alarm_timeout_s, f"{self.alarm_name} to be in ALARM")
        self._note(f"{self.alarm_name} is in ALARM")
        return "ALARM"

    def _redrive(self, job_id: str) -> str:
        answer = self.api.call("POST", f"/queues/{self.queue}/redrive")
        if answer.status != 202:
            raise StepFailed(f"POST /queues/{self.queue}/redrive answered {answer.status}: {answer.error_text()}")

        def ran_again() -> dict[str, Any] | None:
            job = self._job(job_id)
            return job if job.get("redrives", 0) >= 1 and job["status"] in FINAL else None

        job = self._until(ran_again, self.timeout_s, "the redriven job to run again")
        if job["status"] != "SUCCEEDED":
            raise StepFailed(f"job {job_id} ran again after the redrive and ended {job['status']}: {job.get('error')}")
        self._note(f"redrive moved the DLQ back; job {job_id} ran again and SUCCEEDED")
        self.report.cleaned.append(f"job {job_id}'s dead letter (redriven; the job SUCCEEDED)")
        return job_id

    def _dashboard(self) -> str:
        try:
            body = json.loads(self.cloudwatch.get_dashboard(DashboardName=self.prefix)["DashboardBody"])
        except Exception as error:
            if type(error).__name__ in {"ResourceNotFound", "DashboardNotFoundError"} or "not" in str(error).lower():
                raise StepFailed(f"no CloudWatch dashboard named {self.prefix}") from None
            raise
        widgets = len(body.get("widgets", []))
        if not widgets:
            raise StepFailed(f"the dashboard {self.prefix} has no widgets")
        self._note(f"dashboard {self.prefix} with {widgets} widgets")
        return self.prefix

    def _cleanup(self, job_id: str, depth_with_it: int) -> str:
        """Without a redrive: the poison job retried by hand, so it succeeds; the retry removes its message from
        the DLQ when its search finds it. A DLQ no shallower than it was with the message says it may have stayed:
        the next redrive finds the job SUCCEEDED and acknowledges it as a duplicate."""
        answer = self.api.call("POST", f"/jobs/{job_id}/retry")
        if answer.status != 202:
            raise StepFailed(f"POST /jobs/{job_id}/retry answered {answer.status}: {answer.error_text()}")
        job = self._until(
            lambda: _if(self._job(job_id), lambda j: j["status"] in FINAL), self.timeout_s, f"job {job_id} to finish"
        )
        if job["status"] != "SUCCEEDED":
            raise StepFailed(f"job {job_id}, retried by hand, ended {job['status']}: {job.get('error')}")
        self._note(f"job {job_id} retried by hand and SUCCEEDED")
        self.report.cleaned.append(f"job {job_id} retried by hand (SUCCEEDED)")
        if self._dlq_depth() >= depth_with_it:
            self.report.left.append(
                f"job {job_id}'s message in {dlq_name(self.prefix, self.queue)} (the next redrive drops it as a "
                "duplicate)"
            )
        return job_id

    # -- helpers ----------------------------------------------------------------------------------------

    def _run_job(self, job_type: str, payload: dict[str, Any]) -> dict[str, Any]:
        answer = self.api.call("POST", "/jobs", body={"type": job_type, "payload": payload})
        if answer.status != 202:
            raise StepFailed(f"POST /jobs ({job_type}) answered {answer.status}: {answer.error_text()}")
        job_id = str(answer.body["job_id"])
        self.report.created.append(f"{job_type} job {job_id}")
        return self._until(
            lambda: _if(self._job(job_id), lambda j: j["status"] in FINAL), self.timeout_s, f"job {job_id} to finish"
        )

    def _job(self, job_id: str) -> dict[str, Any]:
        answer = self.api.call("GET", f"/jobs/{job_id}")
        if answer.status != 200:
            raise StepFailed(f"GET /jobs/{job_id} answered {answer.status}: {answer.error_text()}")
        return dict(answer.body)

    def _dlq_depth(self) -> int:
        answer = self.api.call("GET", "/queues")
        if answer.status != 200:
            raise StepFailed(f"GET /queues answered {answer.status}: {answer.error_text()}")
        for queue in answer.body.get("queues", []):
            if queue.get("name") == self.queue:
                return int(queue.get("dlq_depth") or 0)
        raise StepFailed(f"GET /queues lists no queue {self.queue}")

    def _until(self, probe: Callable[[], T | None], timeout_s: float, what: str) -> T:
        deadline = time.monotonic() + timeout_s
        while True:
            found = probe()
            if found is not None:
                return found
            if time.monotonic() >= deadline:
                raise StepFailed(f"gave up after {timeout_s:g} s waiting for {what}")
            time.sleep(self.poll_s)

    def _step(self, name: str, action: Callable[[], T]) -> T | None:
        started = time.monotonic()
        self._detail = ""
        try:
            result = action()
        except (StepFailed, CannotConnectError) as error:
            self._record(Check(name, FAIL, str(error), time.monotonic() - started))
            return None
        except Exception as error:  # an SDK error: this step's failure; the next steps still run
            self._record(Check(name, FAIL, f"{type(error).__name__}: {error}", time.monotonic() - started))
            return None
        self._record(Check(name, PASS, self._detail, time.monotonic() - started))
        return result

    def _skip(self, name: str, why: str) -> None:
        self._record(Check(name, SKIP, why))

    def _note(self, detail: str) -> None:
        self._detail = detail

    def _record(self, check: Check) -> None:
        self.report.checks.append(check)
        if self.out is not None:  # progress, while the report waits for the end
            print(check.line(), file=self.out, flush=True)


def _if(value: T, condition: Callable[[T], bool]) -> T | None:
    return value if condition(value) else None


def _at_least(value: int, floor: int) -> int | None:
    return value if value >= floor else None


def region_of(url: str, given: str | None, configured: str | None) -> str:
    if given:
        return given
    match = EXECUTE_API_HOST.search(urllib.parse.urlsplit(url).hostname or "")
    return match.group(1) if match else configured or "us-east-1"


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    import boto3

    out = out or sys.stdout
    for name in ("timeout", "alarm_timeout", "poll"):
        if getattr(args, name) <= 0:
            print(f"offpath smoke: --{name.replace('_', '-')} must be positive", file=sys.stderr)
            return 2
    token = args.token or os.environ.get("OFFPATH_TOKEN") or None
    session = boto3.session.Session(profile_name=args.profile)
    region = region_of(args.api, args.region, session.region_name)
    api = ApiClient(args.api, token=token, sign=token is None, region=region, profile=args.profile)
    cloudwatch = session.client("cloudwatch", region_name=region, endpoint_url=args.aws_endpoint)
    smoke = Smoke(
        api,
        cloudwatch,
        prefix=args.prefix,
        queue=args.queue,
        timeout_s=args.timeout,
        alarm_timeout_s=args.alarm_timeout,
        poll_s=args.poll,
        out=sys.stderr,
    )
    print(f"offpath smoke: checking {args.api} ...", file=sys.stderr, flush=True)
    report = smoke.run()
    print("\n".join(report.lines()), file=out, flush=True)
    return 1 if report.failed else 0


def next_steps(outputs: dict[str, dict[str, str]]) -> str:
    """What to run after `make deploy`, from the stack's outputs (`cdk deploy --outputs-file`)."""
    urls = [stack["ApiUrl"] for stack in outputs.values() if "ApiUrl" in stack]
    if not urls:
        return "make deploy: no ApiUrl among the stack's outputs; see docs/deploy.md, First deploy"
    url = urls[0]
    return "\n".join(
        [
            "",
            "Deployed. Next, check the stage (docs/deploy.md, First deploy):",
            f"  make smoke URL={url}",
            "  (a JWT-authorised stage: add TOKEN=<an admin's token>)",
            "then, on a stage deployed with -c demo_jobs=true, the end-to-end suite:",
            f"  make e2e URL={url} SIGV4=1",
        ]
    )


def print_next_steps(path: str) -> None:
    with open(path, encoding="utf-8") as outputs:
        print(next_steps(json.load(outputs)))
