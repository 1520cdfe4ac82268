"""`scripts/screenshots.py OUT`: the overview with an alarm firing, a job page with a traceback and the DLQ, each
as a PNG 1280 and 390 px wide."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

from tests.e2e.conftest import ROOT

NAMES = ("overview-alarm", "job-traceback", "dlq")


def png_width(path: Path) -> int:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", path
    return int(struct.unpack(">I", header[16:20])[0])


def test_the_script_writes_each_page_wide_and_narrow_into_the_folder_given(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("screenshots", ROOT / "scripts" / "screenshots.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "shots"

    assert script.main([str(out)]) == 0

    assert sorted(p.name for p in out.iterdir()) == sorted(f"{n}-{w}.png" for n in NAMES for w in ("wide", "narrow"))
    for name in NAMES:
        assert png_width(out / f"{name}-wide.png") == 1280
        assert png_width(out / f"{name}-narrow.png") == 390
