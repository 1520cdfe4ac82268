"""The emulator's SQS keeps every message when sends and deletes meet (found by the burst of TESTPLAN 21: moto's
server lost messages sent while another was deleted, and brought deleted ones back)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_sends_and_deletes_at_once_on_a_long_queue_lose_no_message_and_revive_none() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-m", "tests.e2e.emulator_queues"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # a guard against a hang: the race is CPU work, slow on a shared machine or beside another worker
        check=True,
    )
    counts = json.loads(run.stdout.strip().splitlines()[-1])

    assert counts["received"] == counts["sent"], counts
    assert (counts["lost"], counts["resurrected"]) == (0, 0)
