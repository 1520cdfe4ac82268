"""Completion notices: the job table's stream read by the notifier, the webhook delivery queue and function,
the EventBridge bus and (with the `realtime` option) the AWS AppSync Events API browsers subscribe to.

- The notifier reads the table's stream (new and old images) through an event source mapping filtered to
  job items (`NOTIFIER_STREAM_FILTER`), with partial batch failures, bisection of a failing batch, bounded
  retries and record age, and an on-failure destination queue (a record of each batch given up on).
- It puts each event on the bus (`event_bus`: the default bus, a bus of its own, or none), sends the webhook
  deliveries of the tenants' endpoints to the delivery queue and publishes to the realtime channels.
- The delivery function reads the delivery queue (partial batch failures); it sends a delivery's retry back to
  the same queue with a delay; a message it keeps failing on goes to the queue's DLQ, which alarms.
- The endpoints' signing secrets are stored sealed with a KMS key of the stack's own (rotated yearly): the api
  seals (Encrypt) and reads (Decrypt) them, the delivery function only reads them, the notifier never does.
"""

from __future__ import annotations

import json

import aws_cdk as cdk
from aws_cdk import aws_appsync as appsync
from aws_cdk import aws_events as events
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.lambda_function import FunctionKit, ServiceFunction
from infra.nag import acknowledge
from infra.options import EVENT_BUS_DEFAULT
from infra.queues import VISIBILITY_TO_TIMEOUT_RATIO, secure_queue
from infra.table import JobTable
from offpath.naming import (
    NOTICES_MEMORY_MB,
    NOTIFIER_MAPPING,
    NOTIFIER_STREAM_FILTER,
    REALTIME_NAMESPACE,
    delivery_dlq_name,
    delivery_function_name,
    delivery_queue_name,
    notifier_failures_queue_name,
    notifier_function_name,
)

NOTIFIER_HANDLER = "offpath.handlers.notifier.handler"
DELIVERY_HANDLER = "offpath.handlers.delivery.handler"
NOTIFIER_TIMEOUT = cdk.Duration.seconds(60)
NOTIFIER_BATCH_SIZE = NOTIFIER_MAPPING.batch_size
# Fewer, fuller invocations: a batch gathers for this long (or until it holds NOTIFIER_BATCH_SIZE records), so
# an event reaches its webhooks and bus at most this much later. At 1 million jobs a month (0.38 a second) a
# 5-second window puts ~3 jobs' lives in one invocation instead of ~1.4 with 1 s: $0.22 less per million jobs
# (the notifier's requests, duration and EMF lines; docs/decisions.md). Browsers following a job (the
# `realtime` option) get the 1-second window: a progress bar that lags 5 s looks stuck.
NOTIFIER_BATCHING_WINDOW = cdk.Duration.seconds(5)
NOTIFIER_REALTIME_BATCHING_WINDOW = cdk.Duration.seconds(1)
# A batch that keeps failing is split in two (bisection) and retried, at most this often, while its oldest
# record is younger than the maximum age (the stream keeps records 24 hours); then its record goes to the
# on-failure queue, which alarms. Declared once (offpath.naming.NOTIFIER_MAPPING): the embedded runtime's
# stream player plays the same numbers.
NOTIFIER_RETRY_ATTEMPTS = NOTIFIER_MAPPING.retry_attempts
NOTIFIER_MAX_RECORD_AGE = cdk.Duration.seconds(NOTIFIER_MAPPING.max_record_age_s)
# A delivery waits at most 10 s for its receiver: a batch of 10 fits the timeout with room to spare.
DELIVERY_BATCH_SIZE = 10
# How many batches of deliveries run at once (SQS event sources take 2 to 1,000).
DELIVERY_MAX_CONCURRENCY = 10
DELIVERY_TIMEOUT = cdk.Duration.seconds(120)
# Each retry of a delivery is a new message (sent back with its delay), so a message fails here only when
# the function does: after this many receives it is parked in the DLQ.
DELIVERY_MAX_RECEIVE_COUNT = 5
DELIVERY_RETENTION = cdk.Duration.days(4)
FAILURE_RETENTION = cdk.Duration.days(14)
# AWS AppSync Events' HTTP publish endpoint, under the API's HTTP domain.
REALTIME_PUBLISH_PATH = "/event"

ON_FAILURE_REASON = (
    "This queue is the on-failure destination of the notifier's stream event source mapping (a DLQ by another "
    "name, which cdk-nag does not follow); it alarms."
)
SYNC_REASON = (
    "Invoked synchronously by an event source mapping; a function DLQ applies only to asynchronous invocations. "
    "The stream mapping has its own on-failure destination; the delivery queue has a redrive policy to its DLQ."
)
DELIVERY_DESTINATION_REASON = (
    "Lambda supports no on-failure destination for SQS event sources; deliveries the function keeps failing on "
    "go to the delivery queue's DLQ through its redrive policy, which alarms."
)
STREAM_LIST_REASON = (
    "dynamodb:ListStreams takes no resource-level permissions; the stream read actions are granted on the jobs "
    "table's stream only."
)
REALTIME_LOG_REASON = (
    "The realtime API carries job events to subscribed browsers; its connections and publishes are counted in "
    "AppSync's own CloudWatch metrics, and request logging would add a per-event log charge."
)


def notifier_batching_window(*, realtime: bool) -> cdk.Duration:
    """How long the notifier's batches gather (NOTIFIER_BATCHING_WINDOW; shorter with realtime)."""
    return NOTIFIER_REALTIME_BATCHING_WINDOW if realtime else NOTIFIER_BATCHING_WINDOW


def subscribe_handler(tenant_claims: tuple[str, ...]) -> str:
    """The channel namespace's onSubscribe handler (APPSYNC_JS): a browser may subscribe only to channels
    `/jobs/<its tenant>/...`, its tenant read from its token's claims (the first of `tenant_claims` present),
    written as `offpath.adapters.realtime.tenant_segment` writes it."""
    return (
        "import { util } from '@aws-appsync/utils';\n"
        f"const CLAIMS = {json.dumps(list(tenant_claims))};\n"
        "function segment(tenant) {\n"
        "  let out = '';\n"
        "  for (const c of tenant.split('')) {\n"
        "    out += /[A-Za-z0-9]/.test(c) ? c : '-' + c.charCodeAt(0).toString(16).padStart(2, '0');\n"
        "  }\n"
        "  return out;\n"
        "}\n"
        "export function onSubscribe(ctx) {\n"
        "  const claims = (ctx.identity && ctx.identity.claims) || {};\n"
        "  let tenant = null;\n"
        "  for (const name of CLAIMS) {\n"
        "    if (tenant === null && typeof claims[name] === 'string' && claims[name] !== '') {\n"
        "      tenant = claims[name];\n"
        "    }\n"
        "  }\n"
        "  const segments = ctx.info.channel.segments;\n"
        f"  if (tenant === null || segments.length !== 3 || segments[0] !== '{REALTIME_NAMESPACE}' "
        "|| segments[1] !== segment(tenant)) {\n"
        "    util.unauthorized();\n"
        "  }\n"
        "}\n"
    )


class Notices(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, kit: FunctionKit, table: JobTable, api: ServiceFunction
    ) -> None:
        """`api`: the api function, which sends a test delivery (POST /webhooks/{name}/test) to the delivery
        queue and deletes an endpoint's delivery log (DELETE /webhooks/{name})."""
        super().__init__(scope, construct_id)
        options = kit.options
        prefix = options.prefix
        stack = cdk.Stack.of(self)

        # Queues: the stream mapping's on-failure destination; the delivery queue and its DLQ.
        self.stream_failures = secure_queue(
            self,
            "StreamFailures",
            name=notifier_failures_queue_name(prefix),
            retention=FAILURE_RETENTION,
            dead_letter_for="stream batches the notifier gave up on (their shard and sequence numbers)",
        )
        acknowledge(self.stream_failures, "AwsSolutions-SQS3", ON_FAILURE_REASON)
        self.delivery_dlq = secure_queue(
            self,
            "DeliveryDlq",
            name=delivery_dlq_name(prefix),
            retention=FAILURE_RETENTION,
            dead_letter_for="webhook deliveries the delivery function kept failing on",
        )
        self.delivery_queue = secure_queue(
            self,
            "DeliveryQueue",
            name=delivery_queue_name(prefix),
            retention=DELIVERY_RETENTION,
            visibility_timeout=cdk.Duration.seconds(VISIBILITY_TO_TIMEOUT_RATIO * DELIVERY_TIMEOUT.to_seconds()),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.delivery_dlq, max_receive_count=DELIVERY_MAX_RECEIVE_COUNT
            ),
        )

        # The bus: the account's default bus, a bus of this stack's own, or none.
        self.bus: events.IEventBus | None = None
        bus_name = options.event_bus_name
        if bus_name == EVENT_BUS_DEFAULT:
            self.bus = events.EventBus.from_event_bus_name(self, "DefaultBus", EVENT_BUS_DEFAULT)
        elif bus_name is not None:
            self.bus = events.EventBus(self, "Bus", event_bus_name=bus_name, description="offpath: job events")

        # Realtime: AppSync Events, browsers subscribing with their JWT, only the notifier publishing (IAM).
        self.realtime_api: appsync.EventApi | None = None
        self.realtime_namespace: appsync.ChannelNamespace | None = None
        if options.realtime:
            self._realtime(prefix, options.jwt_issuer or "", options.jwt_audience, options.tenant_claims)

        # The endpoints' signing secrets, sealed (offpath.adapters.kms_secrets): a key of the stack's own.
        self.secrets_key = kms.Key(
            self,
            "WebhookSecretsKey",
            description="offpath: seals the webhook endpoints' signing secrets",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        secrets_key = {"OFFPATH_WEBHOOK_SECRETS_KEY": self.secrets_key.key_arn}

        environment = {"OFFPATH_DELIVERY_QUEUE_URL": self.delivery_queue.queue_url}
        notifier_environment = dict(environment)
        if self.bus is not None:
            notifier_environment["OFFPATH_EVENT_BUS_NAME"] = self.bus.event_bus_name
        if self.realtime_api is not None:
            notifier_environment["OFFPATH_REALTIME_URL"] = (
                f"https://{self.realtime_api.http_dns}{REALTIME_PUBLISH_PATH}"
            )

        self.notifier = ServiceFunction(
            self,
            "Notifier",
            kit=kit,
            name=notifier_function_name(prefix),
            handler=NOTIFIER_HANDLER,
            description="offpath: turns the job table's changes into events (webhooks, EventBridge, realtime)",
            timeout=NOTIFIER_TIMEOUT,
            memory_mb=NOTICES_MEMORY_MB["notifier"],
            environment=notifier_environment,
        )
        # The tenants' endpoints are read from the table; the deliveries go to the delivery queue.
        table.grant(self.notifier, ["GetItem"])
        self.notifier.grant(["sqs:SendMessage"], [self.delivery_queue.queue_arn])
        if self.bus is not None:
            self.notifier.grant(["events:PutEvents"], [self._bus_arn(stack, bus_name or "")])
        if self.realtime_api is not None:
            namespace_arn = stack.format_arn(
                service="appsync",
                resource="apis",
                resource_name=f"{self.realtime_api.api_id}/channelNamespace/{REALTIME_NAMESPACE}",
            )
            self.notifier.grant(["appsync:EventPublish"], [namespace_arn])
        self.stream_mapping = self.notifier.target.add_event_source(
            event_sources.DynamoEventSource(
                table.table,
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=NOTIFIER_BATCH_SIZE,
                bisect_batch_on_error=NOTIFIER_MAPPING.bisect_on_error,
                retry_attempts=NOTIFIER_RETRY_ATTEMPTS,
                max_record_age=NOTIFIER_MAX_RECORD_AGE,
                report_batch_item_failures=True,
                on_failure=event_sources.SqsDlq(self.stream_failures),
                max_batching_window=notifier_batching_window(realtime=self.realtime_api is not None),
                filters=[lambda_.FilterCriteria.filter(NOTIFIER_STREAM_FILTER)],
            )
        )
        acknowledge(self.notifier.role, "AwsSolutions-IAM5[Resource::*]", STREAM_LIST_REASON)
        acknowledge(self.notifier, "Serverless-LambdaDLQ", SYNC_REASON)

        self.delivery = ServiceFunction(
            self,
            "Delivery",
            kit=kit,
            name=delivery_function_name(prefix),
            handler=DELIVERY_HANDLER,
            description="offpath: delivers signed webhooks to the tenants' endpoints, retrying with delays",
            timeout=DELIVERY_TIMEOUT,
            memory_mb=NOTICES_MEMORY_MB["delivery"],
            environment={**environment, **secrets_key, "OFFPATH_DELIVERY_DLQ_URL": self.delivery_dlq.queue_url},
        )
        # Endpoints and the delivery log in the table; a retry is sent back to the queue with its delay, the
        # last failure (or a disabled endpoint's delivery) to the DLQ with its reason.
        table.grant(self.delivery, ["GetItem", "PutItem"])
        self.delivery.grant(["kms:Decrypt"], [self.secrets_key.key_arn])
        self.delivery.grant(["sqs:SendMessage"], [self.delivery_queue.queue_arn, self.delivery_dlq.queue_arn])
        self.delivery.target.add_event_source(
            event_sources.SqsEventSource(
                self.delivery_queue,
                batch_size=DELIVERY_BATCH_SIZE,
                max_concurrency=DELIVERY_MAX_CONCURRENCY,
                report_batch_item_failures=True,
            )
        )

        # The api: a test delivery to the queue; an endpoint's delivery log deleted with it.
        api.function.add_environment("OFFPATH_DELIVERY_QUEUE_URL", self.delivery_queue.queue_url)
        api.function.add_environment("OFFPATH_WEBHOOK_SECRETS_KEY", self.secrets_key.key_arn)
        api.grant(["kms:Encrypt", "kms:Decrypt"], [self.secrets_key.key_arn])
        table.grant(api, ["DeleteItem"])
        api.grant(["sqs:SendMessage"], [self.delivery_queue.queue_arn])
        acknowledge(self.delivery, "Serverless-LambdaDLQ", SYNC_REASON)
        acknowledge(self.delivery, "Serverless-LambdaEventSourceMappingDestination", DELIVERY_DESTINATION_REASON)

    @property
    def functions(self) -> list[ServiceFunction]:
        return [self.notifier, self.delivery]

    @staticmethod
    def _bus_arn(stack: cdk.Stack, name: str) -> str:
        return stack.format_arn(
            service="events", resource="event-bus", resource_name=name, arn_format=cdk.ArnFormat.SLASH_RESOURCE_NAME
        )

    def _realtime(self, prefix: str, issuer: str, audience: tuple[str, ...], tenant_claims: tuple[str, ...]) -> None:
        oidc = appsync.AppSyncAuthProvider(
            authorization_type=appsync.AppSyncAuthorizationType.OIDC,
            open_id_connect_config=appsync.AppSyncOpenIdConnectConfig(
                oidc_provider=issuer, client_id="|".join(audience)
            ),
        )
        iam = appsync.AppSyncAuthProvider(authorization_type=appsync.AppSyncAuthorizationType.IAM)
        self.realtime_api = appsync.EventApi(
            self,
            "RealtimeApi",
            api_name=f"{prefix}-realtime",
            authorization_config=appsync.EventApiAuthConfig(
                auth_providers=[iam, oidc],
                # Browsers connect with their JWT; the notifier publishes over HTTP with IAM.
                connection_auth_mode_types=[
                    appsync.AppSyncAuthorizationType.OIDC,
                    appsync.AppSyncAuthorizationType.IAM,
                ],
                default_publish_auth_mode_types=[appsync.AppSyncAuthorizationType.IAM],
                default_subscribe_auth_mode_types=[appsync.AppSyncAuthorizationType.OIDC],
            ),
        )
        self.realtime_namespace = appsync.ChannelNamespace(
            self,
            "RealtimeJobs",
            api=self.realtime_api,
            channel_namespace_name=REALTIME_NAMESPACE,
            code=appsync.Code.from_inline(subscribe_handler(tenant_claims)),
        )
