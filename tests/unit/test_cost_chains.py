"""`offpath cost --chained-share`: what chain steps add per million jobs (0 for plain jobs)."""

from __future__ import annotations

import json

import pytest

from offpath_local.cli import main
from offpath_tools.cost import Config, chain_cost_per_job, money


def chains_per_million(capsys: pytest.CaptureFixture[str], *args: str) -> float:
    assert main(["cost", "--json", *args]) == 0
    return float(json.loads(capsys.readouterr().out)["chains_per_million_jobs"])


def test_plain_jobs_add_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert chains_per_million(capsys) == 0.0


def test_every_job_a_chain_step_adds_one_write_unit_and_one_read_unit_each(capsys: pytest.CaptureFixture[str]) -> None:
    # On demand: $0.625 per million write units, $0.125 per million read units.
    assert chains_per_million(capsys, "--chained-share", "1") == pytest.approx(0.625 + 0.125)


def test_a_share_of_chain_steps_adds_its_share(capsys: pytest.CaptureFixture[str]) -> None:
    assert chains_per_million(capsys, "--chained-share", "0.2") == pytest.approx(0.2 * 0.75)


def test_the_text_states_the_chains_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "--chained-share", "1"]) == 0

    out = capsys.readouterr().out
    assert f"chains (1 of the jobs a step with a next job): {money(0.75)} per million jobs" in out
    assert "1 write unit per chain step" in out


def test_a_share_outside_0_to_1_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "--chained-share", "1.5"]) == 2
    assert "chained share" in capsys.readouterr().err
    with pytest.raises(ValueError, match="between 0 and 1"):
        chain_cost_per_job(Config(), -0.1)
