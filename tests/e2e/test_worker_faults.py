"""Workers under faults, end to end through `offpath local` over HTTP (TESTPLAN 14, 16, 21).

One runtime for the module, started with faults forced onto given jobs only (`--fault-job
worker-crash:JOB_ID`: that job's worker dies after the job function ran, before its success write) and
the test timings, with the queues' visibility timeouts in the stack's ratio (6 x the worker's timeout).
A dead worker's batch was held until its invocation's lease ends, and reappears then, well before its
visibility timeout would bring it back (see WAIT_S). The jobs of 14 and 16 are submitted when it starts and
recover while the burst (21) runs.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from offpath_tools.ledger import STACK_VISIBILITY_SCALE, Api, LedgerRuntime, final_views, run_burst
from tests.e2e.conftest import wait_for

BURST = 150
WELCOME_KEY = "crash-after-the-e-mail"
BATCH_KEYS = [f"mid-batch-{n}" for n in range(5)]
CRASHED_IN_BATCH = 2  # the middle one: two records finished before it, two not started
# A dead worker's batch comes back when its invocation's lease has passed (the hold, logic/process.py): about 23 s
# after the invocation started on `default` (its worker's 700 s timeout, a full batch of its slowest job type,
# scaled by 0.03, + the scaled lease margin + 1 s), about 8 s on `e2e-batch` (200 s scaled). Its queue's
# visibility timeout would take 126 s and 36 s (VISIBILITY_TIMEOUT_S): the tests check that the second attempt
# started before it.
WAIT_S = 180
BATCH_WAIT_S = 100
# The queue class offpath_tools/ledger_jobs.py declares in the runtime (not imported here: it would register its
# job types in this process's registry, which the infra tests synthesize the stack from).
BATCH_QUEUE = "e2e-batch"
# The queues' visibility timeouts in this runtime (TestTiming with both scales at offpath_tools.ledger's
# TIMEOUT_SCALE, 0.03: the stack's 6 x the worker timeout, scaled).
VISIBILITY_TIMEOUT_S = {"default": 126, BATCH_QUEUE: 36}


@dataclass
class Scenario:
    local: LedgerRuntime
    api: Api
    welcome_id: str
    batch_ids: list[str]


pytestmark = pytest.mark.needs("faults")


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    data_dir: Path = tmp_path_factory.mktemp("worker-faults")
    local = LedgerRuntime.launch(
        data_dir,
        # Named by their idempotency keys: a job's id is only known once it is submitted.
        fault_jobs=[f"worker-crash:key={WELCOME_KEY}", f"worker-crash:key={BATCH_KEYS[CRASHED_IN_BATCH]}"],
        sweep_grace_s=120,  # recovery here is the event source mapping's, not the sweeper's
        visibility_scale=STACK_VISIBILITY_SCALE,
    )
    api = local.api()
    try:
        welcome = api.call(
            "POST",
            "/jobs",
            {"type": "send_welcome_email", "payload": {"user_id": "u-14", "email": "u-14@example.com"}},
            {"Idempotency-Key": WELCOME_KEY},
        )
        assert welcome.status == 202, welcome.body
        welcome_id = str(welcome.body["job_id"])
        # One batch of five on a queue of its own: the worker gets them in one invocation, in order.
        items = [{"type": "e2e.batch_effect", "payload": {"tag": key}, "idempotency_key": key} for key in BATCH_KEYS]
        batch = api.call("POST", "/jobs/batch", {"jobs": items})
        assert batch.status == 207, batch.body
        # Accepted, each: 202, or 200 where the client's retry of a slow answer replayed the keyed item.
        assert all(r["status"] in (200, 202) for r in batch.body["results"]), batch.body
        assert len({r["job"]["job_id"] for r in batch.body["results"]}) == len(BATCH_KEYS), batch.body
        batch_ids = [str(r["job"]["job_id"]) for r in batch.body["results"]]
        yield Scenario(local, api, welcome_id, batch_ids)
    finally:
        api.close()
        local.stop()


def _finals(scenario: Scenario, job_ids: list[str], wait_s: float = WAIT_S) -> dict[str, dict[str, Any]]:
    views = final_views(scenario.api, job_ids, timeout_s=wait_s)
    assert all(views[j]["status"] in {"SUCCEEDED", "FAILED"} for j in job_ids), [views[j]["status"] for j in job_ids]
    return views


def test_a_burst_on_a_queue_with_concurrency_2_all_succeeds_and_none_reaches_the_dlq(scenario: Scenario) -> None:
    """TESTPLAN 21, scaled down (the 5,000-job version is `scripts/ledger.py --burst 5000`)."""
    burst = run_burst(scenario.local, BURST, timeout_s=120)
    print("\n" + "\n".join(burst.lines()))

    assert (burst.accepted, burst.succeeded, burst.not_succeeded) == (BURST, BURST, [])
    assert burst.retried == 0
    assert burst.dlq_depth == 0


def test_a_worker_that_dies_after_the_side_effect_does_not_repeat_it_on_redelivery(scenario: Scenario) -> None:
    """TESTPLAN 14: the e-mail went out, the worker died before recording success; the redelivered
    message runs the job again, and `ctx.once` keeps the e-mail from going out twice."""
    view = _finals(scenario, [scenario.welcome_id])[scenario.welcome_id]
    emails = [e for e in scenario.local.effects() if e.get("to") == "u-14@example.com"]
    crashes = [f for f in scenario.local.faults() if f["job_id"] == scenario.welcome_id]

    assert [f["kind"] for f in crashes] == ["worker-crash"]
    assert (view["status"], view["attempts"]) == ("SUCCEEDED", 2)
    assert view["result"] == {"user_id": "u-14", "sent": False}  # the second run found the mark
    assert len(emails) == 1
    # Run again once the dead invocation's lease had passed, not at its queue's visibility timeout.
    assert _second_attempt_after_s(view) < VISIBILITY_TIMEOUT_S[view["queue"]]


def test_a_worker_that_dies_mid_batch_redoes_no_finished_record_and_returns_the_unstarted_ones(
    scenario: Scenario,
) -> None:
    """TESTPLAN 16: the invocation raised at the third of five records. Nothing was deleted: the whole batch
    came back. The two finished records were acknowledged without running again, the crashed one ran
    again without repeating its side effect, the two unstarted ones ran once."""
    ids = scenario.batch_ids
    views = _finals(scenario, ids, BATCH_WAIT_S)
    # The duplicate acknowledgements are logged when the batch comes back, possibly just after the last success.
    acknowledged = wait_for(
        lambda: _acknowledged(scenario, ids[:CRASHED_IN_BATCH]), timeout_s=BATCH_WAIT_S, interval_s=0.2
    )
    effects = scenario.local.effects()
    runs = Counter(e["tag"] for e in effects if e.get("effect") == "run")
    sent = Counter(e["tag"] for e in effects if e.get("effect") == "batch-effect")

    assert [views[j]["status"] for j in ids] == ["SUCCEEDED"] * 5
    assert [views[j]["attempts"] for j in ids] == [1, 1, 2, 1, 1]
    assert [runs[key] for key in BATCH_KEYS] == [1, 1, 2, 1, 1]
    assert [sent[key] for key in BATCH_KEYS] == [1, 1, 1, 1, 1]
    assert all(acknowledged[j] >= 1 for j in ids[:CRASHED_IN_BATCH])
    assert views[ids[CRASHED_IN_BATCH]]["queue"] == BATCH_QUEUE
    assert _second_attempt_after_s(views[ids[CRASHED_IN_BATCH]]) < VISIBILITY_TIMEOUT_S[BATCH_QUEUE]


def _second_attempt_after_s(view: dict[str, Any]) -> float:
    """How long after the job was accepted its second attempt (the one after the crash) started."""
    (second,) = [a for a in view["attempt_history"] if a["attempt"] == 2]
    return (_time(second["started_at"]) - _time(view["created_at"])).total_seconds()


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _acknowledged(scenario: Scenario, job_ids: list[str]) -> Counter[str] | None:
    acknowledged = scenario.local.log().acknowledged
    if all(acknowledged[j] for j in job_ids):
        return acknowledged
    time.sleep(0.1)
    return None
