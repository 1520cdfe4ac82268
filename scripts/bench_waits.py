"""Wait isolation on the embedded runtime: tenant A holds many long polls (`GET /jobs/{id}?wait=N`) at once while
tenant B submits and reads; B's latencies and A's answers are printed.

    .venv/bin/python scripts/bench_waits.py [--waits 15] [--rounds 20] [--wait-s 10]

Each of A's waits targets a job due in an hour (it cannot finish during the wait). With the read function's own
environments and the per-tenant cap (5), A's waits past the cap are answered 429 at once and B's requests are
served by environments A cannot hold.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from offpath_tools.launcher import OffpathLocal

TOKENS = {"tenant-a": "bench-token-a", "tenant-b": "bench-token-b"}


def call(url: str, method: str, path: str, token: str, body: Any = None) -> tuple[int, Any, dict[str, str]]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {token}", **({"Content-Type": "application/json"} if data else {})}
    request = urllib.request.Request(url + path, data=data, method=method, headers=headers)  # noqa: S310 - loopback
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310 - the runtime it started
            return (
                answer.status,
                json.loads(answer.read() or b"null"),
                {k.lower(): v for k, v in answer.headers.items()},
            )
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null"), {k.lower(): v for k, v in error.headers.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waits", type=int, default=15, help="tenant A's waits at once (default 15: 3x the cap)")
    parser.add_argument("--rounds", type=int, default=20, help="tenant B's submits and reads during them")
    parser.add_argument("--wait-s", type=float, default=10.0)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        runtime = OffpathLocal.start(Path(directory), tokens=TOKENS, admins=["tenant-a"], args=["--quiet"])
        try:
            run(runtime.url, options.waits, options.rounds, options.wait_s)
        finally:
            runtime.stop()


def run(url: str, waits: int, rounds: int, wait_s: float) -> None:
    a, b = TOKENS["tenant-a"], TOKENS["tenant-b"]
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    _, job, _ = call(url, "POST", "/jobs", a, {"type": "demo.echo", "payload": {}, "run_at": later})
    _, b_job, _ = call(url, "POST", "/jobs", b, {"type": "demo.echo", "payload": {}})
    answers: list[tuple[int, float, str | None]] = []

    def hold() -> None:
        started = time.monotonic()
        status, _, headers = call(url, "GET", f"/jobs/{job['job_id']}?wait={wait_s:g}", a)
        answers.append((status, time.monotonic() - started, headers.get("retry-after")))

    threads = [threading.Thread(target=hold) for _ in range(waits)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    submits, reads = [], []
    for _ in range(rounds):
        started = time.monotonic()
        assert call(url, "POST", "/jobs", b, {"type": "demo.echo", "payload": {}})[0] == 202
        submits.append(time.monotonic() - started)
        started = time.monotonic()
        assert call(url, "GET", f"/jobs/{b_job['job_id']}", b)[0] == 200
        reads.append(time.monotonic() - started)
    for thread in threads:
        thread.join()
    held = [seconds for status, seconds, _ in answers if status == 200]
    refused = [seconds for status, seconds, _ in answers if status == 429]
    print(f"tenant A: {waits} waits of {wait_s:g} s at once: {len(held)} held (200 after {_spread(held)}),")
    print(
        f"  {len(refused)} refused 429 (after {_spread(refused)}; Retry-After {sorted({r for *_, r in answers if r})})"
    )
    print(f"tenant B meanwhile, {rounds} rounds: submit {_spread(submits)}, read {_spread(reads)}")


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"median {statistics.median(values) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms"


if __name__ == "__main__":
    main()
