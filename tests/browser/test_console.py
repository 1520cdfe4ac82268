"""The operator console, used as a person would: pages opened at their own URLs, jobs watched as they run,
buttons pressed, a tenant kept to its own jobs, a tenant's HTML shown as text."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from playwright.sync_api import expect

from offpath_local.client import ApiClient
from offpath_local.console.proxy import ConsoleProxy
from tests.browser.conftest import Console, OpenConsole
from tests.e2e.conftest import TOKEN_A, TOKEN_B, Local, wait_for
from tests.e2e.local_schedules import E2E_SCHEDULE

RUN_S = 30_000  # ms: how long a page may take to show a job's end


def submit(local: Local, job_type: str, payload: dict[str, Any], token: str = TOKEN_A, **body: Any) -> str:
    headers = body.pop("headers", None)
    answer = local.call(
        "POST", "/jobs", body={"type": job_type, "payload": payload, **body}, token=token, headers=headers
    )
    assert answer.status == 202, answer.body
    return str(answer.body["job_id"])


def dead_letter(local: Local, reason: str = "poison message") -> str:
    """A job that failed for good, its message in its queue's DLQ."""
    job_id = submit(local, "demo.poison", {"reason": reason})
    local.wait_for_job(job_id, {"FAILED"}, timeout_s=30)

    def in_dlq() -> bool | None:
        queues = local.call("GET", "/queues").body["queues"]
        return True if any(q["name"] == "default" and q["dlq_depth"] >= 1 for q in queues) else None

    wait_for(in_dlq, timeout_s=30)
    return job_id


def row(console: Console, job_id: str) -> Any:
    return console.page.locator("tr", has=console.page.locator(f'a[href="/console/jobs/{job_id}"]'))


def test_every_page_opens_at_its_own_url(console: OpenConsole, local: Local) -> None:
    done = submit(local, "demo.echo", {"hello": "console"})
    local.wait_for_job(done, {"SUCCEEDED"})
    dead_letter(local)
    admin = console(TOKEN_A)
    pages = [
        ("overview", "/console", "Overview"),
        ("jobs", "/console/jobs", "Jobs"),
        ("job", f"/console/jobs/{done}", f"Job {done}"),
        ("queues", "/console/queues", "Queues"),
        ("queue", "/console/queues/default", "Queue default"),
        ("schedules", "/console/schedules", "Schedules"),
        ("alarms", "/console/alarms", "Alarms"),
        ("job types", "/console/job-types", "Job types"),
    ]
    for name, path, heading in pages:
        admin.open(path)
        assert admin.heading() == heading
        assert admin.page.url == local.url + path, "the URL stays the page's own"
        admin.screenshot(name)

    signed_out = console(None, path="/console/jobs")
    expect(signed_out.page.locator("main h1")).to_have_text("Sign in")
    signed_out.page.fill("#token", TOKEN_A)
    signed_out.page.get_by_role("button", name="Sign in").click()
    expect(signed_out.page.locator("main h1")).to_have_text("Jobs")


def test_submitted_jobs_reach_succeeded_on_the_page_without_a_reload(console: OpenConsole, local: Local) -> None:
    admin = console(TOKEN_A).open("/console/jobs")
    admin.page.evaluate("window.stillTheSamePage = true")

    ids = [submit(local, "demo.sleep", {"ms": 1200}) for _ in range(3)]

    for job_id in ids:
        expect(row(admin, job_id).locator(".badge")).to_have_text("SUCCEEDED", timeout=RUN_S)
    assert admin.page.evaluate("window.stillTheSamePage") is True

    slow = submit(local, "demo.sleep", {"ms": 4000})
    admin.open(f"/console/jobs/{slow}")
    admin.page.evaluate("window.stillTheSamePage = true")
    expect(admin.page.locator("main .badge").first).to_have_text("RUNNING", timeout=RUN_S)
    expect(admin.page.locator("main .badge").first).to_have_text("SUCCEEDED", timeout=RUN_S)
    expect(admin.page.locator("main pre.data").first).to_contain_text('"slept_ms": 4000')
    assert admin.page.evaluate("window.stillTheSamePage") is True


def test_a_delayed_job_is_cancelled_with_its_button(console: OpenConsole, local: Local) -> None:
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    job_id = submit(local, "demo.echo", {"later": True}, run_at=later)
    admin = console(TOKEN_A).open(f"/console/jobs/{job_id}")
    expect(admin.page.locator("main .badge").first).to_have_text("SCHEDULED")

    admin.page.get_by_role("button", name="Cancel").click()

    expect(admin.page.locator("main .badge").first).to_have_text("CANCELLED")
    assert admin.questions == [f"Cancel job {job_id} (demo.echo)? It will not run."]
    expect(admin.page.get_by_role("button", name="Cancel")).to_have_count(0)
    assert local.job(job_id)["status"] == "CANCELLED"


def test_the_dlq_is_redriven_from_its_queue_page(console: OpenConsole, local: Local) -> None:
    job_id = dead_letter(local, reason="fails every time")
    admin = console(TOKEN_A).open("/console/queues/default")
    expect(row(admin, job_id)).to_contain_text("fails every time")

    admin.page.get_by_role("button", name="Redrive all").click()

    expect(admin.page.locator("main .notice")).to_contain_text("Redrive of default:")
    assert len(admin.questions) == 1
    assert re.fullmatch(r"Move all \d+ messages? in the default DLQ back to the queue\? .+", admin.questions[0])
    wait_for(lambda: local.job(job_id)["redrives"] >= 1 or None, timeout_s=30)
    expect(admin.page.locator(".card", has_text="Last redrive")).not_to_contain_text("none", timeout=RUN_S)


def test_a_schedule_is_triggered_from_the_schedules_page(console: OpenConsole, local: Local) -> None:
    admin = console(TOKEN_A).open("/console/schedules")
    schedule = admin.page.locator("article.schedule", has=admin.page.locator("h2", has_text=E2E_SCHEDULE))

    schedule.get_by_role("button", name="Trigger now").click()

    notice = admin.page.locator("main .notice")
    expect(notice).to_be_visible()
    assert admin.questions and admin.questions[0].startswith(f"Fire schedule {E2E_SCHEDULE} now? It submits one ")
    expect(notice).to_contain_text(f"{E2E_SCHEDULE} fired: job")
    job_id = notice.locator("a").inner_text()
    assert re.fullmatch(r"[0-9a-f]{32}", job_id)
    notice.locator("a").click()
    expect(admin.page.locator("main h1")).to_have_text(f"Job {job_id}")
    expect(admin.page.locator("main .badge").first).to_have_text("SUCCEEDED", timeout=RUN_S)


def test_a_tenant_sees_its_own_jobs_and_no_admin_page(console: OpenConsole, local: Local) -> None:
    theirs = submit(local, "demo.echo", {"owner": "a"}, token=TOKEN_A)
    mine = submit(local, "demo.echo", {"owner": "b"}, token=TOKEN_B)
    tenant = console(TOKEN_B)

    assert tenant.page.url.endswith("/console/jobs"), "a tenant starts on its jobs"
    expect(tenant.page.locator("#nav a")).to_have_text(["Jobs", "Batches", "Job types", "Webhooks"])
    expect(row(tenant, mine)).to_have_count(1)
    expect(row(tenant, theirs)).to_have_count(0)
    tenant.screenshot("tenant-jobs")

    tenant.open(f"/console/jobs/{theirs}")
    expect(tenant.page.locator("main .error")).to_contain_text("404 not_found: no such job")
    for path in ("/console/queues/default", "/console/schedules", "/console/alarms", "/console"):
        tenant.open(path)
        if path == "/console":
            assert tenant.page.url.endswith("/console/jobs")
            continue
        expect(tenant.page.locator("main .error")).to_contain_text("This page is for admins")
        expect(tenant.page.get_by_role("button", name=re.compile("Redrive|Trigger"))).to_have_count(0)
    tenant.open("/console/queues/default")
    tenant.screenshot("tenant-admin-page")


HOSTILE = '<img src=x onerror="window.pwned=1">'


def test_html_in_a_payload_key_and_error_is_shown_as_text(console: OpenConsole, local: Local) -> None:
    echoed = submit(
        local,
        "demo.echo",
        {"note": HOSTILE, "script": "<script>window.pwned=2</script>"},
        headers={"Idempotency-Key": "<b>key</b><img src=x onerror=window.pwned=3>"},
    )
    failed = dead_letter(local, reason=HOSTILE)
    local.wait_for_job(echoed, {"SUCCEEDED"})
    admin = console(TOKEN_A)

    admin.open(f"/console/jobs/{echoed}")
    expect(admin.page.locator("main pre.data").first).to_contain_text(json.dumps(HOSTILE))
    expect(admin.page.locator("main pre.data").last).to_contain_text("<script>window.pwned=2</script>")
    expect(admin.page.locator("main")).to_contain_text("<b>key</b><img src=x onerror=window.pwned=3>")
    admin.screenshot("job-with-html")
    admin.open(f"/console/jobs/{failed}")
    expect(admin.page.locator("main pre.error-text")).to_contain_text(HOSTILE)
    admin.open("/console/queues/default")
    expect(row(admin, failed)).to_contain_text(HOSTILE)
    admin.open("/console/jobs?q=" + "%3Cb%3Ekey%3C%2Fb%3E%3Cimg%20src%3Dx%20onerror%3Dwindow.pwned%3D3%3E")
    expect(row(admin, echoed)).to_have_count(1)

    assert admin.page.locator("main img, main script, main b").count() == 0
    assert admin.page.evaluate("window.pwned") is None


def test_a_failed_job_is_retried_from_its_page_and_succeeds(console: OpenConsole, local: Local) -> None:
    job_id = submit(local, "demo.poison", {"reason": "retry me", "first_run_only": True})
    local.wait_for_job(job_id, {"FAILED"}, timeout_s=30)
    admin = console(TOKEN_A).open(f"/console/jobs/{job_id}")
    expect(admin.page.locator("main .badge").first).to_have_text("FAILED")
    expect(admin.page.locator("main pre.data").last).to_contain_text('"first_run_only": true')

    admin.page.get_by_role("button", name="Retry").click()

    expect(admin.page.locator("main .badge").first).to_have_text("SUCCEEDED", timeout=RUN_S)
    assert admin.questions == [f"Run job {job_id} (demo.poison) again, with a fresh budget of 3 attempts?"]
    expect(admin.page.get_by_role("button", name="Retry")).to_have_count(0)
    fields = admin.page.locator("main dl.fields")
    expect(fields).to_contain_text("Retried by hand")
    timeline = admin.page.locator("main ol.timeline")
    expect(timeline).to_contain_text("Attempt 1 failed: PermanentError: retry me")
    expect(timeline).to_contain_text("Attempt 1 succeeded")
    admin.screenshot("job-retried")
    assert local.job(job_id)["retries"] == 1


def test_a_failed_attempts_traceback_unfolds_on_the_job_page_as_text_beside_its_trace(
    console: OpenConsole, local: Local
) -> None:
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    headers = {"traceparent": f"00-{trace}-00f067aa0ba902b7-01"}
    job_id = submit(local, "demo.poison", {"reason": HOSTILE}, headers=headers)
    local.wait_for_job(job_id, {"FAILED"}, timeout_s=30)
    admin = console(TOKEN_A).open(f"/console/jobs/{job_id}")
    expect(admin.page.locator("main dl.fields")).to_contain_text(f"Trace{trace}")
    timeline = admin.page.locator("main ol.timeline")
    expect(timeline).to_contain_text(f"Attempt 1 failed: PermanentError: {HOSTILE}")
    traceback = timeline.locator("details.traceback")
    expect(traceback.locator("pre")).not_to_be_visible()

    traceback.locator("summary").click()

    expect(traceback.locator("pre")).to_be_visible()
    expect(traceback.locator("pre")).to_have_text(re.compile(r"^offpath/jobs/demo\.py:\d+ in poison\s*$"))
    admin.screenshot("job-traceback")
    assert admin.page.locator("main img").count() == 0
    assert admin.page.evaluate("window.pwned") is None


def test_a_dead_letter_is_retried_from_its_queue_page(console: OpenConsole, local: Local) -> None:
    job_id = submit(local, "demo.poison", {"reason": "dead letter", "first_run_only": True})
    local.wait_for_job(job_id, {"FAILED"}, timeout_s=30)
    admin = console(TOKEN_A).open("/console/queues/default")

    row(admin, job_id).get_by_role("button", name="Retry").click()

    expect(admin.page.locator("main .notice")).to_contain_text(f"Retried {job_id}: QUEUED")
    local.wait_for_job(job_id, {"SUCCEEDED"}, timeout_s=30)
    expect(row(admin, job_id)).to_have_count(0, timeout=RUN_S)


def test_a_dead_letter_is_discarded_from_its_queue_page_after_a_question(console: OpenConsole, local: Local) -> None:
    job_id = dead_letter(local, reason="discard me")
    admin = console(TOKEN_A).open("/console/queues/default")
    admin.answer = False
    row(admin, job_id).get_by_role("button", name="Discard").click()
    assert local.job(job_id)["discarded_at"] is None, "dismissed: nothing happens"
    admin.answer = True

    row(admin, job_id).get_by_role("button", name="Discard").click()

    expect(admin.page.locator("main .notice")).to_contain_text(f"Discarded the dead letter of {job_id}")
    assert admin.questions == 2 * [
        f"Discard the dead letter of job {job_id} (demo.poison)? It leaves the default DLQ for good; "
        "the job stays FAILED and a redrive will not run it."
    ]
    expect(row(admin, job_id)).to_have_count(0, timeout=RUN_S)
    job = local.job(job_id)
    assert (job["status"], job["discarded_at"] is not None) == ("FAILED", True)


def test_selected_dead_letters_are_retried_and_discarded_together(console: OpenConsole, local: Local) -> None:
    retried = [submit(local, "demo.poison", {"reason": "retry us", "first_run_only": True}) for _ in range(2)]
    discarded = [dead_letter(local, reason="discard us") for _ in range(2)]
    for job_id in retried:
        local.wait_for_job(job_id, {"FAILED"}, timeout_s=30)
    admin = console(TOKEN_A).open("/console/queues/default")
    for job_id in retried + discarded:
        expect(row(admin, job_id)).to_have_count(1)
    admin.screenshot("dlq-table")

    for job_id in retried:
        row(admin, job_id).get_by_role("checkbox").check()
    expect(admin.page.locator("main")).to_contain_text("2 selected")
    admin.page.get_by_role("button", name="Retry selected").click()
    expect(admin.page.locator("main .notice")).to_contain_text("Retried 2 of 2 jobs")
    for job_id in discarded:
        row(admin, job_id).get_by_role("checkbox").check()
    admin.page.get_by_role("button", name="Discard selected").click()

    expect(admin.page.locator("main .notice")).to_contain_text("Discarded the dead letters of 2 of 2 jobs")
    assert admin.questions == [
        "Run 2 selected jobs again, each with a fresh attempt budget? Their dead letters leave the default DLQ.",
        "Discard the dead letters of 2 selected jobs? They leave the default DLQ for good; "
        "the jobs stay FAILED and a redrive will not run them.",
    ]
    for job_id in retried:
        assert local.wait_for_job(job_id, {"SUCCEEDED"}, timeout_s=30)["retries"] == 1
    for job_id in discarded:
        job = local.job(job_id)
        assert (job["status"], job["discarded_at"] is not None) == ("FAILED", True)
        expect(row(admin, job_id)).to_have_count(0, timeout=RUN_S)


def test_the_overview_charts_the_last_hour_and_shows_the_alarms(console: OpenConsole, local: Local) -> None:
    done = submit(local, "demo.echo", {"chart": True})
    local.wait_for_job(done, {"SUCCEEDED"})
    dead_letter(local, reason="for the alarm")
    wait_for(lambda: local.alarm_state("offpath-default-dlq-depth") == "ALARM" or None, timeout_s=30)
    admin = console(TOKEN_A).open("/console")

    stats = admin.page.locator("main .stats")
    expect(stats.locator("svg.chart")).to_have_count(2, timeout=RUN_S)
    expect(stats.locator("svg.chart rect:not([height='0'])").first).to_be_visible()
    expect(stats.locator("tr", has_text="demo.echo").first).to_be_visible()
    # Every bar is drawn inside its chart, the first minute's and the last's too.
    outside = stats.locator("svg.chart").evaluate_all(
        """charts => charts.flatMap(chart => [...chart.querySelectorAll("rect")].filter(bar => {
            const x = Number(bar.getAttribute("x")), w = Number(bar.getAttribute("width"));
            return x < 0 || x + w > chart.viewBox.baseVal.width;
        }).map(bar => bar.outerHTML))"""
    )
    assert outside == []
    alarm = admin.page.locator("main tr", has_text="offpath-default-dlq-depth")
    expect(alarm.locator(".badge")).to_have_text("ALARM", timeout=RUN_S)
    admin.screenshot("overview-charts")

    admin.open("/console/alarms")
    listed = admin.page.locator("main tr", has_text="offpath-default-dlq-depth").first
    expect(listed.locator(".badge").first).to_have_text("ALARM")
    expect(admin.page.locator("main h2", has_text="Recent changes")).to_be_visible()
    expect(admin.page.locator("main table").nth(1)).to_contain_text("offpath-default-dlq-depth")
    admin.screenshot("alarms-with-changes")


def test_an_admin_lists_the_jobs_that_schedules_made(console: OpenConsole, local: Local) -> None:
    fired = local.call("POST", f"/schedules/{E2E_SCHEDULE}/trigger")
    assert fired.status == 202, fired.body
    admin = console(TOKEN_A).open("/console/schedules")
    nightly = admin.page.locator("article.schedule", has=admin.page.locator("h2", has_text="nightly-cleanup"))
    expect(nightly.locator("dd ul li")).to_have_count(5)
    expect(nightly.locator("dd ul li").first).to_contain_text("T03:00:00")

    admin.page.get_by_role("link", name="The jobs the schedules made").click()

    expect(admin.page.locator("main h1")).to_have_text("Jobs of schedules")
    assert admin.page.url.endswith("/console/jobs?tenant=system")
    expect(row(admin, fired.body["job_id"])).to_have_count(1)
    admin.screenshot("schedule-jobs")
    tenant = console(TOKEN_B).open("/console/jobs?tenant=system")
    expect(row(tenant, fired.body["job_id"])).to_have_count(0)


def test_every_page_is_reached_from_the_keyboard(console: OpenConsole) -> None:
    admin = console(TOKEN_A)
    page = admin.page
    reached = []
    for _ in range(12):
        page.keyboard.press("Tab")
        reached.append(page.evaluate("document.activeElement.textContent.trim()"))
        if reached[-1] == "Schedules":
            break
    assert reached[0] == "Skip to content"
    page.keyboard.press("Enter")
    expect(page.locator("main h1")).to_have_text("Schedules")
    assert {"Overview", "Jobs", "Queues", "Schedules"} <= set(reached)


def test_offpath_console_serves_the_same_console_for_a_deployed_api(console: OpenConsole, local: Local) -> None:
    job_id = submit(local, "demo.echo", {"through": "offpath console"})
    proxy = ConsoleProxy(ApiClient(local.url, token=TOKEN_A), port=0)
    proxy.start()
    try:
        remote = console(proxy.session_token, base=proxy.url)
        expect(remote.page.locator("#nav a")).to_have_text(
            ["Overview", "Jobs", "Batches", "Queues", "Job types", "Schedules", "Alarms", "Webhooks"]
        )
        remote.open("/console/jobs")
        expect(row(remote, job_id)).to_have_count(1)
        remote.open(f"/console/jobs/{job_id}")
        expect(remote.page.locator("main .badge").first).to_have_text("SUCCEEDED", timeout=RUN_S)
        remote.screenshot("offpath-console-job")
    finally:
        proxy.stop()


def test_a_dismissed_confirmation_does_nothing(console: OpenConsole, local: Local) -> None:
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    job_id = submit(local, "demo.echo", {"keep": True}, run_at=later)
    admin = console(TOKEN_A).open(f"/console/jobs/{job_id}")
    expect(admin.page.locator("main .badge").first).to_have_text("SCHEDULED")
    admin.answer = False

    admin.page.get_by_role("button", name="Cancel").click()

    assert admin.questions == [f"Cancel job {job_id} (demo.echo)? It will not run."]
    expect(admin.page.get_by_role("button", name="Cancel")).to_be_visible()
    assert local.job(job_id)["status"] == "SCHEDULED"


def test_trouble_comes_first_on_the_overview_and_dead_letters_on_every_page(console: OpenConsole, local: Local) -> None:
    dead_letter(local, reason="for the trouble box")
    wait_for(lambda: local.alarm_state("offpath-default-dlq-depth") == "ALARM" or None, timeout_s=30)
    admin = console(TOKEN_A).open("/console")

    trouble = admin.page.locator("main .trouble-box")
    expect(trouble).to_contain_text("offpath-default-dlq-depth", timeout=RUN_S)
    first_row = admin.page.locator("main table", has_text="offpath-default-dlq-depth").locator("tbody tr").first
    expect(first_row.locator(".badge")).to_have_text("ALARM")
    assert "firing" in (first_row.get_attribute("class") or "")
    expect(admin.page.locator("main tr", has_text="offpath-api-5xx")).to_have_count(0)
    expect(admin.page.locator("main p.note", has_text="alarms OK")).to_contain_text(re.compile(r"\d+ of \d+ alarms OK"))
    banner = admin.page.locator("#dlq-banner")
    expect(banner).to_contain_text("Dead letters: ")
    expect(banner.get_by_role("link", name=re.compile(r"^default \d+$"))).to_be_visible()
    expect(admin.page.locator("main .stats svg.chart")).to_have_count(2, timeout=RUN_S)
    ticks = [t for t in admin.page.locator("main svg.chart text").all_text_contents() if ":" not in t]
    assert ticks and all(re.fullmatch(r"\d+", t) for t in ticks), ticks
    admin.screenshot("overview-trouble")

    admin.open("/console/schedules")
    expect(admin.page.locator("#dlq-banner")).to_be_visible()


def test_a_jobs_tags_are_shown_and_list_the_jobs_tagged_so(console: OpenConsole, local: Local) -> None:
    tagged = local.call(
        "POST", "/jobs", body={"type": "demo.echo", "payload": {"tagged": True}, "tags": {"customer": "acme-42"}}
    ).body["job_id"]
    untagged = submit(local, "demo.echo", {"tagged": False})
    admin = console(TOKEN_A).open(f"/console/jobs/{tagged}")

    tag = admin.page.locator("main dl.fields .tag")
    expect(tag).to_have_text("customer: acme-42")
    tag.click()

    expect(admin.page.locator("#filter-tag")).to_have_value("customer:acme-42")
    expect(row(admin, tagged)).to_have_count(1)
    expect(row(admin, untagged)).to_have_count(0)


def test_an_expired_job_shows_its_expiry_and_runs_when_retried_from_its_page(
    console: OpenConsole, local: Local
) -> None:
    # Due 1.9 s from now, its message is delivered 2 s after the submit (SQS delays are whole seconds): expired.
    now = datetime.now(UTC)
    expires_at = (now + timedelta(seconds=1.901)).isoformat().replace("+00:00", "Z")
    run_at = (now + timedelta(seconds=1.9)).isoformat().replace("+00:00", "Z")
    job_id = submit(local, "demo.echo", {"late": True}, run_at=run_at, expires_at=expires_at)
    local.wait_for_job(job_id, {"EXPIRED", "SUCCEEDED"}, timeout_s=30)
    admin = console(TOKEN_A).open(f"/console/jobs/{job_id}")
    expect(admin.page.locator("main .badge").first).to_have_text("EXPIRED")
    expect(admin.page.locator("main dl.fields")).to_contain_text("Expires at")
    expect(admin.page.locator("main ol.timeline")).to_contain_text("EXPIRED: not started by its expires_at; never ran")

    admin.page.get_by_role("button", name="Retry").click()

    expect(admin.page.locator("main .badge").first).to_have_text("SUCCEEDED", timeout=RUN_S)
    assert local.job(job_id)["expires_at"] is None


def test_a_superseded_job_links_the_job_that_took_its_place(console: OpenConsole, local: Local) -> None:
    key = f"browser-{datetime.now(UTC).timestamp()}"
    first = submit(local, "demo.echo", {"n": 1}, debounce={"key": key, "seconds": 60})
    second = submit(local, "demo.echo", {"n": 2}, debounce={"key": key, "seconds": 60})
    admin = console(TOKEN_A).open(f"/console/jobs/{first}")
    expect(admin.page.locator("main .badge").first).to_have_text("CANCELLED")
    expect(admin.page.locator("main ol.timeline")).to_contain_text("superseded by a later submit")

    admin.page.locator(f'main dl.fields a[href="/console/jobs/{second}"]').click()

    expect(admin.page.locator("main .badge").first).to_have_text("QUEUED")
    local.call("POST", f"/jobs/{second}/cancel")
