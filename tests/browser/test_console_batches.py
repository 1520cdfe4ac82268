"""The console's batch pages in a real browser: the caller's batches, one batch's progress, counts, callbacks and
jobs, and a job page's link to its batch."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import OpenConsole
from tests.e2e.conftest import TOKEN_A, TOKEN_B, Local, wait_for

RUN_S = 30_000


def batch(local: Local, body: dict[str, Any], token: str = TOKEN_A) -> str:
    answer = local.call("POST", "/batches", body=body, token=token)
    assert answer.status == 202, answer.body
    return str(answer.body["batch_id"])


def test_a_batch_page_shows_its_progress_counts_callbacks_and_jobs(console: OpenConsole, local: Local) -> None:
    batch_id = batch(
        local,
        {
            "jobs": [{"type": "demo.echo", "payload": {"n": i}} for i in range(3)],
            "on_complete": {"type": "demo.echo", "payload": {"callback": "complete"}},
        },
    )
    done = wait_for(
        lambda: (lambda b: b if b["on_complete_job_id"] else None)(
            local.call("GET", f"/batches/{batch_id}", token=TOKEN_A).body
        ),
        timeout_s=60,
    )
    admin = console(TOKEN_A).open(f"/console/batches/{batch_id}")

    assert admin.heading() == f"Batch {batch_id}"
    expect(admin.page.locator("main .badge").first).to_have_text("SUCCEEDED", timeout=RUN_S)
    expect(admin.page.locator("#batch-progress")).to_have_attribute("value", "3")
    expect(admin.page.locator("#batch-progress")).to_have_attribute("max", "3")
    expect(admin.page.locator("#batch-counts")).to_have_text("pending 0, succeeded 3")
    expect(admin.page.locator("#batch-on_complete")).to_have_text(done["on_complete_job_id"])
    expect(admin.page.locator("main table tbody tr")).to_have_count(3)
    admin.screenshot("batch")

    member = local.call("GET", f"/batches/{batch_id}/jobs", token=TOKEN_A).body["jobs"][0]["job_id"]
    admin.open(f"/console/jobs/{member}")
    admin.page.locator("#job-batch").click()
    expect(admin.page.locator("main h1")).to_have_text(f"Batch {batch_id}")

    admin.open("/console/batches")
    assert admin.heading() == "Batches"
    expect(admin.page.locator(f'a[href="/console/batches/{batch_id}"]')).to_have_count(1)
    admin.screenshot("batches")


def test_another_tenant_s_batch_is_not_found_on_its_page(console: OpenConsole, local: Local) -> None:
    batch_id = batch(local, {"jobs": [{"type": "demo.echo", "payload": {}}]})

    other = console(TOKEN_B).open(f"/console/batches/{batch_id}")

    expect(other.page.locator("main")).to_contain_text("no such batch")
    other.open("/console/batches")
    expect(other.page.locator(f'a[href="/console/batches/{batch_id}"]')).to_have_count(0)
