"""The HTTP API (API Gateway HTTP API, payload format 2.0) in front of the api function.

The routes are those declared in offpath.contract, each with the authorization its `access` names, each
integrated with the function it names: the api function, or the read function for `GET /jobs/{id}` (its waits
hold an environment each for up to 20 s; a function of their own, with its own reserved concurrency, keeps them
from taking the environments submits need).
Authorisation is IAM (SigV4) by default, or a JWT authorizer when `jwt_issuer` and `jwt_audience` are given.
Admin routes are separate routes: with JWT they need the `offpath/admin` scope; with IAM a policy grants them
separately (`execute-api:Invoke` on `.../POST/queues/*/redrive`). `GET /health` alone has no authorizer: load
balancers and uptime checks call it without credentials, and it answers a constant without touching any data.
"""

from __future__ import annotations

import json

import aws_cdk as cdk
import jsii
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.lambda_function import FunctionKit, ServiceFunction
from infra.nag import acknowledge
from infra.queues import JobQueues
from infra.schedules import Schedules
from infra.table import JobTable
from infra.workers import Workers
from offpath import contract
from offpath.naming import FUNCTION_MEMORY_MB, api_function_name, read_function_name
from offpath.tenancy import ADMIN_SCOPE

API_HANDLER = "offpath.handlers.api.handler"
# API Gateway's integration timeout is 30 s; the function gives up first.
API_TIMEOUT = cdk.Duration.seconds(29)

PUBLIC_REASON = (
    "GET /health is deliberately unauthenticated for load balancers and uptime checks; it returns a constant "
    "and reads no data. Every other route has an authorizer."
)
# One JSON line per request. What an operator looks for, once: the method is in `routeKey`, the latency is the
# response's (the integration's is a few ms less), the time in epoch milliseconds (13 characters, not 28). A line
# is ~230 bytes with typical values; the cost model prices ASSUMPTIONS.access_log_bytes per request (tested).
ACCESS_LOG_FIELDS = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "requestTimeEpoch": "$context.requestTimeEpoch",
    "routeKey": "$context.routeKey",
    "status": "$context.status",
    "responseLength": "$context.responseLength",
    "responseLatency": "$context.responseLatency",
    "integrationError": "$context.integrationErrorMessage",
    "authorizerError": "$context.authorizer.error",
}


def route_id(method: str, path: str) -> str:
    """A construct id for a route ("/" is not allowed in ids): `POST /jobs/{id}/cancel` -> `POST-jobs-id-cancel`."""
    return method + "".join(c if c.isalnum() or c == "." else "-" for c in path.replace("{", "").replace("}", ""))


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLog:
    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        return apigw.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FIELDS, separators=(",", ":")))


class JobApi(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        kit: FunctionKit,
        table: JobTable,
        queues: JobQueues,
        schedules: Schedules,
    ) -> None:
        super().__init__(scope, construct_id)
        options = kit.options
        # Who the tenant is (JWT) and who the admins are (IAM): read by the api function alone.
        tenancy = {"OFFPATH_TENANT_CLAIMS": ",".join(options.tenant_claims)}
        if options.admin_principals:
            tenancy["OFFPATH_ADMIN_PRINCIPALS"] = ",".join(options.admin_principals)
        self.prefix = options.prefix
        self.handler = ServiceFunction(
            self,
            "Handler",
            kit=kit,
            name=api_function_name(options.prefix),
            handler=API_HANDLER,
            description="offpath: the HTTP API (submit, status, queues, schedules, redrive)",
            timeout=API_TIMEOUT,
            memory_mb=FUNCTION_MEMORY_MB["api"],
            environment={
                "OFFPATH_PAYLOAD_LIMIT_BYTES": str(options.payload_limit_bytes),
                **tenancy,
                # GET /alarms: the stack's alarms are the ones named <prefix>-...
                "OFFPATH_STACK_PREFIX": options.prefix,
                **schedules.environment,
            },
        )
        self._grant(table, queues, schedules)
        # The job reads (GET /jobs/{id}, waits included): the api's handler, on a function of its own that reads
        # jobs and counts its tenants' waits (contract.READ_FUNCTION).
        self.reader = ServiceFunction(
            self,
            "Reader",
            kit=kit,
            name=read_function_name(options.prefix),
            handler=API_HANDLER,
            description="offpath: job reads and waits (GET /jobs/{id})",
            timeout=API_TIMEOUT,
            memory_mb=FUNCTION_MEMORY_MB["api"],
            environment={**tenancy, "OFFPATH_WAITS_PER_TENANT": str(options.waits_per_tenant)},
        )
        table.grant(self.reader, ["GetItem", "UpdateItem"])

        self.authorizer: apigwv2.IHttpRouteAuthorizer
        if options.jwt_issuer is not None:
            self.authorizer = authorizers.HttpJwtAuthorizer(
                "Jwt", options.jwt_issuer, jwt_audience=list(options.jwt_audience)
            )
        else:
            self.authorizer = authorizers.HttpIamAuthorizer()
        self.http_api = apigwv2.HttpApi(
            self,
            "HttpApi",
            api_name=options.prefix,
            description="offpath: background jobs over HTTP",
            default_authorizer=self.authorizer,
            create_default_stage=False,
        )
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=options.log_retention,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self.stage = apigwv2.HttpStage(
            self,
            "Stage",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(rate_limit=options.api_rate_limit, burst_limit=options.api_burst_limit),
            access_log_settings=_AccessLog(self.access_logs),
        )

        integrations_by_function = {
            contract.API_FUNCTION: integrations.HttpLambdaIntegration("Integration", self.handler.target),
            contract.READ_FUNCTION: integrations.HttpLambdaIntegration("ReadIntegration", self.reader.target),
        }
        self.routes: dict[str, apigwv2.HttpRoute] = {}
        admin_scopes = [ADMIN_SCOPE] if options.jwt else None
        for declared in contract.ROUTES:
            integration = integrations_by_function[declared.function]
            if declared.access == "public":
                route = self._route(declared.method, declared.path, integration, apigwv2.HttpNoneAuthorizer())
                acknowledge(route, "AwsSolutions-APIG4", PUBLIC_REASON)
            else:
                scopes = admin_scopes if declared.access == "admin" else None
                self._route(declared.method, declared.path, integration, self.authorizer, scopes=scopes)

    @property
    def url(self) -> str:
        return self.stage.url

    @property
    def alarm_arns(self) -> str:
        """The stack's alarms (infra/monitoring.py names each `<prefix>-...`)."""
        stack = cdk.Stack.of(self)
        return stack.format_arn(
            service="cloudwatch",
            resource="alarm",
            resource_name=f"{self.prefix}-*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )

    def allow_pausing(self, workers: Workers) -> None:
        """A queue class's pause disables its SQS event source mapping (no polling while paused) and its alarms'
        actions; resume enables both (offpath.adapters.queue_switch). The api function is given each mapping's
        UUID, from the mappings the workers declare, and may update those mappings only."""
        mappings = {name: source.event_source_mapping_id for name, source in sorted(workers.sources.items())}
        self.handler.function.add_environment("OFFPATH_QUEUE_MAPPINGS", cdk.Stack.of(self).to_json_string(mappings))
        arns = [source.event_source_mapping_arn for _, source in sorted(workers.sources.items())]
        self.handler.grant(["lambda:UpdateEventSourceMapping"], arns)
        # The age alarm of a paused queue class pages nobody: its actions are disabled (the stack's alarms only).
        self.handler.grant(["cloudwatch:DisableAlarmActions", "cloudwatch:EnableAlarmActions"], [self.alarm_arns])

    def _route(
        self,
        method: str,
        path: str,
        integration: apigwv2.HttpRouteIntegration,
        authorizer: apigwv2.IHttpRouteAuthorizer,
        scopes: list[str] | None = None,
    ) -> apigwv2.HttpRoute:
        route = apigwv2.HttpRoute(
            self,
            route_id(method, path),
            http_api=self.http_api,
            route_key=apigwv2.HttpRouteKey.with_(path, apigwv2.HttpMethod(method)),
            integration=integration,
            authorizer=authorizer,
            authorization_scopes=scopes,
        )
        self.routes[f"{method} {path}"] = route
        return route

    def _grant(self, table: JobTable, queues: JobQueues, schedules: Schedules) -> None:
        api = self.handler
        # Query on the table itself: a listing reads the tenant's partitions (no listing index). BatchGetItem:
        # the quota counters' shards.
        table.grant(api, ["PutItem", "GetItem", "UpdateItem", "BatchGetItem"], query_table=True)
        # Submits, retries and a redrive's copies go to the job queues, never to a DLQ (make iam-check).
        job_queues = [queue.queue_arn for _, queue in sorted(queues.queues.items())]
        api.grant(["sqs:SendMessage", "sqs:GetQueueAttributes"], job_queues)
        # Redrive: a message move task from each DLQ (or, on emulators, receive + delete + send). One job's dead
        # letter (a hand retry, a discard): receive, delete it, release the others (ChangeMessageVisibilityBatch
        # is authorised by sqs:ChangeMessageVisibility).
        api.grant(
            [
                "sqs:StartMessageMoveTask",
                "sqs:ListMessageMoveTasks",
                "sqs:ReceiveMessage",
                "sqs:DeleteMessage",
                "sqs:ChangeMessageVisibility",
                "sqs:GetQueueAttributes",
            ],
            [dlq.queue_arn for dlq in queues.dlqs.values()],
        )
        # The oldest message's age per queue (GET /queues) and the per-minute statistics (GET /stats, which
        # lists the Offpath metrics first); neither action has resource-level permissions.
        api.grant(["cloudwatch:GetMetricData", "cloudwatch:ListMetrics"], ["*"])
        # GET /alarms: the stack's alarms and their history, by name.
        api.grant(["cloudwatch:DescribeAlarms", "cloudwatch:DescribeAlarmHistory"], [self.alarm_arns])
        # Delayed jobs: one-time schedules, which delete themselves after they fire; a cancel deletes its job's.
        schedules.grant_one_time_schedules(api, ["scheduler:CreateSchedule", "scheduler:DeleteSchedule"])
