"""`offpath local` stops when asked, even with a job running that would take minutes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import ROOT, TENANT_A, TOKEN_A, Local, _stop, _wait_until_serving


def test_a_runtime_with_a_long_job_running_stops_within_the_stop_timeout(tmp_path: Path) -> None:
    console = tmp_path / "console.txt"
    command = [sys.executable, "-m", "offpath_local", "local", "--port", "0", "--data", str(tmp_path)]
    command += ["--token", f"{TENANT_A}:{TOKEN_A}", "--quiet"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with console.open("w") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        local = Local(_wait_until_serving(process, tmp_path, console), tmp_path, console)
        job_id = local.submit("demo.sleep", {"ms": 600_000}).body["job_id"]
        local.wait_for_job(job_id, {"RUNNING"})
    finally:
        # Within conftest's STOP_TIMEOUT_S (20 s) and with exit code 0, or it fails: the running job (its
        # invocation thread) is abandoned, as Lambda ends an environment, not waited for until its timeout.
        _stop(process, console)
