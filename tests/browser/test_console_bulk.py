"""Bulk actions in the console: on the jobs list, "Bulk…" acts on the list's current filter, shows a preview (the
count and a sample, from a dry run), asks (naming the action and the count), then follows the operation's
progress on its own page. A dismissed question does nothing."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from playwright.sync_api import expect

from tests.browser.conftest import OpenConsole
from tests.e2e.conftest import TOKEN_A, Local

RUN_S = 30_000  # ms


def delayed_jobs(local: Local, tag: str, count: int) -> list[str]:
    """Jobs due in a month (SCHEDULED all through the test), tagged `tag`."""
    key, _, value = tag.partition(":")
    run_at = (datetime.now(UTC) + timedelta(days=30)).isoformat().replace("+00:00", "Z")
    ids = []
    for _ in range(count):
        answer = local.call(
            "POST", "/jobs", body={"type": "demo.echo", "payload": {}, "run_at": run_at, "tags": {key: value}}
        )
        assert answer.status == 202, answer.body
        ids.append(str(answer.body["job_id"]))
    return ids


def test_bulk_cancel_previews_the_filtered_jobs_asks_and_follows_the_operation(
    console: OpenConsole, local: Local
) -> None:
    tag = f"bulk-console:{uuid.uuid4().hex[:10]}"
    ids = delayed_jobs(local, tag, 12)
    admin = console(TOKEN_A).open(f"/console/jobs?tag={tag}&status=SCHEDULED")

    admin.page.get_by_role("button", name="Bulk…").click()
    admin.page.select_option("#bulk-action", "cancel")
    admin.page.get_by_role("button", name="Preview").click()

    expect(admin.page.locator("#bulk-count")).to_have_text(f"12 jobs match (state SCHEDULED, tag {tag}).")
    sample = admin.page.locator("#bulk-preview tbody tr")
    expect(sample).to_have_count(10)
    expect(admin.page.locator("#bulk-preview")).to_contain_text("The newest 10 of them.")
    assert {local.job(i)["status"] for i in ids} == {"SCHEDULED"}, "a preview changes nothing"
    admin.screenshot("bulk-preview")
    admin.page.get_by_role("button", name="Bulk…").click()
    admin.page.select_option("#bulk-action", "cancel")
    admin.page.get_by_role("button", name="Preview").click()

    admin.page.get_by_role("button", name="Cancel 12 jobs").click()

    assert admin.questions == [
        f"Cancel 12 jobs (state SCHEDULED, tag {tag})? Those not started yet never run; the others are skipped."
    ]
    expect(admin.page.locator("main h1")).to_contain_text("Bulk operation ", timeout=RUN_S)
    expect(admin.page.locator("#bulk-status")).to_have_text("FINISHED", timeout=RUN_S)
    expect(admin.page.locator("#bulk-matched")).to_have_text("12")
    expect(admin.page.locator("#bulk-done")).to_have_text("12")
    assert admin.page.url.startswith(f"{local.url}/console/bulk/")
    assert {local.job(i)["status"] for i in ids} == {"CANCELLED"}
    admin.screenshot("bulk-operation")


def test_a_dismissed_bulk_question_does_nothing(console: OpenConsole, local: Local) -> None:
    tag = f"bulk-console:{uuid.uuid4().hex[:10]}"
    ids = delayed_jobs(local, tag, 2)
    admin = console(TOKEN_A).open(f"/console/jobs?tag={tag}")
    admin.answer = False

    admin.page.get_by_role("button", name="Bulk…").click()
    admin.page.select_option("#bulk-action", "cancel")
    admin.page.get_by_role("button", name="Preview").click()
    admin.page.get_by_role("button", name="Cancel 2 jobs").click()

    assert admin.questions == [f"Cancel 2 jobs (tag {tag})? Those not started yet never run; the others are skipped."]
    expect(admin.page.get_by_role("button", name="Cancel 2 jobs")).to_be_enabled()
    assert "/console/jobs" in admin.page.url
    assert {local.job(i)["status"] for i in ids} == {"SCHEDULED"}
