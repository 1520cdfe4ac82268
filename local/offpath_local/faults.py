"""Injected faults, seeded and reproducible: what the pipeline must survive, made to happen on purpose.

`offpath local --faults SEED [--fault-rate X] [--fault KIND=RATE]... [--fault-job KIND:JOB_ID]...` hooks
into botocore's event system: the handlers' clients all come from boto3's default session, and the
hooks are registered on that session before any of them is made (each client copies the session's
handlers when it is created). The event source mapping's own SQS clients get the `redelivery` hook.
The emulator itself is untouched: a fault is what a client sees, as it would see it from AWS.

Kinds (what happens; what offpath must do):

- `throttle`: a DynamoDB or SQS request is answered with a throttling error before it reaches the
  emulator, on the call's first attempt only; nothing visible, botocore's own retry gets through.
- `server-error`: the same with a 500.
- `outage`: every attempt of the call is answered with a throttling error or a 500 (nothing applied),
  so the error reaches offpath's code: a 503 with Retry-After, a message left to return to its queue,
  or a job left for the next sweep.
- `lost-response`: a DynamoDB write lands, its response is lost and botocore sends it again (a
  `needs-retry` answer of 0 for the call's first attempt): the retry meets the call's own write, which
  must count as success.
- `send-failure`: a SendMessage or SendMessageBatch fails on every attempt; the caller still gets its
  202 and the sweeper sends the message.
- `duplicate-send`: a SendMessage lands, its response is lost, botocore sends it again: the message is
  on the queue twice, and the duplicate delivery must be harmless.
- `worker-crash`: the worker dies after the job function ran and before its success write: that
  UpdateItem raises `WorkerCrash`, which nothing in offpath catches, so the event source mapping
  returns the whole batch. The job finishes on redelivery; a side effect guarded by `ctx.once` does
  not repeat.
- `redelivery`: a message the event source mapping received is made visible again at once, so it is
  delivered again, possibly while the first delivery still runs; the job function runs once.

Each eligible call draws once, from a `random.Random` seeded with the seed, the call's identity (its
operation, the job it concerns and what it writes, never a time or a receipt handle) and how often that
identity was seen: with the same seed and the same idempotency keys, a run injects the same faults into the
same jobs whatever the threads' interleaving. (Job ids are random: a keyed job's calls name it by its key's
record, `IDEM#<tenant>#<digest>`, which the first call of its submit writes with the job's id.)
`--fault-job KIND:JOB_ID` forces that kind onto the first eligible call concerning that job, whatever the
rates; `--fault-job KIND:key=IDEMPOTENCY_KEY` onto that of the job submitted under that key.

Every injected fault is counted by kind and written to `faults.jsonl` in the data directory (this run's).

`TestTiming` (`--timeout-scale`, `--visibility-scale`) compresses the timeouts that recovery from these
faults waits for; it exists for tests and changes nothing when both scales are 1.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import threading
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from offpath.domain.registry import Registry
from offpath.naming import TABLE_PARTITION_KEY, TABLE_SORT_KEY

FAULTS_FILE = "faults.jsonl"
# A forced fault's target naming a job by its idempotency key: `KIND:key=<key>`.
KEY_TARGET = "key="
KINDS = (
    "throttle",
    "server-error",
    "outage",
    "lost-response",
    "send-failure",
    "duplicate-send",
    "worker-crash",
    "redelivery",
)
DEFAULT_RATE = 0.03
SERVICES = ("dynamodb", "sqs")
DYNAMODB_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem"})
SQS_SENDS = frozenset({"SendMessage", "SendMessageBatch"})
# Which kinds each kind of call can get (the order is the order of the draw).
_DYNAMODB_WRITE_KINDS = ("throttle", "server-error", "outage", "lost-response")
_REQUEST_KINDS = ("throttle", "server-error", "outage")
_SEND_KINDS = ("throttle", "server-error", "send-failure", "duplicate-send")
_EVERY_ATTEMPT = frozenset({"outage", "send-failure"})
_LOST_RESPONSE = frozenset({"lost-response", "duplicate-send"})
_PENDING_LIMIT = 10_000
_MESSAGE = "injected by offpath local --faults"


class WorkerCrash(BaseException):
    """Raised in place of a worker's success write: the worker "dies" after the job function ran. A
    BaseException, as a process ending is: the worker contains every Exception of one record."""


# -- configuration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FaultConfig:
    seed: int = 0
    rates: Mapping[str, float] = field(default_factory=dict)  # kind -> probability per eligible call
    targets: tuple[tuple[str, str], ...] = ()  # (kind, job_id): forced onto that job's first eligible call

    @classmethod
    def from_options(
        cls, seed: int | None, rate: float | None, kinds: Sequence[str] = (), targets: Sequence[str] = ()
    ) -> FaultConfig | None:
        """From the command line: `--faults SEED` (random faults at `--fault-rate`, each kind unless
        `--fault KIND=RATE` names some), `--fault-job KIND:JOB_ID`. None when neither is given."""
        if seed is None and not targets:
            if kinds or rate is not None:
                raise ValueError("--fault-rate and --fault need --faults SEED")
            return None
        rates: dict[str, float] = {}
        if seed is not None:
            base = DEFAULT_RATE if rate is None else rate
            _check_rate("--fault-rate", base)
            rates = {kind: base for kind in KINDS}
            named: dict[str, float] = {}
            for item in kinds:
                kind, sep, value = item.partition("=")
                kind = kind.strip()
                if kind not in KINDS:
                    raise ValueError(f"--fault: unknown kind {kind[:40]!r} (kinds: {', '.join(KINDS)})")
                try:
                    named[kind] = float(value) if sep else base
                except ValueError:
                    raise ValueError(f"--fault {kind}=RATE: {value[:20]!r} is not a number") from None
                _check_rate(f"--fault {kind}", named[kind])
            if named:
                rates = {kind: named.get(kind, 0.0) for kind in KINDS}
        forced: list[tuple[str, str]] = []
        for item in targets:
            kind, sep, job_id = item.partition(":")
            if not sep or kind not in KINDS or not job_id.strip():
                raise ValueError(f"--fault-job takes KIND:JOB_ID with a kind of {', '.join(KINDS)}, got {item[:60]!r}")
            forced.append((kind, job_id.strip()))
        return cls(seed=seed or 0, rates=rates, targets=tuple(forced))

    def describe(self) -> str:
        active = {kind: rate for kind, rate in self.rates.items() if rate > 0}
        parts = [f"seed {self.seed}"]
        if active:
            if len(set(active.values())) == 1 and len(active) == len(KINDS):
                parts.append(f"rate {next(iter(active.values())):g} for each kind")
            else:
                parts.append(", ".join(f"{kind} {rate:g}" for kind, rate in active.items()))
        if self.targets:
            parts.append(f"{len(self.targets)} forced on given jobs")
        return "; ".join(parts)


def _check_rate(name: str, rate: float) -> None:
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"{name} must be between 0 and 1")


# -- the injector -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Call:
    service: str
    operation: str
    identity: str
    job_id: str | None
    # A key's record (its partition): the stable name of the job it names.
    alias: str | None = None


@dataclass
class _Decision:
    call: _Call
    kind: str
    error: str  # "throttle" or "server-error": the answer of a failing attempt


class _Body:
    """The raw body of a made-up HTTP response (botocore reads it with `stream()`)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Iterable[bytes]:
        yield self.data


class FaultInjector:
    def __init__(self, config: FaultConfig, record_path: Path | None = None) -> None:
        self.config = config
        self.record_path = record_path
        self._lock = threading.Lock()
        self._seen: Counter[str] = Counter()
        self._counts: Counter[str] = Counter()
        self._targets = set(config.targets)
        # A keyed job's id -> its key's record (partition), learnt from the put of that record.
        self._aliases: dict[str, str] = {}
        self._pending: OrderedDict[str, _Decision] = OrderedDict()
        # This run's faults only: the file starts empty.
        self._record = record_path.open("w", encoding="utf-8") if record_path is not None else None
        # Off until the runtime has started (its own start-up calls, made on its behalf, get no faults).
        self.armed = False

    # -- installing -----------------------------------------------------------------------------

    def install(self, events: Any) -> None:
        """Register the hooks on a botocore event emitter: a session's (before its clients are made) or a
        client's `meta.events`."""
        for service in SERVICES:
            events.register(f"before-send.{service}", self._before_send, unique_id=f"offpath-faults-send-{service}")
            events.register(f"needs-retry.{service}", self._needs_retry, unique_id=f"offpath-faults-retry-{service}")
        events.register(
            "before-parameter-build.dynamodb.UpdateItem", self._before_update, unique_id="offpath-faults-crash"
        )

    def install_on_default_session(self) -> None:
        """A fresh boto3 default session (from the environment) with the hooks: every client the handlers
        make afterwards with `boto3.client(...)` has them."""
        import boto3

        boto3.setup_default_session()
        assert boto3.DEFAULT_SESSION is not None
        self.install(boto3.DEFAULT_SESSION.events)

    def install_event_source(self, receiver: Any, queue_url: str, control: Any) -> None:
        """The `redelivery` hook on an event source mapping's SQS client (`receiver`); `control` (a client
        without hooks) makes the chosen messages visible again."""

        def after_receive(parsed: dict[str, Any], **_: Any) -> None:
            if self.armed:
                self._redeliver(parsed, queue_url, control)

        receiver.meta.events.register("after-call.sqs.ReceiveMessage", after_receive, unique_id="offpath-faults-esm")

    def arm(self) -> None:
        self.armed = True

    # -- what was injected ----------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {kind: self._counts[kind] for kind in KINDS if self._counts[kind]}

    def summary(self) -> str:
        counts = self.counts()
        if not counts:
            return "no faults injected"
        total = sum(counts.values())
        return f"{total} faults injected: " + ", ".join(f"{kind} {n}" for kind, n in counts.items())

    def close(self) -> None:
        with self._lock:
            if self._record is not None:
                self._record.close()
                self._record = None

    # -- hooks ----------------------------------------------------------------------------------

    def _before_send(self, request: Any, event_name: str, **_: Any) -> Any:
        if not self.armed:
            return None
        service, operation = _service_operation(event_name)
        invocation, attempt, max_attempts = _retry_headers(request.headers)
        if invocation is None:
            return None
        if attempt == 1:
            kinds = _eligible(service, operation)
            if not kinds:
                return None
            call = _call_of(service, operation, request.body)
            decision = self._decide(call, kinds)
            if decision is None:
                return None
            if decision.kind in _LOST_RESPONSE:
                self._hold(invocation, decision)
                return None
            self._count(decision.kind, call)
            if decision.kind in _EVERY_ATTEMPT and max_attempts > 1:
                self._hold(invocation, decision)
            return _error_response(request.url, service, decision.error)
        with self._lock:
            decision = self._pending.get(invocation)
            if decision is None or decision.kind not in _EVERY_ATTEMPT:
                return None
            if attempt >= max_attempts:
                self._pending.pop(invocation, None)
        return _error_response(request.url, service, decision.error)

    def _needs_retry(self, response: Any, attempts: int, request_dict: dict[str, Any], **_: Any) -> int | None:
        """A lost response: the write landed (2xx), botocore is told to send it again at once."""
        if attempts != 1 or response is None:
            return None
        invocation = (request_dict.get("context") or {}).get("retries", {}).get("invocation-id")
        with self._lock:
            decision = self._pending.get(invocation) if invocation else None
            if decision is None or decision.kind not in _LOST_RESPONSE:
                return None
            self._pending.pop(invocation, None)
        status = getattr(response[0], "status_code", 0)
        if not 200 <= status < 300:
            return None
        self._count(decision.kind, decision.call)
        return 0

    def _before_update(self, params: dict[str, Any], **_: Any) -> None:
        """The worker's success write (the only UpdateItem that sets SUCCEEDED)."""
        values = params.get("ExpressionAttributeValues") or {}
        if not self.armed or values.get(":status") != {"S": "SUCCEEDED"}:
            return
        key = params.get("Key")
        call = _Call("dynamodb", "UpdateItem", f"crash|{_key_text(key)}", _job_of_key(key))
        decision = self._decide(call, ("worker-crash",))
        if decision is not None:
            self._count("worker-crash", call)
            raise WorkerCrash(f"worker died before recording job {call.job_id} SUCCEEDED ({_MESSAGE})")

    def _redeliver(self, parsed: dict[str, Any], queue_url: str, control: Any) -> None:
        queue = queue_url.rstrip("/").rsplit("/", 1)[-1]  # the name: the emulator's port changes from run to run
        for message in parsed.get("Messages") or []:
            body = str(message.get("Body", ""))
            call = _Call("sqs", "ReceiveMessage", f"redeliver|{queue}|{body}", _job_of_body(body))
            if self._decide(call, ("redelivery",)) is None:
                continue
            try:
                control.change_message_visibility(
                    QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                )
            except Exception:  # noqa: S112 - the message was deleted meanwhile: no duplicate this time
                continue
            self._count("redelivery", call)

    # -- internals ------------------------------------------------------------------------------

    def _decide(self, call: _Call, kinds: Sequence[str]) -> _Decision | None:
        with self._lock:
            call = self._stable(call)
            self._seen[call.identity] += 1
            seen = self._seen[call.identity]
            if call.job_id is not None:
                for kind in kinds:
                    if (kind, call.job_id) in self._targets:
                        self._targets.discard((kind, call.job_id))
                        error = kind if kind in ("throttle", "server-error") else "throttle"
                        return _Decision(call, kind, "server-error" if kind == "send-failure" else error)
        rates = self.config.rates
        if not any(rates.get(kind, 0.0) > 0 for kind in kinds):
            return None
        draw = random.Random(f"{self.config.seed}|{call.identity}|{seen}")
        roll, edge = draw.random(), 0.0
        error = "throttle" if draw.random() < 0.5 else "server-error"
        for kind in kinds:
            edge += rates.get(kind, 0.0)
            if roll < edge:
                return _Decision(call, kind, error if kind in _EVERY_ATTEMPT else kind)
        return None

    def _stable(self, call: _Call) -> _Call:
        """The call with its job's random id in its identity replaced by the job's key's record (when the job has
        a key); a forced fault named by that key becomes one named by the job's id. Under the lock."""
        if call.job_id is None:
            return call
        if call.alias is not None and call.job_id not in self._aliases:
            self._aliases[call.job_id] = call.alias
            digest = call.alias.rsplit("#", 1)[-1]
            for kind, target in list(self._targets):
                key = target.removeprefix(KEY_TARGET)
                if target.startswith(KEY_TARGET) and hashlib.sha256(key.encode()).hexdigest().startswith(digest):
                    self._targets.discard((kind, target))
                    self._targets.add((kind, call.job_id))
        alias = self._aliases.get(call.job_id)
        if alias is None:
            return call
        return dataclasses.replace(call, identity=call.identity.replace(call.job_id, alias))

    def _hold(self, invocation: str, decision: _Decision) -> None:
        with self._lock:
            self._pending[invocation] = decision
            while len(self._pending) > _PENDING_LIMIT:  # calls botocore gave up on early
                self._pending.popitem(last=False)

    def _count(self, kind: str, call: _Call) -> None:
        line = {
            "at": round(time.time(), 3),
            "kind": kind,
            "service": call.service,
            "operation": call.operation,
            "job_id": call.job_id,
        }
        with self._lock:
            self._counts[kind] += 1
            if self._record is not None:
                self._record.write(json.dumps(line) + "\n")
                self._record.flush()


def _eligible(service: str, operation: str) -> tuple[str, ...]:
    if service == "dynamodb":
        return _DYNAMODB_WRITE_KINDS if operation in DYNAMODB_WRITES else _REQUEST_KINDS
    if operation in SQS_SENDS:
        return _SEND_KINDS
    return _REQUEST_KINDS


def _service_operation(event_name: str) -> tuple[str, str]:
    parts = event_name.split(".")
    return parts[1], parts[2] if len(parts) > 2 else ""


def _retry_headers(headers: Any) -> tuple[str | None, int, int]:
    """The call's invocation id and this attempt's number, from the headers botocore adds to each attempt."""
    invocation = _text(headers.get("amz-sdk-invocation-id"))
    fields = dict(part.strip().partition("=")[::2] for part in (_text(headers.get("amz-sdk-request")) or "").split(";"))
    try:
        return invocation, int(fields.get("attempt", "1")), int(fields.get("max", "1"))
    except ValueError:
        return invocation, 1, 1


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode("ascii", "replace")
    return value if isinstance(value, str) else None


def _call_of(service: str, operation: str, body: Any) -> _Call:
    """What the call is about, without anything that changes from run to run (times, receipt handles)."""
    try:
        request = json.loads(body) if body else {}
    except (TypeError, ValueError):
        request = {}
    if service == "dynamodb":
        key = request.get("Key") or request.get("Item")
        if _key_text(key) is not None:
            what = request.get("UpdateExpression") or request.get("ConditionExpression") or ""
            partition = _key_part(key, TABLE_PARTITION_KEY) or ""
            alias = partition if partition.startswith("IDEM#") and "Item" in request else None
            return _Call(service, operation, f"{operation}|{_key_text(key)}|{what}", _job_of_key(key), alias)
        index = request.get("IndexName") or ""
        return _Call(service, operation, f"{operation}|{request.get('TableName', '')}|{index}", None)
    queue = str(request.get("QueueUrl", "")).rsplit("/", 1)[-1]
    if operation == "SendMessage":
        body_text = str(request.get("MessageBody", ""))
        return _Call(service, operation, f"{operation}|{queue}|{body_text}", _job_of_body(body_text))
    if operation == "SendMessageBatch":
        bodies = "|".join(str(entry.get("MessageBody", "")) for entry in request.get("Entries") or [])
        return _Call(service, operation, f"{operation}|{queue}|{bodies}", None)
    return _Call(service, operation, f"{operation}|{queue}", None)


def _key_part(key: Any, name: str) -> str | None:
    if isinstance(key, dict) and isinstance(key.get(name), dict):
        value = key[name].get("S")
        return value if isinstance(value, str) else None
    return None


def _key_text(key: Any) -> str | None:
    """An item's key (`pk` and `sk`, offpath.naming) as one text, None when the request names no item. A job's
    is `JOB/<id>` (its partition's shard derives from the id)."""
    partition = _key_part(key, TABLE_PARTITION_KEY)
    if partition is None:
        return None
    sort = _key_part(key, TABLE_SORT_KEY) or ""
    return f"JOB/{sort}" if partition.startswith("JOB#") else f"{partition}/{sort}"


def _job_of_key(key: Any) -> str | None:
    """The job an item belongs to: `JOB#<tenant>#<shard>` / `<id>` (the job), `ONCE#<id>#<name>` (a `ctx.once`
    mark of the job), `IDEM#...` (a key's record: its `job_id`, in a put's item)."""
    partition = _key_part(key, TABLE_PARTITION_KEY)
    if partition is None:
        return None
    kind, _, rest = partition.partition("#")
    if kind == "JOB":
        return _key_part(key, TABLE_SORT_KEY) or None
    if kind == "ONCE":
        return rest.split("#", 1)[0] or None
    if kind == "IDEM":
        return _key_part(key, "job_id")
    return None


def _job_of_body(body: str) -> str | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    job_id = message.get("job_id") if isinstance(message, dict) else None
    return job_id if isinstance(job_id, str) else None


def _error_response(url: str, service: str, error: str) -> Any:
    from botocore.awsrequest import AWSResponse

    throttled = error == "throttle"
    if service == "dynamodb":
        code = "ProvisionedThroughputExceededException" if throttled else "InternalServerError"
        kind = f"com.amazonaws.dynamodb.v20120810#{code}"
    else:
        code = "RequestThrottled" if throttled else "InternalError"
        kind = f"com.amazonaws.sqs#{code}"
    status = 400 if throttled else 500
    headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": str(uuid.uuid4())}
    if service == "sqs":
        headers["x-amzn-query-error"] = f"{code};{'Sender' if throttled else 'Receiver'}"
    body = json.dumps({"__type": kind, "message": _MESSAGE}).encode()
    return AWSResponse(url, status, headers, _Body(body))


# -- test timing --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TestTiming:
    """Test only: shorter waits for the recoveries faults cause, which take minutes at the stack's timings.

    `timeout_scale` multiplies the job types' timeouts as the workers see them (rounded up to whole
    seconds), the workers' lease and start margins, and the worker functions' timeouts (at least the
    slowest scaled job timeout plus one second). `visibility_scale` multiplies the queues' visibility
    timeouts (never below the worker function's scaled timeout). A crashed worker's job is taken up again
    when its lease ends and its batch reappears: both come from these. With both scales at 1 nothing
    changes. The ratios the stack keeps (a visibility timeout of 6 x the function timeout) do not hold
    in between; that is why it is for tests only.
    """

    timeout_scale: float = 1.0
    visibility_scale: float = 1.0

    __test__ = False  # not a pytest test class, whatever its name

    def __post_init__(self) -> None:
        if not (0 < self.timeout_scale <= 1 and 0 < self.visibility_scale <= 1):
            raise ValueError("--timeout-scale and --visibility-scale must be in (0, 1]")

    @property
    def active(self) -> bool:
        return self.timeout_scale != 1 or self.visibility_scale != 1

    def job_timeout_s(self, timeout_s: int) -> int:
        return timeout_s if self.timeout_scale == 1 else max(1, math.ceil(timeout_s * self.timeout_scale))

    def function_timeout_s(self, registry: Registry, queue: str) -> int:
        unscaled = registry.worker_timeout_s(queue)
        if self.timeout_scale == 1:
            return unscaled
        slowest = max((self.job_timeout_s(jt.timeout_s) for jt in registry.job_types_on(queue)), default=1)
        return max(math.ceil(unscaled * self.timeout_scale), slowest + 1)

    def visibility_timeout_s(self, registry: Registry, queue: str) -> int:
        unscaled = registry.visibility_timeout_s(queue)
        if not self.active:
            return unscaled
        return max(self.function_timeout_s(registry, queue), math.ceil(unscaled * self.visibility_scale))

    def apply_visibility(self, sqs: Any, registry: Registry, queue_urls: Mapping[str, str]) -> None:
        """Set the queues' visibility timeouts (the resources were made with the stack's)."""
        if not self.active:
            return
        for name, url in queue_urls.items():
            timeout = self.visibility_timeout_s(registry, name)
            sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": str(timeout)})

    def worker_services(self, services: Any) -> Any:
        """A worker's services with the scaled job timeouts and margins (the registry is copied, not changed)."""
        if self.timeout_scale == 1:
            return services
        ports, policy = services.ports, services.policy
        registry = dataclasses.replace(
            ports.registry,
            job_types={
                name: dataclasses.replace(jt, timeout_s=self.job_timeout_s(jt.timeout_s))
                for name, jt in ports.registry.job_types.items()
            },
        )
        policy = dataclasses.replace(
            policy,
            lease_margin=timedelta(seconds=policy.lease_margin.total_seconds() * self.timeout_scale),
            start_margin_ms=math.ceil(policy.start_margin_ms * self.timeout_scale),
        )
        return dataclasses.replace(services, ports=dataclasses.replace(ports, registry=registry), policy=policy)
