"""The saved Logs Insights queries (infra/log_queries.py), as AWS::Logs::QueryDefinition over the functions' log
groups, named `<prefix>/<name>` (a folder per deployment in the console)."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.lambda_function import ServiceFunction
from infra.log_queries import QUERIES, WORKERS


class LogQueries(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        prefix: str,
        functions: Sequence[ServiceFunction],
        workers: Sequence[ServiceFunction],
    ) -> None:
        super().__init__(scope, construct_id)
        self.definitions: dict[str, logs.QueryDefinition] = {}
        for saved in QUERIES:
            over = workers if saved.log_groups == WORKERS else functions
            self.definitions[saved.name] = logs.QueryDefinition(
                self,
                saved.name,
                query_definition_name=f"{prefix}/{saved.name}",
                query_string=logs.QueryString(
                    fields=list(saved.fields) or None,
                    filter_statements=[saved.filter] if saved.filter else None,
                    stats_statements=[saved.stats] if saved.stats else None,
                    sort=saved.sort,
                    limit=saved.limit,
                ),
                log_groups=[function.log_group for function in over],
            )
