"""Job ids: 32 lowercase hex (contract.JOB_ID_PATTERN), time-ordered.

The first 12 hex are the creation time in milliseconds since the Unix epoch, the last 20 are random (80 bits).
Ids of one tenant thus sort by when their jobs were made, which is what the table's sort key needs: a tenant's
listing queries its partitions newest first by id (offpath.adapters.dynamodb_store).
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime, timedelta

TIME_HEX = 12
RANDOM_HEX = 20
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def new_job_id(created_at: datetime) -> str:
    """The id of a job made at `created_at`: its time in milliseconds, then 80 random bits."""
    millis = (created_at - EPOCH) // timedelta(milliseconds=1)
    return f"{millis:0{TIME_HEX}x}{secrets.token_hex(RANDOM_HEX // 2)}"


def created_millis(job_id: str) -> int:
    """The creation time (milliseconds since the epoch) an id made by `new_job_id` carries."""
    return int(job_id[:TIME_HEX], 16)


def derived_job_id(created_at: datetime, *parts: str) -> str:
    """A reproducible id: `created_at`'s millis, then 80 bits of sha256 over the parts."""
    millis = (created_at - EPOCH) // timedelta(milliseconds=1)
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
    return f"{millis:0{TIME_HEX}x}{digest[:RANDOM_HEX]}"
