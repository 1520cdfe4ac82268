"""Waiting for a job: `GET /jobs/{id}?wait=N` answers as soon as the job is final, or after N seconds with
its state then.

The wait reads the job again and again (consistent reads, as every read of a job), pausing between reads:
0.1 s, doubling up to 1 s, so a job that finishes is seen within 1 s (the pause) plus one read. The pauses of
a wait are known in advance (`pauses`): at most `max_reads(N)` reads, 24 for the longest wait (20 s), 14 for 10 s, whose
read units `offpath cost` prices. The time waited is measured on a monotonic clock, so a slow read shortens
the pauses after it instead of lengthening the wait.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from offpath.domain.errors import InvalidRequestError
from offpath.domain.job import Job

# API Gateway's HTTP API gives up on an integration after 30 s and the api function's timeout is 29 s: the
# longest wait leaves 9 s for the reads' own time and the answer.
MAX_WAIT_S = 20.0
FIRST_PAUSE_S = 0.1
MAX_PAUSE_S = 1.0
WAIT_FIELD = "wait"
WAIT_MESSAGE = f"wait must be a number of seconds above 0 and at most {MAX_WAIT_S:g}"
WAIT_NUMBER = re.compile(r"(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")

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
