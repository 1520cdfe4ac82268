"""The stack's way to keep the endpoints' signing secrets, end to end through the handlers against moto's KMS: the
api seals a new endpoint's secret with the stack's key (`webhook_secrets_key`), the stored item holds no secret in
clear, and the delivery function opens it to sign a delivery that the secret the caller was shown verifies."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import boto3

from offpath.handlers import api, delivery
from offpath.handlers.composition import Overrides
from offpath_local.notices import LoopbackResolver
from offpath_local.resources import REGION, Resources, create_delivery_queues
from offpath_tools.webhook_receiver import Receiver
from tests.integration.conftest import Pipeline, RecordingMetrics

JSON = {"content-type": "application/json"}


def test_the_api_seals_a_secret_with_the_stacks_key_and_the_delivery_function_opens_it_to_sign(
    resources: Resources, clients: dict[str, Any], registry: Any, metrics: RecordingMetrics
) -> None:
    key_id = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["KeyId"]
    pipeline = Pipeline(resources, clients, registry, metrics)
    queue_url, dlq_url = create_delivery_queues(clients["sqs"], "offpath-kms")
    receiver = Receiver()
    try:
        port = urlsplit(receiver.url("/")).port
        settings = pipeline.settings.replace(
            delivery_queue_url=queue_url,
            delivery_dlq_url=dlq_url,
            allow_loopback_receivers=True,
            loopback_receiver_ports=[port],
            webhook_secrets_key=key_id,
        )
        overrides = Overrides(**{**vars(pipeline.overrides), "resolver": LoopbackResolver()})
        pipeline.api_services = api.build_services(settings, overrides)
        body = {"url": receiver.url("/kms"), "events": ["job.succeeded"]}

        status, first, _ = pipeline.call("PUT", "/webhooks/kms", body=body, headers=JSON)
        # Another environment of the api (no secret it sealed itself in memory) rotates the secret: it opens the
        # stored one with the key, to keep it valid beside the new one.
        pipeline.api_services = api.build_services(settings, overrides)
        rotated, made, _ = pipeline.call("POST", "/webhooks/kms/rotate-secret", headers=JSON)
        tested, _, _ = pipeline.call("POST", "/webhooks/kms/test", headers=JSON)
        message = clients["sqs"].receive_message(QueueUrl=queue_url, WaitTimeSeconds=1)["Messages"][0]
        services = delivery.build_services(settings, overrides)
        answer = delivery.handler({"Records": [{"messageId": "m1", "body": message["Body"]}]}, None, services)

        assert (status, rotated, tested) == (201, 200, 202)
        assert made["secret"] != first["secret"]
        stored = json.dumps(clients["dynamodb"].scan(TableName=resources.table_name)["Items"])
        assert made["secret"] not in stored and made["secret"].removeprefix("whsec_") not in stored
        assert answer == {"batchItemFailures": []}
        (request,) = receiver.at("/kms")
        assert request.verified_by(made["secret"]) and request.verified_by(first["secret"])  # both, for a day
    finally:
        receiver.stop()
