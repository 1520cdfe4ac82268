"""A schedule the e2e runtime loads (`offpath local --load tests.e2e.local_schedules`): every minute, which the
test clock (60 times real speed) makes every second."""

from __future__ import annotations

from offpath.domain.registry import schedule
from offpath.jobs import load_job_types

load_job_types(demo=True)

E2E_SCHEDULE = "e2e-every-minute"

schedule(E2E_SCHEDULE, rate="1 minute", job="demo.echo", payload={"from": "e2e-schedule"}, overlap="allow")
