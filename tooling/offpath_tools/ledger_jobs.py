"""What the fault ledger's runtimes load (`offpath local --load offpath_tools.ledger_jobs`): side effects the
test can count, and queue classes of their own.

- The welcome e-mail's transport stand-in is replaced by one that appends each e-mail it "sends" to the
  file named by `$LEDGER_EFFECTS_FILE` (one JSON line per e-mail): the side effect the ledger counts.
- `e2e.batch_effect` on queue class `e2e-batch` (batches of 10 gathered for a second, so a burst of
  submits arrives as one batch, and nothing else uses the queue): each run of the job function and each
  side effect (guarded by `ctx.once`) is appended to the same file. TESTPLAN 16.
- `e2e.burst` on the stack's `bulk` queue class (maximum concurrency 2): returns at once. TESTPLAN 21.
- `e2e.limited` on `critical`: at most LIMITED_AT_ONCE at once per `account` (docs/flow-control.md); each run's
  start and end are appended to the effects file (the ledger's `--flow-control` variant).
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from pydantic import BaseModel, Field

from offpath.domain.context import JobContext
from offpath.domain.registry import job, queue_class
from offpath.jobs import load_job_types, welcome_email
from offpath_tools.ledger import EFFECTS_ENV, LIMITED_AT_ONCE

load_job_types(demo=True)

BATCH_QUEUE = "e2e-batch"
_lock = threading.Lock()


def record(entry: dict[str, Any]) -> None:
    path = os.environ.get(EFFECTS_ENV)
    if not path:
        return
    with _lock, open(path, "a", encoding="utf-8") as effects:
        effects.write(json.dumps(entry) + "\n")


class FileEmailTransport:
    """Sends nothing: appends the e-mail to the effects file, where the ledger counts it."""

    def send(self, to: str, subject: str, body: str) -> str:
        record({"effect": "welcome-email", "to": to, "subject": subject})
        return f"file-{to}"


welcome_email.transport = FileEmailTransport()


class BatchEffect(BaseModel):
    tag: str = Field(min_length=1, max_length=64)


queue_class(BATCH_QUEUE, batch_size=10, batching_window_s=1, max_concurrency=2)


@job("e2e.batch_effect", payload=BatchEffect, queue=BATCH_QUEUE, max_attempts=5, timeout_s=10)
def batch_effect(payload: BatchEffect, ctx: JobContext) -> dict[str, Any]:
    record({"effect": "run", "tag": payload.tag, "attempt": ctx.attempt})
    sent = ctx.once("effect")
    if sent:
        record({"effect": "batch-effect", "tag": payload.tag, "attempt": ctx.attempt})
    return {"tag": payload.tag, "sent": sent}


class Burst(BaseModel):
    n: int = Field(ge=0)


@job("e2e.burst", payload=Burst, queue="bulk", max_attempts=3, timeout_s=10)
def burst(payload: Burst, ctx: JobContext) -> dict[str, int]:
    return {"n": payload.n}


class LimitedRun(BaseModel):
    account: str = Field(min_length=1, max_length=64)
    ms: int = Field(default=200, ge=0, le=5_000)


@job(
    "e2e.limited",
    payload=LimitedRun,
    queue="critical",
    max_attempts=5,
    timeout_s=10,
    concurrency_key="account",
    max_concurrency=LIMITED_AT_ONCE,
)
def limited(payload: LimitedRun, ctx: JobContext) -> dict[str, Any]:
    """Each run's start and end (this process's clock) in the effects file: what ran at once, per account."""
    started = time.time()
    time.sleep(payload.ms / 1000)
    record(
        {
            "effect": "limited-run",
            "account": payload.account,
            "job_id": ctx.job_id,
            "start": started,
            "end": time.time(),
        }
    )
    return {"account": payload.account}


class Recorded(BaseModel):
    kind: str = Field(min_length=1, max_length=32)
    tag: str = Field(min_length=1, max_length=64)
    step: int = Field(default=0, ge=0, le=100)


@job("e2e.recorded", payload=Recorded, queue="critical", max_attempts=5, timeout_s=10)
def recorded(payload: Recorded, ctx: JobContext) -> dict[str, Any]:
    """A batch's callback or a chain's step (the ledger's `--batches` variant): its run, guarded by `ctx.once`, is
    appended to the effects file with what it was for, so the ledger counts each one's runs and their order."""
    if ctx.once("recorded"):
        record(
            {"effect": "recorded", "kind": payload.kind, "tag": payload.tag, "step": payload.step, "job_id": ctx.job_id}
        )
    return {"kind": payload.kind, "tag": payload.tag, "step": payload.step}
