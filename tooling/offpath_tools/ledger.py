"""The fault ledger (TESTPLAN 12) and the burst (TESTPLAN 21), over HTTP against `offpath local` in a child process.

Ledger: jobs submitted over HTTP to a runtime started with injected faults (`--faults SEED`), each with an
idempotency key (so a submit answered 503 is retried safely, and the job ids, hence the faults they draw,
are the same in every run with the same seed), followed to their final states, and every outcome
accounted for: submitted, accepted, succeeded and failed (against what each job type should end as),
lost (accepted and never final), side effects done twice or never (the welcome e-mails, written to a file
by the transport `offpath_tools/ledger_jobs.py` puts in place), the faults injected by kind (`faults.jsonl`),
the jobs' retries, the sweeper's re-sends and the duplicate deliveries the workers acknowledged (from the
functions' log).

Notices: before the first submit the ledger's tenant registers a webhook endpoint for the final events
(`job.succeeded`, `job.failed`, `job.cancelled`) on a receiver on 127.0.0.1 that answers every tenth request
503; every final job must then have a delivery of its final event that verifies with the endpoint's secret
(standardwebhooks), or a dead-lettered delivery (counted apart; with a receiver that recovers it stays 0).

Burst: jobs submitted in batches of 100 to the `bulk` queue class (maximum concurrency 2), then every one
must succeed and the queue's DLQ must stay empty.

Used by tests/e2e/test_ledger.py and tests/e2e/test_worker_faults.py (`make test`) and scripts/ledger.py
(`make bench`). The runtime runs with the test timings (`--timeout-scale`, `--visibility-scale`) and a short
sweep grace, so crash recovery takes seconds instead of minutes.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offpath_tools.launcher import OffpathLocal, free_loopback_port
from offpath_tools.webhook_receiver import Receiver

TENANT, TOKEN = "ledger", "ledger-token-0123456789"
FINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED"})
EFFECTS_FILE = "effects.jsonl"
# Where the runtime's job types (offpath_tools.ledger_jobs, loaded by the runtime and never imported here: it
# declares a queue class in the registry) write the side effects the ledger counts.
EFFECTS_ENV = "LEDGER_EFFECTS_FILE"
LEDGER_JOBS = "offpath_tools.ledger_jobs"
# Test timings: a worker's crash is recovered within half a minute. The default queue's worker timeout becomes
# 21 s (700 s x 0.03), so a lease at most 22 s (the 30 s lease margin x 0.03 on top): a crashed worker's batch,
# held until the lease ends (logic/process.py), comes back about 23 s after its invocation started. The ledger
# keeps the queues' visibility timeouts at the least TestTiming allows (the worker's timeout: 21 s on default,
# 5 s on critical), so that a record the hold missed (its request failed: the ledger injects faults into it too)
# is not kept longer; `STACK_VISIBILITY_SCALE` keeps the stack's ratio instead (6 x the worker's timeout: 126 s
# on default), where a test shows that the hold, not the visibility timeout, brings a dead worker's job back.
# The sweeper runs every second (its schedule at 60x) with a short grace. At 0.1 (a 70 s worker timeout) the
# ledgers of `make test` waited out 73 s leases (docs/decisions.md, 2026-12-03). The job types' own timeouts are
# 1 s at either scale for 10 s jobs; the welcome e-mail's is 1 s (3 s at 0.1).
TIMEOUT_SCALE = 0.03
VISIBILITY_SCALE = 0.005
STACK_VISIBILITY_SCALE = TIMEOUT_SCALE


def timing_options(visibility_scale: float = VISIBILITY_SCALE) -> tuple[str, ...]:
    """`offpath local`'s options for the ledger's test timings."""
    return ("--timeout-scale", str(TIMEOUT_SCALE), "--visibility-scale", str(visibility_scale))


# How long a job may take, at the test timings, to reach its final state once it was accepted, at the most: the
# slowest recovery is a record's return at its invocation's lease end (about 23 s after the invocation started,
# on default), after a crash or a store outage (on its claim, or through its outcome write's retries); one job
# met two in a row at the earlier timings (146 s from its submit at 0.1, seed 7), a third is allowed for, and a
# retry's backoff. A bound, not a wait: a run takes as long as its slowest job.
FINAL_WITHIN_S = 240
SWEEP_GRACE_S = 5
UNAVAILABLE = frozenset({429, 500, 502, 503, 504})
LIST_EVERY_ROUND_UP_TO = 300
# Notices: the ledger's endpoint, its receiver's failures, and the delivery schedule's scale (5 s -> 1 s).
WEBHOOK_NAME = "ledger"
WEBHOOK_PATH = "/ledger"
RECEIVER_FAILS_EVERY = 10
WEBHOOK_RETRY_SCALE = 0.01
FINAL_EVENTS = {
    "SUCCEEDED": "job.succeeded",
    "FAILED": "job.failed",
    "CANCELLED": "job.cancelled",
    "EXPIRED": "job.expired",
}
# The flow-control variant (`--flow-control`): `e2e.limited` jobs (offpath_tools.ledger_jobs) of FLOW_ACCOUNTS
# accounts, at most LIMITED_AT_ONCE running at once per account.
LIMITED_AT_ONCE = 2
FLOW_ACCOUNTS = 3
FLOW_RUN_MS = 200


# -- the runtime ------------------------------------------------------------------------------


class LedgerRuntime(OffpathLocal):
    """`offpath local` in a child process on free ports, with the ledger's tenant and job types; its webhook
    receiver listens on `webhook_port`, the port named for receivers (`--webhook-port`)."""

    webhook_port: int = 0

    @classmethod
    def launch(
        cls,
        data_dir: Path,
        *,
        seed: int | None = None,
        fault_rate: float | None = None,
        fault_kinds: Sequence[str] = (),
        fault_jobs: Sequence[str] = (),
        sweep_grace_s: int = SWEEP_GRACE_S,
        test_timing: bool = True,
        clock_speed: float = 60,
        alarm_interval_s: float = 1,
        quiet: bool = True,
        quotas: Sequence[str] = (),
        visibility_scale: float = VISIBILITY_SCALE,
    ) -> LedgerRuntime:
        """`quotas`: `--quota` options (TENANT:submits_per_s=N,open_jobs=M...), the ledger's tenant being TENANT.
        `visibility_scale`: the queues' visibility timeouts at the test timings (see VISIBILITY_SCALE)."""
        args = ["--clock-speed", str(clock_speed), "--clock-tick", "0.2", "--alarm-interval", str(alarm_interval_s)]
        if test_timing:
            args += timing_options(visibility_scale)
        if quiet:
            args.append("--quiet")
        if seed is not None:
            args += ["--faults", str(seed)]
            if fault_rate is not None:
                args += ["--fault-rate", str(fault_rate)]
            for kind in fault_kinds:
                args += ["--fault", kind]
        for target in fault_jobs:
            args += ["--fault-job", target]
        for quota in quotas:
            args += ["--quota", quota]
        env = {
            EFFECTS_ENV: str(data_dir / EFFECTS_FILE),
            "OFFPATH_SWEEP_GRACE_S": str(sweep_grace_s),
            "OFFPATH_WEBHOOK_RETRY_SCALE": str(WEBHOOK_RETRY_SCALE),
        }
        port = free_loopback_port()
        started = OffpathLocal.start(
            data_dir, tokens={TENANT: TOKEN}, load=[LEDGER_JOBS], args=args, env=env, webhook_ports=[port]
        )
        runtime = cls(started.process, started.url, started.data_dir, started.console)
        runtime.webhook_port = port
        return runtime

    def api(self) -> Api:
        return Api(self.url, TOKEN)

    def effects(self) -> list[dict[str, Any]]:
        return _json_lines(self.data_dir / EFFECTS_FILE)

    def faults(self) -> list[dict[str, Any]]:
        return _json_lines(self.data_dir / "faults.jsonl")

    def log(self) -> LogFacts:
        return LogFacts.read(self.data_dir / "offpath.log")

    def dead_lettered_deliveries(self) -> list[str]:
        """Job ids of the deliveries the delivery function gave up (the log line of each dead-lettered one)."""
        return LogFacts.dead_lettered_deliveries(self.data_dir / "offpath.log")


def _json_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# -- HTTP -------------------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    body: Any
    tries: int = 1
    over_quota: int = 0  # answers 429 quota_exceeded met on the way (each retried, as any 429)


class Api:
    """A keep-alive HTTP client for one thread. `call` retries what a careful client retries: a 503 (or
    another 5xx/429) and a dropped connection, a bounded number of times."""

    def __init__(self, url: str, token: str, *, tries: int = 10, pause_s: float = 0.2) -> None:
        self.netloc = urllib.parse.urlsplit(url).netloc
        self.token = token
        self.tries = tries
        self.pause_s = pause_s
        self._connection: http.client.HTTPConnection | None = None

    def call(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Answer:
        answer = Answer(0, None, 0)
        over_quota = 0
        for attempt in range(1, self.tries + 1):
            try:
                status, data = self._once(method, path, body, headers or {})
            except (OSError, http.client.HTTPException):
                self.close()
                status, data = 0, None
            over_quota += status == 429 and isinstance(data, dict) and "quota_exceeded" in json.dumps(data)
            answer = Answer(status, data, attempt, over_quota)
            if status and status not in UNAVAILABLE:
                return answer
            time.sleep(self.pause_s * attempt)
        return answer

    def _once(self, method: str, path: str, body: Any, headers: dict[str, str]) -> tuple[int, Any]:
        if self._connection is None:
            self._connection = http.client.HTTPConnection(self.netloc, timeout=60)
        all_headers = {"Authorization": f"Bearer {self.token}", **headers}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            all_headers["Content-Type"] = "application/json"
        self._connection.request(method, path, body=data, headers=all_headers)
        response = self._connection.getresponse()
        raw = response.read()
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        return response.status, parsed

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def in_parallel(items: Sequence[Any], work: Callable[[Api, Any], None], url: str, clients: int) -> None:
    """`work(api, item)` for every item, from `clients` threads with a connection each."""
    position = iter(range(len(items)))
    lock = threading.Lock()
    errors: list[BaseException] = []

    def client() -> None:
        api = Api(url, TOKEN)
        try:
            while True:
                with lock:
                    index = next(position, None)
                if index is None:
                    return
                work(api, items[index])
        except BaseException as error:
            errors.append(error)
        finally:
            api.close()

    threads = [threading.Thread(target=client) for _ in range(max(1, clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def final_views(api: Api, job_ids: Iterable[str], timeout_s: float, pause_s: float = 0.5) -> dict[str, dict[str, Any]]:
    """The last view of each of `job_ids`, once every one is final or `timeout_s` has passed.

    Cheap to the runtime while it works: first the queues are watched (`GET /queues`) until no message is
    left on them; then the tenant's jobs are listed once (100 a page: the emulator answers each index query
    by reading the whole table) and the ones not yet final (a message the sweeper has still to send, a
    retry's backoff) are read one by one until they are."""
    wanted = set(job_ids)
    deadline = time.monotonic() + timeout_s
    views: dict[str, dict[str, Any]] = {}
    while time.monotonic() < deadline and queued_messages(api) != 0:
        if len(wanted) <= LIST_EVERY_ROUND_UP_TO:
            # Few jobs: listing them is cheap, and the queues may hold duplicates of finished jobs a while longer.
            views = _listing(api)
            if all(views.get(job_id, {}).get("status") in FINAL for job_id in wanted):
                return views
        time.sleep(pause_s)
    views = _listing(api)
    pending = [job_id for job_id in wanted if views.get(job_id, {}).get("status") not in FINAL]
    while pending:
        for job_id in pending:
            answer = api.call("GET", f"/jobs/{job_id}")
            if answer.status == 200:
                views[job_id] = answer.body
        pending = [job_id for job_id in pending if views.get(job_id, {}).get("status") not in FINAL]
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(pause_s)
    return views


def queued_messages(api: Api) -> int | None:
    """Messages visible, in flight or delayed on all the queues (not their DLQs); None when unknown."""
    answer = api.call("GET", "/queues")
    if answer.status != 200:
        return None
    return sum(int(q["visible"]) + int(q["in_flight"]) + int(q["delayed"]) for q in answer.body.get("queues", []))


def _listing(api: Api) -> dict[str, dict[str, Any]]:
    views: dict[str, dict[str, Any]] = {}
    cursor: str | None = None
    while True:
        query = "limit=100" + (f"&cursor={urllib.parse.quote(cursor)}" if cursor else "")
        answer = api.call("GET", f"/jobs?{query}")
        if answer.status != 200:
            return views  # unavailable for now: the next round lists again
        for job in answer.body.get("jobs", []):
            views[job["job_id"]] = job
        cursor = answer.body.get("cursor")
        if not cursor:
            return views


# -- what the runtime wrote down -----------------------------------------------------------------


@dataclass
class LogFacts:
    """Counted from the functions' log (offpath.log): JSON log lines and EMF metric lines."""

    sweeper_resends: int = 0  # messages sent again for jobs whose message was missing or late
    sweeper_requeues: int = 0  # jobs whose worker died holding the lease, requeued
    duplicate_deliveries: int = 0  # DuplicateDeliveries: deliveries acknowledged without running the job
    admission_waits: int = 0  # AdmissionWaits: jobs that waited for a limit, unclaimed
    acknowledged: Counter[str] = field(default_factory=Counter)  # job id -> deliveries acknowledged without a run

    @classmethod
    def read(cls, path: Path) -> LogFacts:
        facts = cls()
        if not path.exists():
            return facts
        with path.open(encoding="utf-8", errors="replace") as log:
            for line in log:
                if not line.startswith("{"):
                    continue
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if "_aws" in entry:
                    facts.duplicate_deliveries += int(entry.get("DuplicateDeliveries", 0) or 0)
                    facts.admission_waits += int(entry.get("AdmissionWaits", 0) or 0)
                    continue
                message = str(entry.get("message", ""))
                if entry.get("service") == "sweeper":
                    if message.startswith("job overdue on its queue") or message.startswith("scheduled job overdue"):
                        facts.sweeper_resends += 1
                    elif message.startswith("lease expired; job requeued"):
                        facts.sweeper_requeues += 1
                elif message.startswith("delivery for a ") and entry.get("job_id"):
                    facts.acknowledged[str(entry["job_id"])] += 1
        return facts

    @staticmethod
    def dead_lettered_deliveries(path: Path) -> list[str]:
        """Job ids of webhook deliveries the delivery function gave up (its "delivery dead_lettered" lines)."""
        found: list[str] = []
        if not path.exists():
            return found
        with path.open(encoding="utf-8", errors="replace") as log:
            for line in log:
                if '"delivery dead_lettered"' not in line and "delivery disabled" not in line:
                    continue
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("job_id"):
                    found.append(str(entry["job_id"]))
        return found


# -- the ledger -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Planned:
    key: str
    job_type: str
    payload: dict[str, Any]
    expect: str
    email: str | None = None


def plan(jobs: int, tag: str = "ledger", *, flow_control: bool = False) -> list[Planned]:
    """Eight in ten welcome e-mails (SUCCEEDED, one e-mail each), one flaky job that fails its first attempt
    (SUCCEEDED on a retry), one poison job (FAILED). With `flow_control`: `e2e.limited` jobs of FLOW_ACCOUNTS
    accounts in turn (SUCCEEDED)."""
    if flow_control:
        return [
            Planned(
                f"{tag}-{n}", "e2e.limited", {"account": f"account-{n % FLOW_ACCOUNTS}", "ms": FLOW_RUN_MS}, "SUCCEEDED"
            )
            for n in range(jobs)
        ]
    planned = []
    for n in range(jobs):
        key = f"{tag}-{n}"
        if n % 10 == 8:
            planned.append(Planned(key, "demo.flaky", {"fail_first": 1}, "SUCCEEDED"))
        elif n % 10 == 9:
            planned.append(Planned(key, "demo.poison", {"reason": f"{key} is poison"}, "FAILED"))
        else:
            email = f"{key}@example.com"
            planned.append(Planned(key, "send_welcome_email", {"user_id": key, "email": email}, "SUCCEEDED", email))
    return planned


@dataclass
class Ledger:
    jobs: int
    seed: int | None
    fault_rate: float | None
    submitted: int = 0
    accepted: int = 0
    refused: int = 0  # still refused after the client's retries
    submit_retries: int = 0  # submits tried again after a 503 (or a dropped connection)
    written_despite_refusal: int = 0  # a submit answered 503 whose job existed all the same
    over_quota: int = 0  # answers 429 quota_exceeded (with quotas on), each retried by the client
    refused_jobs: list[str] = field(default_factory=list)  # the idempotency keys of the submits still refused
    succeeded: int = 0
    failed: int = 0
    unexpected: list[str] = field(default_factory=list)  # final, but not in the state its type should end in
    lost: list[str] = field(default_factory=list)  # accepted, never final
    duplicate_effects: list[str] = field(default_factory=list)  # e-mails sent more than once
    missing_effects: list[str] = field(default_factory=list)  # SUCCEEDED welcome jobs that sent no e-mail
    faults: dict[str, int] = field(default_factory=dict)
    faulted_jobs: dict[str, list[str]] = field(default_factory=dict)  # kind -> job ids it hit
    retries: int = 0  # attempts after the first, over all jobs
    sweeper_resends: int = 0
    sweeper_requeues: int = 0
    duplicate_deliveries: int = 0
    elapsed_s: float = 0.0
    views: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Notices (None: no endpoint was registered for this run).
    webhooks: WebhookFacts | None = None
    # The flow-control variant: the most runs of one account at once (from the runs' own start and end), and how
    # often a job waited for its limit.
    flow_control: bool = False
    most_at_once: dict[str, int] = field(default_factory=dict)
    admission_waits: int = 0

    @property
    def expected(self) -> Counter[str]:
        return Counter(p.expect for p in plan(self.jobs, flow_control=self.flow_control))

    @property
    def over_limit(self) -> dict[str, int]:
        """Accounts that ever ran more than LIMITED_AT_ONCE jobs at once (the flow-control variant)."""
        return {account: most for account, most in self.most_at_once.items() if most > LIMITED_AT_ONCE}

    @property
    def clean(self) -> bool:
        undelivered = self.webhooks is not None and (self.webhooks.undelivered or self.webhooks.unverified)
        return not (
            self.lost
            or self.unexpected
            or self.duplicate_effects
            or self.missing_effects
            or self.refused
            or undelivered
            or self.over_limit
        )

    def lines(self) -> list[str]:
        faults = sum(self.faults.values())
        by_kind = ", ".join(f"{kind} {n}" for kind, n in sorted(self.faults.items(), key=lambda kv: -kv[1]))
        setting = f"seed {self.seed}, fault rate {self.fault_rate:g}" if self.seed is not None else "no faults"
        expected = self.expected
        return [
            f"ledger: {self.jobs} jobs over HTTP, {setting}",
            f"  submitted {self.submitted}   accepted {self.accepted}   refused {self.refused}"
            f"   (submits retried after a 503: {self.submit_retries}; 503s whose job existed: "
            f"{self.written_despite_refusal})",
            f"  succeeded {self.succeeded} (expected {expected['SUCCEEDED']})   failed {self.failed}"
            f" (expected {expected['FAILED']})   not as expected {len(self.unexpected)}",
            f"  lost {len(self.lost)}   duplicate side effects {len(self.duplicate_effects)}"
            f"   missing side effects {len(self.missing_effects)}",
            f"  faults injected {faults}: {by_kind or '-'}",
            f"  job retries {self.retries}   sweeper re-sends {self.sweeper_resends}"
            f" (+ {self.sweeper_requeues} expired leases requeued)   duplicate deliveries {self.duplicate_deliveries}",
            f"  {self.elapsed_s:.1f} s from the first submit until every job was final",
            *([self.webhooks.line()] if self.webhooks else []),
            *([f"  answers 429 quota_exceeded {self.over_quota} (each retried)"] if self.over_quota else []),
            *([self.flow_line()] if self.flow_control else []),
        ]

    def flow_line(self) -> str:
        most = ", ".join(f"{account} {n}" for account, n in sorted(self.most_at_once.items()))
        return (
            f"  flow control: at most {LIMITED_AT_ONCE} at once per account; most running at once: {most or '-'}"
            f"   over the limit {len(self.over_limit)}   waits for the limit {self.admission_waits}"
        )

    def markdown_rows(self) -> list[tuple[str, str]]:
        faults = sum(self.faults.values())
        by_kind = ", ".join(f"{kind} {n}" for kind, n in sorted(self.faults.items(), key=lambda kv: -kv[1]))
        expected = self.expected
        return [
            ("submitted / accepted / refused", f"{self.submitted} / {self.accepted} / {self.refused}"),
            ("submits retried after a 503", str(self.submit_retries)),
            ("succeeded (expected)", f"{self.succeeded} ({expected['SUCCEEDED']})"),
            ("failed (expected: the poison jobs)", f"{self.failed} ({expected['FAILED']})"),
            ("not in the expected final state", str(len(self.unexpected))),
            ("**lost**", f"**{len(self.lost)}**"),
            ("**duplicate side effects** (`ctx.once`)", f"**{len(self.duplicate_effects)}**"),
            ("missing side effects", str(len(self.missing_effects))),
            ("faults injected", f"{faults}: {by_kind or '-'}"),
            ("job retries (attempts after the first)", str(self.retries)),
            ("sweeper re-sends (+ expired leases requeued)", f"{self.sweeper_resends} (+ {self.sweeper_requeues})"),
            ("duplicate deliveries acknowledged", str(self.duplicate_deliveries)),
            ("first submit until every job final", f"{self.elapsed_s:.1f} s"),
            *(self.webhooks.markdown_rows() if self.webhooks else []),
            *(
                [
                    (
                        "**runs of one account over its limit** (most at once)",
                        f"**{len(self.over_limit)}** ({self.most_at_once})",
                    )
                ]
                if self.flow_control
                else []
            ),
        ]


def run_ledger(
    local: LedgerRuntime,
    jobs: int,
    *,
    seed: int | None,
    fault_rate: float | None,
    clients: int = 4,
    timeout_s: float = 120,
    tag: str = "ledger",
    webhooks: bool = True,
    flow_control: bool = False,
) -> Ledger:
    planned = plan(jobs, tag, flow_control=flow_control)
    ledger = Ledger(jobs=jobs, seed=seed, fault_rate=fault_rate, submitted=len(planned), flow_control=flow_control)
    answers: dict[str, Answer] = {}
    lock = threading.Lock()
    receiver = Receiver(fail_every=RECEIVER_FAILS_EVERY, port=local.webhook_port) if webhooks else None
    secret = _register_endpoint(local, receiver) if receiver is not None else None

    def submit(api: Api, job: Planned) -> None:
        body = {"type": job.job_type, "payload": job.payload}
        answer = api.call("POST", "/jobs", body, {"Idempotency-Key": job.key})
        with lock:
            answers[job.key] = answer

    started = time.monotonic()
    in_parallel(planned, submit, local.url, clients)
    # The job ids the answers gave (an id is not derived from its key): the job of each accepted submit.
    accepted: dict[str, Planned] = {}
    for job in planned:
        answer = answers[job.key]
        ledger.submit_retries += answer.tries - 1
        ledger.over_quota += answer.over_quota
        job_id = answer.body.get("job_id") if answer.status in (200, 202) else None
        if isinstance(job_id, str) and job_id not in accepted:
            accepted[job_id] = job
            if answer.tries > 1 and answer.status == 200:
                ledger.written_despite_refusal += 1
        else:
            ledger.refused += 1
            ledger.refused_jobs.append(job.key)
    ledger.accepted = len(accepted)

    api = local.api()
    try:
        views = final_views(api, accepted, timeout_s)
    finally:
        api.close()
    ledger.elapsed_s = time.monotonic() - started
    ledger.views = views
    _settle(local)

    emails = Counter(str(e.get("to")) for e in local.effects() if e.get("effect") == "welcome-email")
    for job_id, job in accepted.items():
        view = views.get(job_id, {})
        status = view.get("status")
        if status not in FINAL:
            ledger.lost.append(job_id)
            continue
        ledger.succeeded += status == "SUCCEEDED"
        ledger.failed += status == "FAILED"
        ledger.retries += max(0, int(view.get("attempts") or 0) - 1)
        if status != job.expect:
            ledger.unexpected.append(job_id)
        if job.email is not None:
            if emails[job.email] > 1:
                ledger.duplicate_effects.append(job_id)
            elif status == "SUCCEEDED" and emails[job.email] == 0:
                ledger.missing_effects.append(job_id)

    for fault in local.faults():
        kind = str(fault["kind"])
        ledger.faults[kind] = ledger.faults.get(kind, 0) + 1
        if fault.get("job_id"):
            ledger.faulted_jobs.setdefault(kind, []).append(str(fault["job_id"]))
    facts = local.log()
    ledger.sweeper_resends = facts.sweeper_resends
    ledger.sweeper_requeues = facts.sweeper_requeues
    ledger.duplicate_deliveries = facts.duplicate_deliveries
    ledger.admission_waits = facts.admission_waits
    if flow_control:
        ledger.most_at_once = most_at_once_by_account(local.effects())
    if receiver is not None and secret is not None:
        try:
            ledger.webhooks = account_deliveries(local, receiver, secret, views, timeout_s)
        finally:
            receiver.stop()
    return ledger


def most_at_once_by_account(effects: Iterable[dict[str, Any]]) -> dict[str, int]:
    """The most `e2e.limited` runs of each account at one moment, from their recorded starts and ends (a run
    ending as another starts does not overlap it)."""
    changes: dict[str, list[tuple[float, int]]] = {}
    for effect in effects:
        if effect.get("effect") == "limited-run":
            account = str(effect["account"])
            changes.setdefault(account, []).extend([(float(effect["start"]), 1), (float(effect["end"]), -1)])
    most: dict[str, int] = {}
    for account, events in changes.items():
        running = peak = 0
        for _, change in sorted(events):
            running += change
            peak = max(peak, running)
        most[account] = peak
    return most


# -- notices: every final state delivered -------------------------------------------------------


@dataclass
class WebhookFacts:
    finals: int  # jobs in a final state
    requests: int  # requests the receiver got
    undelivered: list[str]  # final jobs with neither a verified delivery of their final event nor a DLQ entry
    dead_lettered: list[str]  # final jobs whose delivery was given up (the delivery DLQ)
    unverified: int  # requests whose signature did not verify
    redelivered: int  # requests for an event already delivered (the same webhook-id)
    answered_503: int
    last_delivery_s: float  # from every job final to the last final event delivered

    def line(self) -> str:
        return (
            f"  webhooks: {self.finals} final states, {self.requests} requests ({self.answered_503} answered 503), "
            f"undelivered {len(self.undelivered)}   dead-lettered {len(self.dead_lettered)}   unverified "
            f"{self.unverified}   redelivered {self.redelivered}   last delivery {self.last_delivery_s:.1f} s later"
        )

    def markdown_rows(self) -> list[tuple[str, str]]:
        return [
            ("**final states without a delivery or a DLQ entry**", f"**{len(self.undelivered)}**"),
            ("webhook requests (answered 503 by the receiver)", f"{self.requests} ({self.answered_503})"),
            (
                "deliveries dead-lettered / unverified / redelivered",
                f"{len(self.dead_lettered)} / {self.unverified} / {self.redelivered}",
            ),
        ]


def _register_endpoint(local: LedgerRuntime, receiver: Receiver) -> str:
    api = local.api()
    try:
        answer = api.call(
            "PUT",
            f"/webhooks/{WEBHOOK_NAME}",
            {"url": receiver.url(WEBHOOK_PATH), "events": sorted(FINAL_EVENTS.values())},
        )
    finally:
        api.close()
    if answer.status != 201:
        raise RuntimeError(f"the ledger's webhook endpoint was refused: {answer.status} {answer.body}")
    return str(answer.body["secret"])


def account_deliveries(
    local: LedgerRuntime, receiver: Receiver, secret: str, views: dict[str, dict[str, Any]], timeout_s: float
) -> WebhookFacts:
    """Waits (up to `timeout_s`) until every final job's final event was delivered or dead-lettered."""
    finals = {job_id: FINAL_EVENTS[v["status"]] for job_id, v in views.items() if v.get("status") in FINAL_EVENTS}
    started = time.monotonic()
    deadline = started + timeout_s

    def delivered() -> set[str]:
        return {
            r.event["data"]["job_id"]
            for r in receiver.at(WEBHOOK_PATH)
            if r.status == 200 and r.event.get("type") == finals.get(r.event.get("data", {}).get("job_id"))
        }

    while time.monotonic() < deadline:
        missing = set(finals) - delivered() - set(local.dead_lettered_deliveries())
        if not missing:
            break
        time.sleep(0.2)
    received = receiver.at(WEBHOOK_PATH)
    done = delivered()
    dead = sorted(set(local.dead_lettered_deliveries()) & set(finals))
    seen: Counter[str] = Counter(r.webhook_id for r in received if r.status == 200)
    return WebhookFacts(
        finals=len(finals),
        requests=len(received),
        undelivered=sorted(set(finals) - done - set(dead)),
        dead_lettered=dead,
        unverified=sum(1 for r in received if not r.verified_by(secret)),
        redelivered=sum(count - 1 for count in seen.values()),
        answered_503=sum(1 for r in received if r.status == 503),
        last_delivery_s=time.monotonic() - started,
    )


def _settle(local: LedgerRuntime, quiet_s: float = 1.0, limit_s: float = 10.0) -> None:
    """Wait until the side effects file stops growing (a job thread abandoned at its timeout may still be
    finishing), at most `limit_s`."""
    files = [local.data_dir / EFFECTS_FILE]
    deadline = time.monotonic() + limit_s
    last: tuple[int, ...] = ()
    still_since = time.monotonic()
    while time.monotonic() < deadline:
        sizes = tuple(path.stat().st_size if path.exists() else 0 for path in files)
        if sizes != last:
            last, still_since = sizes, time.monotonic()
        elif time.monotonic() - still_since >= quiet_s:
            return
        time.sleep(0.1)


# -- the burst --------------------------------------------------------------------------------


@dataclass
class Burst:
    jobs: int
    accepted: int = 0
    succeeded: int = 0
    not_succeeded: list[str] = field(default_factory=list)
    retried: int = 0  # jobs that took more than one attempt
    dlq_depth: int = -1
    sweeper_resends: int = 0  # jobs still waiting on the queue after the sweep grace are sent again
    duplicate_deliveries: int = 0
    submit_s: float = 0.0
    elapsed_s: float = 0.0

    def lines(self) -> list[str]:
        rate = self.succeeded / self.elapsed_s if self.elapsed_s else 0.0
        return [
            f"burst: {self.jobs} jobs on the bulk queue (maximum concurrency 2), submitted in batches of 100",
            f"  accepted {self.accepted}   succeeded {self.succeeded}   not succeeded {len(self.not_succeeded)}"
            f"   retried {self.retried}   bulk DLQ depth {self.dlq_depth}",
            f"  sweeper re-sends {self.sweeper_resends}   duplicate deliveries {self.duplicate_deliveries}",
            f"  submitted in {self.submit_s:.1f} s; all final {self.elapsed_s:.1f} s after the first submit"
            f" ({rate:.0f} jobs/s)",
        ]


def run_burst(
    local: LedgerRuntime,
    jobs: int,
    *,
    clients: int = 2,
    timeout_s: float = 600,
    poll_s: float = 1.0,
    tag: str = "burst",
) -> Burst:
    """`poll_s`: between looks at the queues while they drain (each look costs the emulator time proportional to
    the messages queued)."""
    burst = Burst(jobs=jobs)
    batches = [list(range(start, min(jobs, start + 100))) for start in range(0, jobs, 100)]
    accepted: list[str] = []
    lock = threading.Lock()

    def submit(api: Api, numbers: list[int]) -> None:
        ids: list[str] = []
        for _ in range(5):  # items answered 503 (the store was unavailable for them) are sent again
            items = [{"type": "e2e.burst", "payload": {"n": n}, "idempotency_key": f"{tag}-{n}"} for n in numbers]
            answer = api.call("POST", "/jobs/batch", {"jobs": items})
            if answer.status != 207:
                continue
            results = answer.body.get("results", [])
            ids += [item["job"]["job_id"] for item in results if item.get("job")]
            numbers = [numbers[item["index"]] for item in results if item.get("status") in UNAVAILABLE]
            if not numbers:
                break
        with lock:
            accepted.extend(ids)

    started = time.monotonic()
    in_parallel(batches, submit, local.url, clients)
    burst.submit_s = time.monotonic() - started
    burst.accepted = len(accepted)
    api = local.api()
    try:
        views = final_views(api, accepted, timeout_s, pause_s=poll_s)
        burst.elapsed_s = time.monotonic() - started
        queues = api.call("GET", "/queues")
    finally:
        api.close()
    for job_id in accepted:
        view = views.get(job_id, {})
        if view.get("status") == "SUCCEEDED":
            burst.succeeded += 1
        else:
            burst.not_succeeded.append(job_id)
        burst.retried += int(view.get("attempts") or 0) > 1
    if queues.status == 200:
        bulk = next((q for q in queues.body.get("queues", []) if q.get("name") == "bulk"), None)
        burst.dlq_depth = int(bulk["dlq_depth"]) if bulk else -1
    facts = local.log()
    burst.sweeper_resends = facts.sweeper_resends
    burst.duplicate_deliveries = facts.duplicate_deliveries
    return burst
