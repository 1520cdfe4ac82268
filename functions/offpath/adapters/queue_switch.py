"""The AWS side of a queue class's pause (domain.pauses.QueueSwitch): its SQS event source mapping disabled
(`lambda:UpdateEventSourceMapping`, Enabled=false: no polling, no receive, no cost while paused) and its age alarm's
actions disabled (`cloudwatch:DisableAlarmActions`: a paused queue's growing age pages nobody); resume enables both.

The mappings' UUIDs come from the stack (OFFPATH_QUEUE_MAPPINGS, from the same declaration as the mappings,
infra/workers.py); a queue class without one (the embedded runtime, tests) has no mapping to switch. Both calls
are idempotent. No raw SDK error leaves this module: a failure is `SwitchUnavailableError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import botocore.exceptions
from botocore.config import Config

from offpath.domain.errors import SwitchUnavailableError

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch.client import CloudWatchClient
    from mypy_boto3_lambda.client import LambdaClient

SDK_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=2, read_timeout=10)


def default_lambda_client() -> LambdaClient:
    import boto3

    return boto3.client("lambda", config=SDK_CONFIG)


def _call(operation: Callable[..., Any], **request: Any) -> Any:
    try:
        return operation(**request)
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
        raise SwitchUnavailableError(f"{type(error).__name__}: {error}"[:300]) from None


class AwsQueueSwitch:
    def __init__(
        self,
        mappings: Mapping[str, str],
        alarms: Mapping[str, list[str]],
        *,
        lambda_client: LambdaClient | None = None,
        cloudwatch: CloudWatchClient | None = None,
    ) -> None:
        """`mappings`: queue class -> its event source mapping's UUID; `alarms`: queue class -> the names of the
        alarms a pause mutes."""
        self.mappings = dict(mappings)
        self.alarms = {name: list(names) for name, names in alarms.items()}
        self._lambda = lambda_client
        self._cloudwatch = cloudwatch

    def apply(self, queue: str, *, paused: bool) -> None:
        mapping = self.mappings.get(queue)
        if mapping:
            _call(self.lambda_client().update_event_source_mapping, UUID=mapping, Enabled=not paused)
        names = self.alarms.get(queue)
        if names:
            client = self.cloudwatch_client()
            operation = client.disable_alarm_actions if paused else client.enable_alarm_actions
            _call(operation, AlarmNames=names)

    def lambda_client(self) -> LambdaClient:
        if self._lambda is None:
            self._lambda = default_lambda_client()
        return self._lambda

    def cloudwatch_client(self) -> CloudWatchClient:
        if self._cloudwatch is None:
            from offpath.adapters.cloudwatch import default_client

            self._cloudwatch = default_client()
        return self._cloudwatch
