"""The operator console: static HTML, CSS and JavaScript under `/console`, the same page everywhere.

It is served by the embedded runtime (`/console` on its API port) and by `offpath console --api URL` (a
local proxy for a deployed stack, console/proxy.py). The page holds no data: the browser reads and acts
through the public HTTP API only, with the bearer token it was given in the URL's fragment (never sent
to a server as part of a URL) and keeps in sessionStorage. Without cookies a page on another origin
cannot act in its name.

Every answer carries a Content-Security-Policy that allows scripts and styles from this origin only
(no inline script, no eval, no third-party origin), and the script builds every element with
`textContent`: whatever a tenant wrote is shown as text. Every URL under `/console` is the same page,
which draws what its path names, so shared links work when opened directly.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from importlib import resources

ROOT = "/console"
STATIC = f"{ROOT}/static/"
CONTENT_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".html": "text/html; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
}
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}

Answer = tuple[int, dict[str, str], bytes]


def _load_assets() -> dict[str, bytes]:
    folder = resources.files(__package__).joinpath("static")
    return {item.name: item.read_bytes() for item in folder.iterdir() if item.is_file()}


class ConsoleSite:
    """Answers GET requests under `/console`: the page for every path, and its static assets.

    `api_base`: where the browser finds the HTTP API, on this origin ("" for the runtime's own port,
    "/api" behind `offpath console`)."""

    def __init__(self, api_base: str = "") -> None:
        self.api_base = api_base
        self.assets = _load_assets()
        template = self.assets["index.html"].decode("utf-8")
        self.page = template.replace("{{api_base}}", html.escape(api_base, quote=True)).encode("utf-8")

    def answer(self, method: str, path: str) -> Answer | None:
        """None for a path outside the console."""
        if path != ROOT and not path.startswith(ROOT + "/"):
            return None
        if method not in ("GET", "HEAD"):
            return _plain(405, "the console's pages are read with GET\n", allow="GET")
        if path.startswith(STATIC):
            name = path[len(STATIC) :]
            body = self.assets.get(name) if name != "index.html" else None
            if body is None:
                return _plain(404, "no such file\n")
            kind = CONTENT_TYPES.get(name[name.rfind(".") :], "application/octet-stream")
            return 200, {**SECURITY_HEADERS, "content-type": kind, "cache-control": "no-cache"}, body
        headers = {**SECURITY_HEADERS, "content-type": CONTENT_TYPES[".html"], "cache-control": "no-store"}
        return 200, headers, self.page


def _plain(status: int, text: str, **extra: str) -> Answer:
    headers = {**SECURITY_HEADERS, "content-type": CONTENT_TYPES[".txt"], "cache-control": "no-store", **extra}
    return status, headers, text.encode()


def local_pages(metrics: Callable[[], tuple[bytes, str]] | None = None) -> Callable[[str, str], Answer | None]:
    """The embedded runtime's own pages, answered before its API routes: the console under `/console`
    and, given `metrics` (the Prometheus exposition and its content type), `GET /metrics`."""
    console = ConsoleSite(api_base="")

    def pages(method: str, path: str) -> Answer | None:
        if path == "/metrics" and metrics is not None:
            if method not in ("GET", "HEAD"):
                return _plain(405, "/metrics is read with GET\n", allow="GET")
            body, content_type = metrics()
            return 200, {"content-type": content_type, "cache-control": "no-store"}, body
        return console.answer(method, path)

    return pages
