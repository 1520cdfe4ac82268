"""The Lambda event source mapping for SQS, as AWS runs it (see shared AWS-SEMANTICS.md):

- receive up to BatchSize messages (waiting up to the batching window), each receive counting
  towards the redrive policy's maxReceiveCount;
- invoke the function synchronously with the SQS event;
- on a normal return delete every message except those in `batchItemFailures`; an identifier that
  is not in the batch fails the whole batch;
- on an exception or a timeout delete nothing: each message reappears when its visibility ends.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from offpath_local.aws_calls import outside_functions
from offpath_local.lambda_context import LocalLambdaContext

logger = logging.getLogger("offpath.local.esm")

Handler = Callable[[dict[str, Any], Any], Any]


@dataclass(frozen=True)
class PollResult:
    received: int
    deleted: int
    failed: int
    errored: bool


class SqsEventSource:
    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        handler: Handler,
        *,
        function_name: str,
        batch_size: int,
        batching_window_s: float,
        function_timeout_s: float,
        region: str = "us-east-1",
        window_poll_s: float = 0.05,
    ) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self.handler = handler
        self.function_name = function_name
        self.batch_size = batch_size
        self.batching_window_s = batching_window_s
        self.function_timeout_s = function_timeout_s
        self.queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        self.region = region
        # Inside a batching window, an empty receive is followed by this pause rather than another
        # receive at once (the window's length and the batch it gathers are unchanged).
        self.window_poll_s = window_poll_s

    def batches_per_receive(self) -> int:
        """How many batches one receive may fill: without a batching window, a receive of up to 10 messages is
        split into batches of `batch_size` (each its own invocation), as AWS's pollers do; with a window, one."""
        if self.batching_window_s > 0:
            return 1
        return max(1, 10 // self.batch_size)

    def receive(self, wait_s: float = 0.0, batches: int = 1) -> list[dict[str, Any]]:
        """One batch (or up to `batches` batches' messages, at most `batches_per_receive()`): keep receiving until
        it is full or the batching window has passed."""
        limit = self.batch_size * max(1, min(batches, self.batches_per_receive()))
        messages: list[dict[str, Any]] = []
        deadline = time.monotonic() + self.batching_window_s
        first = True
        while len(messages) < limit:
            wait = int(wait_s) if first else 0
            response = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=min(10, limit - len(messages)),
                WaitTimeSeconds=wait,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
            first = False
            got = response.get("Messages", [])
            messages.extend(got)
            if not got and (not messages or time.monotonic() >= deadline):
                break
            if time.monotonic() >= deadline and messages:
                break
            if not got:
                time.sleep(min(self.window_poll_s, max(0.0, deadline - time.monotonic())))
        return messages

    def poll_once(self, wait_s: float = 0.0) -> PollResult:
        with outside_functions():  # Lambda's poller, not the function (offpath_local.aws_calls)
            messages = self.receive(wait_s)
        if not messages:
            return PollResult(0, 0, 0, errored=False)
        return self.invoke(messages)

    def invoke(self, messages: list[dict[str, Any]]) -> PollResult:
        event = {"Records": [self._record(message) for message in messages]}
        context = LocalLambdaContext(self.function_name, self.function_timeout_s)
        try:
            response = self.handler(event, context)
        except KeyboardInterrupt:
            raise
        except BaseException:  # whatever ends the function (a crash is a BaseException in tests), Lambda reports
            logger.exception("function %s raised: the whole batch returns to the queue", self.function_name)
            return PollResult(len(messages), 0, len(messages), errored=True)
        if context.get_remaining_time_in_millis() <= 0:
            logger.error("function %s timed out: the whole batch returns to the queue", self.function_name)
            return PollResult(len(messages), 0, len(messages), errored=True)
        failed_ids = self._failed_ids(response, {m["MessageId"] for m in messages})
        if failed_ids is None:
            return PollResult(len(messages), 0, len(messages), errored=True)
        done = [m for m in messages if m["MessageId"] not in failed_ids]
        with outside_functions():
            for start in range(0, len(done), 10):
                chunk = done[start : start + 10]
                self.sqs.delete_message_batch(
                    QueueUrl=self.queue_url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)],
                )
        return PollResult(len(messages), len(done), len(failed_ids), errored=False)

    def _failed_ids(self, response: Any, batch_ids: set[str]) -> set[str] | None:
        if not isinstance(response, dict) or not response.get("batchItemFailures"):
            return set()
        failed: set[str] = set()
        for item in response["batchItemFailures"]:
            identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
            if not identifier or identifier not in batch_ids:
                logger.error("invalid itemIdentifier in batchItemFailures: the whole batch fails")
                return None
            failed.add(identifier)
        return failed

    def _record(self, message: dict[str, Any]) -> dict[str, Any]:
        return {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message["Body"],
            "attributes": message.get("Attributes", {}),
            "messageAttributes": _lambda_attributes(message.get("MessageAttributes", {})),
            "md5OfBody": message.get("MD5OfBody", ""),
            "eventSource": "aws:sqs",
            "eventSourceARN": self.queue_arn,
            "awsRegion": self.region,
        }


def _lambda_attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    """Message attributes as Lambda hands them to the function (`stringValue`, `dataType`...), not as
    ReceiveMessage answers (`StringValue`, `DataType`)."""
    return {
        name: {
            "stringValue": value.get("StringValue"),
            "binaryValue": value.get("BinaryValue"),
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": value.get("DataType", "String"),
        }
        for name, value in attributes.items()
    }
