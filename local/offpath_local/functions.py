"""The Lambda functions, in this process: the real handlers, unmodified, with the services they build
from their environment (`OFFPATH_*`, `AWS_ENDPOINT_URL`), given to them per execution environment.

Lambda runs one invocation at a time per execution environment and gives each concurrent
invocation its own environment. Here an environment is a set of services of its own (the
handlers' metrics buffer is per invocation) and, for the api function, a fresh load of the handler
module (its HTTP resolver keeps the current request on a module-level object). Every environment's
job store is wrapped so the runtime sees the job state changes it makes.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import logging
import queue
import random
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from offpath.observability import EmfMetrics
from offpath.settings import Settings
from offpath_local.job_events import JobEvents, ObservedJobStore
from offpath_local.lambda_context import LocalLambdaContext
from offpath_local.output import invocation
from offpath_local.resources import function_arn

logger = logging.getLogger("offpath.local.functions")

API_MODULE = "offpath.handlers.api"
WORKER_MODULE = "offpath.handlers.worker"
ENQUEUE_MODULE = "offpath.handlers.enqueue"
SWEEPER_MODULE = "offpath.handlers.sweeper"
API_TIMEOUT_S = 29.0


# Metrics the runtime's alarms count (name -> event prefix; the event is "<prefix>:<queue>").
COUNTED_METRICS = {"StuckJobsFound": "stuck"}

MetricTap = Callable[[str, int], None]


class TappedMetrics:
    """The handlers' EMF metrics, unchanged, with the ones an alarm counts also reported to the runtime
    (CloudWatch would extract them from the log lines)."""

    def __init__(self, inner: EmfMetrics, tap: MetricTap | None) -> None:
        self._inner = inner
        self._tap = tap

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def count(self, name: str, value: float = 1, *, queue: str, job_type: str) -> None:
        self._inner.count(name, value, queue=queue, job_type=job_type)
        prefix = COUNTED_METRICS.get(name)
        if prefix and self._tap and value > 0:
            self._tap(f"{prefix}:{queue}", int(value))

    def milliseconds(self, name: str, value: float, *, queue: str, job_type: str) -> None:
        self._inner.milliseconds(name, value, queue=queue, job_type=job_type)

    def flush(self) -> None:
        self._inner.flush()


def observed(services: Any, events: JobEvents, service_name: str, tap: MetricTap | None = None) -> Any:
    """A copy of a handler's services with its own metrics buffer and an observed job store."""
    ports = services.ports
    ports = dataclasses.replace(
        ports, store=ObservedJobStore(ports.store, events), metrics=TappedMetrics(EmfMetrics(service_name), tap)
    )
    return dataclasses.replace(services, ports=ports)


class _Turn:
    """A request's turn at the api function: it starts, or it was given up first, never both."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = "waiting"

    def start(self) -> bool:
        with self._lock:
            if self._state == "given up":
                return False
            self._state = "running"
            return True

    def give_up(self) -> None:
        with self._lock:
            if self._state == "waiting":
                self._state = "given up"


class ApiFunction:
    """The api function (or the read function: the job reads' own), with `environments` execution environments.
    As on Lambda, an environment serves one request at a time and requests run in as many at once: each
    environment has its own copy of the handler's services (its own metrics buffer, and what a route builds on
    its first call), the handler keeps no request in anything the environments share (its router and logging
    context are per call), and a request waiting for a job (`GET /jobs/{id}?wait=N`) holds its environment while
    it waits, as it does on Lambda (the read function has more environments than a tenant may hold waits)."""

    def __init__(
        self,
        name: str,
        events: JobEvents,
        environments: int = 4,
        tap: MetricTap | None = None,
        *,
        stats: Any = None,
        alarms: Any = None,
        resolver: Any = None,
        cipher: Any = None,
        switch: Any = None,
    ) -> None:
        """`stats`, `alarms`: the runtime's stand-ins for what moto's CloudWatch cannot answer (operations.py);
        `switch`: what a queue class's pause switches (offpath_local.queue_switch, the pollers' switch);
        `resolver`: the webhook routes' resolver (offpath_local.notices.LoopbackResolver, a stand-in for DNS);
        `cipher`: what seals the endpoints' secrets (offpath_local.secret_key, the stand-in for KMS)."""
        self.name = name
        self._module = importlib.import_module(API_MODULE)
        base = self._module.default_services()
        overrides = {"stats": stats, "alarms": alarms, "switch": switch}
        base = dataclasses.replace(base, **{k: v for k, v in overrides.items() if v is not None})
        if resolver is not None or cipher is not None:
            hooks = self._module.webhook_services(base)  # on Lambda built at the first webhook route's call
            hooks.store.cipher = cipher or hooks.store.cipher
            base = dataclasses.replace(base, webhooks=dataclasses.replace(hooks, resolver=resolver or hooks.resolver))
        # Clients that adapters create on first use are created now, on one thread.
        base.monitor.stats()
        # One environment per thread of the executor: a running request always finds one free.
        self._environments: queue.Queue[Any] = queue.Queue()
        for _ in range(max(1, environments)):
            self._environments.put(observed(base, events, "api", tap))
        self._executor = ThreadPoolExecutor(max(1, environments), thread_name_prefix="api")

    def invoke(self, event: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """The handler's response; TimeoutError when it takes longer than `timeout_s`. A request still waiting for
        the function then is given up and never runs (the caller was told to retry: running it too would do the
        work twice); one already running goes on, as on Lambda after API Gateway's timeout."""
        turn = _Turn()
        future = self._executor.submit(self._run, event, turn)
        try:
            result: dict[str, Any] = future.result(timeout=timeout_s)
        except FutureTimeout:
            turn.give_up()
            raise TimeoutError from None
        return result

    def _run(self, event: dict[str, Any], turn: _Turn | None = None) -> dict[str, Any] | None:
        # The function's role in the stack (api, or read: the job reads' own function), as its calls are recorded.
        if turn is not None and not turn.start():
            return None
        services = self._environments.get()
        try:
            with invocation(self.name.rsplit("-", 1)[-1]):
                context = LocalLambdaContext(self.name, API_TIMEOUT_S)
                result: dict[str, Any] = self._module.handler(event, context, services=services)
                return result
        finally:
            self._environments.put(services)

    def stop(self) -> None:
        """Requests already running finish (the gateway has stopped taking new ones)."""
        self._executor.shutdown(wait=True, cancel_futures=True)


class WorkerFunction:
    """The worker of one queue class, with `concurrency` environments (its MaximumConcurrency)."""

    def __init__(
        self,
        name: str,
        queue_class: str,
        settings: Settings,
        events: JobEvents,
        concurrency: int,
        tap: MetricTap | None = None,
        adjust: Callable[[Any], Any] | None = None,
    ) -> None:
        """`adjust`: applied to each environment's services (the runtime's test timings, faults.TestTiming)."""
        self.name = name
        self.service = f"worker-{queue_class}"
        module = importlib.import_module(WORKER_MODULE)
        self._module = module
        build = getattr(module, "build_services", None)
        if build is None:
            raise RuntimeError(f"{WORKER_MODULE} has no build_services(settings)")
        base = build(settings.replace(queue_class=queue_class))
        self._pool: queue.Queue[Any] = queue.Queue()
        for _ in range(max(1, concurrency)):
            services = observed(base, events, f"worker-{queue_class}", tap)
            services.ports.rng = random.Random()
            self._pool.put(adjust(services) if adjust is not None else services)

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        services = self._pool.get()
        try:
            with invocation(self.service):
                return self._module.handler(event, context, services=services)
        finally:
            self._pool.put(services)


@dataclass(frozen=True)
class AsyncConfig:
    """A function invoked asynchronously (by EventBridge Scheduler): Lambda's own retries of a failed
    invocation, the oldest event it still runs, then its on-failure destination."""

    timeout_s: float
    retry_attempts: int
    max_event_age_s: float


class AsyncFunction:
    """An asynchronously invoked function: events queue up and run one at a time (one environment).
    A failed invocation is retried after 1 and then 2 minutes (divided by `time_scale`, which the
    runtime sets to the scheduler clock's speed), within the maximum event age; then the event goes to
    the on-failure destination queue, as Lambda's destination record."""

    RETRY_DELAYS_S = (60.0, 120.0)

    def __init__(
        self,
        name: str,
        module_name: str,
        config: AsyncConfig,
        events: JobEvents,
        *,
        on_failure: Callable[[dict[str, Any]], None] | None = None,
        on_result: Callable[[str, dict[str, Any], str, Any], None] | None = None,
        time_scale: float = 1.0,
        tap: MetricTap | None = None,
        service: str | None = None,
    ) -> None:
        self.tap = tap
        self.service = service or module_name.rsplit(".", 1)[-1]
        self.name = name
        self.module_name = module_name
        self.config = config
        self.events = events
        self.on_failure = on_failure
        self.on_result = on_result
        self.time_scale = max(time_scale, 1e-6)
        self._queue: queue.Queue[tuple[float, dict[str, Any], int, str, float] | None] = queue.Queue()
        self._delayed: list[tuple[float, dict[str, Any], int, str, float]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"async-{name}", daemon=True)
        self._module: ModuleType | None = None
        self._services: Any = None
        self._missing_reported = False

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        """Begin stopping without waiting (the runtime asks every part first, then waits for each)."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        self._queue.put(None)
        self._thread.join(timeout=10)

    def invoke_async(self, event: dict[str, Any]) -> str:
        """Accepted at once (202 on AWS): returns the request id."""
        request_id = str(uuid.uuid4())
        self._queue.put((time.monotonic(), event, 1, request_id, time.time()))
        return request_id

    def available(self) -> bool:
        return self._load() is not None

    # -- internals ----------------------------------------------------------------------------

    def _load(self) -> ModuleType | None:
        if self._module is not None:
            return self._module
        try:
            module = importlib.import_module(self.module_name)
        except ModuleNotFoundError as error:
            if error.name != self.module_name:
                raise
            if not self._missing_reported:
                logger.warning("%s does not exist yet: its invocations are skipped", self.module_name)
                self._missing_reported = True
            return None
        factory = getattr(module, "default_services", None)
        if factory is not None:
            try:
                self._services = observed(factory(), self.events, self.service, self.tap)
            except Exception:
                logger.exception("%s: its services could not be built; it is called without them", self.name)
                self._services = None
        self._module = module
        return module

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._release_due()
            try:
                item = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            if item is None:
                break
            self._run(*item)

    def _release_due(self) -> None:
        now = time.monotonic()
        with self._lock:
            due = [d for d in self._delayed if d[0] <= now]
            self._delayed = [d for d in self._delayed if d[0] > now]
        for item in due:
            self._queue.put(item)

    def _run(self, _ready: float, event: dict[str, Any], attempt: int, request_id: str, queued_at: float) -> None:
        module = self._load()
        if module is None:
            if self.on_result:
                self.on_result(self.name, event, "missing", None)
            return
        context = LocalLambdaContext(self.name, self.config.timeout_s)
        context.aws_request_id = request_id
        try:
            with invocation(self.service):
                if self._services is not None:
                    response = module.handler(event, context, services=self._services)
                else:
                    response = module.handler(event, context)
        except Exception as error:
            if self._stop.is_set():
                return  # the emulator may already be gone
            logger.exception("%s failed (attempt %d of %d)", self.name, attempt, self.config.retry_attempts + 1)
            try:
                self._retry_or_fail(event, attempt, request_id, queued_at, error)
            except Exception:
                logger.exception("%s: the failed event could not be handed to its destination", self.name)
            return
        if self.on_result:
            self.on_result(self.name, event, "ok", response)

    def _retry_or_fail(
        self, event: dict[str, Any], attempt: int, request_id: str, queued_at: float, error: Exception
    ) -> None:
        age_s = (time.time() - queued_at) * self.time_scale
        if attempt <= self.config.retry_attempts:
            delay_s = self.RETRY_DELAYS_S[min(attempt - 1, len(self.RETRY_DELAYS_S) - 1)]
            if age_s + delay_s <= self.config.max_event_age_s:
                with self._lock:
                    self._delayed.append(
                        (time.monotonic() + delay_s / self.time_scale, event, attempt + 1, request_id, queued_at)
                    )
                return
        if self.on_result:
            self.on_result(self.name, event, "failed", f"{type(error).__name__}: {error}")
        if self.on_failure:
            self.on_failure(self._destination_record(event, attempt, request_id, error))

    def _destination_record(
        self, event: dict[str, Any], attempts: int, request_id: str, error: Exception
    ) -> dict[str, Any]:
        return {
            "version": "1.0",
            "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "requestContext": {
                "requestId": request_id,
                "functionArn": f"{function_arn(self.name)}:$LATEST",
                "condition": "RetriesExhausted",
                "approximateInvokeCount": attempts,
            },
            "requestPayload": event,
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
            "responsePayload": {"errorMessage": str(error)[:1000], "errorType": type(error).__name__},
        }


def destination_sender(sqs: Any, queue_url: str) -> Callable[[dict[str, Any]], None]:
    def send(record: dict[str, Any]) -> None:
        sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(record, default=str))

    return send
