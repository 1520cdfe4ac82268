"""The fault ledger's batch section (`scripts/ledger.py --batches`): batches and chains under injected faults.

BATCHES batches of MEMBERS jobs each (`POST /batches`, each with an idempotency key): a seeded share of the members
is `demo.poison` (FAILED), some of those with `first_run_only` (retried by hand once the batch is complete, they
then succeed); the rest `demo.echo`. Each batch has an `on_complete` and an `on_success` callback of type
`e2e.recorded` (offpath_tools.ledger_jobs), which appends its run, guarded by `ctx.once`, to the effects file.
CHAINS chains of STEPS `e2e.recorded` steps (`then`), each step recording (chain, step).

Checks: every batch's on_complete ran exactly once; its on_success exactly once when every member ended SUCCEEDED
(after the hand retries) and never otherwise; `GET /batches/{id}` counts equal the members' final states; every
chain step ran exactly once, in order; every member, callback and step final (none lost).
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from offpath_tools.ledger import FINAL, UNAVAILABLE, Answer, Api, LedgerRuntime, _settle

FAIL_SHARE = 0.1  # members that fail (demo.poison)
RETRY_SHARE = 0.5  # of the failing members, those that fail on their first run only and are retried by hand
BATCH_DONE = frozenset({"COMPLETE", "SUCCEEDED"})
# How long a submit is tried again under its key while it is answered 503 or 429.
SUBMIT_PATIENCE_S = 120.0


@dataclass
class BatchLedger:
    batches: int
    members: int
    chains: int
    steps: int
    seed: int
    fault_rate: float | None
    failing: int = 0  # members planned to fail
    retried_by_hand: int = 0  # failed members retried by hand
    batch_ids: dict[str, str] = field(default_factory=dict)  # tag -> batch id
    views: dict[str, dict[str, Any]] = field(default_factory=dict)  # tag -> last GET /batches/{id}
    members_final: dict[str, Counter[str]] = field(default_factory=dict)  # tag -> members' final states
    lost: list[str] = field(default_factory=list)  # members, callbacks or steps never final, batches never done
    on_complete_wrong: list[str] = field(default_factory=list)  # batches whose on_complete did not run once
    on_success_wrong: list[str] = field(default_factory=list)  # on_success not once when all succeeded, or ran
    counts_wrong: list[str] = field(default_factory=list)  # GET /batches/{id} counts != members' final states
    steps_wrong: list[str] = field(default_factory=list)  # chains whose steps did not run once each, in order
    refused: int = 0
    refusals: list[str] = field(default_factory=list)  # what each refused submit was answered (after its retries)
    faults: dict[str, int] = field(default_factory=dict)
    all_succeeded: int = 0  # batches whose members all ended SUCCEEDED
    elapsed_s: float = 0.0

    @property
    def clean(self) -> bool:
        return not (
            self.lost
            or self.on_complete_wrong
            or self.on_success_wrong
            or self.counts_wrong
            or self.steps_wrong
            or self.refused
        )

    def lines(self) -> list[str]:
        faults = sum(self.faults.values())
        by_kind = ", ".join(f"{kind} {n}" for kind, n in sorted(self.faults.items(), key=lambda kv: -kv[1]))
        return [
            f"ledger --batches: {self.batches} batches x {self.members} jobs, {self.chains} chains x {self.steps}"
            f" steps, seed {self.seed}, fault rate {self.fault_rate}",
            f"  failing members {self.failing}   retried by hand {self.retried_by_hand}   batches all succeeded"
            f" {self.all_succeeded}   refused {self.refused}",
            f"  lost {len(self.lost)}   on_complete not once {len(self.on_complete_wrong)}   on_success wrong"
            f" {len(self.on_success_wrong)}   counts wrong {len(self.counts_wrong)}   chains wrong"
            f" {len(self.steps_wrong)}",
            f"  faults injected {faults}: {by_kind or '-'}",
            f"  {self.elapsed_s:.1f} s from the first submit until every batch and chain was done",
            *(f"  refused {refusal}" for refusal in self.refusals),
        ]


def plan_members(tag: str, members: int, rng: random.Random) -> list[tuple[dict[str, Any], str]]:
    """Each member's spec and what becomes of it: "ok", "fail" (FAILED for good) or "retry" (retried by hand)."""
    planned: list[tuple[dict[str, Any], str]] = []
    for n in range(members):
        if rng.random() < FAIL_SHARE:
            retry = rng.random() < RETRY_SHARE
            payload = {"reason": f"{tag}-{n} fails", "first_run_only": retry}
            planned.append(({"type": "demo.poison", "payload": payload}, "retry" if retry else "fail"))
        else:
            planned.append(({"type": "demo.echo", "payload": {"message": f"{tag}-{n}"}}, "ok"))
    return planned


def _chain(tag: str, steps: int) -> dict[str, Any]:
    spec: dict[str, Any] | None = None
    for step in reversed(range(steps)):
        current: dict[str, Any] = {"type": "e2e.recorded", "payload": {"kind": "step", "tag": tag, "step": step}}
        if spec is not None:
            current["then"] = spec
        spec = current
    assert spec is not None
    return spec


def run_batch_ledger(
    local: LedgerRuntime,
    *,
    batches: int,
    members: int,
    chains: int,
    steps: int,
    seed: int,
    fault_rate: float | None,
    timeout_s: float = 600,
    tag: str = "lb",
) -> BatchLedger:
    rng = random.Random(seed)
    ledger = BatchLedger(batches, members, chains, steps, seed, fault_rate)
    api = local.api()
    started = time.monotonic()
    deadline = started + timeout_s
    try:
        plans: dict[str, list[tuple[dict[str, Any], str]]] = {}
        for b in range(batches):
            btag = f"{tag}-b{b}"
            plans[btag] = plan_members(btag, members, rng)
            ledger.failing += sum(outcome != "ok" for _, outcome in plans[btag])
            body = {
                "jobs": [spec for spec, _ in plans[btag]],
                "on_complete": {"type": "e2e.recorded", "payload": {"kind": "on_complete", "tag": btag}},
                "on_success": {"type": "e2e.recorded", "payload": {"kind": "on_success", "tag": btag}},
            }
            answer = _submit(api, "/batches", body, btag)
            if answer.status in (200, 202):
                ledger.batch_ids[btag] = str(answer.body["batch_id"])
            else:
                ledger.refused += 1
                ledger.refusals.append(f"{btag}: {answer.status} {json.dumps(answer.body)[:300]}")
        chain_ids: dict[str, str] = {}
        for c in range(chains):
            ctag = f"{tag}-c{c}"
            spec = _chain(ctag, steps)
            answer = _submit(api, "/jobs", spec, ctag)
            if answer.status in (200, 202):
                chain_ids[ctag] = str(answer.body["job_id"])
            else:
                ledger.refused += 1
                ledger.refusals.append(f"{ctag}: {answer.status} {json.dumps(answer.body)[:300]}")

        # The batches complete; then the failed members planned to recover are retried by hand.
        _wait_batches(api, ledger, deadline, want_callback="on_complete_job_id")
        retried: set[str] = set()
        for btag, batch_id in ledger.batch_ids.items():
            for job in _members(api, batch_id):
                if job.get("status") != "FAILED":
                    continue
                one = api.call("GET", f"/jobs/{job['job_id']}")  # listings carry no payload
                if one.status == 200 and (one.body.get("payload") or {}).get("first_run_only"):
                    answer = api.call("POST", f"/jobs/{job['job_id']}/retry")
                    if answer.status in (200, 202):
                        retried.add(btag)
                        ledger.retried_by_hand += 1
        _wait_batches(api, ledger, deadline, want_callback="on_complete_job_id", retried=retried)

        # Members' final states, against the batch's counts; the callback jobs final.
        callback_ids: list[str] = []
        for btag, batch_id in ledger.batch_ids.items():
            view = ledger.views.get(btag, {})
            states: Counter[str] = Counter(str(job.get("status")) for job in _members(api, batch_id))
            ledger.members_final[btag] = states
            if any(state not in FINAL for state in states) or view.get("status") not in BATCH_DONE:
                ledger.lost.append(btag)
            counted = Counter(
                {"SUCCEEDED": int(view.get("succeeded", -1)), "FAILED": int(view.get("failed", -1))}
                | ({"CANCELLED": int(view["cancelled"])} if view.get("cancelled") else {})
            )
            if +counted != +states or int(view.get("total", -1)) != members or int(view.get("pending", -1)) != 0:
                ledger.counts_wrong.append(btag)
            ledger.all_succeeded += states == Counter({"SUCCEEDED": members})
            callback_ids += [str(view[k]) for k in ("on_complete_job_id", "on_success_job_id") if view.get(k)]
        for job_id in callback_ids:
            if _final(api, job_id, deadline) is None:
                ledger.lost.append(job_id)
        # Every chain's last step final (a step that never comes is lost).
        for ctag, job_id in chain_ids.items():
            current: str | None = job_id
            for _ in range(steps):
                view = _final(api, current, deadline) if current else None
                if view is None:
                    ledger.lost.append(ctag)
                    break
                current = view.get("next_job_id")
    finally:
        api.close()
    ledger.elapsed_s = time.monotonic() - started
    _settle(local)

    recorded = [e for e in local.effects() if e.get("effect") == "recorded"]
    runs: Counter[tuple[str, str]] = Counter((str(e["kind"]), str(e["tag"])) for e in recorded)
    for btag in ledger.batch_ids:
        if runs[("on_complete", btag)] != 1:
            ledger.on_complete_wrong.append(btag)
        all_ok = ledger.members_final.get(btag) == Counter({"SUCCEEDED": members})
        if runs[("on_success", btag)] != (1 if all_ok else 0):
            ledger.on_success_wrong.append(btag)
    order: dict[str, list[int]] = {}
    for e in recorded:
        if e["kind"] == "step":
            order.setdefault(str(e["tag"]), []).append(int(e["step"]))
    for ctag in chain_ids:
        if order.get(ctag) != list(range(steps)):
            ledger.steps_wrong.append(ctag)
    for fault in local.faults():
        kind = str(fault["kind"])
        ledger.faults[kind] = ledger.faults.get(kind, 0) + 1
    return ledger


def _submit(api: Api, path: str, body: dict[str, Any], key: str) -> Answer:
    """A patient client's submit: the same Idempotency-Key again while the answer is one to retry (a 503 or a 429,
    after `Api.call`'s own tries), for up to SUBMIT_PATIENCE_S. A batch's submit makes a write per member: under
    the ledger's fault rate most tries meet a fault, and each replay under the key finishes what the last began."""
    deadline = time.monotonic() + SUBMIT_PATIENCE_S
    while True:
        answer = api.call("POST", path, body, {"Idempotency-Key": key})
        if answer.status not in UNAVAILABLE or time.monotonic() >= deadline:
            return answer


def _wait_batches(
    api: Api, ledger: BatchLedger, deadline: float, *, want_callback: str, retried: set[str] | None = None
) -> None:
    """Until every batch is done with its callback submitted (and a batch with hand retries has no member
    pending), or the deadline."""
    waiting = dict(ledger.batch_ids)
    while waiting and time.monotonic() < deadline:
        for btag, batch_id in list(waiting.items()):
            answer = api.call("GET", f"/batches/{batch_id}")
            if answer.status != 200:
                continue
            view = answer.body
            ledger.views[btag] = view
            done = view.get("status") in BATCH_DONE and view.get(want_callback) and int(view.get("pending", 1)) == 0
            if done and retried is not None and btag in retried:
                # The retried members final too (SUCCEEDED: on_success submitted; or FAILED again).
                done = view.get("status") != "SUCCEEDED" or bool(view.get("on_success_job_id"))
            if done:
                del waiting[btag]
        if waiting:
            time.sleep(0.5)


def _members(api: Api, batch_id: str) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        answer = api.call("GET", f"/batches/{batch_id}/jobs?limit=100" + (f"&cursor={cursor}" if cursor else ""))
        if answer.status != 200:
            return jobs
        jobs += answer.body.get("jobs", [])
        cursor = answer.body.get("cursor")
        if not cursor:
            return jobs


def _final(api: Api, job_id: str, deadline: float) -> dict[str, Any] | None:
    """The job's view once final (None at the deadline)."""
    while True:
        answer = api.call("GET", f"/jobs/{job_id}")
        if answer.status == 200 and answer.body.get("status") in FINAL:
            return dict(answer.body)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.5)
