"""Cost and blast-radius guards: how much the stack can do, and spend, when something floods it.

- Reserved concurrency for the api, read and enqueue functions: a flood of requests or firings cannot take the
  account's whole Lambda concurrency from the workers (or from anything else in the account), and cannot run
  more environments than that at once.
- The stage's throttling of `POST /jobs/batch` apart from the rest: a batch is up to 100 jobs, so it gets its
  own, lower rate (the stage's default applies to `POST /jobs` and every other route).
- On-demand maximum throughput on the table and its indexes: a runaway writer is throttled (the api answers
  503 with Retry-After, the workers retry) instead of billed without bound.
- An optional monthly cost budget (AWS Budgets) mailing at 80% of the actual and 100% of the forecast spend.
  It watches the account's whole bill (Budgets filters by a cost allocation tag only once that tag is
  activated in the billing console, which no stack can do).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_budgets as budgets
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.api import JobApi
from infra.lambda_function import ServiceFunction
from infra.options import StackOptions
from infra.table import JobTable

BATCH_ROUTE = "POST /jobs/batch"
# Budget notifications: (actual or forecasted, percent of the budget).
BUDGET_THRESHOLDS = (("ACTUAL", 80), ("FORECASTED", 100))


class Guards(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        options: StackOptions,
        api: JobApi,
        enqueue: ServiceFunction,
        table: JobTable,
    ) -> None:
        super().__init__(scope, construct_id)
        reserve(api.handler, options.api_reserved_concurrency)
        reserve(api.reader, options.read_reserved_concurrency)
        reserve(enqueue, options.enqueue_reserved_concurrency)
        self._throttle_batches(api, options)
        self._cap_table(table, options)
        self.budget = self._budget(options) if options.monthly_budget_usd else None

    @staticmethod
    def _throttle_batches(api: JobApi, options: StackOptions) -> None:
        stage = api.stage.node.default_child
        assert isinstance(stage, cdk.CfnResource)
        stage.add_property_override(
            "RouteSettings",
            {
                BATCH_ROUTE: {
                    "ThrottlingRateLimit": options.batch_rate_limit,
                    "ThrottlingBurstLimit": options.batch_burst_limit,
                }
            },
        )
        # A stage's route settings name routes that must exist first.
        api.stage.node.add_dependency(api.routes[BATCH_ROUTE])

    @staticmethod
    def _cap_table(table: JobTable, options: StackOptions) -> None:
        if not (options.table_max_read_units or options.table_max_write_units):
            return
        cfn = table.table.node.default_child
        assert isinstance(cfn, dynamodb.CfnTable)
        cap = {
            **({"MaxReadRequestUnits": options.table_max_read_units} if options.table_max_read_units else {}),
            **({"MaxWriteRequestUnits": options.table_max_write_units} if options.table_max_write_units else {}),
        }
        cfn.add_property_override("OnDemandThroughput", cap)
        for position, _ in enumerate(table.index_names):
            cfn.add_property_override(f"GlobalSecondaryIndexes.{position}.OnDemandThroughput", cap)

    def _budget(self, options: StackOptions) -> budgets.CfnBudget:
        email = options.budget_email or options.alarm_email
        assert email is not None  # StackOptions refuses a budget without an address
        return budgets.CfnBudget(
            self,
            "MonthlyBudget",
            budget=budgets.CfnBudget.BudgetDataProperty(
                budget_name=f"{options.prefix}-monthly",
                budget_type="COST",
                time_unit="MONTHLY",
                budget_limit=budgets.CfnBudget.SpendProperty(amount=options.monthly_budget_usd, unit="USD"),
            ),
            notifications_with_subscribers=[
                budgets.CfnBudget.NotificationWithSubscribersProperty(
                    notification=budgets.CfnBudget.NotificationProperty(
                        notification_type=kind,
                        comparison_operator="GREATER_THAN",
                        threshold=percent,
                        threshold_type="PERCENTAGE",
                    ),
                    subscribers=[budgets.CfnBudget.SubscriberProperty(subscription_type="EMAIL", address=email)],
                )
                for kind, percent in BUDGET_THRESHOLDS
            ],
        )


def reserve(function: ServiceFunction, concurrency: int) -> None:
    """Reserved concurrency (0: none, the function draws on the account's unreserved pool)."""
    if concurrency:
        cfn = function.function.node.default_child
        assert isinstance(cfn, lambda_.CfnFunction)
        cfn.reserved_concurrent_executions = concurrency
