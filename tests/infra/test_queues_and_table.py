"""TESTPLAN 27: the queues and the table keep the delivery guarantees the workers rely on."""

from __future__ import annotations

import aws_cdk as cdk
import pytest

from infra.queues import JobQueues, QueueConfigError
from offpath.domain.registry import Registry
from offpath.naming import TABLE_INDEXES, TTL_ATTRIBUTE, dlq_name, queue_name
from tests.infra.stacks import NEW_QUEUE, Synthesized
from tests.infra.template_view import functions_by_name, of_type, queues_by_name, render


def test_every_queue_class_has_a_queue_and_a_dlq(any_stack: Synthesized) -> None:
    queues = queues_by_name(any_stack.json)
    prefix = any_stack.stack.options.prefix
    for name in any_stack.registry.queues:
        _, queue = queues[queue_name(prefix, name)]
        dlq_id, _ = queues[dlq_name(prefix, name)]
        assert render(queue["RedrivePolicy"]["deadLetterTargetArn"]) == f"<{dlq_id}.Arn>"


def test_visibility_timeout_is_at_least_six_times_the_worker_timeout(any_stack: Synthesized) -> None:
    queues = queues_by_name(any_stack.json)
    functions = functions_by_name(any_stack.json)
    prefix = any_stack.stack.options.prefix
    for name in any_stack.registry.queues:
        _, queue = queues[queue_name(prefix, name)]
        _, worker = functions[f"{prefix}-worker-{name}"]
        assert queue["VisibilityTimeout"] >= 6 * worker["Timeout"]
        assert queue["VisibilityTimeout"] == any_stack.registry.visibility_timeout_s(name)


def test_max_receive_count_is_above_every_job_types_max_attempts(any_stack: Synthesized) -> None:
    queues = queues_by_name(any_stack.json)
    registry = any_stack.registry
    for name in registry.queues:
        _, queue = queues[queue_name(any_stack.stack.options.prefix, name)]
        attempts = [job_type.max_attempts for job_type in registry.job_types_on(name)]
        assert queue["RedrivePolicy"]["maxReceiveCount"] > max(attempts, default=0)


def test_dlq_keeps_messages_longer_than_its_queue(any_stack: Synthesized) -> None:
    queues = queues_by_name(any_stack.json)
    prefix = any_stack.stack.options.prefix
    for name in any_stack.registry.queues:
        _, queue = queues[queue_name(prefix, name)]
        _, dlq = queues[dlq_name(prefix, name)]
        assert dlq["MessageRetentionPeriod"] > queue["MessageRetentionPeriod"]


def test_every_queue_is_encrypted_and_denies_requests_without_tls(default_stack: Synthesized) -> None:
    template = default_stack.json
    tls_only: set[str] = set()
    for policy in of_type(template, "AWS::SQS::QueuePolicy").values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        if any(
            s["Effect"] == "Deny"
            and s["Action"] == "sqs:*"
            and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
            and s["Principal"] == {"AWS": "*"}
            for s in statements
        ):
            tls_only.update(render(queue) for queue in policy["Properties"]["Queues"])
    queues = of_type(template, "AWS::SQS::Queue")
    # + the schedule DLQ and async failures; the webhook delivery queue, its DLQ and the notifier's failures
    assert len(queues) == 2 * len(default_stack.registry.queues) + 2 + 3
    for logical_id, queue in queues.items():
        assert queue["Properties"].get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in queue["Properties"]
        assert f"<{logical_id}>" in tls_only, f"{logical_id} accepts requests without TLS"


def test_table_has_pitr_ttl_encryption_and_the_store_indexes(default_stack: Synthesized) -> None:
    (table,) = of_type(default_stack.json, "AWS::DynamoDB::Table").values()
    properties = table["Properties"]
    assert properties["BillingMode"] == "PAY_PER_REQUEST"
    assert properties["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert properties["TimeToLiveSpecification"] == {"AttributeName": TTL_ATTRIBUTE, "Enabled": True}
    assert properties["SSESpecification"]["SSEEnabled"] is True
    assert properties["DeletionProtectionEnabled"] is True
    assert table["DeletionPolicy"] == "Retain"
    indexes = {index["IndexName"]: index for index in properties["GlobalSecondaryIndexes"]}
    assert set(indexes) == {index.name for index in TABLE_INDEXES}
    for index in TABLE_INDEXES:
        found = indexes[index.name]
        assert [k["AttributeName"] for k in found["KeySchema"]] == [index.partition_key, index.sort_key]
        assert found["Projection"]["ProjectionType"] == index.projection
        assert found["Projection"].get("NonKeyAttributes", []) == list(index.attributes)


def test_table_deletion_protection_can_be_turned_off(extended_stack: Synthesized) -> None:
    (table,) = of_type(extended_stack.json, "AWS::DynamoDB::Table").values()
    assert table["Properties"]["DeletionProtectionEnabled"] is False
    assert table["DeletionPolicy"] == "Delete"


def test_a_table_replaced_by_a_key_schema_change_is_kept_whatever_the_deletion_protection(
    default_stack: Synthesized, extended_stack: Synthesized
) -> None:
    for stack in (default_stack, extended_stack):
        (table,) = of_type(stack.json, "AWS::DynamoDB::Table").values()
        assert table["UpdateReplacePolicy"] == "Retain"


def test_a_new_queue_class_gets_its_queue_dlq_worker_and_alarms(
    default_stack: Synthesized, extended_stack: Synthesized
) -> None:
    """Registering a queue class and a job type is all it takes: infra/ reads the registry."""
    prefix = extended_stack.stack.options.prefix
    queues = queues_by_name(extended_stack.json)
    assert queue_name(prefix, NEW_QUEUE) in queues
    assert dlq_name(prefix, NEW_QUEUE) in queues
    assert f"{prefix}-worker-{NEW_QUEUE}" in functions_by_name(extended_stack.json)
    alarms = {r["Properties"]["AlarmName"] for r in of_type(extended_stack.json, "AWS::CloudWatch::Alarm").values()}
    for kind in ("dlq-depth", "oldest-message-age", "stuck-jobs", "worker-errors", "worker-throttles"):
        assert f"{prefix}-{NEW_QUEUE}-{kind}" in alarms
    assert NEW_QUEUE not in default_stack.registry.queues
    assert not any(NEW_QUEUE in name for name in queues_by_name(default_stack.json))


class TooFewReceives(Registry):
    def max_receive_count(self, queue: str) -> int:
        return 2


def test_a_receive_count_at_or_below_max_attempts_fails_the_synth(default_stack: Synthesized) -> None:
    base = default_stack.registry
    registry = TooFewReceives(queues=dict(base.queues), job_types=dict(base.job_types))
    stack = cdk.Stack(cdk.App(), "Probe")
    with pytest.raises(QueueConfigError, match=r"maxReceiveCount 2 must be above every job type's max_attempts"):
        JobQueues(stack, "Queues", registry=registry, prefix="probe")
