"""A job type whose name is as long as a name may be (63 characters, no space to break at), for the console's
layout: the browser tests' runtime loads it (`--load tests.browser.long_names`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from offpath.domain.context import JobContext
from offpath.domain.registry import job

LONG_TYPE = "reports.quarterly_revenue_reconciliation_for_each_region.export"
assert len(LONG_TYPE) == 63


class LongPayload(BaseModel):
    n: int = 0


@job(LONG_TYPE, payload=LongPayload, max_attempts=1, timeout_s=10)
def long_named(payload: LongPayload, ctx: JobContext) -> dict[str, Any]:
    return {"n": payload.n}
