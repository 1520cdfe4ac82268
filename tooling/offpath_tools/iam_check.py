"""`make iam-check`: every AWS call a function makes is granted by its role in the synthesized template, and every
grant is used by some call or explained.

The calls: docs/aws_calls.json (recorded by the test session, offpath_tools.iam_calls) and the calls the template
itself implies (Lambda writing each function's log, the event source mappings' pollers, the asynchronous and
stream on-failure destinations, the Scheduler invoking its targets with its role, API Gateway invoking the api).
Each call becomes the IAM actions it needs (`service:Operation`, with the exceptions below) on a symbolic ARN
built from the template's own resources (`Ref`, `Fn::GetAtt`, `Fn::Join`, `Fn::Sub` resolved against one
account and region), evaluated against the role's statements: actions and resources with wildcards, the
conditions the stack uses, explicit denies, and the queues' resource policies.

A grant no call uses fails too, unless infra/iam_allowlist.json gives its reason.

    python -m offpath_tools.iam_check [--template cdk.out/Offpath.template.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from offpath import naming
from offpath_tools import iam_calls
from offpath_tools.iam_calls import CLASS, Call

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "cdk.out" / "Offpath.template.json"
ALLOWLIST = ROOT / "infra" / "iam_allowlist.json"
ACCOUNT = "123456789012"
REGION = "us-east-1"
PARTITION = "aws"
PSEUDO = {
    "AWS::AccountId": ACCOUNT,
    "AWS::Region": REGION,
    "AWS::Partition": PARTITION,
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "Offpath",
}

# Operations whose IAM action is not `service:Operation`.
ACTION_OF = {
    ("sqs", "SendMessageBatch"): "sqs:SendMessage",
    ("sqs", "DeleteMessageBatch"): "sqs:DeleteMessage",
    ("sqs", "ChangeMessageVisibilityBatch"): "sqs:ChangeMessageVisibility",
    ("dynamodb", "TransactGetItems"): "dynamodb:GetItem",
}
# A transaction needs each of its items' own actions (and no action of its own).
TRANSACT_ACTIONS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}
# A message move task reads and deletes from its source with the caller's role (and sends to its destination).
MOVE_TASK_SOURCE = ("sqs:StartMessageMoveTask", "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
# Actions that take no resource (IAM evaluates them against "*").
UNSCOPED = {
    "cloudwatch:GetMetricData",
    "cloudwatch:ListMetrics",
    "cloudwatch:PutMetricData",
    "sqs:ListQueues",
    "dynamodb:ListStreams",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
}
# What Lambda's pollers call with the function's role (AWS Lambda developer guide, "execution role permissions").
SQS_POLLER = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
STREAM_POLLER = ("dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator")


# -- the template, resolved ------------------------------------------------------------------------------------


class Stack:
    """A synthesized template with its intrinsic functions resolved into symbolic values."""

    def __init__(self, template: dict[str, Any]) -> None:
        self.resources: dict[str, dict[str, Any]] = template.get("Resources", {})

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {k: r.get("Properties", {}) for k, r in self.resources.items() if r.get("Type") == resource_type}

    def name(self, logical: str) -> str:
        resource = self.resources[logical]
        props = resource.get("Properties", {})
        keys = {
            "AWS::SQS::Queue": "QueueName",
            "AWS::Lambda::Function": "FunctionName",
            "AWS::DynamoDB::Table": "TableName",
            "AWS::IAM::Role": "RoleName",
            "AWS::Logs::LogGroup": "LogGroupName",
            "AWS::Scheduler::ScheduleGroup": "Name",
            "AWS::Events::EventBus": "Name",
            "AWS::SNS::Topic": "TopicName",
        }
        value = props.get(keys.get(resource.get("Type", ""), ""))
        return str(self.resolve(value)) if value is not None else logical

    def ref(self, logical: str) -> str:
        if logical in PSEUDO:
            return PSEUDO[logical]
        kind = self.resources[logical].get("Type", "")
        name = self.name(logical)
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}"
        if kind == "AWS::SNS::Topic":
            return f"arn:{PARTITION}:sns:{REGION}:{ACCOUNT}:{name}"
        return name

    def get_att(self, logical: str, attribute: str) -> str:
        kind = self.resources[logical].get("Type", "")
        name = self.name(logical)
        arns = {
            "AWS::SQS::Queue": f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:{name}",
            "AWS::DynamoDB::Table": f"arn:{PARTITION}:dynamodb:{REGION}:{ACCOUNT}:table/{name}",
            "AWS::Lambda::Function": f"arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:function:{name}",
            "AWS::IAM::Role": f"arn:{PARTITION}:iam::{ACCOUNT}:role/{name}",
            "AWS::Logs::LogGroup": f"arn:{PARTITION}:logs:{REGION}:{ACCOUNT}:log-group:{name}:*",
            "AWS::Scheduler::ScheduleGroup": f"arn:{PARTITION}:scheduler:{REGION}:{ACCOUNT}:schedule-group/{name}",
            "AWS::Events::EventBus": f"arn:{PARTITION}:events:{REGION}:{ACCOUNT}:event-bus/{name}",
        }
        if kind == "AWS::DynamoDB::Table" and attribute == "StreamArn":
            return f"{arns[kind]}/stream/STREAM"
        if attribute in ("Arn", "QueueArn") and kind in arns:
            return arns[kind]
        return f"{logical}.{attribute}"

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::GetAtt":
                logical, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
                return self.get_att(logical, attribute)
            if key == "Fn::Join":
                separator, parts = arg
                return separator.join(str(self.resolve(p)) for p in parts)
            if key == "Fn::Sub":
                text, variables = (arg, {}) if isinstance(arg, str) else arg
                return re.sub(r"\$\{([^}]+)\}", lambda m: self._sub(m.group(1), variables), text)
            if key == "Fn::Select":
                index, items = arg
                return self.resolve(items)[int(index)]
            if key == "Fn::Split":
                separator, text = arg
                return str(self.resolve(text)).split(separator)
        return {k: self.resolve(v) for k, v in value.items()}

    def _sub(self, name: str, variables: dict[str, Any]) -> str:
        if name in variables:
            return str(self.resolve(variables[name]))
        if "." in name and name.split(".", 1)[0] in self.resources:
            return self.get_att(*name.split(".", 1))
        return self.ref(name)


# -- statements and matching -----------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _pattern(glob: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob), re.S)


def matches(glob: str, value: str, *, case: bool = True) -> bool:
    """IAM's wildcard match: `*` any run of characters (`/` and `:` included), `?` one character."""
    if case:
        return _pattern(glob).fullmatch(value) is not None
    return _pattern(glob.lower()).fullmatch(value.lower()) is not None


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@dataclass(frozen=True)
class Statement:
    effect: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    conditions: tuple[tuple[str, str, tuple[str, ...]], ...]  # operator, key, values
    origin: str  # the policy's logical id and the statement's position

    @classmethod
    def of(cls, raw: dict[str, Any], origin: str) -> Statement:
        conditions = tuple(
            (operator, key, tuple(str(v) for v in _as_list(values)))
            for operator, block in (raw.get("Condition") or {}).items()
            for key, values in block.items()
        )
        return cls(
            effect=raw.get("Effect", "Allow"),
            actions=tuple(str(a) for a in _as_list(raw.get("Action", []))),
            resources=tuple(str(r) for r in _as_list(raw.get("Resource", "*"))),
            conditions=conditions,
            origin=origin,
        )

    def grants(self, action: str, resource: str) -> bool:
        return any(matches(a, action, case=False) for a in self.actions) and any(
            matches(r, resource) for r in self.resources
        )

    def holds(self, context: dict[str, str]) -> bool:
        """Whether the conditions hold in the request's context (an unknown operator or key never holds)."""
        for operator, key, values in self.conditions:
            actual = context.get(key)
            if actual is None:
                return False
            if operator in ("StringEquals", "ArnEquals", "Bool"):
                ok = actual in values
            elif operator in ("StringLike", "ArnLike"):
                ok = any(matches(v, actual) for v in values)
            elif operator == "StringNotEquals":
                ok = actual not in values
            else:
                return False
            if not ok:
                return False
        return True

    def describe(self) -> str:
        conditions = f" when {list(self.conditions)}" if self.conditions else ""
        return f"{self.effect} {list(self.actions)} on {list(self.resources)}{conditions} ({self.origin})"


@dataclass(frozen=True)
class Need:
    """One action on one resource that a call needs, and why."""

    action: str
    resource: str
    why: str
    context: tuple[tuple[str, str], ...] = (("aws:SecureTransport", "true"),)


@dataclass
class Principal:
    """A role, named as the check reports it: a function's name ("api", "worker-default") or the role's."""

    name: str
    role: str  # logical id
    statements: list[Statement] = field(default_factory=list)
    needs: list[Need] = field(default_factory=list)
    pattern: str = ""  # the name as docs/aws_calls.json and the allow-list spell it ("worker-{class}")
    queue_class: str | None = None

    def allowed(self, need: Need) -> bool:
        context = dict(need.context)
        applies = [s for s in self.statements if s.grants(need.action, need.resource) and s.holds(context)]
        return any(s.effect == "Allow" for s in applies) and not any(s.effect == "Deny" for s in applies)


@dataclass
class Report:
    missing: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unused


# -- the model of one stack ------------------------------------------------------------------------------------


class Model:
    def __init__(self, template: dict[str, Any]) -> None:
        self.stack = Stack(template)
        functions = self.stack.of_type("AWS::Lambda::Function")
        self.env: dict[str, dict[str, Any]] = {
            logical: self.stack.resolve((props.get("Environment") or {}).get("Variables") or {})
            for logical, props in functions.items()
        }
        prefixes = {
            str(env.get("OFFPATH_STACK_PREFIX")) for env in self.env.values() if env.get("OFFPATH_STACK_PREFIX")
        }
        if len(prefixes) != 1:
            raise ValueError(f"the functions name {len(prefixes)} stack prefixes (OFFPATH_STACK_PREFIX): {prefixes}")
        self.prefix = prefixes.pop()
        self.function_names = {logical: self.stack.name(logical) for logical in functions}
        self.queues = {self.stack.name(k): k for k in self.stack.of_type("AWS::SQS::Queue")}
        worker = naming.worker_function_name(self.prefix, "")
        self.classes = sorted(n[len(worker) :] for n in self.function_names.values() if n.startswith(worker))
        self.principals = self._principals()

    # Names ----------------------------------------------------------------------------------------------------

    def short_name(self, function_name: str) -> str:
        return function_name[len(self.prefix) + 1 :] if function_name.startswith(self.prefix + "-") else function_name

    def function_logical(self, short: str) -> str | None:
        for logical, name in self.function_names.items():
            if self.short_name(name) == short:
                return logical
        return None

    def queue_arn(self, name: str) -> str | None:
        logical = self.queues.get(name)
        return self.stack.get_att(logical, "Arn") if logical else None

    def arn_of(self, role: str, queue_class: str | None, env: dict[str, Any]) -> str | None:
        """The symbolic ARN of a logical role (iam_calls) in this stack; None if the stack has no such resource."""
        kind, _, name = role.partition(":")
        if kind == "table":
            tables = list(self.stack.of_type("AWS::DynamoDB::Table"))
            if len(tables) != 1:
                return None
            arn = self.stack.get_att(tables[0], "Arn")
            return arn + name[len("jobs") :] if name.startswith("jobs/index/") else arn
        if kind == "queue":
            base, _, _ = name.partition("/")
            queue_name = {
                "jobs": naming.queue_name(self.prefix, queue_class or ""),
                "jobs-dlq": naming.dlq_name(self.prefix, queue_class or ""),
                "deliveries": naming.delivery_queue_name(self.prefix),
                "deliveries-dlq": naming.delivery_dlq_name(self.prefix),
                "notifier-failures": naming.notifier_failures_queue_name(self.prefix),
            }.get(base, f"{self.prefix}-{base}")
            return self.queue_arn(queue_name)
        if kind == "schedule":
            group = env.get("OFFPATH_SCHEDULE_GROUP")
            return f"arn:{PARTITION}:scheduler:{REGION}:{ACCOUNT}:schedule/{group}/NAME" if group else None
        if kind == "role" and name == "scheduler":
            arn = env.get("OFFPATH_SCHEDULER_ROLE_ARN")
            return str(arn) if arn else None
        if kind == "function":
            logical = self.function_logical(name.replace(CLASS, queue_class or ""))
            return self.stack.get_att(logical, "Arn") if logical else None
        if kind == "alarm":
            return f"arn:{PARTITION}:cloudwatch:{REGION}:{ACCOUNT}:alarm:{self.prefix}-NAME"
        if kind == "mapping":  # the event source mapping on the queue class's queue
            queue = self.queue_arn(naming.queue_name(self.prefix, queue_class or ""))
            for logical, props in self.stack.of_type("AWS::Lambda::EventSourceMapping").items():
                if queue is not None and self.stack.resolve(props.get("EventSourceArn")) == queue:
                    return f"arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:event-source-mapping:{logical}"
            return None
        if kind == "key" and name == "webhook-secrets":
            key = env.get("OFFPATH_WEBHOOK_SECRETS_KEY")
            return str(key) if key else None
        if kind == "bus":
            bus = env.get("OFFPATH_EVENT_BUS_NAME")
            return f"arn:{PARTITION}:events:{REGION}:{ACCOUNT}:event-bus/{bus}" if bus else None
        return None

    # Roles and their statements ---------------------------------------------------------------------------------

    def _role_of(self, function_logical: str) -> str | None:
        role = self.stack.resources[function_logical].get("Properties", {}).get("Role")
        if isinstance(role, dict) and "Fn::GetAtt" in role:
            return str(role["Fn::GetAtt"][0])
        return None

    def statements(self, role: str) -> list[Statement]:
        found: list[Statement] = []
        props = self.stack.resources[role].get("Properties", {})
        for policy in props.get("Policies") or []:
            for i, raw in enumerate(_as_list(self.stack.resolve(policy["PolicyDocument"]).get("Statement", []))):
                found.append(Statement.of(raw, f"{role} inline {policy.get('PolicyName')} #{i + 1}"))
        for managed in props.get("ManagedPolicyArns") or []:
            found.append(Statement("Allow", ("*",), ("*",), (), f"{role} managed {self.stack.resolve(managed)}"))
        for logical, policy in self.stack.of_type("AWS::IAM::Policy").items():
            if {"Ref": role} not in policy.get("Roles", []):
                continue
            for i, raw in enumerate(_as_list(self.stack.resolve(policy["PolicyDocument"]).get("Statement", []))):
                found.append(Statement.of(raw, f"{logical} #{i + 1}"))
        return found

    def _principals(self) -> dict[str, Principal]:
        principals: dict[str, Principal] = {}
        for logical, name in self.function_names.items():
            role = self._role_of(logical)
            if role is None:
                continue
            short = self.short_name(name)
            queue_class = short[len("worker-") :] if short.startswith("worker-") else None
            pattern = f"worker-{CLASS}" if queue_class is not None else short
            principals[role] = Principal(short, role, self.statements(role), [], pattern, queue_class)
        for role in self.stack.of_type("AWS::IAM::Role"):
            if role in principals:
                continue
            name = "role:" + re.sub(r"[0-9A-F]{8}$", "", role)
            principals[role] = Principal(name, role, self.statements(role), [], name)
        return principals

    def principal_of_function(self, logical: str) -> Principal | None:
        role = self._role_of(logical)
        return self.principals.get(role) if role else None

    def principal_of_role_arn(self, arn: str) -> Principal | None:
        for role, principal in self.principals.items():
            if self.stack.get_att(role, "Arn") == arn:
                return principal
        return None


# -- what each call needs --------------------------------------------------------------------------------------


def actions_of(service: str, operation: str, resources: Iterable[str]) -> list[str]:
    """The IAM actions one call needs on its resources (the exceptions: ACTION_OF, TRANSACT_ACTIONS)."""
    if (service, operation) == ("sqs", "StartMessageMoveTask"):
        return list(MOVE_TASK_SOURCE)
    if (service, operation) == ("dynamodb", "TransactWriteItems"):
        return sorted({TRANSACT_ACTIONS[r.split(":", 1)[1]] for r in resources if r.startswith("transact:")})
    return [ACTION_OF.get((service, operation), f"{service}:{operation}")]


def needs_of_call(model: Model, call: Call, principal: Principal) -> tuple[list[Need], list[tuple[Principal, Need]]]:
    """The needs of a recorded call for its function's role, and those it hands to other roles (the Scheduler's
    role, which invokes the schedule's target and sends to its DLQ)."""
    _, service, operation, resources = call
    logical = model.function_logical(principal.name)
    env = model.env.get(logical or "", {})
    why = iam_calls.describe(call)
    own: list[Need] = []
    handed: list[tuple[Principal, Need]] = []
    # A schedule's role, target and DLQ are not the call's own resources: the role is passed, the others are
    # for the schedule's role to reach.
    handed_on = ("function:", "queue:schedule-dlq") if service == "scheduler" else ()
    scoped = [r for r in resources if not r.startswith(("transact:", "role:", *handed_on))]
    actions = actions_of(service, operation, resources)
    for action in actions:
        if action in UNSCOPED or not scoped:
            own.append(Need(action, "*", why))
    for role in scoped:
        # A message move task's destination (`to:`) receives the messages: SendMessage, with the caller's role.
        wanted = ["sqs:SendMessage"] if role.startswith("to:") else [a for a in actions if a not in UNSCOPED]
        role = role.removeprefix("to:")
        # A worker's `{class}` is its own queue class; any other function's, every class of the stack.
        classes = [principal.queue_class] if principal.queue_class or CLASS not in role else model.classes
        for queue_class in classes:
            arn = model.arn_of(role, queue_class, env)
            if arn is None:
                raise LookupError(role)
            own += [Need(action, arn, why) for action in wanted]
    if "role:scheduler" in resources:
        role_arn = model.arn_of("role:scheduler", None, env)
        if role_arn is None:
            raise LookupError("role:scheduler")
        context = (("aws:SecureTransport", "true"), ("iam:PassedToService", "scheduler.amazonaws.com"))
        own.append(Need("iam:PassRole", role_arn, why, context))
        scheduler_role = model.principal_of_role_arn(role_arn)
        for role in resources:
            if role.startswith("function:") or role == "queue:schedule-dlq":
                arn = model.arn_of(role, principal.queue_class, env)
                action = "lambda:InvokeFunction" if role.startswith("function:") else "sqs:SendMessage"
                if arn is not None and scheduler_role is not None:
                    handed.append((scheduler_role, Need(action, arn, f"a schedule {principal.name} creates: {why}")))
    return own, handed


def implied_needs(model: Model) -> Iterator[tuple[Principal, Need]]:
    """What the template makes AWS call with a role: each function's log, its event source mapping's poller and
    on-failure destination, its asynchronous on-failure destination, the Scheduler's invocations."""
    stack = model.stack
    for logical in model.function_names:
        principal = model.principal_of_function(logical)
        if principal is None:
            continue
        props = stack.resources[logical].get("Properties", {})
        log_group = (props.get("LoggingConfig") or {}).get("LogGroup")
        if log_group is not None:
            group = str(stack.resolve(log_group))
            stream = f"arn:{PARTITION}:logs:{REGION}:{ACCOUNT}:log-group:{group}:log-stream:STREAM"
            for action in ("logs:CreateLogStream", "logs:PutLogEvents"):
                yield principal, Need(action, stream, "Lambda writes the function's log")
        if (props.get("TracingConfig") or {}).get("Mode") == "Active":
            for action in ("xray:PutTraceSegments", "xray:PutTelemetryRecords"):
                yield principal, Need(action, "*", "active tracing")
    for mapping in stack.of_type("AWS::Lambda::EventSourceMapping").values():
        function = _logical_of_ref(mapping.get("FunctionName"))
        principal = model.principal_of_function(function) if function else None
        if principal is None:
            continue
        source = str(stack.resolve(mapping.get("EventSourceArn")))
        if ":sqs:" in source:
            for action in SQS_POLLER:
                yield principal, Need(action, source, "the SQS event source mapping's poller")
        elif ":dynamodb:" in source:
            for action in STREAM_POLLER:
                yield principal, Need(action, source, "the stream event source mapping's poller")
            yield principal, Need("dynamodb:ListStreams", "*", "the stream event source mapping's poller")
        destination = ((mapping.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        if destination is not None:
            yield principal, Need("sqs:SendMessage", str(stack.resolve(destination)), "the mapping's on-failure record")
    for config in stack.of_type("AWS::Lambda::EventInvokeConfig").values():
        function = _logical_of_ref(config.get("FunctionName"))
        principal = model.principal_of_function(function) if function else None
        destinations = (config.get("DestinationConfig") or {}).values()
        for destination in destinations:
            arn = str(stack.resolve(destination.get("Destination")))
            if principal is not None and ":sqs:" in arn:
                yield principal, Need("sqs:SendMessage", arn, "the asynchronous invocation's destination")
    for logical, schedule in stack.of_type("AWS::Scheduler::Schedule").items():
        target = schedule.get("Target") or {}
        role = model.principal_of_role_arn(str(stack.resolve(target.get("RoleArn"))))
        if role is None:
            continue
        why = f"the Scheduler runs schedule {logical}"
        target_arn = str(stack.resolve(target.get("Arn")))
        action = "lambda:InvokeFunction" if ":lambda:" in target_arn else "sqs:SendMessage"
        yield role, Need(action, target_arn, why)
        dlq = (target.get("DeadLetterConfig") or {}).get("Arn")
        if dlq is not None:
            yield role, Need("sqs:SendMessage", str(stack.resolve(dlq)), why + " (its DLQ)")


def _logical_of_ref(value: Any) -> str | None:
    if isinstance(value, dict):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            return str(value["Fn::GetAtt"][0])
    return None


# -- resource policies -----------------------------------------------------------------------------------------


def queue_policy_denials(model: Model, needs: Iterable[tuple[Principal, Need]]) -> Iterator[str]:
    """A queue policy's Deny that would refuse a needed call."""
    stack = model.stack
    denies: list[tuple[str, Statement]] = []
    for logical, policy in stack.of_type("AWS::SQS::QueuePolicy").items():
        document = stack.resolve(policy.get("PolicyDocument", {}))
        for i, raw in enumerate(_as_list(document.get("Statement", []))):
            statement = Statement.of(raw, f"{logical} #{i + 1}")
            if statement.effect == "Deny":
                denies.append((logical, statement))
    for principal, need in needs:
        for _, statement in denies:
            if statement.grants(need.action, need.resource) and statement.holds(dict(need.context)):
                yield f"{principal.name}: {need.action} on {need.resource} is denied by {statement.describe()}"


def lambda_permissions(model: Model) -> tuple[list[str], list[str]]:
    """Every route's integration has a Lambda permission for API Gateway that covers the route (missing), and
    every Lambda permission serves some route (unused: a resource policy nothing needs)."""
    stack = model.stack
    permissions = {
        logical: (str(stack.resolve(p.get("FunctionName"))), str(stack.resolve(p.get("SourceArn", "*"))), p)
        for logical, p in stack.of_type("AWS::Lambda::Permission").items()
    }
    missing: list[str] = []
    used: set[str] = set()
    integrations = stack.of_type("AWS::ApiGatewayV2::Integration")
    for logical, route in stack.of_type("AWS::ApiGatewayV2::Route").items():
        target = str(stack.resolve(route.get("Target", "")))
        integration = target.removeprefix("integrations/")
        if integration not in integrations:
            continue
        function_arn = str(stack.resolve(integrations[integration].get("IntegrationUri")))
        # API Gateway invokes with the route's own path (its parameters as written) in the source ARN.
        method, _, path = str(route.get("RouteKey", "")).partition(" ")
        api = stack.ref(str(_logical_of_ref(route.get("ApiId"))))
        source = f"arn:{PARTITION}:execute-api:{REGION}:{ACCOUNT}:{api}/$default/{method}{path}"
        covering = [
            permission
            for permission, (function, source_arn, props) in permissions.items()
            if props.get("Principal") == "apigateway.amazonaws.com"
            and props.get("Action") == "lambda:InvokeFunction"
            and matches(function, function_arn)
            and matches(source_arn, source)
        ]
        used.update(covering)
        if not covering:
            missing.append(
                f"route {route.get('RouteKey')!r} ({logical}): no lambda:InvokeFunction permission for API Gateway"
            )
    unused = [
        f"permission {logical}: {props.get('Principal')} may call {props.get('Action')} on {function}, but no trigger "
        "of the template needs it"
        for logical, (function, _, props) in sorted(permissions.items())
        if logical not in used
    ]
    return missing, unused


def trust(model: Model) -> Iterator[str]:
    """A function's role trusts Lambda; a role a schedule uses trusts the Scheduler."""
    stack = model.stack
    scheduler_roles = {
        str(_logical_of_ref(s.get("Target", {}).get("RoleArn")))
        for s in stack.of_type("AWS::Scheduler::Schedule").values()
    }
    for env in model.env.values():
        if env.get("OFFPATH_SCHEDULER_ROLE_ARN"):
            principal = model.principal_of_role_arn(str(env["OFFPATH_SCHEDULER_ROLE_ARN"]))
            if principal is not None:
                scheduler_roles.add(principal.role)
    for role, principal in model.principals.items():
        document = stack.resolve(stack.resources[role].get("Properties", {}).get("AssumeRolePolicyDocument", {}))
        services = {
            str(s)
            for statement in _as_list(document.get("Statement", []))
            if statement.get("Effect") == "Allow"
            for s in _as_list((statement.get("Principal") or {}).get("Service", []))
        }
        expected = "scheduler.amazonaws.com" if role in scheduler_roles else None
        if principal.pattern and not principal.name.startswith("role:"):
            expected = "lambda.amazonaws.com"
        if expected and expected not in services:
            yield f"{principal.name}: its role ({role}) does not trust {expected}"


# -- the check -------------------------------------------------------------------------------------------------


def load_allowlist(path: Path = ALLOWLIST) -> list[dict[str, str]]:
    return list(json.loads(path.read_text())["grants"]) if path.exists() else []


def check(template: dict[str, Any], calls: Iterable[Call], allowlist: list[dict[str, str]]) -> Report:
    model = Model(template)
    report = Report()
    all_needs: list[tuple[Principal, Need]] = list(implied_needs(model))
    by_pattern: dict[str, list[Principal]] = {}
    for principal in model.principals.values():
        by_pattern.setdefault(principal.pattern, []).append(principal)
    for call in sorted(set(calls)):
        principals = by_pattern.get(call[0], [])
        if not principals:
            report.notes.append(f"not in this stack: {iam_calls.describe(call)}")
            continue
        for principal in principals:
            try:
                own, handed = needs_of_call(model, call, principal)
            except LookupError as error:
                report.notes.append(f"not in this stack ({error}): {iam_calls.describe(call)}")
                continue
            report.counts[principal.name] = report.counts.get(principal.name, 0) + 1
            all_needs += [(principal, need) for need in own] + handed
    for principal, need in all_needs:
        if not principal.allowed(need):
            report.missing.append(
                f"{principal.name}: {need.action} on {need.resource} is not granted by its role "
                f"({principal.role}); needed by {need.why}"
            )
    report.missing += queue_policy_denials(model, all_needs)
    permissions_missing, permissions_unused = lambda_permissions(model)
    report.missing += permissions_missing
    report.missing += trust(model)
    report.unused += unused_grants(model, all_needs, allowlist)
    report.unused += permissions_unused
    report.missing = sorted(set(report.missing))
    return report


def unused_grants(model: Model, needs: list[tuple[Principal, Need]], allowlist: list[dict[str, str]]) -> Iterator[str]:
    """Each (action, resource) an Allow statement grants must serve a need or be in the allow-list; and each
    entry of the allow-list must explain a grant no call uses (a stale reason is a grant waiting to come back)."""
    explaining: set[int] = set()
    for principal in model.principals.values():
        own = [need for p, need in needs if p is principal]
        logical = model.function_logical(principal.name)
        env = model.env.get(logical or "", {})
        for statement in principal.statements:
            if statement.effect != "Allow":
                continue
            for action in statement.actions:
                for resource in statement.resources:
                    if any(matches(action, n.action, case=False) and matches(resource, n.resource) for n in own):
                        continue
                    entry = _allowed(model, principal, action, resource, env, allowlist)
                    if entry is not None:
                        explaining.add(entry)
                        continue
                    yield (
                        f"{principal.name}: {action} on {resource} ({statement.origin}) is granted but no recorded "
                        f"or implied call uses it; remove it, or give its reason in {ALLOWLIST.relative_to(ROOT)}"
                    )
    for i, entry in enumerate(allowlist):
        # An entry for a grant this stack does not make (an option left off) is not stale.
        granted = any(
            entry.get("principal") in (p.pattern, p.name, "*") and matches(action, entry["action"], case=False)
            for p in model.principals.values()
            for statement in p.statements
            for action in statement.actions
        )
        if granted and i not in explaining:
            yield f"the allow-list's {entry.get('principal')} {entry.get('action')} explains no unused grant: remove it"


def _allowed(
    model: Model, principal: Principal, action: str, resource: str, env: dict[str, Any], allowlist: list[dict[str, str]]
) -> int | None:
    """The index of the allow-list's entry that explains the grant, if one does."""
    for i, entry in enumerate(allowlist):
        if entry.get("principal") not in (principal.pattern, principal.name, "*"):
            continue
        if not matches(entry["action"], action, case=False):
            continue
        role = entry.get("resource")
        if role is None:
            return i
        classes = [principal.queue_class] if principal.queue_class or CLASS not in role else model.classes
        arns = [model.arn_of(role, queue_class, env) for queue_class in classes]
        # A role that stands for any name (`alarm:{prefix}-*`, `schedule:schedules/*`) explains the same wildcard.
        if any(arn is not None and resource in (arn, arn.replace("NAME", "*")) for arn in arns):
            return i
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="iam-check", description=__doc__.splitlines()[0])
    parser.add_argument("--template", type=Path, default=TEMPLATE)
    parser.add_argument("--calls", type=Path, default=iam_calls.CALLS_FILE)
    parser.add_argument("--allowlist", type=Path, default=ALLOWLIST)
    args = parser.parse_args(argv)
    report = check(json.loads(args.template.read_text()), iam_calls.load(args.calls), load_allowlist(args.allowlist))
    for note in report.notes:
        print(f"iam-check: {note}")
    for line in report.missing:
        print(f"iam-check: MISSING GRANT {line}", file=sys.stderr)
    for line in report.unused:
        print(f"iam-check: UNUSED GRANT {line}", file=sys.stderr)
    counted = ", ".join(f"{name} {count}" for name, count in sorted(report.counts.items()))
    print(f"iam-check: {args.template}: calls checked per function: {counted}")
    if not report.ok:
        print(f"iam-check: {len(report.missing)} missing, {len(report.unused)} unused", file=sys.stderr)
        return 1
    print("iam-check: every call is granted and every grant is used or explained")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
