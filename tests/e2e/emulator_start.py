"""What an emulator scenario (`python -m tests.e2e.emulator_...`) starts with: a fresh emulator in this process
holding the stack's table and queues."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def emulator_with_jobs_table() -> Iterator[tuple[Any, Any, str]]:
    """The emulator, a DynamoDB client of it and the jobs table's name; the emulator stops after the block."""
    from offpath.jobs import load_job_types
    from offpath_local.emulator import Emulator
    from offpath_local.resources import create_resources

    emulator = Emulator()
    emulator.start()
    try:
        dynamodb = emulator.client("dynamodb")
        yield (
            emulator,
            dynamodb,
            create_resources(dynamodb, emulator.client("sqs"), load_job_types(demo=True)).table_name,
        )
    finally:
        emulator.stop()
