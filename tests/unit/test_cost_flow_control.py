"""`offpath cost`: what expiry and debounce add per million jobs (0 when no job uses them)."""

from __future__ import annotations

import json

import pytest

from offpath_local.cli import main
from offpath_tools.cost import Config, flow_control_cost_per_job, money

WRU = 0.625 / 1_000_000  # on-demand write unit (docs/benchmarks.md prices)
RRU = 0.125 / 1_000_000  # on-demand read unit


def costs(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, float]:
    assert main(["cost", "--json", *args]) == 0
    document = json.loads(capsys.readouterr().out)
    return {"expiry": document["expiry_per_million_jobs"], "debounce": document["debounce_per_million_jobs"]}


def test_expiry_and_an_unused_debounce_cost_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert costs(capsys) == {"expiry": 0.0, "debounce": 0.0}


def test_each_debounced_submit_writes_its_keys_record(capsys: pytest.CaptureFixture[str]) -> None:
    assert costs(capsys, "--debounced-share", "1")["debounce"] == pytest.approx(1_000_000 * WRU)
    assert costs(capsys, "--debounced-share", "0.5")["debounce"] == pytest.approx(500_000 * WRU)


def test_each_superseded_job_adds_its_cancel_a_read_of_the_record_and_its_renaming(
    capsys: pytest.CaptureFixture[str],
) -> None:
    small = costs(capsys, "--debounced-share", "1", "--superseded-share", "0.8")["debounce"]
    large = costs(capsys, "--debounced-share", "1", "--superseded-share", "0.8", "--payload-bytes", "2000")["debounce"]

    assert small == pytest.approx(((1 + 0.8 * 2 * 1) * WRU + 0.8 * RRU) * 1_000_000)
    # 2000 payload bytes and the item's own make a 3 KB item: 3 write units for each of its two writes.
    assert large == pytest.approx(((1 + 0.8 * 2 * 3) * WRU + 0.8 * RRU) * 1_000_000)


def test_a_superseded_share_above_the_debounced_one_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "--debounced-share", "0.1", "--superseded-share", "0.2"]) == 2
    assert "superseded share" in capsys.readouterr().err
    with pytest.raises(ValueError, match="debounced share"):
        flow_control_cost_per_job(Config(), debounced_share=1.5)


def test_the_text_states_the_expiry_and_debounce_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "--debounced-share", "1"]) == 0

    out = capsys.readouterr().out
    assert f"expiry: {money(0.0)} per million jobs" in out
    assert f"debounce (1 of the jobs debounced, 0 superseded): {money(1_000_000 * WRU)} per million jobs" in out
