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


# -- the video pipeline: transcode, then its thumbnails as a batch, then one notice when all are done -------------

RENDITIONS = ["720p", "480p"]


class TranscodePayload(BaseModel):
    video: str = Field(min_length=1, max_length=200)
    thumbnails: int = Field(default=4, ge=1, le=20)
    ms: int = Field(default=500, ge=0, le=10_000)


class ThumbnailsPayload(BaseModel):
    """The chain's step after `demo.transcode`: everything it needs is its parent's result."""


class ThumbnailPayload(BaseModel):
    video: str = Field(min_length=1, max_length=200)
    n: int = Field(ge=1, le=20)


class NotifyPayload(BaseModel):
    video: str = Field(min_length=1, max_length=200)


@job(
    "demo.transcode", payload=TranscodePayload, max_attempts=3, timeout_s=30, backoff_base_s=BASE_S, backoff_cap_s=CAP_S
)
def transcode(payload: TranscodePayload, ctx: JobContext) -> dict[str, Any]:
    """Sleeps `ms` as if it transcoded `video`; its result tells the next step how many thumbnails to make."""
    time.sleep(payload.ms / 1000)
    return {"video": payload.video, "renditions": list(RENDITIONS), "thumbnails": payload.thumbnails}


@job(
    "demo.thumbnails",
    payload=ThumbnailsPayload,
    max_attempts=3,
    timeout_s=30,  # it submits up to 20 jobs and a callback: a few writes each
    backoff_base_s=BASE_S,
    backoff_cap_s=CAP_S,
)
def thumbnails(payload: ThumbnailsPayload, ctx: JobContext) -> dict[str, Any]:
    """Fans out one `demo.thumbnail` a thumbnail as a batch whose `on_complete` is `demo.notify` (docs/batches.md)."""
    parent = ctx.parent
    result = parent.result if parent is not None else None
    if not isinstance(result, dict):
        raise PermanentError("demo.thumbnails runs after demo.transcode (as its `then`): it has no parent result")
    video, count = result.get("video"), result.get("thumbnails")
    if not isinstance(video, str) or not video or not isinstance(count, int) or not 1 <= count <= 20:
        raise PermanentError(f"the parent's result is not a demo.transcode result: {result!r:.200}")
    batch = ctx.submit_batch(
        [{"type": "demo.thumbnail", "payload": {"video": video, "n": n}} for n in range(1, count + 1)],
        key="thumbnails",
        on_complete={"type": "demo.notify", "payload": {"video": video}},
    )
    return {"batch_id": batch.batch_id}


@job(
    "demo.thumbnail", payload=ThumbnailPayload, max_attempts=3, timeout_s=10, backoff_base_s=BASE_S, backoff_cap_s=CAP_S
)
def thumbnail(payload: ThumbnailPayload, ctx: JobContext) -> dict[str, Any]:
    time.sleep(0.2)
    return {"thumbnail": f"{payload.video}-{payload.n}.jpg"}


@job("demo.notify", payload=NotifyPayload, max_attempts=3, timeout_s=30, backoff_base_s=BASE_S, backoff_cap_s=CAP_S)
def notify(payload: NotifyPayload, ctx: JobContext) -> dict[str, Any]:
    """The batch's `on_complete`: the thumbnails made (its jobs' results, a page at a time) and how many failed."""
    batch = ctx.batch
    if batch is None:
        raise PermanentError("demo.notify runs as a batch's on_complete: it has no batch")
    names = sorted(
        str(result["thumbnail"])
        for _, status, result in batch.results()
        if status == "SUCCEEDED" and isinstance(result, dict) and "thumbnail" in result
    )
    return {"video": payload.video, "thumbnails": names, "succeeded": batch.succeeded, "failed": batch.failed}
