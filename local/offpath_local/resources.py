"""Create the table and queues in an emulator, from the registry, as the CDK stack declares them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from offpath.domain.registry import Registry
from offpath.naming import TABLE_INDEXES, TABLE_PARTITION_KEY, TTL_ATTRIBUTE, dlq_name, queue_name


@dataclass(frozen=True)
class Resources:
    table_name: str
    queue_urls: dict[str, str]
    dlq_urls: dict[str, str]

    def environment(self) -> dict[str, str]:
        """What the handlers read (offpath.settings)."""
        return {
            "OFFPATH_TABLE_NAME": self.table_name,
            "OFFPATH_QUEUE_URLS": json.dumps(self.queue_urls),
            "OFFPATH_DLQ_URLS": json.dumps(self.dlq_urls),
        }


def create_table(dynamodb: Any, table_name: str) -> None:
    attributes = {TABLE_PARTITION_KEY}
    for index in TABLE_INDEXES:
        attributes |= {index.partition_key, index.sort_key}
    dynamodb.create_table(
        TableName=table_name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": name, "AttributeType": "S"} for name in sorted(attributes)],
        KeySchema=[{"AttributeName": TABLE_PARTITION_KEY, "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": index.name,
                "KeySchema": [
                    {"AttributeName": index.partition_key, "KeyType": "HASH"},
                    {"AttributeName": index.sort_key, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": index.projection}
                | ({"NonKeyAttributes": list(index.attributes)} if index.attributes else {}),
            }
            for index in TABLE_INDEXES
        ],
    )
    dynamodb.update_time_to_live(
        TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
    )


def create_queues(sqs: Any, registry: Registry, prefix: str) -> tuple[dict[str, str], dict[str, str]]:
    queue_urls: dict[str, str] = {}
    dlq_urls: dict[str, str] = {}
    for name, queue in registry.queues.items():
        dlq_url = sqs.create_queue(
            QueueName=dlq_name(prefix, name),
            Attributes={"MessageRetentionPeriod": str(queue.dlq_retention_days * 86400)},
        )["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        queue_urls[name] = sqs.create_queue(
            QueueName=queue_name(prefix, name),
            Attributes={
                "VisibilityTimeout": str(registry.visibility_timeout_s(name)),
                "MessageRetentionPeriod": str(queue.retention_days * 86400),
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": registry.max_receive_count(name)}
                ),
            },
        )["QueueUrl"]
        dlq_urls[name] = dlq_url
    return queue_urls, dlq_urls


def create_resources(dynamodb: Any, sqs: Any, registry: Registry, prefix: str = "offpath") -> Resources:
    table_name = f"{prefix}-jobs"
    create_table(dynamodb, table_name)
    queue_urls, dlq_urls = create_queues(sqs, registry, prefix)
    return Resources(table_name, queue_urls, dlq_urls)
