"""`offpath cost --quotas`: what the tenants' quotas add per million jobs (0 when none is configured)."""

from __future__ import annotations

import json

import pytest

from offpath_local.cli import main
from offpath_tools.cost import Config, money, quota_cost_per_job


def quotas_per_million(capsys: pytest.CaptureFixture[str], *args: str) -> float:
    assert main(["cost", "--json", *args]) == 0
    return float(json.loads(capsys.readouterr().out)["quotas_per_million_jobs"])


def test_no_quota_configured_costs_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert quotas_per_million(capsys) == 0.0


def test_the_submit_rate_costs_one_write_unit_a_job(capsys: pytest.CaptureFixture[str]) -> None:
    assert quotas_per_million(capsys, "--quotas", "rate") == pytest.approx(0.625)


def test_the_counts_cost_two_write_units_a_job_and_their_reads_spread_over_the_jobs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # 100 jobs a second, 10 readers: one read (8 read units) per 10 jobs.
    per_month = str(100 * 365 / 12 * 86_400)
    assert quotas_per_million(capsys, "--quotas", "counts", "--jobs-per-month", per_month) == pytest.approx(
        1.25 + 0.1 * 8 * 0.125
    )


def test_a_delayed_job_adds_one_more_write(capsys: pytest.CaptureFixture[str]) -> None:
    per_month = str(1000 * 365 / 12 * 86_400)
    with_delayed = quotas_per_million(capsys, "--quotas", "all", "--delayed-share", "1", "--jobs-per-month", per_month)
    without = quotas_per_million(capsys, "--quotas", "all", "--jobs-per-month", per_month)

    assert with_delayed - without == pytest.approx(0.625)


def test_the_text_states_the_quotas_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "--quotas", "rate"]) == 0

    assert f"quotas (rate): {money(0.625)} per million jobs" in capsys.readouterr().out


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="quotas must be one of"):
        quota_cost_per_job(Config(), "some")
