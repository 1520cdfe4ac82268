"""Waiting for a job: `GET /jobs/{id}?wait=N` answers as soon as the job is final, or after N seconds with
its state then.

The wait reads the job again and again (consistent reads, as every read of a job), pausing between reads:
0.1 s, doubling up to 1 s, so a job that finishes is seen within 1 s (the pause) plus one read. The pauses of
a wait are known in advance (`pauses`): at most `max_reads(N)` reads, 24 for the longest wait (20 s), 14 for 10 s, whose
read units `offpath cost` prices. The time waited is measured on a monotonic clock, so a slow read shortens
the pauses after it instead of lengthening the wait.


A wait holds an execution environment for its whole length, so waits are counted per tenant across every
environment (`WaitSlots`, on AWS adapters/dynamodb_waits.py): past its cap (`waits_per_tenant`, 5 by default)
a tenant's wait is refused 429 with `Retry-After`; a slot is leased for the wait plus `LEASE_MARGIN_S`, so a
wait whose function died frees its slot when the lease ends. A job already final takes no slot.
"""

from __future__ import annotations

import logging
import math
import re
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from offpath.domain.errors import InvalidRequestError, OffpathError
from offpath.domain.job import Job
from offpath.domain.quotas import QuotaExceededError

logger = logging.getLogger(__name__)

# API Gateway's HTTP API gives up on an integration after 30 s and the api function's timeout is 29 s: the
# longest wait leaves 9 s for the reads' own time and the answer.
MAX_WAIT_S = 20.0
FIRST_PAUSE_S = 0.1
MAX_PAUSE_S = 1.0
WAIT_FIELD = "wait"
WAIT_MESSAGE = f"wait must be a number of seconds above 0 and at most {MAX_WAIT_S:g}"
WAIT_NUMBER = re.compile(r"(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")

# A slot outlives its wait by this much: longer than the function can run past the wait (its timeout is 29 s,
# the longest wait 20 s), so a live wait never loses its slot.
LEASE_MARGIN_S = 10.0
WAITS_PER_TENANT = 5

Sleep = Callable[[float], None]
Monotonic = Callable[[], float]


def parse_wait(text: str) -> float:
    """The `wait` query parameter: seconds, above 0 and at most 20, written as a JSON number is (`2`, `0.5`,
    `5e-1`); float() alone would also take "inf", "nan", "²", "1_0" and surrounding spaces."""
    if len(text) > 32 or not WAIT_NUMBER.fullmatch(text):
        raise InvalidRequestError(WAIT_FIELD, WAIT_MESSAGE)
    seconds = float(text)
    if not 0 < seconds <= MAX_WAIT_S:
        raise InvalidRequestError(WAIT_FIELD, WAIT_MESSAGE)
    return seconds


def pauses(wait_s: float) -> list[float]:
    """The pauses between the reads of a wait of `wait_s` seconds (when no read takes any time): 0.1 s doubling
    to 1 s, the last one cut short at the end of the wait."""
    found: list[float] = []
    waited, pause = 0.0, FIRST_PAUSE_S
    while waited < wait_s - 1e-9:
        step = min(pause, wait_s - waited)
        found.append(step)
        waited += step
        pause = min(pause * 2, MAX_PAUSE_S)
    return found


def max_reads(wait_s: float) -> int:
    """The most reads one wait makes: the first, then one after each pause."""
    return 1 + len(pauses(wait_s))


def wait_for_job(
    first: Job, read: Callable[[], Job], wait_s: float, *, sleep: Sleep, monotonic: Monotonic
) -> tuple[Job, int]:
    """The job once final, or as it is when `wait_s` seconds have passed since `first` was read; and the
    number of reads made after it. `read` reads the job again (and raises what a read raises)."""
    deadline = monotonic() + wait_s
    job, reads = first, 0
    for pause in pauses(wait_s):
        if job.status.is_final:
            break
        left = deadline - monotonic()
        if left <= 0:
            break
        sleep(min(pause, left))
        job, reads = read(), reads + 1
    return job, reads


class WaitSlots(Protocol):
    """A tenant's open waits, counted across execution environments."""

    def take(self, tenant: str, wait_id: str, *, cap: int, now_s: float, lease_s: float) -> float:
        """Take a slot leased until `now_s + lease_s`: 0 when taken (fewer than `cap` held, counting no lease
        that has ended), else the seconds until one may be free."""

    def release(self, tenant: str, wait_id: str) -> None:
        """Give the slot back."""


@contextmanager
def wait_slot(slots: WaitSlots, tenant: str, wait_s: float, *, cap: int, now_s: float) -> Iterator[None]:
    """Hold one of the tenant's `cap` wait slots while the block runs; QuotaExceededError (field `wait`) when
    all are held."""
    wait_id = secrets.token_hex(8)
    retry_after = slots.take(tenant, wait_id, cap=cap, now_s=now_s, lease_s=wait_s + LEASE_MARGIN_S)
    if retry_after > 0:
        raise QuotaExceededError(
            WAIT_FIELD,
            f"over the limit of {cap} waits at once per tenant; to follow many jobs use webhooks or the job "
            "event stream",
            math.ceil(retry_after),
        )
    try:
        yield
    finally:
        try:
            slots.release(tenant, wait_id)
        except OffpathError:
            logger.warning("a wait slot was not given back; its lease frees it")
