"""The sweeper shares a sweep of limited size out across tenants (issue 13): a flood is not a queue to wait behind."""

from __future__ import annotations

from datetime import timedelta

from offpath.domain.job import JobStatus, fair_share
from offpath.domain.ports import Ports
from offpath.logic.sweep import SweepPolicy, sweep
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import InMemoryJobQueue
from tests.unit.conftest import a_job, submitted


def test_a_flood_of_one_tenants_due_jobs_does_not_starve_another_tenants_due_job(
    ports: Ports, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    queue.fail_sends()  # every send fails: each job is written for the sweeper to send
    flood = [submitted(ports, payload={"n": n}) for n in range(200)]
    clock.advance(1)
    quiet = submitted(ports, tenant="tenant-b", payload={"n": 0})  # due after every job of the flood
    queue.fail_sends(0)
    clock.advance(SweepPolicy().grace.total_seconds() + 2)

    report = sweep(ports, SweepPolicy(max_jobs=20))

    resent = [s.message for s in queue.sent]
    assert report.resent == 20
    assert quiet.job_id in {m.job_id for m in resent}
    assert sum(m.tenant == "tenant-a" for m in resent) == 19
    assert {m.job_id for m in resent if m.tenant == "tenant-a"} <= {j.job_id for j in flood}


def test_a_fair_share_takes_tenants_in_turn_each_oldest_first_up_to_the_limit() -> None:
    start = a_job().created_at
    jobs = [
        a_job(JobStatus.QUEUED, job_id=f"{tenant}{n}".ljust(32, "0"), tenant=tenant, sweep_at=start + timedelta(n))
        for tenant, count in (("a", 5), ("b", 2), ("c", 1))
        for n in range(count)
    ]

    chosen = fair_share(list(reversed(jobs)), 6)

    assert [(j.tenant, j.sweep_at - start) for j in chosen] == [
        ("a", timedelta(0)),
        ("b", timedelta(0)),
        ("c", timedelta(0)),
        ("a", timedelta(1)),
        ("b", timedelta(1)),
        ("a", timedelta(2)),
    ]
