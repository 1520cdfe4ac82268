"""The console's job page links a chain's steps: the next job from its parent, the parent from the next job."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser.conftest import OpenConsole
from tests.e2e.conftest import TOKEN_A, Local, wait_for

RUN_S = 30_000  # ms: how long a page may take to show a job's end


def test_a_chains_steps_link_each_other_on_their_job_pages(console: OpenConsole, local: Local) -> None:
    answer = local.call(
        "POST",
        "/jobs",
        body={"type": "demo.step", "payload": {"start": 7}, "then": {"type": "demo.step", "payload": {}}},
    )
    assert answer.status == 202, answer.body
    first_id = answer.body["job_id"]
    first = local.wait_for_job(first_id, {"SUCCEEDED"}, timeout_s=30)
    next_id = first["next_job_id"]
    wait_for(lambda: local.call("GET", f"/jobs/{next_id}").status == 200 or None, timeout_s=30)
    admin = console(TOKEN_A).open(f"/console/jobs/{first_id}")
    fields = admin.page.locator("main dl.fields")
    expect(fields).to_contain_text("Chainwent on to the next job")

    fields.locator('[data-link="next"]').click()

    expect(admin.page).to_have_url(f"{local.url}/console/jobs/{next_id}")
    expect(admin.page.locator("main .badge").first).to_have_text("SUCCEEDED", timeout=RUN_S)
    expect(admin.page.locator("main pre.data").first).to_contain_text('"n": 8')
    parent = admin.page.locator('main dl.fields [data-link="parent"]')
    expect(parent).to_have_text(first_id)
    admin.screenshot("job-chain")

    parent.click()

    expect(admin.page).to_have_url(f"{local.url}/console/jobs/{first_id}")
