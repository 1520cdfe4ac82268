"""The price of waiting for a job (GET /jobs/{id}?wait=N) and of realtime events, as `offpath cost` shows them."""

from __future__ import annotations

import pytest

from offpath.logic.waiting import max_reads
from offpath_local.cli import main
from offpath_tools.cost import MILLION, Config, long_poll_cost, price, realtime_cost


def test_a_long_poll_costs_its_reads_slot_request_and_the_api_functions_wait() -> None:
    poll = long_poll_cost(20)
    reads = max_reads(20) * price("dynamodb_rru")
    slot = 2 * price("dynamodb_wru")  # the tenant's wait slot: taken, given back
    waited = 20 * Config().api_memory_mb / 1024 * price("lambda_gb_second_arm64")

    assert (poll.reads, poll.writes) == (24, 2)
    assert poll.dollars == pytest.approx(reads + slot + price("http_api_request") + price("lambda_request") + waited)
    # The reads are the small part ($3 a million 20-second waits); the function's waiting time is most of it.
    assert reads * MILLION == pytest.approx(3.0)
    assert waited > 10 * reads


def test_a_shorter_wait_costs_less() -> None:
    assert long_poll_cost(1).dollars < long_poll_cost(10).dollars < long_poll_cost(20).dollars
    assert long_poll_cost(10).reads == max_reads(10)


def test_realtime_costs_every_published_event_and_more_per_watched_job() -> None:
    unwatched, watched = realtime_cost(0.0), realtime_cost(1.0)

    assert unwatched.appsync_per_job * MILLION == pytest.approx(7.0)  # 7 events published, $1 a million
    assert watched.appsync_per_job > unwatched.appsync_per_job
    assert watched.websocket_per_job > unwatched.websocket_per_job


def test_offpath_cost_shows_waiting_and_realtime(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost"]) == 0

    out = capsys.readouterr().out
    assert "GET /jobs/{id}?wait=20" in out
    assert "job final after 20 s    24" in out
    assert "APPSYNC EVENTS PER MILLION JOBS" in out and "WEBSOCKET API INSTEAD" in out
