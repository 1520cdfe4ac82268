"""Cost and blast-radius guards in the template: reserved concurrency, the batch route's throttling, the table's
maximum throughput, the budget only when configured, and the quotas in every function's environment."""

from __future__ import annotations

from typing import Any

import pytest

from infra.options import OptionsError, StackOptions
from tests.infra.stacks import Synthesized


def function_named(stack: Synthesized, suffix: str) -> dict[str, Any]:
    [found] = [
        resource["Properties"]
        for resource in stack.resources("AWS::Lambda::Function").values()
        if str(resource["Properties"].get("FunctionName", "")).endswith(suffix)
    ]
    return found


def the_table(stack: Synthesized) -> dict[str, Any]:
    [table] = stack.resources("AWS::DynamoDB::Table").values()
    return dict(table["Properties"])


def the_stage(stack: Synthesized) -> dict[str, Any]:
    [stage] = stack.resources("AWS::ApiGatewayV2::Stage").values()
    return dict(stage["Properties"])


def test_the_api_and_enqueue_functions_have_reserved_concurrency_and_the_workers_none(
    default_stack: Synthesized,
) -> None:
    assert function_named(default_stack, "-api")["ReservedConcurrentExecutions"] == 100
    assert function_named(default_stack, "-read")["ReservedConcurrentExecutions"] == 50
    assert function_named(default_stack, "-enqueue")["ReservedConcurrentExecutions"] == 10
    # A worker's concurrency is its event source's MaximumConcurrency: reserving it too would only lock it away.
    assert "ReservedConcurrentExecutions" not in function_named(default_stack, "-worker-default")


def test_reserved_concurrency_comes_from_context_and_zero_reserves_none(extended_stack: Synthesized) -> None:
    assert function_named(extended_stack, "-api")["ReservedConcurrentExecutions"] == 200
    assert "ReservedConcurrentExecutions" not in function_named(extended_stack, "-enqueue")


def test_the_batch_route_is_throttled_apart_from_the_stage_default(default_stack: Synthesized) -> None:
    stage = the_stage(default_stack)

    assert stage["DefaultRouteSettings"]["ThrottlingRateLimit"] == 50
    assert stage["RouteSettings"] == {"POST /jobs/batch": {"ThrottlingRateLimit": 5, "ThrottlingBurstLimit": 10}}
    [stage_id] = default_stack.resources("AWS::ApiGatewayV2::Stage")
    [batch_route] = [
        key
        for key, route in default_stack.resources("AWS::ApiGatewayV2::Route").items()
        if route["Properties"]["RouteKey"] == "POST /jobs/batch"
    ]
    assert batch_route in default_stack.json["Resources"][stage_id]["DependsOn"]


def test_the_batch_throttling_comes_from_context(extended_stack: Synthesized) -> None:
    assert the_stage(extended_stack)["RouteSettings"]["POST /jobs/batch"] == {
        "ThrottlingRateLimit": 2,
        "ThrottlingBurstLimit": 4,
    }


def test_the_table_and_its_indexes_have_a_maximum_on_demand_throughput(default_stack: Synthesized) -> None:
    table = the_table(default_stack)
    cap = {"MaxReadRequestUnits": 12000, "MaxWriteRequestUnits": 4000}

    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["OnDemandThroughput"] == cap
    assert [index["OnDemandThroughput"] for index in table["GlobalSecondaryIndexes"]] == [cap] * len(
        table["GlobalSecondaryIndexes"]
    )


def test_a_maximum_of_zero_leaves_that_unit_unlimited(extended_stack: Synthesized) -> None:
    assert the_table(extended_stack)["OnDemandThroughput"] == {"MaxReadRequestUnits": 12000}


def test_no_budget_unless_one_is_configured(default_stack: Synthesized) -> None:
    assert default_stack.resources("AWS::Budgets::Budget") == {}


def test_a_configured_budget_mails_at_80_percent_actual_and_100_percent_forecast(extended_stack: Synthesized) -> None:
    [budget] = extended_stack.resources("AWS::Budgets::Budget").values()
    properties = budget["Properties"]

    assert properties["Budget"] == {
        "BudgetName": "offpath-alt-monthly",
        "BudgetType": "COST",
        "TimeUnit": "MONTHLY",
        "BudgetLimit": {"Amount": 50, "Unit": "USD"},
    }
    notifications = [
        (n["Notification"]["NotificationType"], n["Notification"]["Threshold"], n["Subscribers"])
        for n in properties["NotificationsWithSubscribers"]
    ]
    subscriber = [{"SubscriptionType": "EMAIL", "Address": "billing@example.com"}]
    assert notifications == [("ACTUAL", 80, subscriber), ("FORECASTED", 100, subscriber)]


def test_the_quotas_reach_every_function_and_none_without_them(
    default_stack: Synthesized, extended_stack: Synthesized
) -> None:
    expected = "*:submits_per_s=50,burst=100,open_jobs=10000;acme:submits_per_s=500,delayed_jobs=100"
    for resource in extended_stack.resources("AWS::Lambda::Function").values():
        variables = resource["Properties"].get("Environment", {}).get("Variables", {})
        if "OFFPATH_TABLE_NAME" in variables:
            assert variables["OFFPATH_QUOTAS"] == expected
    for resource in default_stack.resources("AWS::Lambda::Function").values():
        assert "OFFPATH_QUOTAS" not in resource["Properties"].get("Environment", {}).get("Variables", {})


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"quotas": "acme:submits_per_s=0"}, "quotas: 'acme:submits_per_s=0': submits_per_s must be"),
        ({"monthly_budget_usd": "50"}, "monthly_budget_usd needs budget_email"),
        ({"api_reserved_concurrency": "-1"}, "api_reserved_concurrency must be 0"),
        ({"batch_rate_limit": "0"}, "batch_rate_limit and batch_burst_limit must be positive"),
    ],
)
def test_unusable_guard_settings_are_refused_with_their_key(context: dict[str, str], message: str) -> None:
    with pytest.raises(OptionsError, match=message):
        StackOptions.from_context(context.get)


def test_every_check_checkov_skips_carries_a_reason() -> None:
    from infra.checkov import SKIPPED

    assert SKIPPED
    for check, reason in SKIPPED.items():
        assert check.startswith("CKV"), check
        assert len(reason.split()) >= 8, check
