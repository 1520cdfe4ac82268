"""`offpath cost --limits`: the write and read units a job type's flow limits add per job (0 when it declares none)."""

from __future__ import annotations

import json

import pytest

from offpath_local.cli import main
from offpath_tools.cost import Config, limits_cost_per_job, limits_units_per_job, money


def estimate(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, float]:
    assert main(["cost", "--json", *args]) == 0
    document = json.loads(capsys.readouterr().out)
    return {
        key: document[key]
        for key in ("limits_write_units_per_job", "limits_read_units_per_job", "limits_per_million_jobs")
    }


def test_a_type_without_limits_adds_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert estimate(capsys) == {
        "limits_write_units_per_job": 0,
        "limits_read_units_per_job": 0,
        "limits_per_million_jobs": 0,
    }


@pytest.mark.parametrize(("kind", "writes"), [("concurrency", 2), ("rate", 1), ("both", 3)])
def test_a_slot_costs_two_writes_a_bucket_one_and_the_jobs_read_one_read_unit(
    capsys: pytest.CaptureFixture[str], kind: str, writes: int
) -> None:
    answer = estimate(capsys, "--limits", kind)

    assert (answer["limits_write_units_per_job"], answer["limits_read_units_per_job"]) == (writes, 1)
    # On demand: $0.625 per million write units, $0.125 per million read units.
    assert answer["limits_per_million_jobs"] == pytest.approx(writes * 0.625 + 0.125)


def test_each_wait_repeats_the_refused_write_the_read_and_two_sqs_requests(capsys: pytest.CaptureFixture[str]) -> None:
    once = estimate(capsys, "--limits", "concurrency", "--limit-waits", "1")
    never = estimate(capsys, "--limits", "concurrency")

    assert once["limits_write_units_per_job"] - never["limits_write_units_per_job"] == 1
    assert once["limits_read_units_per_job"] - never["limits_read_units_per_job"] == 1
    assert once["limits_per_million_jobs"] - never["limits_per_million_jobs"] == pytest.approx(0.625 + 0.125 + 2 * 0.4)


def test_the_text_states_the_limits_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "--limits", "both"]) == 0

    assert f"limits (both): 3 write units and 1 read units a job, {money(3 * 0.625 + 0.125)} per million jobs" in (
        capsys.readouterr().out
    )


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="limits must be one of"):
        limits_units_per_job("some")
    assert limits_cost_per_job(Config(), "none") == 0.0
