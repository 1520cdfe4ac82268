"""The local runtime's fault injector (offpath_local/faults.py), on botocore clients whose requests are answered
in this process: the client's HTTP sending is replaced by a stand-in for the service (it answers 200 `{}` and
records what reached it), so nothing leaves the process."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.retries.standard import ExponentialBackoff

from offpath.adapters.dynamodb_store import DynamoDbJobStore, idempotency_partition, job_key, key_of
from offpath.domain.errors import StoreUnavailableError
from offpath.domain.registry import Registry
from offpath.handlers.worker import WorkerServices
from offpath.jobs import load_job_types
from offpath.logic.process import WorkerPolicy
from offpath_local.faults import KINDS, FaultConfig, FaultInjector, TestTiming, WorkerCrash

JOB_ID = "0" * 31 + "7"
CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 3}, region_name="us-east-1")


@dataclass
class Service:
    """What reached "the service": one entry per attempt, its operation and body."""

    attempts: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def send(self, request: Any) -> AWSResponse:
        target = request.headers.get("X-Amz-Target", b"")
        operation = (target.decode() if isinstance(target, bytes) else str(target)).rsplit(".", 1)[-1]
        self.attempts.append((operation, json.loads(request.body or b"{}")))
        return AWSResponse(request.url, 200, {"Content-Type": "application/x-amz-json-1.0"}, _Raw(b"{}"))


class _Raw:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.data


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0)


def client(service_name: str, injector: FaultInjector, service: Service) -> Any:
    session = boto3.session.Session(aws_access_key_id="k", aws_secret_access_key="s", region_name="us-east-1")
    made = session.client(service_name, endpoint_url="http://127.0.0.1:9", config=CONFIG)
    injector.install(made.meta.events)
    injector.arm()
    made._endpoint._send = service.send  # what a request reaches when no hook answered it
    return made


def only(kind: str, rate: float = 1.0, seed: int = 1) -> FaultConfig:
    config = FaultConfig.from_options(seed, rate, [kind])
    assert config is not None
    return config


def put_job(dynamodb: Any, n: int = 7) -> Any:
    return dynamodb.put_item(TableName="jobs", Item={"pk": {"S": "JOB#tenant-a#3"}, "sk": {"S": f"{n:032x}"}})


def test_a_throttle_is_answered_on_the_first_attempt_and_botocore_retries_through_it() -> None:
    injector, service = FaultInjector(only("throttle")), Service()
    dynamodb = client("dynamodb", injector, service)

    response = put_job(dynamodb)

    assert response["ResponseMetadata"]["RetryAttempts"] == 1
    assert [operation for operation, _ in service.attempts] == ["PutItem"]  # only the retry reached it
    assert injector.counts() == {"throttle": 1}


def test_an_outage_fails_every_attempt_so_the_adapter_raises_its_own_error() -> None:
    injector, service = FaultInjector(only("outage")), Service()
    store = DynamoDbJobStore("jobs", client=client("dynamodb", injector, service))

    with pytest.raises(StoreUnavailableError):
        store.get(JOB_ID, tenant="tenant-a")

    assert service.attempts == []
    assert injector.counts() == {"outage": 1}


def test_a_lost_response_makes_botocore_send_a_landed_write_again() -> None:
    injector, service = FaultInjector(only("lost-response")), Service()
    dynamodb = client("dynamodb", injector, service)

    response = put_job(dynamodb)

    assert response["ResponseMetadata"]["RetryAttempts"] == 1
    assert [operation for operation, _ in service.attempts] == ["PutItem", "PutItem"]
    assert injector.counts() == {"lost-response": 1}


def test_a_send_failure_fails_every_attempt_and_a_duplicate_send_lands_twice() -> None:
    failing, duplicating, service = (
        FaultInjector(only("send-failure")),
        FaultInjector(only("duplicate-send")),
        Service(),
    )
    body = json.dumps({"job_id": JOB_ID, "type": "demo.echo", "tenant": "t"})

    with pytest.raises(botocore.exceptions.ClientError) as refused:
        client("sqs", failing, service).send_message(QueueUrl="http://127.0.0.1:9/1/q", MessageBody=body)
    client("sqs", duplicating, service).send_message(QueueUrl="http://127.0.0.1:9/1/q", MessageBody=body)

    assert refused.value.response["ResponseMetadata"]["RetryAttempts"] == 2
    assert [operation for operation, _ in service.attempts] == ["SendMessage", "SendMessage"]


def test_a_worker_crash_replaces_the_success_write_only() -> None:
    injector, service = FaultInjector(only("worker-crash")), Service()
    dynamodb = client("dynamodb", injector, service)
    key = {"pk": {"S": "JOB#tenant-a#3"}, "sk": {"S": JOB_ID}}

    dynamodb.update_item(TableName="jobs", Key=key, ExpressionAttributeValues={":status": {"S": "RETRYING"}})
    with pytest.raises(WorkerCrash):
        dynamodb.update_item(TableName="jobs", Key=key, ExpressionAttributeValues={":status": {"S": "SUCCEEDED"}})

    assert len(service.attempts) == 1
    assert injector.counts() == {"worker-crash": 1}


def decisions(seed: int, calls: int = 200) -> list[int]:
    """Which of `calls` PutItems of different jobs got a fault (all kinds at 0.1)."""
    config = FaultConfig.from_options(seed, 0.1)
    assert config is not None
    injector, service = FaultInjector(config), Service()
    dynamodb = client("dynamodb", injector, service)
    hit = []
    for n in range(calls):
        before = sum(injector.counts().values())
        with contextlib.suppress(botocore.exceptions.ClientError):
            put_job(dynamodb, n)
        if sum(injector.counts().values()) > before:
            hit.append(n)
    return hit


def test_the_same_seed_injects_the_same_faults_into_the_same_calls() -> None:
    assert decisions(7) == decisions(7)
    assert decisions(7) != decisions(8)
    assert 0 < len(decisions(7)) < 200


def test_a_fault_forced_onto_a_job_hits_its_first_eligible_call_only() -> None:
    config = FaultConfig.from_options(None, None, targets=[f"lost-response:{7:032x}"])
    assert config is not None
    injector, service = FaultInjector(config), Service()
    dynamodb = client("dynamodb", injector, service)

    put_job(dynamodb, 6)
    put_job(dynamodb, 7)
    put_job(dynamodb, 7)

    assert len(service.attempts) == 4  # 6, 7 twice (the lost response), 7 again
    assert injector.counts() == {"lost-response": 1}


def put_key_record(dynamodb: Any, key: str, job_id: str) -> None:
    dynamodb.put_item(
        TableName="jobs", Item={**key_of(idempotency_partition("tenant-a", key)), "job_id": {"S": job_id}}
    )


def test_a_fault_forced_onto_an_idempotency_key_hits_the_job_its_record_names() -> None:
    config = FaultConfig.from_options(None, None, targets=["worker-crash:key=order-42"])
    assert config is not None
    injector, service = FaultInjector(config), Service()
    dynamodb = client("dynamodb", injector, service)
    put_key_record(dynamodb, "order-41", "1" * 32)
    put_key_record(dynamodb, "order-42", JOB_ID)
    succeed = {":status": {"S": "SUCCEEDED"}}

    dynamodb.update_item(TableName="jobs", Key=job_key("tenant-a", "1" * 32), ExpressionAttributeValues=succeed)
    with pytest.raises(WorkerCrash):
        dynamodb.update_item(TableName="jobs", Key=job_key("tenant-a", JOB_ID), ExpressionAttributeValues=succeed)

    assert injector.counts() == {"worker-crash": 1}


def test_a_keyed_jobs_faults_depend_on_its_key_not_on_its_random_id(tmp_path: Path) -> None:
    """The same seed and keys inject the same faults, whatever ids the jobs got."""

    def injected(job_ids: list[str]) -> list[tuple[str, int]]:
        record = tmp_path / "faults.jsonl"
        injector = FaultInjector(only("throttle", rate=0.5), record_path=record)
        dynamodb = client("dynamodb", injector, Service())
        for n, job_id in enumerate(job_ids):
            put_key_record(dynamodb, f"k-{n}", job_id)
            dynamodb.update_item(TableName="jobs", Key=job_key("tenant-a", job_id), UpdateExpression="SET a = :a")
        injector.close()
        lines = [json.loads(line) for line in record.read_text().splitlines()]
        return [(line["operation"], job_ids.index(line["job_id"])) for line in lines]

    first = injected([f"{n:032x}" for n in range(20)])

    assert first == injected([f"{n + 100:032x}" for n in range(20)])
    assert 5 < len(first) < 35


def test_nothing_is_injected_before_the_runtime_arms_the_injector() -> None:
    injector, service = FaultInjector(only("outage")), Service()
    dynamodb = client("dynamodb", injector, service)
    injector.armed = False

    put_job(dynamodb)

    assert injector.counts() == {}


@pytest.mark.parametrize(
    ("seed", "rate", "kinds", "targets", "message"),
    [
        (None, 0.1, [], [], "need --faults"),
        (1, 1.5, [], [], "between 0 and 1"),
        (1, None, ["gremlins"], [], "unknown kind"),
        (None, None, [], ["worker-crash"], "KIND:JOB_ID"),
    ],
)
def test_bad_fault_options_are_refused(
    seed: int | None, rate: float | None, kinds: list[str], targets: list[str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        FaultConfig.from_options(seed, rate, kinds, targets)


def test_no_fault_options_mean_no_faults_and_a_seed_alone_means_every_kind() -> None:
    every = FaultConfig.from_options(3, None)

    assert FaultConfig.from_options(None, None) is None
    assert every is not None and set(every.rates) == set(KINDS) and len(set(every.rates.values())) == 1


# -- test timings -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def registry() -> Registry:
    return load_job_types(demo=True)


def test_test_timings_at_one_change_nothing(registry: Registry) -> None:
    timing = TestTiming()

    assert not timing.active
    assert timing.function_timeout_s(registry, "default") == registry.worker_timeout_s("default")
    assert timing.visibility_timeout_s(registry, "default") == registry.visibility_timeout_s("default")


def test_test_timings_shorten_leases_and_visibility_but_keep_a_batch_invisible_while_it_runs(
    registry: Registry,
) -> None:
    timing = TestTiming(timeout_scale=0.1, visibility_scale=0.025)
    services = WorkerServices(ports=_ports(registry), policy=WorkerPolicy(queue="default"))

    scaled = timing.worker_services(services)

    welcome = scaled.ports.registry.job_types["send_welcome_email"]
    assert (welcome.timeout_s, scaled.policy.lease_margin) == (3, timedelta(seconds=3))
    assert registry.job_types["send_welcome_email"].timeout_s == 30  # the shared registry is left alone
    function = timing.function_timeout_s(registry, "default")
    slowest = max(timing.job_timeout_s(jt.timeout_s) for jt in registry.job_types_on("default"))
    shortened = registry.visibility_timeout_s("default") / 10
    assert slowest < function <= timing.visibility_timeout_s(registry, "default") < shortened


def _ports(registry: Registry) -> Any:
    from offpath.domain.clock import SystemClock
    from offpath.logic.process import WorkerPorts
    from offpath_tools.fakes import InMemoryJobQueue, InMemoryJobStore, RecordingMetrics

    return WorkerPorts(registry, InMemoryJobStore(), InMemoryJobQueue(), SystemClock(), RecordingMetrics())
