"""A record of the AWS calls the functions make: which function, which operation, which resources it names.

Off unless `OFFPATH_RECORD_AWS_CALLS` names a directory (the test session sets it; `offpath local` reads it at
start). Then every botocore client made from now on reports its calls through its own event system
(`provide-client-params`), and a call made while a function runs (`output.FUNCTION`, set by the runtime around
each invocation, or by `attribute_handlers` around a handler called in-process) is appended, once, to a file of
this process in that directory. Calls made outside a function (the runtime's pollers, a test's set-up) are not
recorded. `offpath_tools.aws_calls` reads the files, and `make iam-check` checks them against the stack's roles.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from offpath_local.output import FUNCTION, invocation

ENV = "OFFPATH_RECORD_AWS_CALLS"
OUTSIDE = FUNCTION.get()  # the value outside any function ("local")

Resource = tuple[str, str]


def resources_of(service: str, operation: str, params: Mapping[str, Any]) -> list[Resource]:
    """The (kind, name) pairs a call's parameters name: tables and indexes, queue URLs and ARNs, schedules and
    the roles and targets they hold, event buses, functions, alarms. `transact` pairs name the kinds of a
    transaction's items (each needs its own action)."""
    found: list[Resource] = []

    def add(kind: str, value: Any) -> None:
        if isinstance(value, str) and value:
            found.append((kind, value))

    add("table", params.get("TableName"))
    add("index", params.get("IndexName"))
    for table in params.get("RequestItems") or {}:
        add("table", table)
    for item in params.get("TransactItems") or []:
        for kind, body in item.items():
            add("transact", kind)
            add("table", body.get("TableName"))
    add("queue", params.get("QueueUrl"))
    add("queue-arn", params.get("SourceArn"))
    add("destination", params.get("DestinationArn"))
    add("function", params.get("FunctionName"))
    add("bus", params.get("EventBusName"))
    for entry in params.get("Entries") or []:
        if service == "events":
            add("bus", entry.get("EventBusName") or "default")
    if service == "scheduler":
        name = params.get("Name")
        if isinstance(name, str):
            add("schedule", f"{params.get('GroupName') or 'default'}/{name}")
        target = params.get("Target") or {}
        add("role", target.get("RoleArn"))
        add("target", target.get("Arn"))
        add("schedule-dlq", (target.get("DeadLetterConfig") or {}).get("Arn"))
    if service == "kms":  # the one key offpath uses: the stack's, sealing the webhook endpoints' signing secrets
        add("kms-key", "webhook-secrets")
    if service == "lambda":  # an event source mapping, by its UUID (a queue class's pause)
        add("mapping", params.get("UUID"))
    if service == "cloudwatch":
        for alarm in params.get("AlarmNames") or []:
            add("alarm", alarm)
        add("alarm", params.get("AlarmName"))
        prefix = params.get("AlarmNamePrefix")
        if isinstance(prefix, str):
            add("alarm", prefix + "*")
    return found


class Recorder:
    """Appends each distinct call made inside a function to `path` (one JSON object a line)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        function = FUNCTION.get()
        if function == OUTSIDE:
            return
        service = model.service_model.service_name
        call = {
            "function": function,
            "service": service,
            "operation": model.name,
            "resources": sorted(set(resources_of(service, model.name, params))),
        }
        line = json.dumps(call, sort_keys=True)
        with self._lock:
            if line in self._seen:
                return
            self._seen.add(line)
            # The directory is made again if a test session removed it meanwhile: a record never fails a call.
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as out:
                out.write(line + "\n")


_installed: Recorder | None = None


def install(directory: Path) -> Recorder:
    """Records from now on (idempotent): every client made afterwards, and the threads a function's pools start
    (they run in the function's context)."""
    global _installed
    if _installed is not None:
        return _installed
    from botocore.session import Session

    directory.mkdir(parents=True, exist_ok=True)
    recorder = Recorder(directory / f"calls-{os.getpid()}.jsonl")
    create_client = Session.create_client

    def recorded_client(self: Session, *args: Any, **kwargs: Any) -> Any:
        client = create_client(self, *args, **kwargs)
        client.meta.events.register("provide-client-params", recorder)
        return client

    submit = ThreadPoolExecutor.submit

    def submit_in_context(self: ThreadPoolExecutor, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        if FUNCTION.get() == OUTSIDE:
            return submit(self, fn, *args, **kwargs)
        return submit(self, contextvars.copy_context().run, fn, *args, **kwargs)

    Session.create_client = recorded_client  # type: ignore[method-assign]
    ThreadPoolExecutor.submit = submit_in_context  # type: ignore[method-assign]
    _installed = recorder
    return recorder


def install_from_environment() -> Recorder | None:
    directory = os.environ.get(ENV)
    return install(Path(directory)) if directory else None


def _worker_name(services: Any) -> str:
    policy = getattr(services, "policy", None)
    return f"worker-{getattr(policy, 'queue', None) or os.environ.get('OFFPATH_QUEUE_CLASS', 'default')}"


HANDLERS: dict[str, Callable[[Any], str]] = {
    "api": lambda _: "api",
    "worker": _worker_name,
    "enqueue": lambda _: "enqueue",
    "sweeper": lambda _: "sweeper",
    "notifier": lambda _: "notifier",
    "delivery": lambda _: "delivery",
}


def attribute_handlers() -> None:
    """Handlers called in-process (the integration tests) run as their function, as the runtime runs them."""
    import importlib

    for name, function_of in HANDLERS.items():
        module = importlib.import_module(f"offpath.handlers.{name}")
        inner = module.handler
        if getattr(inner, "attributed", False):
            continue
        module.handler = _attributed(inner, function_of)


def _attributed(inner: Callable[..., Any], function_of: Callable[[Any], str]) -> Callable[..., Any]:
    def handler(event: Any, context: Any, *args: Any, **kwargs: Any) -> Any:
        services = kwargs.get("services", args[0] if args else None)
        with invocation(function_of(services)):
            return inner(event, context, *args, **kwargs)

    handler.attributed = True  # type: ignore[attr-defined]
    handler.__wrapped__ = inner  # type: ignore[attr-defined]
    return handler


def read(directory: Path) -> Iterator[dict[str, Any]]:
    """Every call recorded in `directory` (by any process)."""
    for path in sorted(directory.glob("calls-*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                yield json.loads(line)


def outside_functions() -> contextlib.AbstractContextManager[None]:
    """Calls made inside are no function's (Lambda's poller, run by a test from inside a handler's wait)."""
    return invocation(OUTSIDE)
