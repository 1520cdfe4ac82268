"""The embedded runtime: the whole pipeline in this process, on 127.0.0.1, with no AWS account.

    emulator (moto server)  table, queues + DLQs, schedule group + schedules, alarms (from the registry)
    gateway                 HTTP -> API Gateway payload 2.0 events -> api function (JWT authorizer played)
    pollers                 SQS event source mapping -> worker function, one per queue class
    scheduler clock         schedules in the group -> enqueue / sweeper functions (asynchronous)
    alarm evaluator         queue metrics -> CloudWatch metrics and alarm states

The functions are the real handlers, pointed at the emulator by their environment. This process
takes the place of an AWS account, so it sets that environment for itself: `AWS_ENDPOINT_URL`, fake
credentials, region us-east-1, the `OFFPATH_*` variables (offpath/settings.py).

The data directory is locked while the runtime uses it, and its snapshot (state.py) and journal (journal.py)
carry the jobs, the queues' messages and the one-time schedules across restarts, a crash included.
Stopping takes no new request, receives
no new batch and fires no schedule, lets the batches in flight finish within a grace period, writes the
snapshot, then stops the emulator; a batch still running after the grace period is given up (its job
is RUNNING with a lease and its message in flight in the snapshot: the next start recovers it).
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import os
import shlex
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from offpath.contract import READ_FUNCTION
from offpath.naming import TABLE_KEY, read_function_name
from offpath_local.alarms import AlarmEvaluator, EventCounts, announced
from offpath_local.console import local_pages
from offpath_local.emulator import CREDENTIALS, Emulator, QueuePeek
from offpath_local.event_source import PollResult, SqsEventSource
from offpath_local.faults import FAULTS_FILE, FaultConfig, FaultInjector, TestTiming
from offpath_local.functions import (
    ENQUEUE_MODULE,
    SWEEPER_MODULE,
    ApiFunction,
    AsyncConfig,
    AsyncFunction,
    WorkerFunction,
    destination_sender,
)
from offpath_local.gateway import Authorizer, Gateway
from offpath_local.job_events import ConsoleSummary, JobEvents
from offpath_local.journal import Journal, apply
from offpath_local.notices import DeliveryFunction, LoopbackResolver, NotifierFunction
from offpath_local.operations import (
    ALARM_RECORD,
    CHANGES_KEPT,
    AlarmChanges,
    LocalAlarms,
    LocalStats,
    recorded_alarm_changes,
    restored_reason,
)
from offpath_local.output import Output
from offpath_local.pollers import QueuePoller
from offpath_local.prometheus import LocalMetrics
from offpath_local.queue_switch import LocalQueueSwitch
from offpath_local.realtime import JobEventStreams, RealtimeHub
from offpath_local.recovery import end_leases, left_running
from offpath_local.resources import (
    DELIVERY_BATCH_SIZE,
    DELIVERY_FUNCTION_TIMEOUT_S,
    REGION,
    Resources,
    api_function_name,
    create_local_resources,
    delivery_function_name,
    enqueue_function_name,
    function_name_of,
    notifier_function_name,
    sweeper_function_name,
    worker_function_name,
)
from offpath_local.scheduler_clock import SchedulerClock, VirtualTime
from offpath_local.state import DataLock, Snapshot, StateSaver, StateSources, empty_state, restore
from offpath_local.streams import StreamPlayer, failure_sender

logger = logging.getLogger("offpath.local.runtime")

STATE_FILE = "local.json"
DEFAULT_DATA_DIR = Path(".offpath")
TOKEN_FILE = "token"  # noqa: S105 - a file name
ENQUEUE = AsyncConfig(timeout_s=30, retry_attempts=2, max_event_age_s=3600)
SWEEPER = AsyncConfig(timeout_s=50, retry_attempts=0, max_event_age_s=60)
DELIVERY_CONCURRENCY = 2
# Environment variables that could point this process's SDK at a real account or another endpoint.
_FOREIGN_AWS_SETTINGS = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
# The runtime's own: where the resources are. Other OFFPATH_* settings of the environment (payload limit,
# retention, sweep grace, redrive mode) apply to the local functions as the stack's would.
_RESOURCE_SETTINGS = frozenset(
    {
        "OFFPATH_TABLE_NAME",
        "OFFPATH_QUEUE_URLS",
        "OFFPATH_DLQ_URLS",
        "OFFPATH_QUEUE_CLASS",
        "OFFPATH_SCHEDULE_GROUP",
        "OFFPATH_SCHEDULER_ROLE_ARN",
        "OFFPATH_ENQUEUE_FUNCTION_ARN",
        "OFFPATH_SCHEDULE_DLQ_ARN",
        "OFFPATH_STACK_PREFIX",
        "OFFPATH_LOG_LEVEL",
        "OFFPATH_DEMO_JOBS",
        "OFFPATH_DELIVERY_QUEUE_URL",
        "OFFPATH_DELIVERY_DLQ_URL",
        "OFFPATH_ALLOW_LOOPBACK_RECEIVERS",
        "OFFPATH_LOOPBACK_RECEIVER_PORTS",
        "OFFPATH_EVENT_BUS_NAME",
    }
)


def port_free(host: str, port: int) -> None:
    """Raises OSError (EADDRINUSE) when the API's port is taken, before the start changes anything. Port 0 (any
    free port) is never taken."""
    if port == 0:
        return
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As the HTTP server binds (allow_reuse_address): a port left in TIME_WAIT is free, a listener's is not.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))


class ReceiverPortTaken(OSError):
    """A port named for webhook receivers is one of the runtime's own (`offpath local` refuses to start)."""


@dataclass
class LocalConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    data_dir: Path = Path(".offpath")
    tokens: dict[str, str] = field(default_factory=dict)  # tenant -> secret; empty: tenant "dev"
    admins: tuple[str, ...] = ()  # empty: the first tenant
    verbose: bool = False
    quiet: bool = False  # no line per job state change
    log_level: str = "INFO"
    clock_speed: float = 1.0
    clock_tick_s: float = 1.0
    alarm_interval_s: float = 5.0
    api_environments: int = 4
    # The read function's environments (GET /jobs/{id}, waits included): more than one tenant's waits at once
    # (OFFPATH_WAITS_PER_TENANT, 5), so another tenant's read finds one free.
    read_environments: int = 16
    prefix: str = "offpath"
    load_modules: tuple[str, ...] = ()
    faults: FaultConfig | None = None  # injected faults (faults.py); None: none
    timeout_scale: float = 1.0  # tests only: faults.TestTiming
    visibility_scale: float = 1.0
    fresh: bool = False  # start empty: the data directory's snapshot is not loaded (and is replaced)
    stop_grace_s: float = 10.0  # how long batches in flight may take to finish when the runtime stops
    save_every_s: float = 5.0  # the snapshot is written this often while something changes
    quotas: str | None = None  # the tenants' quotas (offpath/domain/quotas.py's text); None: the environment's
    webhook_ports: tuple[int, ...] = ()  # the 127.0.0.1 ports webhook receivers may use (never the runtime's own)


class LocalRuntime:
    def __init__(self, config: LocalConfig) -> None:
        self.config = config
        self.data_dir = Path(config.data_dir)
        self.output = Output(self.data_dir, verbose=config.verbose, level=config.log_level)
        self.metrics = LocalMetrics()  # from the functions' EMF lines; GET /metrics
        self.output.on_metrics(self.metrics.record)
        self.events = JobEvents()
        self.counts = EventCounts()
        self.alarm_changes = AlarmChanges()
        self.journal = Journal(self.data_dir)
        self.emulator = Emulator(config.host, journal=self.journal)
        self.resources: Resources | None = None
        self.tokens: dict[str, str] = {}
        self.admins: tuple[str, ...] = ()
        self.started_in_s = 0.0
        self.gateway: Gateway | None = None
        self._parts: list[Any] = []
        self._started = False
        self._saved_env: dict[str, str | None] = {}
        self.faults: FaultInjector | None = None
        self.lock = DataLock(self.data_dir)
        self.snapshot = Snapshot(self.data_dir)
        self.restored: dict[str, int] | None = None  # what the snapshot brought back at start; None: nothing
        self.recovered: list[str] = []  # jobs a previous run left RUNNING, whose leases this start ended
        self.abandoned = 0  # batches still running when the grace period ended
        self._pollers: list[QueuePoller] = []
        self._saver: StateSaver | None = None
        self._alarms: AlarmEvaluator | None = None
        self._secret_cipher: Any = None
        self._state_live = False  # the emulator holds the data directory's state: it is saved at stop
        self._replayed = 0  # journal records applied over the snapshot at start
        self._umask: int | None = None
        self._wrote_server_file = False
        self._hurry = threading.Event()
        # The table's stream, played to the notifier; `streams.subscribe(f)` gives f every record's job events.
        self.streams: StreamPlayer | None = None
        # Realtime: every job event the stream carries, for GET /jobs/{id}/events (server-sent events).
        self.realtime = RealtimeHub()

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Raises state.DataDirectoryInUse, having changed nothing, when another instance uses the data directory."""
        started = time.perf_counter()
        config = self.config
        created = not self.data_dir.exists()
        if created:  # a busy port stops the start before the data directory is made
            port_free(config.host, config.port)
        self.lock.acquire()  # an instance on this data directory is named first, whatever port it holds
        if not created:
            try:
                port_free(config.host, config.port)
            except OSError:
                self.lock.release()
                raise
        self._private_files()
        self.output.install()
        try:
            self._start(config)
        except BaseException:
            self.stop()
            if created:  # a start that failed leaves no data directory of its own behind
                shutil.rmtree(self.data_dir, ignore_errors=True)
            raise
        self.started_in_s = time.perf_counter() - started
        self._started = True
        self._write_state()

    def _start(self, config: LocalConfig) -> None:
        self.tokens, self.admins = self._tenants(config)
        self.emulator.start()
        self._parts.append(self.emulator)
        self._point_sdk_at_emulator()
        if config.fresh:
            self.snapshot.remove()
            self.journal.remove_all()

        from offpath.jobs import load_job_types

        registry = load_job_types(demo=True)
        for module in config.load_modules:
            importlib.import_module(module)

        clients = {name: self.emulator.client(name) for name in ("dynamodb", "sqs", "scheduler", "cloudwatch")}
        self.resources = resources = create_local_resources(clients, registry, config.prefix)
        self._set_env({**resources.environment(), "OFFPATH_LOG_LEVEL": config.log_level, "OFFPATH_DEMO_JOBS": "1"})
        if config.quotas is not None:
            self._set_env({"OFFPATH_QUOTAS": config.quotas})
        self._set_env({"OFFPATH_LOOPBACK_RECEIVER_PORTS": self._receiver_ports(config)})
        timing = TestTiming(config.timeout_scale, config.visibility_scale)
        timing.apply_visibility(clients["sqs"], registry, resources.queue_urls)
        if resources.delivery_queue_url and config.visibility_scale != 1:
            visibility = max(1, round(6 * DELIVERY_FUNCTION_TIMEOUT_S * config.visibility_scale))
            clients["sqs"].set_queue_attributes(
                QueueUrl=resources.delivery_queue_url, Attributes={"VisibilityTimeout": str(visibility)}
            )
        sources = self._state_sources(clients, resources, registry)
        saved = self._restore(sources)
        self.recovered = self._end_leases_of_previous_run(clients["dynamodb"], resources.table_name, saved)
        if config.faults is not None:
            # Before any function makes its clients: they all come from boto3's default session.
            self.faults = FaultInjector(config.faults, self.data_dir / FAULTS_FILE)
            self.faults.install_on_default_session()

        from offpath.settings import Settings

        settings = Settings.from_env()
        if not config.quiet:
            self.events.subscribe(ConsoleSummary(self.output.say, tenants=len(self.tokens)))

        # Functions (their services are built here, on one thread).
        from offpath.adapters.cloudwatch import CloudWatchAlarms

        switch = self._queue_switch(clients, registry, config.prefix, settings)

        api = ApiFunction(
            api_function_name(config.prefix),
            self.events,
            config.api_environments,
            self.counts.add,
            stats=LocalStats(self.metrics),
            alarms=LocalAlarms(CloudWatchAlarms(config.prefix, client=clients["cloudwatch"]), self.alarm_changes),
            resolver=LoopbackResolver(),
            cipher=self._cipher(),
            switch=switch,
        )
        self._parts.append(api)
        read = ApiFunction(read_function_name(config.prefix), self.events, config.read_environments, self.counts.add)
        self._parts.append(read)
        send_failure = destination_sender(clients["sqs"], resources.async_failures_url or "")
        speed = config.clock_speed
        async_functions = {
            enqueue_function_name(config.prefix): AsyncFunction(
                enqueue_function_name(config.prefix),
                ENQUEUE_MODULE,
                ENQUEUE,
                self.events,
                on_failure=send_failure,
                on_result=self._on_async_result,
                time_scale=speed,
                tap=self.counts.add,
            ),
            sweeper_function_name(config.prefix): AsyncFunction(
                sweeper_function_name(config.prefix),
                SWEEPER_MODULE,
                SWEEPER,
                self.events,
                on_failure=send_failure,
                on_result=self._on_async_result,
                time_scale=speed,
                tap=self.counts.add,
            ),
        }
        for function in async_functions.values():
            function.available()
            function.start()
            self._parts.append(function)
        if self.recovered:  # their leases ended: the sweeper requeues them now, not at its next minute
            async_functions[sweeper_function_name(config.prefix)].invoke_async(
                {"kind": "sweep", "scheduled_time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
            )

        # Pollers: one per queue class, on its own SQS client (its long polls hold a connection).
        for name, queue_class in registry.queues.items():
            worker = WorkerFunction(
                worker_function_name(config.prefix, name),
                name,
                settings,
                self.events,
                queue_class.max_concurrency,
                self.counts.add,
                adjust=timing.worker_services,
            )
            receiver = self.emulator.client("sqs")
            if self.faults is not None:
                self.faults.install_event_source(receiver, resources.queue_urls[name], clients["sqs"])
            source = SqsEventSource(
                receiver,
                resources.queue_urls[name],
                worker,
                function_name=worker_function_name(config.prefix, name),
                batch_size=registry.batch_size(name),
                batching_window_s=queue_class.batching_window_s,
                function_timeout_s=timing.function_timeout_s(registry, name),
                region=REGION,
            )
            poller = QueuePoller(
                source,
                queue_class=name,
                max_concurrency=queue_class.max_concurrency,
                on_result=self._on_batch,
                paused=functools.partial(switch.is_paused, name),
            )
            poller.start()
            self._pollers.append(poller)

        # Notices: the table's stream played to the notifier, and the delivery queue polled for the delivery function.
        self._start_notices(settings, resources)

        # The scheduler clock.
        def invoke(target_arn: str, event: dict[str, Any]) -> None:
            function = async_functions.get(function_name_of(target_arn))
            if function is None:
                logger.warning("a schedule targets %s, which is not a function of this stack", target_arn)
                return
            function.invoke_async(event)

        clock = SchedulerClock(
            clients["scheduler"],
            resources.schedule_group or "",
            invoke,
            time_source=VirtualTime(config.clock_speed),
            tick_s=config.clock_tick_s,
            record=self._record_firing,
        )
        clock.start()
        self._parts.append(clock)

        # The alarm evaluator.
        queue_urls = [*resources.queue_urls.values(), *resources.dlq_urls.values()]
        queue_urls += [url for url in (resources.schedule_dlq_url, resources.async_failures_url) if url]
        queue_urls += [resources.notifier_failures_url] if resources.notifier_failures_url else []
        alarms = AlarmEvaluator(
            cloudwatch=clients["cloudwatch"],
            peek=QueuePeek(clients["sqs"]),
            queue_urls=queue_urls,
            specs=resources.alarms,
            events=self.counts,
            interval_s=config.alarm_interval_s,
            record_path=self.data_dir / ALARM_RECORD,
            on_change=self._on_alarm,
        )
        self._alarms = alarms
        self._restore_alarms(clients["cloudwatch"], (saved or {}).get("alarms") or {})
        alarms.evaluate()
        alarms.start()
        self._parts.append(alarms)

        # The snapshot, from now on every few seconds while something changes, and at stop.
        self._saver = StateSaver(
            sources,
            self.snapshot,
            lambda: self.emulator.version(sources.queue_names),
            config.save_every_s,
            journal=self.journal,
        )
        if self._replayed:  # the journal replayed is folded into a snapshot at once
            self._saver.save()
        self._saver.start()

        # The HTTP API last: when it answers, everything behind it runs.
        authorizer = Authorizer(self.tokens, frozenset(self.admins))
        self.metrics.watch(QueuePeek(clients["sqs"]), resources.queue_urls, resources.dlq_urls)
        pages = local_pages(self.metrics.exposition)
        from offpath.adapters.dynamodb_store import DynamoDbJobStore

        jobs = DynamoDbJobStore(resources.table_name, client=clients["dynamodb"])
        job_streams = JobEventStreams(self.realtime, lambda job_id, tenant: jobs.get(job_id, tenant=tenant))
        self.gateway = Gateway(
            api.invoke,
            authorizer,
            host=config.host,
            port=config.port,
            on_response=self._on_response,
            pages=pages,
            streams=job_streams,
            functions={READ_FUNCTION: read.invoke},
        )
        self.gateway.start()
        self._parts.append(self.gateway)
        if self.gateway.port in config.webhook_ports:  # `--port 0` took a port named for receivers
            raise ReceiverPortTaken(f"--webhook-port {self.gateway.port} is the API's own port")
        if self.faults is not None:
            self.faults.arm()

    def _queue_switch(self, clients: dict[str, Any], registry: Any, prefix: str, settings: Any) -> LocalQueueSwitch:
        """The pollers' switch, with the pauses the table holds applied (a pause outlives a restart)."""
        from offpath.adapters.dynamodb_pauses import DynamoDbPauseStore
        from offpath.adapters.queue_switch import AwsQueueSwitch
        from offpath.naming import alarm_name, oldest_age_alarm_id

        alarms = {name: [alarm_name(prefix, oldest_age_alarm_id(name))] for name in registry.queues}
        switch = LocalQueueSwitch(AwsQueueSwitch({}, alarms, cloudwatch=clients["cloudwatch"]))
        for name in DynamoDbPauseStore(settings.table_name, client=clients["dynamodb"]).pauses().queues:
            if name in registry.queues:
                switch.apply(name, paused=True)
        return switch

    def _cipher(self) -> Any:
        """The stand-in for the stack's KMS key: the webhook secrets' key, beside the data directory."""
        from offpath_local.secret_key import LocalKeyCipher, key_path

        if self._secret_cipher is None:
            self._secret_cipher = LocalKeyCipher(key_path(self.data_dir))
        return self._secret_cipher

    def _receiver_ports(self, config: LocalConfig) -> str:
        """The ports named for webhook receivers; the runtime's own (the emulator's, the API's and console's)
        are refused here, so no tenant's webhook reaches them."""
        own = {self.emulator.port, config.port}
        taken = sorted(own & set(config.webhook_ports))
        if taken:
            raise ReceiverPortTaken(f"--webhook-port {taken[0]} is one of the runtime's own ports")
        return ",".join(str(port) for port in sorted(set(config.webhook_ports)))

    def _start_notices(self, settings: Any, resources: Resources) -> None:
        if resources.stream_arn:
            self.streams = StreamPlayer(
                self.emulator.stream_reader(),
                resources.stream_arn,
                NotifierFunction(settings, self.data_dir),
                function_name=notifier_function_name(self.config.prefix),
                on_failure=failure_sender(self.emulator.client("sqs"), resources.notifier_failures_url),
            )
            self.streams.subscribe(self.realtime.publish)
            self.streams.start()
            self._parts.append(self.streams)
        if resources.delivery_queue_url:
            source = SqsEventSource(
                self.emulator.client("sqs"),
                resources.delivery_queue_url,
                DeliveryFunction(settings, DELIVERY_CONCURRENCY, cipher=self._cipher()),
                function_name=delivery_function_name(self.config.prefix),
                batch_size=DELIVERY_BATCH_SIZE,
                batching_window_s=0,
                function_timeout_s=DELIVERY_FUNCTION_TIMEOUT_S,
                region=REGION,
            )
            poller = QueuePoller(source, queue_class="webhooks", max_concurrency=DELIVERY_CONCURRENCY)
            poller.start()
            self._pollers.append(poller)

    def stop(self) -> None:
        """Stops everything started; safe to call twice. In order: the HTTP API; receiving, the scheduler clock,
        the alarms and the periodic snapshot; then the batches in flight get until the grace period ends to
        finish; the snapshot is written; the functions and the emulator stop; the data directory is unlocked."""
        if not self.lock.held:
            return
        self.realtime.close()  # the open event streams end, so the HTTP API stops at once
        if self.gateway is not None and self.gateway in self._parts:
            self._parts.remove(self.gateway)
            self._stop_part(self.gateway)
        if self._saver is not None:
            self._saver.request_stop()
        for part in [*self._pollers, *self._parts]:
            request_stop = getattr(part, "request_stop", None)
            if request_stop is not None:
                request_stop()
        waited = time.monotonic()
        deadline = waited + self.config.stop_grace_s
        self.abandoned = sum(poller.wait(deadline, self._hurry) for poller in self._pollers)
        if self.abandoned:
            self.output.say(
                f"offpath local: {self.abandoned} batch(es) still running after {time.monotonic() - waited:.0f} s: "
                "given up; their jobs are recovered at the next start"
            )
        for poller in self._pollers:
            self._stop_part(poller, "shutdown")
        self._pollers.clear()
        if self._saver is not None:
            self._stop_part(self._saver)
        while self._parts:
            part = self._parts.pop()
            if part is self.emulator:  # the last one: everything that writes to it has stopped
                self._save()
            self._stop_part(part)
        self._saver = None
        if self._wrote_server_file:
            (self.data_dir / STATE_FILE).unlink(missing_ok=True)
            self._wrote_server_file = False
        if self.faults is not None:
            if self._started:
                self.output.say(f"offpath local: {self.faults.summary()} (listed in {FAULTS_FILE})")
            self.faults.close()
        self._restore_env()
        if self._umask is not None:
            os.umask(self._umask)
            self._umask = None
        # Batches given up still run: what they log goes on to the log file, not to the console.
        self.output.restore(keep_function_log=self.abandoned > 0)
        self._started = False
        self.lock.release()

    def hurry(self) -> None:
        """Stop without waiting for the batches in flight (a second Ctrl-C)."""
        self._hurry.set()

    def _save(self) -> None:
        if not self._state_live or self._saver is None:
            return
        try:
            self._saver.save()
        except Exception as error:
            logger.warning("the state could not be written to %s: %s", self.snapshot.path, error)

    def _stop_part(self, part: Any, method: str = "stop") -> None:
        try:
            getattr(part, method)()
        except Exception:
            logger.warning("stopping %s failed", type(part).__name__, exc_info=True)

    def __enter__(self) -> LocalRuntime:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- facts for the console and the CLI ----------------------------------------------------

    @property
    def url(self) -> str:
        assert self.gateway is not None
        return self.gateway.url

    @property
    def first_tenant(self) -> str:
        return next(iter(self.tokens))

    def banner(self) -> str:
        tenant = self.admins[0] if self.admins else self.first_tenant
        token = self.tokens[tenant]
        url = self.url
        command, activate = cli_command()
        data = "" if self.data_dir == DEFAULT_DATA_DIR else f" --data {shlex.quote(str(self.data_dir))}"
        lines = [
            f"offpath local: the whole pipeline on this machine, ready in {self.started_in_s:.1f} s",
            "",
            f"  API        {url}",
            f"  console    {url}/console#token={token}  (signed in as {tenant})",
            f"  metrics    {url}/metrics  (Prometheus)",
        ]
        for name, secret in self.tokens.items():
            role = " (admin)" if name in self.admins else ""
            lines.append(f"  tenant     {name}{role}   token {secret}")
        lines += [
            f"  emulator   {self.emulator.address}  (moto: DynamoDB, SQS, EventBridge Scheduler, CloudWatch; it answers"
            " only this runtime)",
            f"  data       {self.data_dir}/  (function logs: offpath.log, alarm changes: alarms.jsonl)",
            f"  state      {self._state_line()}",
            f"  quotas     {self._quotas_line()}",
            *(
                [f"  faults     {self.config.faults.describe()} (each injected one in {FAULTS_FILE})"]
                if self.faults
                else []
            ),
            "",
            "Submit a first job:",
            f"  curl -s -X POST {url}/jobs -H 'Authorization: Bearer {token}' "
            '-H \'Content-Type: application/json\' -d \'{"type": "demo.echo", "payload": {"hello": "world"}}\'',
            "and read it back with the job_id it returns:",
            f"  curl -s {url}/jobs/JOB_ID -H 'Authorization: Bearer {token}'",
            "or with the command line (from this directory):",
            f'  {command} submit demo.echo --payload \'{{"hello": "world"}}\' --wait{data}',
            f"  {command} jobs{data}",
            *([f"  ({activate} puts `offpath` on your PATH)"] if activate else []),
            "",
            "Ctrl-C stops (batches in flight get "
            f"{self.config.stop_grace_s:g} s to finish). One line per job state change follows.",
        ]
        return "\n".join(lines)

    def _quotas_line(self) -> str:
        """The tenants' quotas in force (--quota, else OFFPATH_QUOTAS), one entry each as `--quota` takes it."""
        from offpath.domain.quotas import QuotaSpecError, parse

        text = self.config.quotas if self.config.quotas is not None else os.environ.get("OFFPATH_QUOTAS", "")
        try:
            book = parse(text)
        except QuotaSpecError as error:
            return f"unreadable ({error})"
        if not book.configured:
            return "none (--quota TENANT:submits_per_s=N,open_jobs=M... limits a tenant)"
        return "; ".join(book.text().split(";"))

    def _state_line(self) -> str:
        kept = f"kept in {self.snapshot.path.name} across restarts"
        if self.config.fresh:
            return f"started empty (--fresh); {kept}"
        if self.restored is None:
            return f"nothing saved yet; {kept}"
        r = self.restored
        return (
            f"restored {r['jobs']} job(s), {r['messages']} queued message(s), {r['schedules']} one-time schedule(s)"
            f" and {r['records']} other record(s) (idempotency keys, once marks...)"
            + (f"; {self._replayed} journaled change(s) replayed" if self._replayed else "")
            + (
                f"; {len(self.recovered)} job(s) left RUNNING by the previous run: leases ended, requeued now"
                if self.recovered
                else ""
            )
        )

    # -- internals ----------------------------------------------------------------------------

    def _tenants(self, config: LocalConfig) -> tuple[dict[str, str], tuple[str, ...]]:
        from offpath.tenancy import checked_tenant

        tokens = {checked_tenant(tenant, "tenant"): secret for tenant, secret in config.tokens.items()}
        if not tokens:
            tokens = {"dev": self._dev_token()}
        admins = tuple(a for a in config.admins if a in tokens) or (next(iter(tokens)),)
        return tokens, admins

    def _dev_token(self) -> str:
        """A random token, made once per data directory and kept there (so curl commands keep working)."""
        from offpath_local.gateway import new_token

        path = self.data_dir / TOKEN_FILE
        if path.exists():
            token = path.read_text(encoding="utf-8").strip()
            if token:
                return token
        token = new_token()
        path.write_text(token + "\n", encoding="utf-8")
        path.chmod(0o600)
        return token

    def _point_sdk_at_emulator(self) -> None:
        values: dict[str, str | None] = {
            "AWS_ENDPOINT_URL": self.emulator.endpoint,
            "AWS_ACCESS_KEY_ID": CREDENTIALS["aws_access_key_id"],
            "AWS_SECRET_ACCESS_KEY": CREDENTIALS["aws_secret_access_key"],
            "AWS_SESSION_TOKEN": CREDENTIALS["aws_session_token"],
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            # No profile, config file or credentials file of this machine's user is read.
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        for name in _FOREIGN_AWS_SETTINGS:
            values[name] = None
        for name in list(os.environ):
            if name.startswith("AWS_ENDPOINT_URL_") or name in _RESOURCE_SETTINGS:
                values[name] = None
        self._set_env(values)
        import boto3

        # A default session made before this point would keep the machine's own settings.
        boto3.DEFAULT_SESSION = None

    def _set_env(self, values: dict[str, str | None]) -> None:
        """Set (or, for None, remove) environment variables, remembering what was there."""
        for name, value in values.items():
            self._saved_env.setdefault(name, os.environ.get(name))
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def _restore_env(self) -> None:
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_env.clear()

    def _write_state(self) -> None:
        tenant = self.admins[0] if self.admins else self.first_tenant
        # Private to its owner (0600, in a 0700 directory), as the token: the emulator's endpoint with its secret
        # prefix, for the owner's own tools (`offpath smoke --aws-endpoint` against this runtime).
        state = {
            "url": self.url,
            "tenant": tenant,
            "token": self.tokens[tenant],
            "pid": os.getpid(),
            "emulator": self.emulator.endpoint,
        }
        path = self.data_dir / STATE_FILE
        path.touch(mode=0o600, exist_ok=True)
        path.chmod(0o600)
        path.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
        self._wrote_server_file = True

    def _state_sources(self, clients: dict[str, Any], resources: Resources, registry: Any) -> StateSources:
        from offpath_local.emulator import export_messages, import_messages

        queue_urls = [*resources.queue_urls.values(), *resources.dlq_urls.values()]
        queue_urls += [url for url in (resources.schedule_dlq_url, resources.async_failures_url) if url]
        queue_urls += [resources.notifier_failures_url] if resources.notifier_failures_url else []
        queue_urls += [url for url in (resources.delivery_queue_url, resources.delivery_dlq_url) if url]
        return StateSources(
            scheduler=clients["scheduler"],
            table_name=resources.table_name,
            queue_names=tuple(url.rstrip("/").rsplit("/", 1)[-1] for url in queue_urls),
            schedule_group=resources.schedule_group or "",
            declared_schedules=frozenset({*registry.schedules, sweeper_function_name(self.config.prefix)}),
            read_items=self.emulator.export_items,
            write_items=self.emulator.import_items,
            read_messages=export_messages,
            write_messages=import_messages,
            alarm_states=lambda: dict(self._alarms.states) if self._alarms is not None else {},
        )

    def _restore(self, sources: StateSources) -> dict[str, Any] | None:
        """The snapshot and the journal after it into the fresh emulator, before anything runs; from here on every
        change is journaled, and the state is saved at stop."""
        saved = None if self.config.fresh else self.snapshot.load()
        records = list(self.journal.records())
        if records:
            saved = saved if saved is not None else empty_state(sources.table_name)
            self._replayed = apply(saved, records, TABLE_KEY, sources.schedule_group)
        if saved is not None:
            self.restored = restore(sources, saved)
        self.journal.start()
        self._state_live = True
        return saved

    def _end_leases_of_previous_run(self, dynamodb: Any, table_name: str, saved: dict[str, Any] | None) -> list[str]:
        """No worker of this run holds a lease yet, and the data directory's lock keeps any other run out: the
        leases of the jobs the previous run left RUNNING are ended (recovery.py)."""
        if not saved:
            return []
        items = (saved.get("table") or {}).get("items") or []
        jobs = left_running(items, TABLE_KEY[0])
        ended = end_leases(dynamodb, table_name, jobs, datetime.now(UTC)) if jobs else []
        if ended:
            logger.info("%d job(s) left RUNNING by the previous run: their leases ended at start", len(ended))
        return ended

    def _private_files(self) -> None:
        """The data directory is its owner's alone (state.DataLock made it 0700), and so is every file in it: files
        made from now on (umask 077 while the runtime runs), and those an earlier version left readable."""
        self._umask = os.umask(0o077)
        for path in self.data_dir.iterdir():
            if path.is_file() and not path.is_symlink():
                path.chmod(0o600)

    def _restore_alarms(self, cloudwatch: Any, states: dict[str, str]) -> None:
        """The alarms' states before the restart, each with the reason of the change that set it (alarms.jsonl);
        the recent changes, from the same record, are listed again (GET /alarms)."""
        assert self._alarms is not None
        if not states:  # nothing restored (a first start, or --fresh)
            return
        changes = recorded_alarm_changes(self.data_dir / ALARM_RECORD)
        for change in changes[-CHANGES_KEPT:]:
            self.alarm_changes.record(change)
        last = {str(change["alarm"]): change for change in changes}
        for name, state in states.items():
            if name in self._alarms.states and state in {"OK", "ALARM"}:
                self._alarms.states[name] = state
                cloudwatch.set_alarm_state(
                    AlarmName=name, StateValue=state, StateReason=restored_reason(state, last.get(name))
                )

    def _on_batch(self, queue_class: str, result: PollResult) -> None:
        if result.errored:
            self.counts.add(f"worker-error:{queue_class}")

    def _on_response(self, status: int) -> None:
        if status >= 500:
            self.counts.add("api-5xx")

    def _on_alarm(self, change: dict[str, Any]) -> None:
        self.alarm_changes.record(change)
        if not announced(change):  # (actions disabled: a paused queue class's age alarm notifies nobody)
            return
        stamp = time.strftime("%H:%M:%S")
        self.output.say(
            f"{stamp}  {change['new_state']:<9}  alarm {change['alarm']}: {change['reason']}"
            "  (local stand-in for the SNS notification; recorded in alarms.jsonl)"
        )

    def _record_firing(self, firing: dict[str, Any]) -> None:
        with open(self.data_dir / "schedules.jsonl", "a", encoding="utf-8") as record:
            record.write(json.dumps(firing) + "\n")

    def _on_async_result(self, function: str, event: dict[str, Any], outcome: str, response: Any) -> None:
        kind = event.get("kind") if isinstance(event, dict) else None
        stamp = time.strftime("%H:%M:%S")
        if outcome == "missing":
            return
        if outcome == "failed":
            self.output.say(f"{stamp}  {'FAILED':<9}  {function}: {response} (event in the async failures queue)")
            return
        if kind == "sweep" and isinstance(response, dict):
            stuck = int(response.get("stuck") or 0)
            if stuck:
                self.output.say(f"{stamp}  {'SWEEP':<9}  the sweeper found {stuck} stuck job(s): {response}")
            return
        if kind == "recurring" and isinstance(response, dict):
            schedule = event.get("schedule")
            slot = event.get("scheduled_time")
            if response.get("skipped"):
                self.output.say(f"{stamp}  {'SCHEDULE':<9}  {schedule} slot {slot} skipped: {response['skipped']}")
            else:
                self.output.say(
                    f"{stamp}  {'SCHEDULE':<9}  {schedule} fired for slot {slot}: job {response.get('job_id')}"
                )


def cli_command() -> tuple[str, str]:
    """How to type the `offpath` command from the current directory, and how to put it on the PATH ("" when it
    already is): the entry point installed next to this Python (`.venv/bin/offpath` after `make run`)."""
    script = Path(sys.executable).parent / "offpath"
    on_path = shutil.which("offpath")
    if not script.exists():
        return ("offpath", "") if on_path else (f"{shlex.quote(sys.executable)} -m offpath_local", "")
    if on_path and os.path.samefile(on_path, script):
        return "offpath", ""
    activate = script.with_name("activate")
    return _from_here(script), (f"source {_from_here(activate)}" if activate.exists() else "")


def _from_here(path: Path) -> str:
    """A path as typed from the current directory (relative when it is below it)."""
    here = Path.cwd()
    return shlex.quote(str(path.relative_to(here)) if path.is_relative_to(here) else str(path))
