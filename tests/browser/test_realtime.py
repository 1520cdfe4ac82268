"""The console's job page follows a job with server-sent events (GET /jobs/{id}/events) instead of asking for it
every two seconds: in Chromium, a `demo.sleep` job's progress and its end arrive while the page reads the job
once; a tenant cannot subscribe to another tenant's job."""

from __future__ import annotations

from urllib.parse import urlsplit

from playwright.sync_api import Request, expect

from tests.browser.conftest import OpenConsole
from tests.browser.test_console import RUN_S, submit
from tests.e2e.conftest import TOKEN_A, TOKEN_B, Local


def test_a_job_page_shows_progress_and_completion_without_polling(console: OpenConsole, local: Local) -> None:
    tenant = console(TOKEN_B)
    job_id = submit(local, "demo.sleep", {"ms": 6000}, token=TOKEN_B)
    reads: list[str] = []
    streams: list[str] = []

    def on_request(request: Request) -> None:
        path = urlsplit(request.url).path
        if path == f"/jobs/{job_id}":
            reads.append(request.method)
        elif path == f"/jobs/{job_id}/events":
            streams.append(request.url)

    tenant.page.on("request", on_request)
    tenant.open(f"/console/jobs/{job_id}")
    page = tenant.page

    expect(page.locator("#live")).to_contain_text("Live", timeout=RUN_S)
    # The third of four steps: progress shown while the job still runs, from an event.
    expect(page.locator("main .progress")).to_contain_text("slept 4500 ms", timeout=RUN_S)
    expect(page.locator("main .badge").first).to_have_text("RUNNING")
    expect(page.locator("main .badge").first).to_have_text("SUCCEEDED", timeout=RUN_S)
    expect(page.locator("main pre.data").first).to_contain_text('"slept_ms": 6000')
    expect(page.locator("#live")).to_have_text("")
    page.wait_for_timeout(2500)  # a tick of the page's 2-second timer after the end: still no read

    assert reads == ["GET"]  # the job was read once, when the page opened; the rest came as events
    assert len(streams) == 1
    assert "access_token=" in streams[0]


def test_a_tenant_cannot_subscribe_to_another_tenants_job(console: OpenConsole, local: Local) -> None:
    others = submit(local, "demo.sleep", {"ms": 3000}, token=TOKEN_A)
    tenant = console(TOKEN_B)

    outcome = tenant.page.evaluate(
        """async (jobId) => {
            const token = sessionStorage.getItem("offpath.console.token");
            const url = `/jobs/${jobId}/events?access_token=${encodeURIComponent(token)}`;
            const status = (await fetch(url)).status;
            const subscribed = await new Promise((resolve) => {
                const source = new EventSource(url);
                for (const type of ["job.started", "job.progress", "job.succeeded"]) {
                    source.addEventListener(type, () => { source.close(); resolve("received an event"); });
                }
                source.onerror = () => { const state = source.readyState; source.close(); resolve(state); };
            });
            return { status, subscribed };
        }""",
        others,
    )

    assert outcome == {"status": 404, "subscribed": 2}  # EventSource.CLOSED: refused, never retried
    tenant.open(f"/console/jobs/{others}")
    expect(tenant.page.locator("main")).to_contain_text("404")
    expect(tenant.page.locator("#live")).to_have_text("")  # never followed: the read was refused
