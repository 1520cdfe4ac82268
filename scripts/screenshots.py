"""Screenshots of the console for the documentation: the overview with an alarm firing, a job page with a failed
attempt's traceback unfolded, a queue's dead letters, the jobs list's bulk panel with its preview (the count and a
sample, before anything is asked), a batch's page with its progress bar and a job's page saying why it waits (its
job type paused), each 1280 and 390 px wide.

    .venv/bin/python scripts/screenshots.py [OUT_DIR]      (default build/screenshots/)

It starts `offpath local` on a free loopback port with an empty data directory of its own, makes those states
through the API (jobs that succeed, two demo.poison jobs that fail for good: their messages in the default DLQ,
whose depth alarm fires; a dozen tagged jobs due in a month for the bulk preview; a batch of five demo.echo jobs and
one demo.poison with an on_complete callback; demo.sleep paused, with one of its jobs waiting), opens the console in
Chromium (Debian's, /usr/bin/chromium: `make browser-deps`) and writes twelve PNGs: overview-alarm-{wide,narrow}.png,
job-traceback-{wide,narrow}.png, dlq-{wide,narrow}.png, bulk-preview-{wide,narrow}.png, batch-{wide,narrow}.png,
job-waiting-{wide,narrow}.png.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from offpath.logic.pause import PAUSE_FLAGS_TTL_S
from offpath_local.client import ApiClient
from offpath_tools.launcher import OffpathLocal

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "build" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--no-first-run"]
TENANT, TOKEN = "ops", "screenshots-token-0123456789"
WIDTHS = {"wide": (1280, 900), "narrow": (390, 844)}
ALARM = "offpath-default-dlq-depth"
WAIT_S = 60.0
BULK_TAG = "campaign:spring-sale"
BULK_JOBS = 12
T = TypeVar("T")


def wait_for(condition: Callable[[], T | None], what: str, timeout_s: float = WAIT_S) -> T:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.25)
    raise RuntimeError(f"gave up after {timeout_s:g} s waiting for {what}")


@dataclass(frozen=True)
class States:
    failed_job_id: str  # a job that failed for good: its page's traceback, its row in the DLQ
    batch_id: str  # a finished batch with one failed member and its on_complete callback
    waiting_job_id: str  # a job of a paused type: its page says why it waits


def make_states(api: ApiClient) -> States:
    """Jobs that succeed, two that fail for good (the DLQ, its alarm), tagged jobs due in a month (the bulk preview's
    matches) and a batch whose members all finished and whose on_complete callback was submitted."""

    def submit(job_type: str, payload: dict[str, Any], **more: Any) -> str:
        answer = api.call("POST", "/jobs", body={"type": job_type, "payload": payload, **more})
        if answer.status != 202:
            raise RuntimeError(f"submit {job_type}: {answer.status} {answer.body}")
        return str(answer.body["job_id"])

    def status(job_id: str) -> str:
        return str(api.call("GET", f"/jobs/{job_id}").body["status"])

    answer = api.call(
        "POST",
        "/batches",
        body={
            "jobs": [{"type": "demo.echo", "payload": {"invoice": n}} for n in range(5)]
            + [{"type": "demo.poison", "payload": {"reason": "the invoice has no lines"}}],
            "on_complete": {"type": "demo.echo", "payload": {"report": "invoices"}},
        },
    )
    if answer.status != 202:
        raise RuntimeError(f"submit a batch: {answer.status} {answer.body}")
    batch_id = str(answer.body["batch_id"])
    key, _, value = BULK_TAG.partition(":")
    run_at = (datetime.now(UTC) + timedelta(days=30)).isoformat().replace("+00:00", "Z")
    for n in range(BULK_JOBS):
        submit("demo.echo", {"coupon": n}, run_at=run_at, tags={key: value})
    done = [submit("demo.echo", {"n": n}) for n in range(5)]
    submit("demo.flaky", {"fail_first": 1})
    failed = [submit("demo.poison", {"reason": reason}) for reason in ("the card was declined", "no such customer")]
    for job_id in done + failed:
        wait_for(lambda j=job_id: status(j) in {"SUCCEEDED", "FAILED"} or None, f"job {job_id} to finish")

    def dlq_depth() -> int:
        queues = api.call("GET", "/queues").body["queues"]
        return int(next(q for q in queues if q["name"] == "default")["dlq_depth"])

    wait_for(lambda: dlq_depth() >= len(failed) or None, "the default DLQ to hold the failed jobs")

    def alarm_state() -> str | None:
        alarms = api.call("GET", "/alarms").body["alarms"]
        return next((a["state"] for a in alarms if a["name"] == ALARM), None)

    wait_for(lambda: alarm_state() == "ALARM" or None, f"{ALARM} to fire")

    def batch_called_back() -> bool:
        return bool(api.call("GET", f"/batches/{batch_id}").body.get("on_complete_job_id"))

    wait_for(batch_called_back, f"batch {batch_id} to finish and submit its on_complete callback")
    paused = api.call("POST", "/job-types/demo.sleep/pause", body={"reason": "the image store is being migrated"})
    if paused.status != 200:
        raise RuntimeError(f"pause demo.sleep: {paused.status} {paused.body}")
    time.sleep(PAUSE_FLAGS_TTL_S + 1)  # every worker has seen the pause (each reads it at most every 10 s)
    waiting = submit("demo.sleep", {"ms": 100})
    wait_for(lambda: api.call("GET", f"/jobs/{waiting}").body.get("waiting_on"), f"job {waiting} to say why it waits")
    return States(failed_job_id=failed[0], batch_id=batch_id, waiting_job_id=waiting)


def shoot(url: str, states: States, out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    written: list[Path] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            for label, (width, height) in WIDTHS.items():
                context = browser.new_context(viewport={"width": width, "height": height})
                try:
                    written += shoot_at(context.new_page(), url, states, out, label)
                finally:
                    context.close()
        finally:
            browser.close()
    return written


def shoot_at(page: Any, url: str, states: States, out: Path, label: str) -> list[Path]:
    """The six pages at one width, in one tab signed in with the token."""
    from playwright.sync_api import expect

    written: list[Path] = []
    job_id = states.failed_job_id

    def ready() -> None:
        expect(page.locator("#updated")).to_contain_text("Updated", timeout=30_000)

    def save(name: str) -> None:
        path = out / f"{name}-{label}.png"
        page.screenshot(path=str(path), full_page=True)
        written.append(path)

    page.goto(f"{url}/console#token={TOKEN}")
    ready()
    expect(page.locator("main .trouble-box")).to_contain_text(ALARM, timeout=30_000)
    expect(page.locator("main figure svg.chart").first).to_be_visible()
    save("overview-alarm")

    page.goto(f"{url}/console/jobs/{job_id}")
    ready()
    traceback = page.locator("main ol.timeline details.traceback").first
    traceback.locator("summary").click()
    expect(traceback.locator("pre")).to_be_visible()
    save("job-traceback")

    page.goto(f"{url}/console/queues/default")
    ready()
    expect(page.locator("main tr", has_text=job_id).first).to_be_visible()
    save("dlq")

    page.goto(f"{url}/console/jobs?tag={BULK_TAG}&status=SCHEDULED")
    ready()
    page.get_by_role("button", name="Bulk…").click()
    page.select_option("#bulk-action", "cancel")
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#bulk-count")).to_contain_text(f"{BULK_JOBS} jobs match", timeout=30_000)
    expect(page.locator("#bulk-preview tbody tr").first).to_be_visible()
    save("bulk-preview")

    page.goto(f"{url}/console/batches/{states.batch_id}")
    ready()
    expect(page.locator("#batch-counts")).to_contain_text("pending 0", timeout=30_000)
    expect(page.locator("#batch-progress")).to_be_visible()
    expect(page.locator("main table tbody tr")).to_have_count(6, timeout=30_000)
    save("batch")

    page.goto(f"{url}/console/jobs/{states.waiting_job_id}")
    ready()
    expect(page.locator("#job-waiting")).to_contain_text("is paused", timeout=30_000)
    save("job-waiting")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT, help="where the PNGs go")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        print(f"screenshots: {CHROMIUM} is missing (make browser-deps installs it)", file=sys.stderr)
        return 1
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="offpath-screenshots-") as data:
        runtime = OffpathLocal.start(
            Path(data) / "data", tokens={TENANT: TOKEN}, args=["--alarm-interval", "0.5", "--quiet"], cwd=ROOT
        )
        try:
            states = make_states(ApiClient(runtime.url, token=TOKEN))
            written = shoot(runtime.url, states, out)
        finally:
            runtime.stop()
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
