"""Schemathesis hooks for fuzzing the API (loaded with SCHEMATHESIS_HOOKS=tests.e2e.fuzz_hooks).

Two rules of the API depend on time or on what was sent before, which no JSON Schema can state; for those, the
generation is steered into the values the rule allows, and the rules themselves are tested in
tests/integration (test_scheduling.py, test_submit_api.py):

- `run_at` is a `date-time` from 1970-01-01 to a year ahead: date-times are drawn from that range (each with
  an offset of its own), as schemathesis advises for a ranged format.
- An `Idempotency-Key` used before with another request is refused (422 idempotency_key_reused): a key that
  fits the document's pattern is made unique to its request (a suffix is added), so a schema-valid request
  never reuses one by chance.
- `expires_at` must be in the future, after the job's run time and at most the retention (7 days) ahead, and
  `debounce` decides when a job runs (with a `run_at` beside it: 422 run_at): a submit's (or a batch item's)
  `expires_at` that is a date-time is moved to a day after its run time, a `run_at` beside a `debounce` is
  dropped, and a `run_at` more than 6 days ahead beside an expiry is dropped (tests/unit/test_expiry.py and
  tests/integration/test_expiry_and_debounce_api.py test the rules).
- A listing's `cursor` is only accepted from the listing that handed it out (422 invalid_cursor otherwise): a
  cursor that fits the document's pattern is replaced by one of the real cursors in FUZZ_CURSORS (a JSON list,
  set by the test from the pages of the jobs it seeded). Those are the caller's own listing's: a request that
  lists another tenant's jobs (`tenant=system`, admins), or another listing (batches, a batch's jobs), is sent for
  its first page, without a cursor.

- A webhook receiver's URL is refused unless its host resolves to allowed addresses (the embedded runtime
  resolves no names and allows only 127.0.0.1, on the ports its operator named), and a tenant has at most 10
  endpoints: a `PUT /webhooks/{name}` whose URL fits the document's pattern is given a loopback receiver's URL
  (a closed port: its deliveries fail and are retried, on loopback only), and a name that fits is one of 8. The rules
  are tested in tests/unit/test_webhooks.py and tests/e2e/test_notices.py.

A value that breaks the document's pattern is sent as generated: the refusals of those are what is checked.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import urllib.request
from datetime import UTC, datetime, timedelta
from typing import Any

import schemathesis
from hypothesis import strategies as st

from offpath.contract import CURSOR_PATTERN, IDEMPOTENCY_KEY_PATTERN, WEBHOOK_NAME_PATTERN
from offpath.handlers.api_models import WEBHOOK_URL_PATTERN
from offpath.logic.submit import EARLIEST_RUN_AT

# A day inside either end, so the clock moving on during the run changes nothing.
LATEST_AHEAD = timedelta(days=364)
MARGIN = timedelta(days=1)
MAX_OFFSET_MIN = 23 * 60 + 59

_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)
_CURSOR = re.compile(CURSOR_PATTERN)
_WEBHOOK_NAME = re.compile(WEBHOOK_NAME_PATTERN)
_WEBHOOK_URL = re.compile(WEBHOOK_URL_PATTERN)
LOOPBACK_RECEIVER_PORT = 9  # named for receivers (`--webhook-port`); nothing listens there
LOOPBACK_RECEIVER = f"http://127.0.0.1:{LOOPBACK_RECEIVER_PORT}/fuzzed"
WEBHOOK_NAMES = 8
_sent = itertools.count(1)
_cursors = itertools.cycle(json.loads(os.environ.get("FUZZ_CURSORS") or "[]") or [None])


@st.composite
def run_at_values(draw: st.DrawFn) -> str:
    """An RFC 3339 date-time whose instant is within the range run_at allows, written in some offset."""
    earliest = (EARLIEST_RUN_AT + MARGIN).replace(tzinfo=None)
    latest = (datetime.now(UTC) + LATEST_AHEAD - MARGIN).replace(tzinfo=None)
    instant = draw(st.datetimes(min_value=earliest, max_value=latest))
    offset_min = draw(st.integers(-MAX_OFFSET_MIN, MAX_OFFSET_MIN))
    local = instant + timedelta(minutes=offset_min)
    fraction = draw(st.sampled_from(["", f".{local.microsecond:06d}", f".{local.microsecond // 1000:03d}"]))
    if offset_min == 0 and draw(st.booleans()):
        zone = "Z"
    else:
        sign = "-" if offset_min < 0 else "+"
        zone = f"{sign}{abs(offset_min) // 60:02d}:{abs(offset_min) % 60:02d}"
    return f"{local:%Y-%m-%dT%H:%M:%S}{fraction}{zone}"


schemathesis.openapi.format("date-time", run_at_values())


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    key = (case.headers or {}).get("Idempotency-Key")
    if isinstance(key, str) and _KEY.fullmatch(key):
        case.headers["Idempotency-Key"] = f"{key[:200]}~{next(_sent)}"
    cursor = (case.query or {}).get("cursor")
    if isinstance(cursor, str) and _CURSOR.fullmatch(cursor) and ("tenant" in case.query or case.path != "/jobs"):
        del case.query["cursor"]
    elif isinstance(cursor, str) and _CURSOR.fullmatch(cursor):
        real = next(_cursors)
        if real is not None:
            case.query["cursor"] = real
    _steer_webhook(case)
    _steer_expiry(case)
    _steer_wait(case)


# A long poll answers when the job is final or the wait ends: a valid wait is kept short (the parameter is still
# exercised, its refusals too), so a run is not made of waits on jobs that a paused type or a long chain holds back.
SHORT_WAIT_S = 1


def _steer_wait(case: Any) -> None:
    wait = (case.query or {}).get("wait")
    if isinstance(wait, (int, float)) and not isinstance(wait, bool) and wait > SHORT_WAIT_S:
        case.query["wait"] = SHORT_WAIT_S


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    """A pause the run made is resumed at once (the routes are still fuzzed, both of them): a queue or job type
    left paused would hold every later job of the run back."""
    request = getattr(response, "request", None)
    url = getattr(request, "url", None)
    if case.method.upper() != "POST" or not str(case.path).endswith("/pause") or not isinstance(url, str):
        return
    if getattr(response, "status_code", None) != 200:
        return
    resume = urllib.request.Request(
        url.rsplit("/pause", 1)[0] + "/resume",
        method="POST",
        headers={"Authorization": request.headers.get("Authorization", "")},
    )
    with contextlib.suppress(OSError), urllib.request.urlopen(resume, timeout=30):
        pass


RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)
EXPIRY_AHEAD_MAX = timedelta(days=6)


def _steer_expiry(case: Any) -> None:
    if case.method.upper() != "POST" or case.path not in ("/jobs", "/jobs/batch"):
        return
    body = case.body
    items = body.get("jobs") if isinstance(body, dict) and case.path == "/jobs/batch" else [body]
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            _steer_expiry_of(item)


def _steer_expiry_of(item: dict[str, Any]) -> None:
    now = datetime.now(UTC)
    debounce = item.get("debounce")
    if debounce is not None and item.get("run_at") is not None:
        item["run_at"] = None
    expires_at = item.get("expires_at")
    if not (isinstance(expires_at, str) and RFC3339.fullmatch(expires_at)):
        return
    due = now
    run_at = item.get("run_at")
    if isinstance(run_at, str) and RFC3339.fullmatch(run_at):
        try:
            due = max(now, datetime.fromisoformat(run_at.upper()).astimezone(UTC))
        except (ValueError, OverflowError):
            due = now
    if due - now > EXPIRY_AHEAD_MAX:
        item["run_at"] = None
        due = now
    seconds = debounce.get("seconds") if isinstance(debounce, dict) else None
    if isinstance(seconds, int) and not isinstance(seconds, bool) and 0 < seconds <= 900:
        due = now + timedelta(seconds=seconds)
    item["expires_at"] = (due + timedelta(days=1)).isoformat()


def _steer_webhook(case: Any) -> None:
    if case.method.upper() != "PUT" or case.path != "/webhooks/{name}":
        return
    name = (case.path_parameters or {}).get("name")
    if isinstance(name, str) and _WEBHOOK_NAME.fullmatch(name):
        case.path_parameters["name"] = f"fuzz-{next(_sent) % WEBHOOK_NAMES}"
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("url"), str) and _WEBHOOK_URL.search(body["url"]):
        body["url"] = LOOPBACK_RECEIVER
