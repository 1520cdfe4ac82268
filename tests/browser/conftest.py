"""The console in a real browser: Playwright driving Debian's Chromium (`make browser-deps` installs it), against
the embedded runtime started as the e2e tests start it (tenant-a is the admin, tenant-b a tenant). The runtime
and the browser live as long as this folder's tests, so later tests do not share the machine with them.

A missing browser fails these tests; it never skips them. Any JavaScript error on a page fails the test that
opened it; the browser's own line for a refused request (403/404, which some tests cause on purpose) is not
a script error. Every page is saved as a screenshot, 1280 and 390 px wide, under .artifacts/screenshots/."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from offpath_tools.launcher import OffpathLocal, free_loopback_port
from tests.e2e.conftest import ROOT, TENANT_A, TENANT_B, TOKEN_A, TOKEN_B, Local, tests_importable

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = ROOT / ".artifacts" / "screenshots"
WIDE, NARROW = (1280, 900), (390, 844)
REFUSED_REQUEST = re.compile(r"^Failed to load resource: the server responded with a status of 40[34]\b")
# A tenant of the webhooks page only: its endpoints are registered before its first job, so the notifier (which
# keeps a tenant's endpoints for a few seconds) sees them for that job.
TENANT_HOOKS, TOKEN_HOOKS = "tenant-hooks", "e2e-token-tenant-hooks"
# Its receiver's port, named for receivers when the runtime starts (`--webhook-port`).
HOOKS_PORT = free_loopback_port()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/browser/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="package")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Local]:
    """`offpath local` in a child process on a free port; the e2e schedule fires once a minute."""
    runtime = OffpathLocal.start(
        tmp_path_factory.mktemp("offpath-console"),
        tokens={TENANT_A: TOKEN_A, TENANT_B: TOKEN_B, TENANT_HOOKS: TOKEN_HOOKS},
        admins=[TENANT_A],
        load=["tests.e2e.local_schedules", "tests.browser.long_names"],
        args=["--alarm-interval", "0.5"],
        env=tests_importable(),
        cwd=ROOT,
        webhook_ports=[HOOKS_PORT],
    )
    try:
        yield Local(url=runtime.url, data_dir=runtime.data_dir, log=runtime.console)
    finally:
        runtime.stop()


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make browser-deps` installs Debian's chromium (as root)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class Console:
    """One browser tab on the console, signed in with a token (or not)."""

    page: Page
    base: str
    errors: list[str] = field(default_factory=list)
    # What each confirmation the page asked said; answered with `answer` (True: confirm, False: dismiss).
    questions: list[str] = field(default_factory=list)
    answer: bool = True

    def open(self, path: str) -> Console:
        """Loads `path` as a person opening a shared link would, and waits for its first data."""
        self.page.goto(self.base + path)
        self.ready()
        return self

    def ready(self) -> None:
        expect(self.page.locator("#updated")).to_contain_text("Updated", timeout=15_000)

    def heading(self) -> str:
        return self.page.locator("main h1").inner_text()

    def screenshot(self, name: str) -> None:
        """The page as it is now at 1280 px and, reloaded, at 390 px (where nothing may overflow sideways)."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        for (width, height), label in ((WIDE, "wide"), (NARROW, "narrow")):
            if (width, height) != WIDE:
                self.page.set_viewport_size({"width": width, "height": height})
                self.page.reload()
                self.ready()
                overflow = self.page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
                assert overflow <= 0, f"{name} is {overflow} px wider than a {width} px screen"
            self.page.screenshot(path=str(SCREENSHOTS / f"{name}-{label}.png"), full_page=True)
        self.page.set_viewport_size({"width": WIDE[0], "height": WIDE[1]})
        self.page.reload()
        self.ready()


OpenConsole = Callable[..., Console]


@pytest.fixture
def console(browser: Browser, local: Local) -> Iterator[OpenConsole]:
    """console(token, base=...) -> a tab signed in with `token` (None: not signed in)."""
    contexts = []
    consoles: list[Console] = []

    def open_console(token: str | None, base: str | None = None, path: str = "/console") -> Console:
        context = browser.new_context(viewport={"width": WIDE[0], "height": WIDE[1]})
        contexts.append(context)
        page = context.new_page()
        opened = Console(page, base or local.url)
        consoles.append(opened)

        def on_console(message: object) -> None:
            text = message.text  # type: ignore[attr-defined]
            if message.type == "error" and not REFUSED_REQUEST.match(text):  # type: ignore[attr-defined]
                opened.errors.append(f"console error on {page.url}: {text}")

        page.on("console", on_console)
        page.on("pageerror", lambda error: opened.errors.append(f"uncaught on {page.url}: {error}"))

        def on_dialog(dialog: Any) -> None:
            opened.questions.append(dialog.message)
            if opened.answer:
                dialog.accept()
            else:
                dialog.dismiss()

        page.on("dialog", on_dialog)
        page.goto(opened.base + path + (f"#token={token}" if token else ""))
        if token:
            opened.ready()
        return opened

    yield open_console
    for context in contexts:
        context.close()
    errors = [error for opened in consoles for error in opened.errors]
    assert not errors, "JavaScript errors:\n" + "\n".join(errors)
