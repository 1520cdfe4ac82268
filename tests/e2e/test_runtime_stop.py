"""`offpath local` stops when asked, even with a job running that would take minutes."""

from __future__ import annotations

from pathlib import Path

from offpath_tools.launcher import OffpathLocal
from tests.e2e.conftest import ROOT, TENANT_A, TOKEN_A, Local


def test_a_runtime_with_a_long_job_running_stops_within_the_stop_timeout(tmp_path: Path) -> None:
    runtime = OffpathLocal.start(tmp_path, tokens={TENANT_A: TOKEN_A}, args=["--quiet"], cwd=ROOT)
    try:
        local = Local(runtime.url, runtime.data_dir, runtime.console)
        job_id = local.accepted("demo.sleep", {"ms": 600_000}, key="long-sleep")
        local.wait_for_job(job_id, {"RUNNING"})
    finally:
        # Within the launcher's STOP_TIMEOUT_S and with exit code 0, or it fails: the running job (its invocation
        # thread) is abandoned, as Lambda ends an environment, not waited for until its timeout.
        runtime.stop()
