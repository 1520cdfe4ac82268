"""The console's webhooks pages: a tenant's endpoints and, per endpoint, its latest deliveries, as a person sees
them after a job ran. The receiver is a real one on 127.0.0.1; the endpoints belong to a tenant of their own,
registered before that tenant's first job."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from offpath_tools.webhook_receiver import Receiver
from tests.browser.conftest import HOOKS_PORT, TOKEN_HOOKS, Console, OpenConsole
from tests.e2e.conftest import TOKEN_B, Local, wait_for

RUN_S = 30_000  # ms: how long a page may take to show a delivery


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    receiver = Receiver(port=HOOKS_PORT)
    try:
        yield receiver
    finally:
        receiver.stop()


def register(local: Local, name: str, url: str) -> None:
    answer = local.call("PUT", f"/webhooks/{name}", token=TOKEN_HOOKS, body={"url": url, "events": ["job.succeeded"]})
    assert answer.status == 201, answer.body


def endpoint_row(console: Console, name: str) -> Any:
    return console.page.locator("tr", has=console.page.locator(f'a[href="/console/webhooks/{name}"]'))


def delivery_row(console: Console, event_id: str) -> Any:
    return console.page.locator("tr", has_text=event_id)


def test_the_webhooks_pages_show_each_endpoint_its_deliveries_and_why_one_is_disabled(
    console: OpenConsole, local: Local, receiver: Receiver
) -> None:
    receiver.script("/gone", then=410)
    register(local, "orders", receiver.url("/orders"))
    register(local, "gone", receiver.url("/gone"))
    submitted = local.submit("demo.echo", {"hello": "webhooks"}, token=TOKEN_HOOKS)
    assert submitted.status == 202, submitted.body
    job_id = submitted.body["job_id"]
    delivered = wait_for(lambda: receiver.at("/orders") or None, timeout_s=30)[0]
    assert delivered.event["data"]["job_id"] == job_id
    wait_for(lambda: receiver.at("/gone") or None, timeout_s=30)

    tenant = console(TOKEN_HOOKS).open("/console/webhooks")
    assert tenant.heading() == "Webhooks"
    orders = endpoint_row(tenant, "orders")
    expect(orders).to_contain_text(receiver.url("/orders"))
    expect(orders).to_contain_text("job.succeeded")
    expect(orders.locator(".badge")).to_have_text("ENABLED")
    gone = endpoint_row(tenant, "gone")
    expect(gone.locator(".badge")).to_have_text("DISABLED", timeout=RUN_S)
    expect(gone.locator(".disabled-reason")).to_contain_text("410")
    tenant.screenshot("webhooks")

    tenant.page.get_by_role("link", name="orders").click()
    expect(tenant.page.locator("main h1")).to_have_text("Webhook orders")
    assert tenant.page.url == local.url + "/console/webhooks/orders"
    attempt = delivery_row(tenant, delivered.webhook_id)
    expect(attempt).to_contain_text("job.succeeded", timeout=RUN_S)
    expect(attempt.locator(".status-code")).to_have_text("200")
    expect(attempt).to_contain_text(" ms")
    expect(attempt.locator(f'a[href="/console/jobs/{job_id}"]')).to_have_text(job_id)  # the job it was about

    tenant.page.get_by_role("button", name="Send test").click()
    expect(tenant.page.locator("main .notice")).to_contain_text("Sent webhook.test evt_test_")
    test_id = tenant.page.locator("main .notice").inner_text().split()[2].rstrip(":")
    test_attempt = delivery_row(tenant, test_id)
    expect(test_attempt).to_contain_text("webhook.test", timeout=RUN_S)
    expect(test_attempt.locator(".status-code")).to_have_text("200")
    assert any(r.webhook_id == test_id and r.event["type"] == "webhook.test" for r in receiver.at("/orders"))
    tenant.screenshot("webhook-deliveries")

    tenant.open("/console/webhooks/gone")
    expect(tenant.page.locator("main dd.disabled-reason")).to_contain_text("410")
    gone_attempt = delivery_row(tenant, receiver.at("/gone")[0].webhook_id)
    expect(gone_attempt.locator(".status-code")).to_have_text("410", timeout=RUN_S)
    expect(tenant.page.get_by_role("button", name="Send test")).to_be_disabled()
    tenant.screenshot("webhook-disabled")

    other = console(TOKEN_B).open("/console/webhooks/orders")
    expect(other.page.locator("main .error")).to_contain_text("404")
    expect(other.page.get_by_role("button", name="Send test")).to_be_hidden()
    other.open("/console/webhooks")
    expect(endpoint_row(other, "orders")).to_have_count(0)
