"""`scripts/screenshots.py OUT`: the overview with an alarm firing, a job page with a traceback, the DLQ, the jobs
list's bulk preview and a batch's page, each as a PNG 1280 and 390 px wide."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import ROOT

NAMES = ("overview-alarm", "job-traceback", "dlq", "bulk-preview", "batch", "job-waiting")


def png_width(path: Path) -> int:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", path
    return int(struct.unpack(">I", header[16:20])[0])


def test_the_script_writes_each_page_wide_and_narrow_into_the_folder_given(tmp_path: Path) -> None:
    out = tmp_path / "shots"

    # Its own process, as a user runs it: Playwright's sync API cannot run inside the browser tests' event loop.
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "screenshots.py"), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{n}-{w}.png" for n in NAMES for w in ("wide", "narrow"))
    for name in NAMES:
        assert png_width(out / f"{name}-wide.png") == 1280
        assert png_width(out / f"{name}-narrow.png") == 390
