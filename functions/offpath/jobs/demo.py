"""Demo job types that show the whole life cycle within seconds (short backoffs)."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from offpath.domain.context import JobContext
from offpath.domain.errors import PermanentError
from offpath.domain.registry import job

# Short backoffs so a local run shows retries within seconds.
BASE_S, CAP_S = 1.0, 5.0


class EchoPayload(BaseModel):
    model_config = ConfigDict(extra="allow")


class SleepPayload(BaseModel):
    ms: int = Field(ge=0, le=600_000)


class FlakyPayload(BaseModel):
    fail_first: int = Field(default=1, ge=0, le=100)


class PoisonPayload(BaseModel):
    reason: str = Field(default="poison message", max_length=200)
    # Fails its first run only: a retry (by hand, or a redrive) then succeeds.
    first_run_only: bool = False


@job("demo.echo", payload=EchoPayload, max_attempts=3, timeout_s=10, backoff_base_s=BASE_S, backoff_cap_s=CAP_S)
def echo(payload: EchoPayload, ctx: JobContext) -> dict[str, Any]:
    return payload.model_dump()


@job("demo.sleep", payload=SleepPayload, max_attempts=3, timeout_s=60, backoff_base_s=BASE_S, backoff_cap_s=CAP_S)
def sleep(payload: SleepPayload, ctx: JobContext) -> dict[str, Any]:
    steps = 4
    for step in range(steps):
        time.sleep(payload.ms / 1000 / steps)
        ctx.progress((step + 1) / steps, f"slept {(step + 1) * payload.ms // steps} ms")
    return {"slept_ms": payload.ms}


@job("demo.flaky", payload=FlakyPayload, max_attempts=5, timeout_s=10, backoff_base_s=BASE_S, backoff_cap_s=CAP_S)
def flaky(payload: FlakyPayload, ctx: JobContext) -> dict[str, Any]:
    if ctx.attempt <= payload.fail_first:
        _flaky_failure(ctx.attempt, payload.fail_first)
    return {"succeeded_on_attempt": ctx.attempt}


def _flaky_failure(attempt: int, fail_first: int) -> None:
    # Raised from a helper, so the attempt's traceback shows two frames of job code.
    raise RuntimeError(f"flaky failure on attempt {attempt} of the first {fail_first}")


@job("demo.poison", payload=PoisonPayload, max_attempts=3, timeout_s=10, backoff_base_s=BASE_S, backoff_cap_s=CAP_S)
def poison(payload: PoisonPayload, ctx: JobContext) -> dict[str, Any] | None:
    if payload.first_run_only and not ctx.once("first-run"):
        return {"recovered": True}
    raise PermanentError(payload.reason)


class StepPayload(BaseModel):
    # The first step's number; a later step counts on from its parent's result.
    start: int = Field(default=1, ge=0, le=1_000_000)


@job("demo.step", payload=StepPayload, max_attempts=3, timeout_s=10, backoff_base_s=BASE_S, backoff_cap_s=CAP_S)
def step(payload: StepPayload, ctx: JobContext) -> dict[str, Any]:
    """A chain's step (docs/workflows.md): `n` is its parent's `n` + 1 (`ctx.parent`), or `start` without a parent."""
    parent = ctx.parent
    if parent is None or not isinstance(parent.result, dict) or not isinstance(parent.result.get("n"), int):
        return {"n": payload.start, "parent_job_id": None}
    return {"n": parent.result["n"] + 1, "parent_job_id": parent.job_id}


class AccountSleepPayload(BaseModel):
    account: str = Field(min_length=1, max_length=100)
    ms: int = Field(default=300, ge=0, le=10_000)


class AccountPayload(BaseModel):
    account: str = Field(min_length=1, max_length=100)


# On the critical queue (one job an invocation, ten at once): the limits, not the worker pool, bound them.
@job(
    "demo.limited",
    payload=AccountSleepPayload,
    queue="critical",
    max_attempts=3,
    timeout_s=15,
    backoff_base_s=BASE_S,
    backoff_cap_s=CAP_S,
    concurrency_key="account",
    max_concurrency=2,
)
def limited(payload: AccountSleepPayload, ctx: JobContext) -> dict[str, Any]:
    """At most two at once per account; sleeps `ms`."""
    time.sleep(payload.ms / 1000)
    return {"account": payload.account, "slept_ms": payload.ms}


@job(
    "demo.rated",
    payload=AccountPayload,
    queue="critical",
    max_attempts=3,
    timeout_s=10,
    backoff_base_s=BASE_S,
    backoff_cap_s=CAP_S,
    concurrency_key="account",
    rate_limit="2/s",
)
def rated(payload: AccountPayload, ctx: JobContext) -> dict[str, Any]:
    """At most two starts a second per account."""
    return {"account": payload.account}
