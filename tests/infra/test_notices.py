"""Issue 12's infrastructure: the table's stream read by the notifier (filtered, partial batch failures,
bisection, bounded retries and age, an on-failure queue), the webhook delivery queue, its DLQ and alarms, the
delivery function, the EventBridge bus by context, the realtime API (AppSync Events) and the asset's
standardwebhooks, in the aws and localstack targets."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from infra.notices import subscribe_handler
from infra.options import OptionsError, StackOptions
from offpath.adapters.realtime import channel_of, tenant_segment
from offpath.naming import NOTIFIER_STREAM_FILTER, TABLE_STREAM_VIEW
from tests.infra.stacks import Synthesized, cdk_json_context, synthesize
from tests.infra.template_view import (
    alarms_by_name,
    dimensions,
    functions_by_name,
    grants_of_role,
    of_type,
    queues_by_name,
    render,
    role_of,
)


def mappings_of(template: dict[str, object], function_id: str) -> list[dict[str, object]]:
    return [
        m["Properties"]
        for m in of_type(template, "AWS::Lambda::EventSourceMapping").values()  # type: ignore[arg-type]
        if render(m["Properties"]["FunctionName"]) == f"<{function_id}>"
    ]


def test_the_table_streams_new_and_old_images(any_stack: Synthesized) -> None:
    (table,) = of_type(any_stack.json, "AWS::DynamoDB::Table").values()
    assert table["Properties"]["StreamSpecification"] == {"StreamViewType": TABLE_STREAM_VIEW}


def test_the_notifier_reads_the_stream_filtered_with_partial_failures_and_an_on_failure_queue(
    any_stack: Synthesized,
) -> None:
    template = any_stack.json
    prefix = any_stack.stack.options.prefix
    notifier_id, notifier = functions_by_name(template)[f"{prefix}-notifier"]
    (table_id,) = of_type(template, "AWS::DynamoDB::Table")
    failures_id, failures = queues_by_name(template)[f"{prefix}-notifier-failures"]
    (mapping,) = mappings_of(template, notifier_id)

    assert notifier["Handler"] == "offpath.handlers.notifier.handler"
    assert render(mapping["EventSourceArn"]) == f"<{table_id}.StreamArn>"
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BisectBatchOnFunctionError"] is True
    assert 1 <= mapping["MaximumRetryAttempts"] <= 10
    assert 60 <= mapping["MaximumRecordAgeInSeconds"] < 24 * 3600  # inside the stream's 24 hours
    assert mapping["StartingPosition"] == "TRIM_HORIZON"  # nothing written before the mapping is missed
    # An event waits at most the window for its batch: 5 s, or 1 s where browsers follow jobs (realtime).
    window = 1 if any_stack.stack.options.realtime else 5
    assert mapping["MaximumBatchingWindowInSeconds"] == window
    assert render(mapping["DestinationConfig"]["OnFailure"]["Destination"]) == f"<{failures_id}.Arn>"
    (criteria,) = mapping["FilterCriteria"]["Filters"]
    assert json.loads(criteria["Pattern"]) == NOTIFIER_STREAM_FILTER
    assert failures["MessageRetentionPeriod"] == 14 * 86400
    assert notifier["Timeout"] <= 900


def test_the_delivery_queue_has_a_dlq_and_feeds_the_delivery_function(any_stack: Synthesized) -> None:
    template = any_stack.json
    prefix = any_stack.stack.options.prefix
    queues = queues_by_name(template)
    queue_id, queue = queues[f"{prefix}-webhooks"]
    dlq_id, dlq = queues[f"{prefix}-webhooks-dlq"]
    delivery_id, delivery = functions_by_name(template)[f"{prefix}-delivery"]
    (mapping,) = mappings_of(template, delivery_id)

    assert render(queue["RedrivePolicy"]["deadLetterTargetArn"]) == f"<{dlq_id}.Arn>"
    assert queue["RedrivePolicy"]["maxReceiveCount"] >= 3
    assert queue["VisibilityTimeout"] >= 6 * delivery["Timeout"]
    assert dlq["MessageRetentionPeriod"] == 14 * 86400
    for properties in (queue, dlq):
        assert properties["SqsManagedSseEnabled"] is True
    assert delivery["Handler"] == "offpath.handlers.delivery.handler"
    assert render(mapping["EventSourceArn"]) == f"<{queue_id}.Arn>"
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BatchSize"] * 10 < delivery["Timeout"]  # a batch of 10-second deliveries fits
    assert mapping["ScalingConfig"]["MaximumConcurrency"] >= 2


def test_the_delivery_dlq_and_the_stream_failures_alarm_on_the_alarm_topic(any_stack: Synthesized) -> None:
    template = any_stack.json
    prefix = any_stack.stack.options.prefix
    (topic_id,) = of_type(template, "AWS::SNS::Topic")
    queues = queues_by_name(template)
    alarms = alarms_by_name(template)
    for alarm_name, queue_name in (("webhooks-dlq-depth", "webhooks-dlq"), ("notifier-failures", "notifier-failures")):
        alarm = alarms[f"{prefix}-{alarm_name}"]
        assert (alarm["MetricName"], alarm["Threshold"]) == ("ApproximateNumberOfMessagesVisible", 1)
        assert dimensions(alarm)["QueueName"] == f"<{queues[f'{prefix}-{queue_name}'][0]}.QueueName>"
        assert alarm["AlarmActions"] == [{"Ref": topic_id}]


def test_notices_grants_stay_on_their_resources(any_stack: Synthesized) -> None:
    template = any_stack.json
    options = any_stack.stack.options
    prefix = options.prefix
    functions = functions_by_name(template)
    queues = queues_by_name(template)
    (table_id,) = of_type(template, "AWS::DynamoDB::Table")
    notifier = grants_of_role(template, role_of(functions[f"{prefix}-notifier"][1]))
    delivery = grants_of_role(template, role_of(functions[f"{prefix}-delivery"][1]))
    delivery_queue = f"<{queues[f'{prefix}-webhooks'][0]}.Arn>"
    failures = f"<{queues[f'{prefix}-notifier-failures'][0]}.Arn>"

    assert notifier["sqs:SendMessage"] == {delivery_queue, failures}
    assert notifier["dynamodb:GetRecords"] == {f"<{table_id}.StreamArn>"}
    assert notifier["dynamodb:GetItem"] == {f"<{table_id}.Arn>"}
    delivery_dlq = f"<{queues[f'{prefix}-webhooks-dlq'][0]}.Arn>"
    assert delivery["sqs:SendMessage"] == {delivery_queue, delivery_dlq}
    assert delivery["sqs:ReceiveMessage"] == {delivery_queue}
    assert delivery["dynamodb:PutItem"] == {f"<{table_id}.Arn>"}
    api = grants_of_role(template, role_of(functions[f"{prefix}-api"][1]))
    assert delivery_queue in api["sqs:SendMessage"]
    assert api["dynamodb:DeleteItem"] == {f"<{table_id}.Arn>"}
    queue_url = f"<{queues[f'{prefix}-webhooks'][0]}>"
    for kind in ("notifier", "delivery", "api"):
        variables = functions[f"{prefix}-{kind}"][1]["Environment"]["Variables"]
        assert render(variables["OFFPATH_DELIVERY_QUEUE_URL"]) == queue_url, kind
    delivery_variables = functions[f"{prefix}-delivery"][1]["Environment"]["Variables"]
    assert render(delivery_variables["OFFPATH_DELIVERY_DLQ_URL"]) == f"<{queues[f'{prefix}-webhooks-dlq'][0]}>"


def test_webhook_secrets_are_sealed_with_a_key_only_the_api_and_the_delivery_function_use(
    any_stack: Synthesized,
) -> None:
    template = any_stack.json
    prefix = any_stack.stack.options.prefix
    functions = functions_by_name(template)
    keys = of_type(template, "AWS::KMS::Key").items()
    ((key_id, key),) = [(i, k) for i, k in keys if "signing secrets" in k["Properties"].get("Description", "")]
    key_arn = f"<{key_id}.Arn>"

    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Retain"  # deleting the stack keeps the key: a restored table's secrets open
    grants = {
        kind: grants_of_role(template, role_of(functions[f"{prefix}-{kind}"][1]))
        for kind in ("api", "delivery", "notifier")
    }
    assert (grants["api"]["kms:Encrypt"], grants["api"]["kms:Decrypt"]) == ({key_arn}, {key_arn})
    assert grants["delivery"]["kms:Decrypt"] == {key_arn} and "kms:Encrypt" not in grants["delivery"]
    assert not any(action.startswith("kms:") for action in grants["notifier"])
    for kind in ("api", "delivery"):
        variables = functions[f"{prefix}-{kind}"][1]["Environment"]["Variables"]
        assert render(variables["OFFPATH_WEBHOOK_SECRETS_KEY"]) == key_arn, kind
    assert "OFFPATH_WEBHOOK_SECRETS_KEY" not in functions[f"{prefix}-notifier"][1]["Environment"]["Variables"]


def test_no_bus_by_default(default_stack: Synthesized) -> None:
    """Events go on a bus only when asked: three events a job are $3.00 a million jobs (docs/decisions.md)."""
    template = default_stack.json
    notifier = functions_by_name(template)["offpath-notifier"][1]

    assert "OFFPATH_EVENT_BUS_NAME" not in notifier["Environment"]["Variables"]
    assert "events:PutEvents" not in grants_of_role(template, role_of(notifier))
    assert not of_type(template, "AWS::Events::EventBus")
    assert "OFFPATH_REALTIME_URL" not in notifier["Environment"]["Variables"]
    assert not of_type(template, "AWS::AppSync::Api")


def test_a_named_bus_is_made_and_the_notifier_puts_events_on_it_alone(extended_stack: Synthesized) -> None:
    template = extended_stack.json
    ((bus_id, bus),) = of_type(template, "AWS::Events::EventBus").items()
    notifier = functions_by_name(template)["offpath-alt-notifier"][1]

    assert bus["Properties"]["Name"] == "offpath-alt-events"
    # Ref of a bus is its name: the notifier is made after its bus.
    assert render(notifier["Environment"]["Variables"]["OFFPATH_EVENT_BUS_NAME"]) == f"<{bus_id}>"
    assert grants_of_role(template, role_of(notifier))["events:PutEvents"] == {
        "arn:<AWS::Partition>:events:<AWS::Region>:<AWS::AccountId>:event-bus/offpath-alt-events"
    }


def test_the_accounts_default_bus_when_asked(tmp_path: Path) -> None:
    stack = synthesize(tmp_path, {**cdk_json_context(), "event_bus": "default"}, None)
    notifier = functions_by_name(stack.json)["offpath-notifier"][1]

    assert not of_type(stack.json, "AWS::Events::EventBus")
    assert notifier["Environment"]["Variables"]["OFFPATH_EVENT_BUS_NAME"] == "default"
    assert grants_of_role(stack.json, role_of(notifier))["events:PutEvents"] == {
        "arn:<AWS::Partition>:events:<AWS::Region>:<AWS::AccountId>:event-bus/default"
    }


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"event_bus": "aws.partner"}, "event_bus"),
        ({"event_bus": "no spaces"}, "event_bus"),
        ({"realtime": "true"}, "realtime needs jwt_issuer"),
    ],
)
def test_unusable_notice_options_are_refused(context: dict[str, str], message: str) -> None:
    with pytest.raises(OptionsError, match=message):
        StackOptions.from_context(context.get)


def test_realtime_browsers_subscribe_with_their_jwt_and_only_the_notifier_publishes(
    extended_stack: Synthesized,
) -> None:
    template = extended_stack.json
    (api_id, api), *more = of_type(template, "AWS::AppSync::Api").items()
    (namespace,) = of_type(template, "AWS::AppSync::ChannelNamespace").values()
    notifier = functions_by_name(template)["offpath-alt-notifier"][1]
    config = api["Properties"]["EventConfig"]

    assert not more
    (oidc,) = [p for p in config["AuthProviders"] if p["AuthType"] == "OPENID_CONNECT"]
    assert oidc["OpenIDConnectConfig"] == {
        "Issuer": "https://issuer.example.com/",
        "ClientId": "offpath-api|offpath-admin",
    }
    assert config["DefaultSubscribeAuthModes"] == [{"AuthType": "OPENID_CONNECT"}]
    assert config["DefaultPublishAuthModes"] == [{"AuthType": "AWS_IAM"}]
    assert namespace["Properties"]["Name"] == "jobs"
    assert "onSubscribe" in namespace["Properties"]["CodeHandlers"]
    assert grants_of_role(template, role_of(notifier))["appsync:EventPublish"] == {
        f"arn:<AWS::Partition>:appsync:<AWS::Region>:<AWS::AccountId>:apis/<{api_id}.ApiId>/channelNamespace/jobs"
    }
    url = render(notifier["Environment"]["Variables"]["OFFPATH_REALTIME_URL"])
    assert url == f"https://<{api_id}.Dns.Http>/event"
    assert {"RealtimeEndpoint", "RealtimeHttpEndpoint"} <= set(template["Outputs"])


def _subscribe(handler: str, claims: dict[str, str], channel: str) -> str:
    """Runs the onSubscribe handler in Node with AppSync's `util.unauthorized` standing in: "allowed" or
    "unauthorized"."""
    body = handler.replace("import { util } from '@aws-appsync/utils';\n", "").replace("export function", "function")
    script = (
        "const util = { unauthorized() { throw new Error('unauthorized'); } };\n"
        + body
        + f"const channel = {json.dumps(channel)};\n"
        + "try {\n"
        + f"  onSubscribe({{ identity: {{ claims: {json.dumps(claims)} }}, "
        + "info: { channel: { path: channel, segments: channel.split('/').filter(Boolean) } } });\n"
        + "  console.log('allowed');\n"
        + "} catch (e) { console.log(e.message); }\n"
    )
    done = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.strip()


@pytest.mark.parametrize("tenant", ["acme", "acme.eu", "team:a/b+c=d@e-f_g", "A1"])
def test_the_subscribe_handler_lets_a_tenant_into_its_own_channels_only(tenant: str) -> None:
    """The handler's channel segment (JavaScript) is the publisher's (offpath.adapters.realtime)."""
    handler = subscribe_handler(("tenant", "custom:tenant"))
    job = "0123456789abcdef0123456789abcdef"
    own = channel_of(tenant, job)

    assert own == f"/jobs/{tenant_segment(tenant)}/{job}"
    assert _subscribe(handler, {"tenant": tenant}, own) == "allowed"
    assert _subscribe(handler, {"custom:tenant": tenant}, own) == "allowed"
    assert _subscribe(handler, {"tenant": "other"}, own) == "unauthorized"
    assert _subscribe(handler, {}, own) == "unauthorized"
    assert _subscribe(handler, {"tenant": tenant}, channel_of("other", job)) == "unauthorized"
    assert _subscribe(handler, {"tenant": tenant}, "/jobs/*") == "unauthorized"


def test_the_asset_carries_standardwebhooks(default_stack: Synthesized, localstack_stack: Synthesized) -> None:
    for stack in (default_stack, localstack_stack):
        manifest = json.loads((stack.outdir / "Offpath.assets.json").read_text())
        (asset,) = [f for f in manifest["files"].values() if f["source"].get("packaging") == "zip"]
        root = stack.outdir / asset["source"]["path"]
        assert (root / "standardwebhooks" / "webhooks.py").is_file()
        assert any(p.name.startswith("standardwebhooks-") and p.suffix == ".dist-info" for p in root.iterdir())


def test_the_cost_model_prices_the_notifiers_batches_as_the_stack_sets_them() -> None:
    from infra.notices import NOTIFIER_BATCH_SIZE, NOTIFIER_BATCHING_WINDOW
    from offpath_tools.cost import ASSUMPTIONS

    assert ASSUMPTIONS.notifier_batch_size == NOTIFIER_BATCH_SIZE
    assert ASSUMPTIONS.notifier_batching_window_s == NOTIFIER_BATCHING_WINDOW.to_seconds()
