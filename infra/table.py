"""The jobs table: one item per job, keyed for its tenant's listing (`pk` + `sk`), layout from `offpath.naming`.
A table's key cannot change in place: a deployment made before the sort key gets a new table (docs/deploy.md)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.lambda_function import ServiceFunction
from infra.options import StackOptions
from offpath.naming import TABLE_INDEXES, TABLE_PARTITION_KEY, TABLE_SORT_KEY, TABLE_STREAM_VIEW, TTL_ATTRIBUTE

# The sparse index of unfinished jobs, queried by the sweeper only.
SWEEP_INDEX = "sweep"


class JobTable(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, options: StackOptions) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name=TABLE_PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=TABLE_SORT_KEY, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute=TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            deletion_protection=options.deletion_protection,
            # The notifier reads every change of a job from the table's own stream (infra/notices.py).
            stream=dynamodb.StreamViewType[TABLE_STREAM_VIEW],
            removal_policy=cdk.RemovalPolicy.RETAIN if options.deletion_protection else cdk.RemovalPolicy.DESTROY,
        )
        # A change of the key schema replaces the table: the replaced table is kept with its items, whatever the
        # options, for `offpath migrate` to copy (docs/deploy.md, "Upgrading"). Deleting the stack still follows
        # deletion_protection.
        resource = self.table.node.default_child
        assert isinstance(resource, cdk.CfnResource)
        resource.cfn_options.update_replace_policy = cdk.CfnDeletionPolicy.RETAIN
        for index in TABLE_INDEXES:
            self.table.add_global_secondary_index(
                index_name=index.name,
                partition_key=dynamodb.Attribute(name=index.partition_key, type=dynamodb.AttributeType.STRING),
                sort_key=dynamodb.Attribute(name=index.sort_key, type=dynamodb.AttributeType.STRING),
                projection_type=dynamodb.ProjectionType[index.projection],
                non_key_attributes=list(index.attributes) or None,
            )
        self.index_names = tuple(index.name for index in TABLE_INDEXES)
        if SWEEP_INDEX not in self.index_names:
            raise ValueError(f"offpath.naming.TABLE_INDEXES has no {SWEEP_INDEX!r} index for the sweeper")

    @property
    def table_name(self) -> str:
        return self.table.table_name

    def index_arn(self, index_name: str) -> str:
        if index_name not in self.index_names:
            raise ValueError(f"the jobs table has no index {index_name!r} (indexes: {', '.join(self.index_names)})")
        return f"{self.table.table_arn}/index/{index_name}"

    def grant(
        self,
        function: ServiceFunction,
        item_actions: Sequence[str],
        *,
        query_indexes: Iterable[str] = (),
        query_table: bool = False,
    ) -> None:
        """Item actions on the table; Query on the table and/or on the named indexes only (no wildcards)."""
        actions = [f"dynamodb:{action}" for action in item_actions]
        if actions:
            function.grant(actions, [self.table.table_arn])
        query_resources = [self.table.table_arn] if query_table else []
        query_resources += [self.index_arn(name) for name in query_indexes]
        if query_resources:
            function.grant(["dynamodb:Query"], query_resources)
