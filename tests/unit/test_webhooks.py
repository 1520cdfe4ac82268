"""Webhook deliveries against fakes: signing (verified as a receiver verifies, with standardwebhooks), the retry
schedule, Retry-After, 410, the 5-day disable, rotation, and the refused addresses (no connection is ever
attempted to one)."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from offpath.adapters.webhook_http import PinnedSender
from offpath.domain.errors import InvalidRequestError, WebhookNotFoundError
from offpath.domain.quotas import QuotaExceededError
from offpath.domain.webhooks import (
    MAX_ENDPOINTS_PER_TENANT,
    RETRY_DELAYS_S,
    SUBSCRIBABLE,
    Attempt,
    Delivery,
    Endpoint,
    HttpResult,
    RefusedUrlError,
    Secret,
    disabled,
    new_secret,
    refusal_of,
    retry_delay_s,
)
from offpath.logic.webhooks import (
    DeliveryOutcome,
    DeliveryPorts,
    EndpointRequest,
    PutOutcome,
    ReceiverPolicy,
    check_receiver,
    delete_endpoint,
    deliver,
    delivery_log,
    get_endpoint,
    put_endpoint,
    rotate_secret,
    send_test,
)
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import InMemoryQuotaCounters
from offpath_tools.webhook_fakes import (
    ConnectorThatMustNotBeCalled,
    FakeResolver,
    InMemoryWebhookStore,
    RecordingDeliveryQueue,
    ScriptedSender,
)

TENANT = "acme"
AWS = ReceiverPolicy(allow_loopback=False)
PUBLIC = "https://hooks.example.com/offpath"
START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def endpoint(**changes: object) -> Endpoint:
    base = Endpoint(name="orders", url=PUBLIC, events=("job.succeeded",), secrets=(Secret(new_secret()),))
    return Endpoint(**{**base.__dict__, **changes})  # type: ignore[arg-type]


def delivery(attempt: int = 1) -> Delivery:
    return Delivery(
        tenant=TENANT,
        endpoint="orders",
        event_id="evt_0123456789abcdef0123456789abcdef",
        type="job.succeeded",
        timestamp=datetime(2026, 12, 1, 9, 0, tzinfo=UTC),
        data={"job_id": "a" * 32, "status": "SUCCEEDED"},
        attempt=attempt,
    )


class Setup:
    def __init__(self, *results: HttpResult, start: datetime | None = None) -> None:
        self.store = InMemoryWebhookStore()
        self.queue = RecordingDeliveryQueue()
        self.sender = ScriptedSender(list(results))
        self.clock = ManualClock(start or datetime.now(UTC))
        self.ports = DeliveryPorts(self.store, self.queue, self.sender, self.clock, random.Random(7))
        self.endpoint = endpoint()
        self.store.put_endpoint(TENANT, self.endpoint, limit=10)

    def deliver(self, message: Delivery) -> str:
        return deliver(message, self.ports, AWS).result

    @property
    def current(self) -> Endpoint:
        found = self.store.endpoint(TENANT, "orders")
        assert found is not None
        return found


# -- signing -------------------------------------------------------------------------------------


def test_a_delivery_is_signed_as_standard_webhooks_receivers_verify_it() -> None:
    setup = Setup(HttpResult(200, 3))

    assert setup.deliver(delivery()) == "delivered"

    url, headers, body = setup.sender.posted[0]
    assert url == PUBLIC
    assert headers["webhook-id"] == delivery().event_id
    payload = Webhook(setup.endpoint.secret).verify(body, headers)
    assert payload == {"type": "job.succeeded", "timestamp": "2026-12-01T09:00:00Z", "data": delivery().data}
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, headers)


def test_after_a_rotation_both_secrets_verify_for_24_hours_then_only_the_new_one() -> None:
    setup = Setup(HttpResult(200, 3), HttpResult(200, 3))
    old = setup.endpoint.secret
    new = rotate_secret(TENANT, "orders", store=setup.store, clock=setup.clock).secret

    setup.deliver(delivery())
    _, headers, body = setup.sender.posted[0]
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert Webhook(old).verify(body, headers) and Webhook(new).verify(body, headers)

    setup.clock.advance(24 * 3600 + 1)
    assert setup.current.signing_secrets(setup.clock.now()) == [new]


def test_every_retry_of_an_event_carries_the_same_webhook_id() -> None:
    setup = Setup(HttpResult(500, 3), HttpResult(200, 3))

    assert setup.deliver(delivery()) == "retrying"
    retry, _ = setup.queue.sent[0]
    setup.clock.set(retry.not_before or setup.clock.now())
    assert setup.deliver(retry) == "delivered"

    assert [headers["webhook-id"] for _, headers, _ in setup.sender.posted] == [delivery().event_id] * 2


# -- retries -------------------------------------------------------------------------------------


def test_the_schedule_is_5s_5min_30min_2h_5h_10h_10h_with_jitter_then_no_more() -> None:
    assert RETRY_DELAYS_S == (5, 300, 1800, 7200, 18000, 36000, 36000)
    for attempt, base in enumerate(RETRY_DELAYS_S, start=1):
        low = retry_delay_s(attempt, status=500, retry_after_s=None, scale=1, draw=0.0)
        high = retry_delay_s(attempt, status=500, retry_after_s=None, scale=1, draw=0.999)
        assert low == pytest.approx(base * 0.9) and high == pytest.approx(base * 1.1, rel=1e-3)
    assert retry_delay_s(8, status=500, retry_after_s=None, scale=1, draw=0.5) is None


def test_a_wait_longer_than_a_message_delay_is_made_in_hops_of_15_minutes() -> None:
    setup = Setup(HttpResult(500, 3))

    assert setup.deliver(delivery(attempt=4)) == "retrying"  # the next is about 5 h later
    retry, delay = setup.queue.sent[0]
    assert delay == 900 and retry.attempt == 5 and retry.not_before is not None

    setup.clock.advance(900)
    assert setup.deliver(retry) == "waiting"  # not yet: sent on again, nothing posted
    assert len(setup.sender.posted) == 1 and setup.queue.sent[1] == (retry, 900)


def test_429_and_503_wait_what_retry_after_asks() -> None:
    for status in (429, 503):
        setup = Setup(HttpResult(status, 3, retry_after="120"))
        setup.deliver(delivery())
        retry, delay = setup.queue.sent[0]
        assert delay == 120
        assert retry.not_before == setup.clock.now() + timedelta(seconds=120)


def test_the_last_failure_goes_to_the_dlq_with_its_reason() -> None:
    setup = Setup(HttpResult(500, 3))

    assert setup.deliver(delivery(attempt=8)) == "dead_lettered"
    assert not setup.queue.sent
    assert "8 attempts failed" in setup.queue.dead[0][1]


def test_410_gone_disables_the_endpoint_at_once() -> None:
    setup = Setup(HttpResult(410, 3))

    assert setup.deliver(delivery()) == "disabled"
    assert not setup.current.enabled and "410" in (setup.current.disabled_reason or "")
    assert not setup.queue.sent and setup.queue.dead
    assert setup.deliver(delivery()) == "dead_lettered"  # a disabled endpoint gets nothing more
    assert len(setup.sender.posted) == 1


def test_an_endpoint_failing_for_five_days_in_a_row_is_disabled_and_says_so() -> None:
    setup = Setup(*[HttpResult(None, 10_000, error="timed out after 10 s")] * 3)
    setup.deliver(delivery())
    setup.clock.advance(4 * 86400)
    assert setup.deliver(delivery()) == "retrying"
    setup.clock.advance(86400)

    assert setup.deliver(delivery()) == "disabled"
    assert "5 days" in (setup.current.disabled_reason or "")


def test_a_success_ends_a_run_of_failures() -> None:
    setup = Setup(HttpResult(500, 3), HttpResult(200, 3), HttpResult(500, 3))
    setup.deliver(delivery())
    setup.clock.advance(4 * 86400)
    setup.deliver(delivery())
    setup.clock.advance(2 * 86400)

    assert setup.deliver(delivery()) == "retrying"
    assert setup.current.enabled


# -- refused addresses ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "169.254.169.254",  # the instance metadata service (link-local)
        "10.0.0.1",
        "172.16.0.1",
        "192.168.1.1",
        "127.0.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "240.0.0.1",
        "100.64.0.1",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "ff02::1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
    ],
)
def test_an_address_of_each_refused_class_is_refused_on_aws(address: str) -> None:
    assert refusal_of(address, allow_loopback=False) is not None


def test_locally_127_0_0_1_and_only_it_of_the_refused_classes_is_allowed() -> None:
    assert refusal_of("127.0.0.1", allow_loopback=True) is None
    for address in ("127.0.0.2", "::1", "10.0.0.1", "169.254.169.254"):
        assert refusal_of(address, allow_loopback=True) is not None
    assert refusal_of("93.184.215.14", allow_loopback=False) is None


@pytest.mark.parametrize(
    ("url", "answers"),
    [
        ("https://169.254.169.254/latest/meta-data", {"169.254.169.254": ["169.254.169.254"]}),
        ("https://10.0.0.1/hook", {"10.0.0.1": ["10.0.0.1"]}),
        ("https://[::1]/hook", {"::1": ["::1"]}),
        ("https://internal.example.com/hook", {"internal.example.com": ["10.1.2.3"]}),
        ("https://mixed.example.com/hook", {"mixed.example.com": ["93.184.215.14", "127.0.0.1"]}),
        ("https://nowhere.example.com/hook", {}),
        ("http://public.example.com/hook", {"public.example.com": ["93.184.215.14"]}),  # not https
    ],
)
def test_a_refused_receiver_is_never_connected_to(url: str, answers: dict[str, list[str]]) -> None:
    sender = PinnedSender(FakeResolver(answers), ConnectorThatMustNotBeCalled(), allow_loopback=False)

    result = sender.post(url, {}, b"{}", 10)

    assert result.status is None and (result.error or "").startswith("refused")


def test_a_refused_receiver_is_a_422_naming_the_url_at_registration() -> None:
    store = InMemoryWebhookStore()
    resolver = FakeResolver({"internal.example.com": ["10.1.2.3"]})
    for url in ("https://internal.example.com/h", "https://169.254.169.254/", "https://[::1]/", "http://x.example/"):
        with pytest.raises(InvalidRequestError) as refused:
            put_endpoint(
                TENANT,
                EndpointRequest("orders", url, ("job.succeeded",)),
                store=store,
                resolver=resolver,
                policy=AWS,
                known_job_types=set(),
                clock=ManualClock(),
            )
        assert refused.value.field == "url"
    assert store.endpoints(TENANT) == []


def test_a_name_that_later_resolves_inside_fails_the_delivery_without_a_connection() -> None:
    resolver = FakeResolver({"hooks.example.com": ["93.184.215.14"]})
    store = InMemoryWebhookStore()
    put_endpoint(
        TENANT,
        EndpointRequest("orders", PUBLIC, ("job.succeeded",)),
        store=store,
        resolver=resolver,
        policy=AWS,
        known_job_types=set(),
        clock=ManualClock(),
    )
    resolver.answers["hooks.example.com"] = ["169.254.169.254"]  # DNS changed
    queue = RecordingDeliveryQueue()
    sender = PinnedSender(resolver, ConnectorThatMustNotBeCalled())
    ports = DeliveryPorts(store, queue, sender, ManualClock(datetime.now(UTC)), random.Random(1))

    assert deliver(delivery(), ports, AWS).result == "retrying"
    assert "link-local" in (store.delivery_log(TENANT, "orders").attempts[0].error or "")


def test_a_tenant_has_a_bounded_number_of_endpoints() -> None:
    store = InMemoryWebhookStore()
    resolver = FakeResolver({"hooks.example.com": ["93.184.215.14"]})

    def put(name: str) -> None:
        put_endpoint(
            TENANT,
            EndpointRequest(name, PUBLIC, ("job.succeeded",)),
            store=store,
            resolver=resolver,
            policy=AWS,
            known_job_types=set(),
            clock=ManualClock(),
        )

    for i in range(MAX_ENDPOINTS_PER_TENANT):
        put(f"e{i}")
    with pytest.raises(InvalidRequestError) as refused:
        put("one-more")
    assert (refused.value.field, refused.value.code) == ("name", "too_many_endpoints")
    assert str(refused.value) == "a tenant has at most 10 webhook endpoints"
    put("e0")  # replacing one is not adding one


# -- endpoints -----------------------------------------------------------------------------------

RESOLVER = {"hooks.example.com": ["93.184.215.14"]}


def put(store: InMemoryWebhookStore, clock: ManualClock, request: EndpointRequest) -> PutOutcome:
    return put_endpoint(
        TENANT,
        request,
        store=store,
        resolver=FakeResolver(dict(RESOLVER)),
        policy=AWS,
        known_job_types={"resize", "report"},
        clock=clock,
    )


def test_a_new_endpoint_gets_a_secret_and_its_events_and_job_types_once_each() -> None:
    store, clock = InMemoryWebhookStore(), ManualClock(START)
    request = EndpointRequest(
        "orders", PUBLIC, ("job.failed", "job.succeeded", "job.failed"), ("resize", "resize"), include_payload=True
    )

    outcome = put(store, clock, request)

    assert not outcome.replaced
    assert store.endpoint(TENANT, "orders") == outcome.endpoint
    assert (outcome.endpoint.events, outcome.endpoint.job_types) == (("job.failed", "job.succeeded"), ("resize",))
    assert outcome.endpoint.include_payload and outcome.endpoint.url == PUBLIC and outcome.endpoint.enabled
    assert outcome.endpoint.secret.startswith("whsec_") and len(outcome.endpoint.secrets) == 1
    assert outcome.endpoint.created_at == outcome.endpoint.updated_at == START


def test_a_replaced_endpoint_keeps_its_secret_and_creation_time_and_is_enabled_again() -> None:
    store, clock = InMemoryWebhookStore(), ManualClock(START)
    first = put(store, clock, EndpointRequest("orders", PUBLIC, ("job.succeeded",))).endpoint
    store.put_endpoint(TENANT, disabled(first, "the receiver answered 410 Gone", START), limit=10)
    clock.advance(60)

    outcome = put(store, clock, EndpointRequest("orders", PUBLIC + "/v2", ("job.failed",)))

    assert outcome.replaced
    current = get_endpoint(TENANT, "orders", store)
    assert (current.url, current.events, current.secrets) == (PUBLIC + "/v2", ("job.failed",), first.secrets)
    assert (current.created_at, current.updated_at) == (START, START + timedelta(seconds=60))
    assert current.enabled and current.disabled_reason is None


@pytest.mark.parametrize(
    ("request_", "field", "message"),
    [
        (
            EndpointRequest("Orders", PUBLIC, ("job.succeeded",)),
            "name",
            "name must be 1 to 64 of a-z 0-9 _ -, starting with a letter or digit",
        ),
        (EndpointRequest("orders", PUBLIC, ()), "events", "events must name one or more of "),
        (
            EndpointRequest("orders", PUBLIC, ("job.succeeded", "job.done")),
            "events",
            "events must name one or more of ",
        ),
        (
            EndpointRequest("orders", PUBLIC, ("job.succeeded",), ("resize", "unknown")),
            "job_types",
            "job_types names a job type that is not registered",
        ),
        (
            EndpointRequest("orders", "https://internal.example.com/h", ("job.succeeded",)),
            "url",
            "url is refused: the host does not resolve",
        ),
    ],
)
def test_a_request_that_can_never_succeed_is_refused_by_its_field_and_nothing_is_stored(
    request_: EndpointRequest, field: str, message: str
) -> None:
    store = InMemoryWebhookStore()

    with pytest.raises(InvalidRequestError) as refused:
        put(store, ManualClock(START), request_)

    assert refused.value.field == field
    assert str(refused.value).startswith(message)
    assert store.endpoints(TENANT) == []


def test_the_events_refusal_lists_every_event_an_endpoint_may_name() -> None:
    with pytest.raises(InvalidRequestError) as refused:
        put(InMemoryWebhookStore(), ManualClock(START), EndpointRequest("orders", PUBLIC, ()))

    assert str(refused.value) == f"events must name one or more of {', '.join(sorted(SUBSCRIBABLE))}"


def test_the_receiver_is_resolved_by_its_host_and_port() -> None:
    resolver = FakeResolver({"hooks.example.com": ["93.184.215.14"]})

    check_receiver("https://hooks.example.com:8443/h", resolver, AWS)

    assert resolver.asked == ["hooks.example.com"]


def test_locally_a_receiver_at_127_0_0_1_is_allowed_only_on_a_port_the_operator_named() -> None:
    local = ReceiverPolicy(allow_loopback=True, loopback_ports=frozenset({8800}))
    resolver = FakeResolver({"127.0.0.1": ["127.0.0.1"]})

    check_receiver("http://127.0.0.1:8800/hook", resolver, local)
    with pytest.raises(RefusedUrlError) as refused:
        check_receiver("http://127.0.0.1:8801/hook", resolver, local)

    assert str(refused.value) == (
        "url is refused: port 8801 is not a receiver port of this runtime (offpath local --webhook-port)"
    )
    with pytest.raises(RefusedUrlError):
        check_receiver("http://127.0.0.1:8800/hook", resolver, AWS)


@pytest.mark.parametrize("name", ["missing", "Not A Name"])
def test_an_endpoint_the_tenant_does_not_have_is_not_found_by_any_route(name: str) -> None:
    setup = Setup()

    for call in (
        lambda: get_endpoint(TENANT, name, setup.store),
        lambda: delete_endpoint(TENANT, name, setup.store),
        lambda: delivery_log(TENANT, name, setup.store),
        lambda: rotate_secret(TENANT, name, store=setup.store, clock=setup.clock),
        lambda: send_test(TENANT, name, store=setup.store, queue=setup.queue, clock=setup.clock),
    ):
        with pytest.raises(WebhookNotFoundError):
            call()
    with pytest.raises(WebhookNotFoundError):
        get_endpoint("other-tenant", "orders", setup.store)
    assert not setup.queue.sent


def test_a_deleted_endpoint_is_gone_with_its_delivery_log() -> None:
    setup = Setup(HttpResult(200, 3))
    setup.deliver(delivery())
    assert len(delivery_log(TENANT, "orders", setup.store).attempts) == 1

    delete_endpoint(TENANT, "orders", setup.store)

    assert setup.store.endpoints(TENANT) == []
    with pytest.raises(WebhookNotFoundError):
        delivery_log(TENANT, "orders", setup.store)


def test_a_rotation_is_stored_with_the_old_secret_valid_for_a_day() -> None:
    setup = Setup(start=START)
    old = setup.endpoint.secret

    rotated = rotate_secret(TENANT, "orders", store=setup.store, clock=setup.clock)

    assert setup.current == rotated
    assert rotated.secrets[1] == Secret(old, expires_at=START + timedelta(hours=24))


def test_a_test_delivery_is_queued_for_the_endpoint_whatever_it_subscribes_to() -> None:
    setup = Setup(start=START)

    sent = send_test(TENANT, "orders", store=setup.store, queue=setup.queue, clock=setup.clock)

    assert setup.queue.sent == [(sent, 0)]
    assert (sent.tenant, sent.endpoint, sent.type, sent.timestamp, sent.attempt) == (
        TENANT,
        "orders",
        "webhook.test",
        START,
        1,
    )
    assert sent.data == {"endpoint": "orders", "message": "a test delivery from offpath"}
    assert sent.event_id.startswith("evt_test_") and len(sent.event_id) == len("evt_test_") + 32


def test_test_deliveries_are_limited_to_a_burst_of_3_then_one_each_10_seconds_apart_from_submits() -> None:
    setup = Setup(start=START)
    rate = InMemoryQuotaCounters()

    def test() -> Delivery:
        return send_test(TENANT, "orders", store=setup.store, queue=setup.queue, clock=setup.clock, rate=rate)

    for _ in range(3):
        test()
    with pytest.raises(QuotaExceededError) as refused:
        test()

    assert (refused.value.field, refused.value.retry_after_s) == ("test", 10)
    assert str(refused.value) == "over the limit of 6 test deliveries a minute (burst 3)"
    assert len(setup.queue.sent) == 3
    setup.clock.advance(9.999999)
    with pytest.raises(QuotaExceededError):
        test()
    setup.clock.advance(0.000001)
    test()
    assert len(setup.queue.sent) == 4
    now_us = int(setup.clock.now().timestamp() * 1_000_000)
    assert rate.take(TENANT, per_s=1, bucket=1, now_us=now_us) == 0  # the tenant's submits are not held back
    setup.store.put_endpoint("beta", endpoint(), limit=10)
    for _ in range(3):
        send_test("beta", "orders", store=setup.store, queue=setup.queue, clock=setup.clock, rate=rate)


# -- what a delivery leaves behind ---------------------------------------------------------------


def test_each_attempt_is_logged_with_the_answer_and_the_job_it_is_about() -> None:
    setup = Setup(HttpResult(500, 42), HttpResult(204, 7), start=START)

    failed = deliver(delivery(), setup.ports, AWS)
    setup.clock.advance(10)
    succeeded = deliver(delivery(attempt=2), setup.ports, AWS)

    assert failed.next_retry_at is not None
    assert (failed, succeeded) == (
        DeliveryOutcome("retrying", 500, failed.next_retry_at),
        DeliveryOutcome("delivered", 204),
    )
    event, kind, job_id = delivery().event_id, "job.succeeded", "a" * 32
    assert delivery_log(TENANT, "orders", setup.store).attempts == (
        Attempt(event, kind, 2, START + timedelta(seconds=10), 204, 7, None, None, job_id),
        Attempt(event, kind, 1, START, 500, 42, "HTTP 500", failed.next_retry_at, job_id),
    )


@pytest.mark.parametrize("data", [{"endpoint": "orders"}, {"job_id": ""}, {"job_id": 7}])
def test_an_attempt_of_an_event_about_no_job_names_none(data: dict[str, object]) -> None:
    setup = Setup(start=START)

    deliver(Delivery(TENANT, "orders", "evt_test_1", "webhook.test", START, data), setup.ports, AWS)

    assert delivery_log(TENANT, "orders", setup.store).attempts[0].job_id is None


def test_a_message_due_within_a_second_waits_one_second_on_the_queue() -> None:
    setup = Setup(start=START)
    later = Delivery(**{**delivery().__dict__, "not_before": START + timedelta(seconds=0.4)})

    assert deliver(later, setup.ports, AWS) == DeliveryOutcome("waiting", next_retry_at=later.not_before)
    assert setup.queue.sent == [(later, 1)] and not setup.sender.posted


def test_a_delivery_for_a_deleted_endpoint_is_dropped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    setup = Setup()
    delete_endpoint(TENANT, "orders", setup.store)

    with caplog.at_level(logging.INFO, logger="offpath.webhooks"):
        assert deliver(delivery(), setup.ports, AWS) == DeliveryOutcome("dropped")

    [record] = caplog.records
    assert record.getMessage() == "a delivery's endpoint was deleted; dropped"
    assert record.__dict__["event_id"] == delivery().event_id
    assert not setup.sender.posted and not setup.queue.sent and not setup.queue.dead


def test_a_delivery_for_a_disabled_endpoint_goes_to_the_dlq_saying_why() -> None:
    setup = Setup()
    setup.store.put_endpoint(TENANT, disabled(setup.endpoint, "turned off", START), limit=10)

    assert deliver(delivery(), setup.ports, AWS) == DeliveryOutcome("dead_lettered")
    assert setup.queue.dead == [(delivery(), "endpoint orders is disabled: turned off")]


def test_a_410_disables_the_endpoint_when_it_answered_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    setup = Setup(HttpResult(410, 3), start=START)

    with caplog.at_level(logging.WARNING, logger="offpath.webhooks"):
        assert deliver(delivery(), setup.ports, AWS) == DeliveryOutcome("disabled", 410)

    reason = "the receiver answered 410 Gone"
    assert (setup.current.disabled_reason, setup.current.disabled_at, setup.current.updated_at) == (
        reason,
        START,
        START,
    )
    assert setup.queue.dead == [(delivery(), f"endpoint orders disabled: {reason}")]
    [record] = caplog.records
    assert record.getMessage() == "webhook endpoint disabled"
    assert (record.__dict__["endpoint"], record.__dict__["reason"]) == ("orders", reason)


def test_five_days_of_failures_disable_the_endpoint_naming_when_they_began() -> None:
    setup = Setup(*[HttpResult(503, 3)] * 2, start=START)
    setup.deliver(delivery())
    setup.clock.advance(5 * 86400)

    assert deliver(delivery(), setup.ports, AWS) == DeliveryOutcome("disabled", 503)
    reason = "deliveries failed for 5 days in a row (since 2026-12-01T09:00:00+00:00)"
    assert (setup.current.disabled_reason, setup.current.disabled_at) == (reason, setup.clock.now())
    assert setup.queue.dead == [(delivery(), f"endpoint orders disabled: {reason}")]


def test_the_last_failure_is_dead_lettered_with_its_status() -> None:
    setup = Setup(HttpResult(502, 3))

    assert deliver(delivery(attempt=8), setup.ports, AWS) == DeliveryOutcome("dead_lettered", 502)
    assert setup.queue.dead == [(delivery(attempt=8), "8 attempts failed; the last: HTTP 502")]


def test_locally_a_host_resolving_to_a_private_address_is_still_refused() -> None:
    local = ReceiverPolicy(allow_loopback=True, loopback_ports=frozenset({8800}))

    with pytest.raises(RefusedUrlError, match="url is refused: "):
        check_receiver(
            "http://internal.example.com:8800/h", FakeResolver({"internal.example.com": ["10.0.0.1"]}), local
        )


# -- an endpoint changed while a delivery is in flight -------------------------------------------------------------


class ChangingSender(ScriptedSender):
    """Answers as scripted after `meanwhile` ran: what the tenant did while the request was in flight."""

    def __init__(self, result: HttpResult, meanwhile: Callable[[], object]) -> None:
        super().__init__([result])
        self.meanwhile = meanwhile

    def post(self, url: str, headers: dict[str, str], body: bytes, timeout_s: float) -> HttpResult:
        self.meanwhile()
        return super().post(url, headers, body, timeout_s)


def test_a_410_for_an_endpoint_deleted_in_the_meantime_leaves_it_deleted() -> None:
    setup = Setup(start=START)
    setup.ports = replace(
        setup.ports, sender=ChangingSender(HttpResult(410, 3), lambda: setup.store.delete_endpoint(TENANT, "orders"))
    )

    assert setup.deliver(delivery()) == "disabled"

    assert setup.store.endpoint(TENANT, "orders") is None  # not written back, disabled
    assert [reason for _, reason in setup.queue.dead] == ["endpoint orders disabled: the receiver answered 410 Gone"]


def test_a_410_from_the_old_url_leaves_the_endpoint_given_a_new_url_in_the_meantime_enabled() -> None:
    setup = Setup(start=START)
    moved = endpoint(url="https://hooks.example.com/v2", secrets=setup.endpoint.secrets)
    setup.ports = replace(
        setup.ports,
        sender=ChangingSender(HttpResult(410, 3), lambda: setup.store.put_endpoint(TENANT, moved, limit=10)),
    )

    setup.deliver(delivery())

    assert setup.current == moved and setup.current.enabled


def test_an_endpoint_created_again_after_a_delete_starts_without_the_attempt_that_was_in_flight_at_the_delete() -> None:
    setup = Setup(HttpResult(200, 3), start=START)
    setup.ports = replace(
        setup.ports, sender=ChangingSender(HttpResult(200, 3), lambda: setup.store.delete_endpoint(TENANT, "orders"))
    )
    setup.deliver(delivery())
    assert (TENANT, "orders") in setup.store.logs  # written after the delete removed the log

    put(setup.store, setup.clock, EndpointRequest("orders", PUBLIC, ("job.succeeded",)))

    assert delivery_log(TENANT, "orders", setup.store).attempts == ()
    setup.ports = replace(setup.ports, sender=ScriptedSender([HttpResult(200, 3)]))
    setup.deliver(delivery())
    # A replacement keeps its log.
    put(setup.store, setup.clock, EndpointRequest("orders", PUBLIC + "/v2", ("job.succeeded",)))
    assert [a.event_id for a in delivery_log(TENANT, "orders", setup.store).attempts] == [delivery().event_id]


def test_a_rotation_of_an_endpoint_deleted_before_it_is_not_found_and_writes_nothing() -> None:
    setup = Setup(start=START)
    setup.store.delete_endpoint(TENANT, "orders")

    with pytest.raises(WebhookNotFoundError):
        rotate_secret(TENANT, "orders", store=setup.store, clock=setup.clock)
    assert setup.store.endpoints(TENANT) == []
