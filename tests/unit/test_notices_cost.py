"""The notices' cost per million jobs (offpath_tools.cost.notices_per_million): a separate row of `offpath cost`."""

from __future__ import annotations

import pytest

from offpath_tools.cost import NoticesAssumptions, notices_per_million, notices_rows


def test_the_event_bus_costs_one_dollar_per_million_events_and_nothing_when_off() -> None:
    on = notices_per_million(bus=True)
    off = notices_per_million(bus=False)

    assert on["event bus (EventBridge PutEvents)"] == pytest.approx(3.00)
    assert off["event bus (EventBridge PutEvents)"] == 0
    assert {k: v for k, v in on.items() if "bus" not in k} == {k: v for k, v in off.items() if "bus" not in k}


def test_deliveries_cost_in_proportion_to_the_endpoints_a_job_is_delivered_to() -> None:
    one = notices_per_million(assumptions=NoticesAssumptions(deliveries_per_job=1))
    two = notices_per_million(assumptions=NoticesAssumptions(deliveries_per_job=2))

    for part in (
        "deliveries: SQS",
        "deliveries: delivery function (Lambda)",
        "deliveries: endpoint and log items (DynamoDB)",
    ):
        assert two[part] == pytest.approx(2 * one[part])
    assert two["notifier (Lambda)"] == one["notifier (Lambda)"]


def test_the_rows_end_with_their_total() -> None:
    rows = notices_rows()

    assert rows[-1][0] == "notices in all"
    assert rows[-1][1] == pytest.approx(sum(value for _, value in rows[:-1]))
