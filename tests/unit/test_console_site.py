"""The console's static page: one page for every console URL, its assets, and the headers that keep a tenant's
data inert in an admin's browser."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from offpath_local.console import ConsoleSite, local_pages

PAGE_PATHS = [
    "/console",
    "/console/",
    "/console/jobs",
    "/console/jobs/0123456789abcdef0123456789abcdef",
    "/console/queues/default",
    "/console/schedules",
    "/console/alarms",
    "/console/job-types",
]


@pytest.fixture(scope="module")
def site() -> ConsoleSite:
    return ConsoleSite(api_base="")


@pytest.mark.parametrize("path", PAGE_PATHS)
def test_every_console_url_is_the_page_itself(site: ConsoleSite, path: str) -> None:
    answer = site.answer("GET", path)

    assert answer is not None
    status, headers, body = answer
    assert status == 200
    assert headers["content-type"].startswith("text/html")
    assert b'<script src="/console/static/console.js" defer></script>' in body


def test_the_page_forbids_inline_script_and_framing(site: ConsoleSite) -> None:
    _, headers, _ = site.answer("GET", "/console/jobs") or (0, {}, b"")
    policy = dict(part.strip().split(" ", 1) for part in headers["content-security-policy"].split(";"))

    assert policy["script-src"] == "'self'"
    assert policy["default-src"] == "'none'"
    assert policy["frame-ancestors"] == "'none'"
    assert "unsafe" not in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"


class _Scripts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.inline: list[str] = []
        self.handlers: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handlers += [name for name, _ in attrs if name.startswith("on")]
        if tag == "script":
            self._in_script = not dict(attrs).get("src")

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False


def test_the_page_has_no_inline_script_or_handler(site: ConsoleSite) -> None:
    parser = _Scripts()
    parser.feed(site.page.decode())

    assert parser.inline == [] and parser.handlers == []


def test_the_script_never_parses_text_as_html(site: ConsoleSite) -> None:
    script = site.assets["console.js"].decode()
    # Comments may name what is avoided; code may not use it.
    code = re.sub(r"//.*", "", script)

    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in code, sink


def test_assets_are_served_with_their_types(site: ConsoleSite) -> None:
    for name, kind in [("console.js", "text/javascript"), ("console.css", "text/css"), ("favicon.svg", "image/svg")]:
        status, headers, body = site.answer("GET", f"/console/static/{name}") or (0, {}, b"")
        assert status == 200 and headers["content-type"].startswith(kind) and body


@pytest.mark.parametrize(
    "path", ["/console/static/../__init__.py", "/console/static/nothing.js", "/console/static/index.html"]
)
def test_only_the_shipped_assets_are_served(site: ConsoleSite, path: str) -> None:
    status, _, _ = site.answer("GET", path) or (0, {}, b"")
    assert status == 404


def test_the_console_takes_no_writes(site: ConsoleSite) -> None:
    status, headers, _ = site.answer("POST", "/console/jobs") or (0, {}, b"")
    assert status == 405 and headers["allow"] == "GET"


def test_paths_outside_the_console_are_left_to_the_api(site: ConsoleSite) -> None:
    assert site.answer("GET", "/jobs") is None
    assert site.answer("GET", "/consoles") is None


def test_the_api_base_is_written_into_the_page_as_an_attribute_value() -> None:
    behind_proxy = ConsoleSite(api_base="/api")
    assert b'<meta name="offpath-api" content="/api">' in behind_proxy.page
    hostile = ConsoleSite(api_base='"><script>x</script>')
    assert b"<script>x" not in hostile.page


def test_the_runtime_pages_add_metrics_beside_the_console() -> None:
    pages = local_pages(lambda: (b"offpath_up 1\n", "text/plain; version=0.0.4"))

    assert pages("GET", "/metrics") == (
        200,
        {"content-type": "text/plain; version=0.0.4", "cache-control": "no-store"},
        b"offpath_up 1\n",
    )
    assert (pages("GET", "/console") or (0,))[0] == 200
    assert pages("GET", "/metrics/x") is None
    assert pages("GET", "/jobs") is None
