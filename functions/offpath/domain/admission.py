"""What a check before a claim answers (logic/admission.py runs the checks): the job waits, or the check ended
it (its message is acknowledged). None from a check: the job may go on."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Wait:
    seconds: int  # when the message should come back (SQS visibility, <= 12 h)
    reason: str  # "paused" | "concurrency" | "rate_limit" (shown in logs and metrics)


@dataclass(frozen=True)
class Done:
    """The check ended the job without running it (e.g. EXPIRED): its message is acknowledged."""

    reason: str
