"""The functions' AWS calls as docs/aws_calls.json keeps them: recorded by the test session
(offpath_local.aws_calls), with every stack-specific name replaced by its logical role.

A role is `kind:name`: `table:jobs` (and `table:jobs/index/<index>`), `queue:jobs/{class}` and
`queue:jobs-dlq/{class}` (any queue class's; a worker's own when the function is `worker-{class}`),
`queue:deliveries`, `queue:deliveries-dlq`, `queue:schedule-dlq`, `queue:async-failures`,
`queue:notifier-failures`, `schedule:schedules/*` (the one-time schedules' group), `role:scheduler`,
`function:<name>`, `alarm:{prefix}-*`, `to:<queue>` (a message move task's destination), `bus:events` (the
bus the function is configured with), `transact:<Put|Update|Delete|ConditionCheck>`.

Regenerate after a change of the functions' calls: `make iam-calls` (the integration and end-to-end suites with
OFFPATH_AWS_CALLS=update, which adds what they record to the file).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from offpath import naming

ROOT = Path(__file__).resolve().parents[2]
CALLS_FILE = ROOT / "docs" / "aws_calls.json"
UPDATE_ENV = "OFFPATH_AWS_CALLS"  # "update": the session adds what it recorded to CALLS_FILE
REGENERATE = f"make iam-calls (or {UPDATE_ENV}=update .venv/bin/python -m pytest -p no:xdist <the tests>)"
CLASS = "{class}"

Call = tuple[str, str, str, tuple[str, ...]]  # function, service, operation, resources

# Queue roles by the suffix the naming module gives their names (longest first: "-webhooks-dlq" before "-dlq").
_QUEUE_SUFFIXES = (
    (naming.delivery_dlq_name(""), "queue:deliveries-dlq"),
    (naming.delivery_queue_name(""), "queue:deliveries"),
    (naming.notifier_failures_queue_name(""), "queue:notifier-failures"),
    ("-schedule-dlq", "queue:schedule-dlq"),
    ("-async-failures", "queue:async-failures"),
    ("-dlq", f"queue:jobs-dlq/{CLASS}"),
)
_FUNCTION_SUFFIXES = (
    (naming.enqueue_function_name(""), "function:enqueue"),
    (naming.sweeper_function_name(""), "function:sweeper"),
    (naming.notifier_function_name(""), "function:notifier"),
    (naming.delivery_function_name(""), "function:delivery"),
    (naming.api_function_name(""), "function:api"),
)


def queue_role(name_or_url_or_arn: str) -> str:
    name = name_or_url_or_arn.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    for suffix, role in _QUEUE_SUFFIXES:
        if name.endswith(suffix):
            return role
    return f"queue:jobs/{CLASS}"


def function_role(name_or_arn: str) -> str:
    name = name_or_arn.rsplit(":function:", 1)[-1].split(":", 1)[0]
    for suffix, role in _FUNCTION_SUFFIXES:
        if name.endswith(suffix):
            return role
    return f"function:worker-{CLASS}" if "-worker-" in name else f"function:{name}"


def normalise(record: dict[str, Any]) -> Call:
    """A recorded call (offpath_local.aws_calls) in logical roles."""
    function = str(record["function"])
    if function.startswith("worker-"):
        function = f"worker-{CLASS}"
    pairs = [(str(kind), str(name)) for kind, name in record["resources"]]
    indexes = [name for kind, name in pairs if kind == "index"]
    roles: set[str] = set()
    for kind, name in pairs:
        if kind == "table":
            if indexes:
                roles.update(f"table:jobs/index/{index}" for index in indexes)
            else:
                roles.add("table:jobs")
        elif kind in ("queue", "queue-arn"):
            roles.add(queue_role(name))
        elif kind == "destination":
            roles.add("to:" + queue_role(name))
        elif kind == "schedule":
            roles.add("schedule:schedules/*")
        elif kind == "role":
            roles.add("role:scheduler")
        elif kind in ("target", "function"):
            roles.add(function_role(name))
        elif kind == "alarm":
            roles.add("alarm:{prefix}-*")
        elif kind == "mapping":
            roles.add(f"mapping:jobs/{CLASS}")
        elif kind == "schedule-dlq":
            roles.add("queue:schedule-dlq")
        elif kind == "bus":
            roles.add("bus:events")
        elif kind == "transact":
            roles.add(f"transact:{name}")
        elif kind == "kms-key":
            roles.add(f"key:{name}")
    return function, str(record["service"]), str(record["operation"]), tuple(sorted(roles))


def as_json(call: Call) -> dict[str, Any]:
    function, service, operation, resources = call
    return {"function": function, "service": service, "operation": operation, "resources": list(resources)}


def of_json(item: dict[str, Any]) -> Call:
    return item["function"], item["service"], item["operation"], tuple(item["resources"])


def load(path: Path = CALLS_FILE) -> set[Call]:
    if not path.exists():
        return set()
    return {of_json(item) for item in json.loads(path.read_text())["calls"]}


def save(calls: Iterable[Call], path: Path = CALLS_FILE) -> None:
    about = (
        "Every AWS call the functions make in the integration and end-to-end suites, in logical roles "
        f"(offpath_tools.iam_calls); `make iam-check` proves each against its function's role. Add: {REGENERATE}."
    )
    rows = ",\n  ".join(json.dumps(as_json(call)) for call in sorted(set(calls)))
    path.write_text(f'{{\n "about": {json.dumps(about)},\n "calls": [\n  {rows}\n ]\n}}\n')


def missing(recorded: Iterable[Call], committed: set[Call]) -> list[Call]:
    """The recorded calls the committed file does not list."""
    return sorted(set(recorded) - committed)


def describe(call: Call) -> str:
    function, service, operation, resources = call
    return f"{function}: {service}:{operation} on {', '.join(resources) or '*'}"
