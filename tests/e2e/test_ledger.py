"""TESTPLAN 12, the ledger: 100 jobs over HTTP through `offpath local` with random injected faults (seeded)
lose nothing, repeat no side effect guarded by `ctx.once`, and all end in the state their type should end in.

The runtime is started for this module with `--faults 7 --fault-rate 0.03` (every kind of faults.py) and
the test timings; the 1,000-job version is `scripts/ledger.py` (`make bench`). The ledger is printed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from offpath_local.faults import KINDS
from offpath_tools.ledger import FINAL_WITHIN_S, FLOW_ACCOUNTS, LIMITED_AT_ONCE, Ledger, LedgerRuntime, run_ledger
from offpath_tools.ledger_batches import BatchLedger, run_batch_ledger

# A seed whose draws meet every kind of fault, worker crashes of welcome jobs among them (the draws depend on the
# idempotency keys: with these keys seed 6 crashes 5 welcome jobs' workers, seed 7 none).
SEED = 6
FAULT_RATE = 0.03
JOBS = 100


pytestmark = pytest.mark.needs("faults")


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Ledger, LedgerRuntime]]:
    data_dir: Path = tmp_path_factory.mktemp("ledger")
    local = LedgerRuntime.launch(data_dir, seed=SEED, fault_rate=FAULT_RATE)
    try:
        result = run_ledger(local, JOBS, seed=SEED, fault_rate=FAULT_RATE, timeout_s=FINAL_WITHIN_S)
    finally:
        local.stop()
    print("\n" + "\n".join(result.lines()))
    yield result, local


def test_every_accepted_job_reaches_the_final_state_its_type_should_end_in(
    ledger: tuple[Ledger, LedgerRuntime],
) -> None:
    result, _ = ledger

    assert (result.submitted, result.accepted, result.refused) == (JOBS, JOBS, 0)
    assert result.lost == []
    assert result.unexpected == []
    assert (result.succeeded, result.failed) == (90, 10)


def test_no_side_effect_guarded_by_once_happens_twice_or_never(ledger: tuple[Ledger, LedgerRuntime]) -> None:
    result, _ = ledger

    assert result.duplicate_effects == []
    assert result.missing_effects == []


def test_a_submit_answered_503_left_no_job_behind(ledger: tuple[Ledger, LedgerRuntime]) -> None:
    result, _ = ledger

    assert result.written_despite_refusal == 0


def test_the_run_met_every_kind_of_fault(ledger: tuple[Ledger, LedgerRuntime]) -> None:
    result, _ = ledger

    assert {kind for kind, count in result.faults.items() if count} == set(KINDS)
    assert result.sweeper_resends + result.sweeper_requeues > 0
    assert result.duplicate_deliveries > 0


def test_jobs_whose_worker_died_after_the_side_effect_finished_without_repeating_it(
    ledger: tuple[Ledger, LedgerRuntime],
) -> None:
    """TESTPLAN 14 under random faults: every welcome job whose worker was killed before its success write."""
    result, local = ledger
    crashed = set(result.faulted_jobs.get("worker-crash", []))
    emails = Counter(e["to"] for e in local.effects() if e.get("effect") == "welcome-email")
    welcome = {
        view["job_id"]: view
        for view in result.views.values()
        if view["type"] == "send_welcome_email" and view["job_id"] in crashed
    }

    assert welcome, "no welcome job was crashed: the seed no longer exercises TESTPLAN 14"
    for view in welcome.values():
        assert view["status"] == "SUCCEEDED"
        assert view["attempts"] >= 2
        assert emails[f"{view['result']['user_id']}@example.com"] == 1


# -- with quotas on ---------------------------------------------------------------------------------

QUOTA_JOBS = 40
# Tight enough that the ledger's four clients meet them even on a loaded machine, where the local api answered
# fewer than 3 submits a second and a rate of 3 was never exceeded: 2 a second, and 10 open jobs (of 40).
QUOTAS = ("ledger:submits_per_s=2,burst=2,open_jobs=10",)


@pytest.fixture(scope="module")
def ledger_with_quotas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Ledger, dict[str, int]]]:
    data_dir: Path = tmp_path_factory.mktemp("ledger-quotas")
    local = LedgerRuntime.launch(data_dir, seed=SEED, fault_rate=FAULT_RATE, quotas=QUOTAS)
    try:
        result = run_ledger(local, QUOTA_JOBS, seed=SEED, fault_rate=FAULT_RATE, timeout_s=FINAL_WITHIN_S, tag="quotas")
        api = local.api()
        try:
            # A submit still refused after its retries left no job: no job of the tenant carries its key (404,
            # as a lookup of it would answer; 200 if one did).
            keys = _listed_keys(api)
            found = Counter(200 if key in keys else 404 for key in result.refused_jobs)
        finally:
            api.close()
    finally:
        local.stop()
    print("\n" + "\n".join(result.lines()))
    yield result, dict(found)


def _listed_keys(api: Any) -> set[str]:
    """The idempotency keys of every job the api lists for the ledger's tenant."""
    keys: set[str] = set()
    cursor: str | None = None
    while True:
        answer = api.call("GET", "/jobs?limit=100" + (f"&cursor={cursor}" if cursor else ""))
        assert answer.status == 200
        keys |= {str(job.get("idempotency_key")) for job in answer.body["jobs"]}
        cursor = answer.body.get("cursor")
        if not cursor:
            return keys


def test_with_quotas_on_nothing_accepted_is_lost_and_a_429_left_no_job(
    ledger_with_quotas: tuple[Ledger, dict[str, int]],
) -> None:
    result, refused_lookups = ledger_with_quotas

    assert result.over_quota > 0  # the quotas were met
    assert result.accepted + result.refused == QUOTA_JOBS
    assert result.accepted > 0
    assert result.lost == []
    assert result.unexpected == []
    assert result.duplicate_effects == []
    assert result.written_despite_refusal == 0
    assert set(refused_lookups) <= {404}


def test_no_final_state_is_without_its_delivery_or_its_deliverys_dlq_entry(
    ledger: tuple[Ledger, LedgerRuntime],
) -> None:
    """The notifier and the delivery path under the same faults: every final job's final event reached the
    tenant's endpoint, signed (or its delivery was dead-lettered), though the receiver answered every tenth
    request 503."""
    result, _ = ledger
    webhooks = result.webhooks

    assert webhooks is not None
    assert webhooks.finals == JOBS
    assert webhooks.undelivered == []
    assert webhooks.unverified == 0
    assert webhooks.answered_503 > 0


# -- with flow control --------------------------------------------------------------------------------

FLOW_JOBS = 30
# One job's worker dies after the job ran, holding its slot: the slot frees at its time's end, the job runs again.
FLOW_CRASHED = "flow-0"


@pytest.fixture(scope="module")
def ledger_with_flow_control(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ledger]:
    data_dir: Path = tmp_path_factory.mktemp("ledger-flow")
    local = LedgerRuntime.launch(
        data_dir, seed=SEED, fault_rate=FAULT_RATE, fault_jobs=[f"worker-crash:key={FLOW_CRASHED}"]
    )
    try:
        result = run_ledger(
            local, FLOW_JOBS, seed=SEED, fault_rate=FAULT_RATE, timeout_s=FINAL_WITHIN_S, tag="flow", flow_control=True
        )
    finally:
        local.stop()
    print("\n" + "\n".join(result.lines()))
    yield result


def test_with_flow_control_no_account_ever_runs_more_than_its_limit_and_nothing_is_lost(
    ledger_with_flow_control: Ledger,
) -> None:
    """`e2e.limited` (at most 2 at once per account) under the same faults: the runs' own start and end times (the
    job function writes them down) never show 3 of one account at once; every job succeeds."""
    result = ledger_with_flow_control

    assert (result.accepted, result.lost, result.unexpected) == (FLOW_JOBS, [], [])
    assert result.succeeded == FLOW_JOBS
    assert set(result.most_at_once) == {f"account-{n}" for n in range(FLOW_ACCOUNTS)}
    assert result.over_limit == {}
    # Never over the limit; how close a loaded machine came to it is not asserted (the starts are the workers').
    assert 1 <= max(result.most_at_once.values()) <= LIMITED_AT_ONCE
    assert result.admission_waits > 0
    assert sum(result.faults.values()) > 0
    (crashed,) = result.faulted_jobs["worker-crash"]
    assert result.views[crashed]["status"] == "SUCCEEDED" and result.views[crashed]["attempts"] == 2


# -- batches and chains --------------------------------------------------------------------------------

BATCHES, MEMBERS, CHAINS, STEPS = 4, 5, 3, 3
# A seed whose plan has a batch whose one failing member is retried by hand (then on_success runs), one with two
# members that fail for good and two of members that all succeed.
BATCH_SEED = 12


@pytest.fixture(scope="module")
def batch_ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BatchLedger]:
    data_dir: Path = tmp_path_factory.mktemp("ledger-batches")
    local = LedgerRuntime.launch(data_dir, seed=BATCH_SEED, fault_rate=FAULT_RATE)
    try:
        result = run_batch_ledger(
            local,
            batches=BATCHES,
            members=MEMBERS,
            chains=CHAINS,
            steps=STEPS,
            seed=BATCH_SEED,
            fault_rate=FAULT_RATE,
            timeout_s=FINAL_WITHIN_S,
        )
    finally:
        local.stop()
    print("\n" + "\n".join(result.lines()))
    yield result


def test_batches_callbacks_run_once_counts_are_exact_and_chain_steps_run_once_in_order(
    batch_ledger: BatchLedger,
) -> None:
    """Under the same faults: each batch's on_complete ran once; on_success once exactly when every member ended
    SUCCEEDED (hand retries included); the batch's counts are its members' final states; each chain's steps ran
    once each, in order; nothing lost."""
    result = batch_ledger

    assert (result.refused, len(result.batch_ids)) == (0, BATCHES)
    assert result.lost == []
    assert result.on_complete_wrong == []
    assert result.on_success_wrong == []
    assert result.counts_wrong == []
    assert result.steps_wrong == []
    assert result.failing == 3
    # The member retried by hand (unless a fault made its first run's failure a success already) then succeeded.
    assert result.retried_by_hand <= 1
    assert sum(sum(states.values()) for states in result.members_final.values()) == BATCHES * MEMBERS
    assert result.all_succeeded == BATCHES - 1
    assert result.members_final["lb-b3"] == Counter({"SUCCEEDED": 3, "FAILED": 2})
    assert sum(result.faults.values()) > 0
