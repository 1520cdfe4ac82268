"""`offpath cost` prices a batch: the write units a member and a callback add, per million members; a plain job
adds nothing."""

from __future__ import annotations

import json

import pytest

from offpath_local.cli import main
from offpath_tools.cost import Config, batch_cost, money


def test_a_member_adds_its_page_share_its_count_and_its_clear() -> None:
    cost = batch_cost(Config())

    # A page of 100 ids (4 KB) and the batch item (1 KB), reserved and written in transactions: 20 units a page;
    # the count, a transaction of a 1 KB job and the batch: 4; the clear of its sweep time and index entry: 2.
    assert cost.member_write_units == pytest.approx(0.2 + 4 + 2)
    assert cost.member_read_units == 1.0
    assert cost.per_million_members == pytest.approx(6.2 * 0.625 + 1 * 0.125)


def test_a_larger_job_item_costs_more_per_count() -> None:
    small = batch_cost(Config(payload_bytes=100))
    large = batch_cost(Config(payload_bytes=10_000))

    # The job item grows from under 1 KB to ~10.7 KB (11 units): counted twice in the count's transaction and once in
    # the clear.
    assert large.member_write_units - small.member_write_units == pytest.approx(3 * (11 - 1))


def test_the_cost_command_prints_the_batch_rows_and_a_plain_job_s_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "--json"]) == 0
    batches = json.loads(capsys.readouterr().out)["batches"]
    assert batches["plain_job_extra"] == 0.0
    assert batches["per_million_members"] == pytest.approx(4.0)
    assert batches["callback_write_units"] == 3

    assert main(["cost"]) == 0
    text = capsys.readouterr().out
    assert f"{money(4.0)} per million members" in text
    assert "a plain job: 0 extra" in text
