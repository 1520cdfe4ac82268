"""Notices end to end: webhook endpoints over HTTP, jobs run by the embedded runtime, the table's stream played
to the notifier, deliveries made by the delivery function to a real receiver on 127.0.0.1 that verifies every
signature with `standardwebhooks`.

The runtime of this module shortens the delivery schedule (OFFPATH_WEBHOOK_RETRY_SCALE=0.01: 5 s, 5 min, 30 min
become 1 s, 3 s, 18 s; a delay is at least one second, SQS's unit). Each test has a tenant of its own, so an
endpoint is registered before that tenant's first job (the notifier reads a tenant's endpoints once per few
seconds)."""

from __future__ import annotations

import json
import re
import stat
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from offpath_tools.launcher import OffpathLocal, free_loopback_port
from offpath_tools.webhook_receiver import Receiver, listening, trickle
from tests.e2e.conftest import ROOT, Local, wait_for
from tests.e2e.target import Target

TENANTS = [f"notice-{i}" for i in range(15)]


def token(tenant: str) -> str:
    return f"e2e-token-{tenant}"


# A port named for receivers where nothing listens (its deliveries fail to connect).
CLOSED_PORT = free_loopback_port()


# A delivery's whole time here (OFFPATH_WEBHOOK_DEADLINE_S): a receiver trickling its answer is cut off at it.
DEADLINE_S = 3


@pytest.fixture(scope="module")
def trickler() -> Iterator[int]:
    """A receiver on 127.0.0.1 that answers one byte every 0.2 s, for ever; yields its port."""
    with listening(trickle) as port:
        yield port


@pytest.fixture(scope="module")
def notices(tmp_path_factory: pytest.TempPathFactory, receiver: Receiver, trickler: int) -> Iterator[Local]:
    runtime = OffpathLocal.start(
        tmp_path_factory.mktemp("offpath-notices"),
        tokens={tenant: token(tenant) for tenant in TENANTS},
        admins=[TENANTS[0]],
        args=["--alarm-interval", "1"],
        env={"OFFPATH_WEBHOOK_RETRY_SCALE": "0.01", "OFFPATH_WEBHOOK_DEADLINE_S": str(DEADLINE_S)},
        cwd=ROOT,
        webhook_ports=[receiver.port, CLOSED_PORT, trickler],
    )
    try:
        yield Local(url=runtime.url, data_dir=runtime.data_dir, log=runtime.console)
    finally:
        runtime.stop()


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    try:
        yield receiver
    finally:
        receiver.stop()


def register(local: Local, tenant: str, name: str, url: str, events: list[str], **extra: Any) -> dict[str, Any]:
    answer = local.call("PUT", f"/webhooks/{name}", token=token(tenant), body={"url": url, "events": events, **extra})
    assert answer.status == 201, answer.body
    return dict(answer.body)


def test_a_registered_endpoint_receives_one_verifiable_job_succeeded_delivery(
    notices: Local, receiver: Receiver
) -> None:
    tenant = TENANTS[1]
    endpoint = register(notices, tenant, "orders", receiver.url("/slice"), ["job.succeeded"])
    assert endpoint["secret"].startswith("whsec_")

    submitted = notices.submit("demo.echo", {"hello": "world"}, token=token(tenant))
    assert submitted.status == 202, submitted.body
    job_id = submitted.body["job_id"]

    received = wait_for(lambda: receiver.at("/slice") or None, timeout_s=30)
    delivery = received[0]
    assert delivery.verified_by(endpoint["secret"])
    assert delivery.event["type"] == "job.succeeded"
    assert delivery.event["data"]["job_id"] == job_id
    assert delivery.event["data"]["status"] == "SUCCEEDED"
    assert delivery.event["data"]["payload"] is None  # include_payload is off
    assert delivery.webhook_id.startswith("evt_")
    assert {r.event["type"] for r in receiver.at("/slice")} == {"job.succeeded"}


def test_the_event_bus_stand_in_records_every_state_change_without_the_payload(notices: Local) -> None:
    tenant = TENANTS[2]
    submitted = notices.submit("demo.echo", {"secret": "kept out"}, token=token(tenant))
    job_id = submitted.body["job_id"]
    path = Path(notices.data_dir) / "events.jsonl"

    def job_lines() -> list[dict[str, Any]] | None:
        if not path.exists():
            return None
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        mine = [line for line in lines if line["detail"]["job"]["job_id"] == job_id]
        return mine if any(line["detail"]["type"] == "job.succeeded" for line in mine) else None

    lines = wait_for(job_lines, timeout_s=30)
    assert [line["detail"]["type"] for line in lines] == ["job.queued", "job.started", "job.succeeded"]
    assert {line["source"] for line in lines} == {"offpath"}
    assert {line["detail-type"] for line in lines} == {"Job State Change"}
    assert all(line["detail"]["tenant"] == tenant and line["detail"]["job"]["payload"] is None for line in lines)


def final_deliveries(receiver: Receiver, path: str) -> dict[str, list[Any]]:
    """Per job id, the deliveries of its final event."""
    per_job: dict[str, list[Any]] = {}
    for received, event in receiver.events(path):
        if event["type"] in {"job.succeeded", "job.failed", "job.cancelled"}:
            per_job.setdefault(event["data"]["job_id"], []).append(received)
    return per_job


def test_each_final_state_of_200_jobs_is_delivered_signed_with_one_webhook_id_per_event(
    notices: Local, receiver: Receiver
) -> None:
    tenant = TENANTS[3]
    secret = register(
        notices, tenant, "finals", receiver.url("/finals"), ["job.succeeded", "job.failed", "job.cancelled"]
    )["secret"]
    job_ids: list[str] = []
    for start in range(0, 200, 100):
        items = [{"type": "demo.echo", "payload": {"n": n}} for n in range(start, start + 100)]
        answer = notices.call("POST", "/jobs/batch", token=token(tenant), body={"jobs": items})
        assert answer.status == 207, answer.body
        job_ids += [result["job"]["job_id"] for result in answer.body["results"]]
    assert len(set(job_ids)) == 200

    per_job = wait_for(lambda: _if_all(final_deliveries(receiver, "/finals"), job_ids), timeout_s=120)

    every = [received for deliveries in per_job.values() for received in deliveries]
    assert all(received.verified_by(secret) for received in every)
    by_id: dict[str, set[str]] = {}
    for received in every:
        by_id.setdefault(received.webhook_id, set()).add(received.body)
    # A duplicate (a stream record read twice) is the same event: the same id and the same body.
    assert all(len(bodies) == 1 for bodies in by_id.values())
    assert {json.loads(next(iter(b)))["data"]["job_id"] for b in by_id.values()} == set(job_ids)


def _if_all(per_job: dict[str, list[Any]], job_ids: list[str]) -> dict[str, list[Any]] | None:
    return per_job if set(job_ids) <= set(per_job) else None


def test_a_receiver_down_for_a_while_then_up_gets_every_event(notices: Local, receiver: Receiver) -> None:
    tenant = TENANTS[4]
    receiver.script("/flaky", *[(503, {})] * 3)
    secret = register(notices, tenant, "flaky", receiver.url("/flaky"), ["job.succeeded"])["secret"]

    job_ids = [notices.submit("demo.echo", {"n": n}, token=token(tenant)).body["job_id"] for n in range(3)]

    per_job = wait_for(lambda: _if_all(_delivered(receiver, "/flaky"), job_ids), timeout_s=60)
    assert all(r.verified_by(secret) for deliveries in per_job.values() for r in deliveries)
    # An attempt is recorded after its request is answered: the log may trail the receiver by a moment.
    log = wait_for(lambda: _if_answered(_delivery_log(notices, tenant, "flaky"), 200, 3))
    assert _statuses(log).count(503) == 3
    assert log["failing_since"] is None
    assert all(a["next_retry_at"] for a in log["deliveries"] if a["status_code"] == 503)


def _statuses(log: dict[str, Any]) -> list[int]:
    return [attempt["status_code"] for attempt in log["deliveries"]]


def _if_answered(log: dict[str, Any], status: int, at_least: int) -> dict[str, Any] | None:
    return log if _statuses(log).count(status) >= at_least else None


def _delivery_log(notices: Local, tenant: str, name: str) -> dict[str, Any]:
    body: dict[str, Any] = notices.call("GET", f"/webhooks/{name}/deliveries", token=token(tenant)).body
    return body


def _delivered(receiver: Receiver, path: str) -> dict[str, list[Any]]:
    """Per job id, the requests answered 200: all but the first three (the scripted 503s answer the first)."""
    per_job: dict[str, list[Any]] = {}
    for r in receiver.at(path)[3:]:
        per_job.setdefault(r.event["data"]["job_id"], []).append(r)
    return per_job


def test_410_gone_disables_the_endpoint_and_get_says_why(notices: Local, receiver: Receiver) -> None:
    tenant = TENANTS[5]
    receiver.script("/gone", then=410)
    register(notices, tenant, "gone", receiver.url("/gone"), ["job.succeeded"])

    notices.submit("demo.echo", {}, token=token(tenant))

    shown = wait_for(
        lambda: _if_disabled(notices.call("GET", "/webhooks/gone", token=token(tenant)).body), timeout_s=30
    )
    assert "410" in shown["disabled_reason"] and shown["disabled_at"]
    assert len(receiver.at("/gone")) == 1  # no retry after a 410
    again = notices.call(
        "PUT", "/webhooks/gone", token=token(tenant), body={"url": receiver.url("/gone"), "events": ["job.succeeded"]}
    )
    assert again.status == 200 and again.body["enabled"] is True and "secret" not in again.body


def _if_disabled(body: dict[str, Any]) -> dict[str, Any] | None:
    return body if body.get("enabled") is False else None


def test_429_with_retry_after_is_honoured(notices: Local, receiver: Receiver) -> None:
    tenant = TENANTS[6]
    receiver.script("/busy", (429, {"Retry-After": "3"}))
    register(notices, tenant, "busy", receiver.url("/busy"), ["job.succeeded"])

    notices.submit("demo.echo", {}, token=token(tenant))

    first, second = wait_for(lambda: receiver.at("/busy")[:2] if len(receiver.at("/busy")) >= 2 else None, 60)
    # The schedule's first retry here is about 1 s (scaled); the receiver asked for 3.
    assert second.at - first.at >= 3
    assert first.webhook_id == second.webhook_id


def test_after_a_rotation_deliveries_verify_with_the_old_and_the_new_secret(notices: Local, receiver: Receiver) -> None:
    tenant = TENANTS[7]
    old = register(notices, tenant, "rotating", receiver.url("/rotating"), ["job.succeeded"])["secret"]
    rotated = notices.call("POST", "/webhooks/rotating/rotate-secret", token=token(tenant))
    assert rotated.status == 200
    new = rotated.body["secret"]
    assert new != old and rotated.body["previous_secret_expires_at"]

    notices.submit("demo.echo", {}, token=token(tenant))

    delivery = wait_for(lambda: receiver.at("/rotating") or None, timeout_s=30)[0]
    assert delivery.verified_by(old) and delivery.verified_by(new)
    assert "secret" not in notices.call("GET", "/webhooks/rotating", token=token(tenant)).body


def test_a_test_event_is_delivered_and_listed_with_its_attempt(notices: Local, receiver: Receiver) -> None:
    tenant = TENANTS[8]
    secret = register(notices, tenant, "pinged", receiver.url("/pinged"), ["job.failed"])["secret"]

    sent = notices.call("POST", "/webhooks/pinged/test", token=token(tenant))
    assert sent.status == 202 and sent.body["type"] == "webhook.test"

    delivery = wait_for(lambda: receiver.at("/pinged") or None, timeout_s=30)[0]
    assert delivery.verified_by(secret) and delivery.event["type"] == "webhook.test"
    assert delivery.webhook_id == sent.body["event_id"]
    log = wait_for(
        lambda: notices.call("GET", "/webhooks/pinged/deliveries", token=token(tenant)).body["deliveries"] or None
    )
    assert log[0]["event_id"] == sent.body["event_id"] and log[0]["status_code"] == 200


def test_another_tenants_endpoints_are_not_found(notices: Local, receiver: Receiver) -> None:
    owner, other = TENANTS[9], TENANTS[8]
    register(notices, owner, "private", receiver.url("/private"), ["job.succeeded"])

    for method, path in (
        ("GET", "/webhooks/private"),
        ("DELETE", "/webhooks/private"),
        ("POST", "/webhooks/private/rotate-secret"),
        ("POST", "/webhooks/private/test"),
        ("GET", "/webhooks/private/deliveries"),
    ):
        answer = notices.call(method, path, token=token(other))
        assert answer.status == 404, (method, path, answer.body)
        assert answer.body["error"]["code"] == "not_found"
    assert "private" not in [w["name"] for w in notices.call("GET", "/webhooks", token=token(other)).body["webhooks"]]
    assert notices.call("DELETE", "/webhooks/private", token=token(owner)).status == 204
    assert notices.call("GET", "/webhooks/private", token=token(owner)).status == 404


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://10.0.0.1/hook", "private"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://[::1]:8080/hook", "loopback"),
        ("http://127.0.0.2/hook", "loopback"),
        ("http://[2002:7f00:1::]/hook", "loopback"),  # 6to4 of 127.0.0.1
        ("http://[::ffff:127.0.0.1]/hook", "loopback"),  # IPv4-mapped
        ("http://[64:ff9b::7f00:1]/hook", "loopback"),  # NAT64
        ("ftp://127.0.0.1/hook", "http"),
    ],
)
def test_a_refused_receiver_is_a_422_naming_the_url(target: Target, url: str, reason: str) -> None:
    name = f"e2e-refused-{uuid.uuid4().hex[:12]}"
    answer = target.call("PUT", f"/webhooks/{name}", body={"url": url, "events": ["job.succeeded"]})
    if answer.status < 300:  # not refused: the endpoint goes, and the test fails
        target.call("DELETE", f"/webhooks/{name}")

    assert answer.status == 422
    assert answer.body["error"]["field"] == "url" and reason in answer.body["error"]["message"]


def emulator_port(local: Local) -> int:
    """The emulator's port, as the runtime printed it at start."""
    match = re.search(r"emulator\s+http://127\.0\.0\.1:(\d+)", local.log.read_text())
    assert match, local.log.read_text()[-2000:]
    return int(match.group(1))


def test_the_runtimes_own_ports_and_ports_not_named_are_never_a_receiver(notices: Local, receiver: Receiver) -> None:
    gateway_port = urllib.parse.urlsplit(notices.url).port
    own = [
        f"http://127.0.0.1:{emulator_port(notices)}/moto-api/reset",  # the emulator
        f"http://127.0.0.1:{gateway_port}/jobs",  # the API
        f"http://127.0.0.1:{gateway_port}/console",  # the console
        f"http://localhost:{gateway_port}/health",
        f"http://127.0.0.1:{free_loopback_port()}/hook",  # a port the operator did not name
    ]
    answers = [
        notices.call("PUT", "/webhooks/own", token=token(TENANTS[0]), body={"url": url, "events": ["job.succeeded"]})
        for url in own
    ]

    assert [a.status for a in answers] == [422] * len(own)
    assert all(a.body["error"]["field"] == "url" for a in answers)
    assert len({a.body["error"]["message"].split("port ")[0] for a in answers}) == 1  # one answer for every port
    assert all("not a receiver port" in a.body["error"]["message"] for a in answers)
    assert notices.call("GET", "/webhooks/own", token=token(TENANTS[0])).status == 404


def test_a_failed_connection_is_one_generic_error_in_the_deliveries_log(notices: Local) -> None:
    tenant = TENANTS[0]
    register(notices, tenant, "closed", f"http://127.0.0.1:{CLOSED_PORT}/hook", ["job.failed"])

    sent = notices.call("POST", "/webhooks/closed/test", token=token(tenant))
    assert sent.status == 202, sent.body

    log = wait_for(
        lambda: notices.call("GET", "/webhooks/closed/deliveries", token=token(tenant)).body["deliveries"] or None
    )
    assert log[0]["status_code"] is None and log[0]["error"] == "connection failed"


def test_a_receiver_whose_port_is_no_longer_named_is_refused_at_delivery(tmp_path: Path, receiver: Receiver) -> None:
    """An endpoint registered while its port was named, then the runtime restarted without it: the delivery is
    refused before any connection (the receiver never hears of it). Its secret was saved sealed."""
    tenant, data = TENANTS[0], tmp_path / "offpath"
    options: dict[str, Any] = {"tokens": {tenant: token(tenant)}, "cwd": ROOT}
    first = OffpathLocal.start(data, webhook_ports=[receiver.port], **options)
    try:
        local = Local(url=first.url, data_dir=first.data_dir, log=first.console)
        secret = register(local, tenant, "unnamed", receiver.url("/unnamed"), ["job.failed"])["secret"]
    finally:
        first.stop()
    # The secret is kept sealed: not in the saved state; its key beside the data directory, the owner's only.
    saved = (data / "state.json").read_text()
    assert "unnamed" in saved and secret not in saved and secret.removeprefix("whsec_") not in saved
    assert stat.S_IMODE((tmp_path / "offpath.key").stat().st_mode) == 0o600
    second = OffpathLocal.start(data, **options)
    try:
        local = Local(url=second.url, data_dir=second.data_dir, log=second.console)
        assert local.call("POST", "/webhooks/unnamed/test", token=token(tenant)).status == 202
        rotated = local.call("POST", "/webhooks/unnamed/rotate-secret", token=token(tenant))
        assert rotated.status == 200 and rotated.body["previous_secret_expires_at"]  # the old secret opened

        log = wait_for(
            lambda: local.call("GET", "/webhooks/unnamed/deliveries", token=token(tenant)).body["deliveries"] or None
        )
    finally:
        second.stop()
    assert log[0]["status_code"] is None
    assert log[0]["error"].startswith("refused:") and f"port {receiver.port} is not a receiver port" in log[0]["error"]
    assert receiver.at("/unnamed") == []


def test_one_tenants_oversized_fan_out_holds_back_no_other_tenants_delivery(notices: Local, receiver: Receiver) -> None:
    """Ten endpoints with the payload of a 64 KB payload of 4-byte characters (once a ~2 MB SendMessageBatch
    SQS refused, holding the stream for ever), and another tenant's event right behind it."""
    big, small = TENANTS[10], TENANTS[11]
    for n in range(10):
        register(notices, big, f"big{n}", receiver.url(f"/big{n}"), ["job.queued"], include_payload=True)
    secret = register(notices, small, "small", receiver.url("/small"), ["job.queued"])["secret"]
    payload = {"text": "\U0001f600" * 16_000}

    big_job = notices.submit("demo.echo", payload, token=token(big))
    small_job = notices.submit("demo.echo", {"n": 1}, token=token(small))
    assert big_job.status == small_job.status == 202, (big_job.body, small_job.body)

    delivered = wait_for(lambda: receiver.at("/small") or None, timeout_s=30)[0]
    assert delivered.verified_by(secret) and delivered.event["data"]["job_id"] == small_job.body["job_id"]
    bigs = wait_for(
        lambda: (
            [receiver.at(f"/big{n}") for n in range(10)] if all(receiver.at(f"/big{n}") for n in range(10)) else None
        ),
        timeout_s=30,
    )
    assert all(r[0].event["data"]["payload"] == payload for r in bigs)


def test_a_slow_receiver_holds_only_its_own_deliveries(notices: Local, receiver: Receiver, trickler: int) -> None:
    """A receiver trickling its answer a byte at a time is cut off at the delivery's deadline (the timeout once
    applied per read, so it held a delivery for minutes); another tenant's deliveries made meanwhile arrive."""
    slow, quick = TENANTS[12], TENANTS[13]
    register(notices, slow, "slow", f"http://127.0.0.1:{trickler}/hook", ["job.failed"])
    register(notices, quick, "quick", receiver.url("/quick"), ["job.failed"])

    for _ in range(3):
        assert notices.call("POST", "/webhooks/slow/test", token=token(slow)).status == 202
    sent = [notices.call("POST", "/webhooks/quick/test", token=token(quick)).body["event_id"] for _ in range(3)]

    arrived = wait_for(lambda: receiver.at("/quick") if len(receiver.at("/quick")) >= 3 else None, timeout_s=60)
    assert {r.webhook_id for r in arrived} == set(sent)
    log = wait_for(
        lambda: _if_three(notices.call("GET", "/webhooks/slow/deliveries", token=token(slow)).body["deliveries"]),
        timeout_s=60,
    )
    assert {a["error"] for a in log} == {f"timed out after {DEADLINE_S} s"}
    # Cut off at the deadline: the trickle's status line and headers take ~9 s, its body ~5.5 hours.
    assert all(DEADLINE_S * 1000 <= a["latency_ms"] < DEADLINE_S * 1000 + 5000 for a in log)


def _if_three(attempts: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    return attempts[:3] if len(attempts) >= 3 else None


def test_the_deliveries_log_names_the_job_and_the_event_type_of_each_delivery(
    notices: Local, receiver: Receiver
) -> None:
    tenant = TENANTS[14]
    register(notices, tenant, "named", receiver.url("/named"), ["job.succeeded", "job.failed"])
    done = notices.submit("demo.echo", {"n": 1}, token=token(tenant)).body["job_id"]
    failed = notices.submit("demo.poison", {"reason": "named"}, token=token(tenant)).body["job_id"]
    test_event = notices.call("POST", "/webhooks/named/test", token=token(tenant)).body["event_id"]

    log = wait_for(
        lambda: _if_three(notices.call("GET", "/webhooks/named/deliveries", token=token(tenant)).body["deliveries"]),
        timeout_s=60,
    )

    assert sorted((a["job_id"] or "-", a["type"]) for a in log) == sorted(
        [(done, "job.succeeded"), (failed, "job.failed"), ("-", "webhook.test")]
    )
    assert next(a for a in log if a["job_id"] is None)["event_id"] == test_event
