"""The console as an operator reads it during a day: a running job's lease end, a timeline in time order, no
confirmation left over from an earlier action, long job-type names inside their cells, the depth chart drawn
at the first look."""

from __future__ import annotations

from datetime import datetime

from playwright.sync_api import expect

from tests.browser.conftest import NARROW, WIDE, OpenConsole
from tests.browser.long_names import LONG_TYPE
from tests.browser.test_console import RUN_S, dead_letter, row, submit
from tests.e2e.conftest import TOKEN_A, Local


def test_a_running_jobs_page_shows_when_its_lease_ends_and_not_once_it_is_done(
    console: OpenConsole, local: Local
) -> None:
    # Long enough to be still running when a loaded machine's browser opens its page.
    job_id = submit(local, "demo.sleep", {"ms": 25_000})
    running = local.wait_for_job(job_id, {"RUNNING"})
    admin = console(TOKEN_A).open(f"/console/jobs/{job_id}")

    fields = admin.page.locator("main dl.fields")
    expect(fields).to_contain_text("Lease until")
    shown = fields.locator("dt:text-is('Lease until') + dd time")
    assert datetime.fromisoformat(shown.get_attribute("datetime") or "") == datetime.fromisoformat(
        running["lease_until"]
    )

    expect(admin.page.locator("main .badge").first).to_have_text("SUCCEEDED", timeout=RUN_S + 40_000)
    expect(fields).not_to_contain_text("Lease until")


def test_the_timeline_is_in_time_order_with_the_hand_retry_before_the_attempt_it_caused(
    console: OpenConsole, local: Local
) -> None:
    job_id = submit(local, "demo.poison", {"reason": "once", "first_run_only": True})
    local.wait_for_job(job_id, {"FAILED"}, timeout_s=30)
    assert local.call("POST", f"/jobs/{job_id}/retry", token=TOKEN_A).status == 202
    done = local.wait_for_job(job_id, {"SUCCEEDED"}, timeout_s=30)
    admin = console(TOKEN_A).open(f"/console/jobs/{job_id}")

    entries = admin.page.locator("main ol.timeline > li")
    expect(entries.last).to_contain_text("SUCCEEDED")
    texts = [entries.nth(i).locator("div").first.inner_text() for i in range(entries.count())]
    times = [entries.nth(i).locator(".when time").get_attribute("datetime") for i in range(entries.count())]

    retried = texts.index("Retried by hand")
    assert texts[:retried] == ["Submitted", "Attempt 1 started", "Attempt 1 failed: PermanentError: once"]
    assert texts[retried + 1 :] == ["Attempt 1 started", "Attempt 1 succeeded", "SUCCEEDED"]
    assert times[retried] == done["retried_at"].replace("+00:00", "Z") or times[retried] == done["retried_at"]
    stamps = [datetime.fromisoformat(t) for t in times if t]
    assert len(stamps) == len(texts)
    assert stamps == sorted(stamps)


def test_a_confirmation_goes_when_the_next_action_starts_and_at_the_next_page(
    console: OpenConsole, local: Local
) -> None:
    first = dead_letter(local, reason="first of two")
    admin = console(TOKEN_A).open("/console/queues/default")
    notice = admin.page.locator("main .notice")
    row(admin, first).get_by_role("button", name="Retry").click()
    expect(notice).to_have_text(f"Retried {first}: QUEUED")

    admin.answer = False
    admin.page.get_by_role("button", name="Redrive all").click()  # asked, then dismissed: nothing done

    expect(notice).to_have_count(0)
    assert len(admin.questions) == 2

    admin.answer = True
    job_page = admin.open(f"/console/jobs/{first}")
    expect(job_page.page.locator("main h1")).to_have_text(f"Job {first}")
    expect(notice).to_have_count(0)
    admin.page.go_back()
    admin.ready()
    expect(admin.page.locator("main h1")).to_have_text("Queue default")
    expect(notice).to_have_count(0)


def test_a_long_job_type_name_wraps_inside_its_cell_with_its_whole_name_as_title(
    console: OpenConsole, local: Local
) -> None:
    job_id = submit(local, LONG_TYPE, {"n": 1})
    local.wait_for_job(job_id, {"SUCCEEDED"})
    admin = console(TOKEN_A)

    for path in ("/console/jobs", f"/console/jobs/{job_id}"):
        for width, height in (WIDE, NARROW):
            admin.page.set_viewport_size({"width": width, "height": height})
            admin.open(path)
            name = admin.page.locator("main .type-name", has_text=LONG_TYPE).first
            expect(name).to_have_attribute("title", LONG_TYPE)
            overflow = admin.page.evaluate(
                """(el) => {
                  const box = el.getBoundingClientRect();
                  const holder = el.closest(".table-wrap, dl") || document.querySelector("main");
                  const wrap = el.closest(".table-wrap");
                  return Math.max(box.right - holder.getBoundingClientRect().right,
                                  wrap ? wrap.scrollWidth - wrap.clientWidth : 0,
                                  document.documentElement.scrollWidth - window.innerWidth);
                }""",
                name.element_handle(),
            )
            assert overflow <= 0, f"{path} at {width} px: the type name overflows by {overflow} px"
            if path == "/console/jobs":
                # The Finished column is hidden on a narrow screen: no card shows its label without a value.
                finished = admin.page.locator("main td[data-label='Finished']").first
                if (width, height) == NARROW:
                    expect(finished).to_be_hidden()
                else:
                    expect(finished).to_be_visible()
    admin.page.set_viewport_size({"width": WIDE[0], "height": WIDE[1]})
    admin.open("/console/jobs")
    admin.screenshot("jobs-long-type-name")


def test_the_overview_draws_the_depth_chart_at_the_first_look_and_keeps_it_across_a_reload(
    console: OpenConsole, local: Local
) -> None:
    admin = console(TOKEN_A)  # a new tab: nothing measured yet
    admin.open("/console")

    depth = admin.page.locator("main figure").first
    series = depth.locator(".legend > span").count()
    assert series >= 2
    expect(depth.locator("svg.chart path")).to_have_count(series)
    assert depth.locator("svg.chart circle").count() == 0

    admin.page.reload()
    admin.ready()
    lines = depth.locator("svg.chart path")
    expect(lines).to_have_count(series)
    assert (lines.first.get_attribute("d") or "").count("L") >= 2, "the measurements before the reload are kept"
