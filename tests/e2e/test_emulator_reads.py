"""The emulator's speed corrections change nothing a client sees: GetRecords written out as moto keeps its
records answers what moto's serializer answers, to the byte of a binary value and the millisecond of a record's
time, and so does the stream player's reader in the runtime's process; an update expression parsed once still
applies each request's own values, and a refused one is refused each time."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import emulator_scenario


@pytest.fixture(scope="module")
def seen() -> dict[str, Any]:
    return emulator_scenario("tests.e2e.emulator_reads")


def test_stream_records_read_as_moto_itself_answers(seen: dict[str, Any]) -> None:
    assert seen["same_answer"] is True
    # The stream player's reader, in this process: the same records, from where its last read ended.
    assert seen["same_in_process"] is True
    assert seen["in_process_records"] == 6 and seen["nothing_more"] == [] and seen["latest_is_empty"] == []
    # The two updates of ONE and TWO, their puts, and ODD's put and update: every write made a record.
    assert seen["records"] == 6 and seen["has_next"] is True
    assert seen["odd_events"] == ["INSERT", "MODIFY"]
    assert "b'\\x00\\xff'" in seen["odd_old_image"] and "é✓" in seen["odd_old_image"]
    assert seen["odd_time_is_aware"] is True


def test_an_update_expression_parsed_once_applies_each_requests_values(seen: dict[str, Any]) -> None:
    assert seen["one"] == {"a": "a1", "b": "b1", "updated_at": "ONE"}
    assert seen["two"] == {"a": "a2", "b": "b2", "updated_at": "TWO"}
    assert seen["refusals"] == ["ValidationException", "ValidationException"]
    assert seen["one_after_refusals"] == "a1"
