"""The job queues on SQS: one queue and one DLQ per queue class.

Every message carries `MessageGroupId` = its job's tenant (`message_group_of`): on a standard queue that makes
it an SQS fair queue, which serves quiet tenants' messages before those of a tenant holding a large share of
the messages in flight (docs/local.md, "Fair delivery"). Nothing changes for the consumer.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import botocore.exceptions
from botocore.config import Config

from offpath.domain.errors import QueueUnavailableError, RedriveInProgressError
from offpath.domain.ports import JobMessage
from offpath.observability import TRACEPARENT_ATTRIBUTE, traceparent_of

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch.client import CloudWatchClient
    from mypy_boto3_sqs.client import SQSClient

    from offpath.domain.operations import QueueStats, RedriveTask

logger = logging.getLogger(__name__)

# total_max_attempts counts the first try: 3 attempts in all ("max_attempts" would mean 3 retries).
SDK_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=2, read_timeout=5)
MAX_DELAY_S = 900
SEND_BATCH_LIMIT = 10
REASON_ATTRIBUTE = "offpath-failure-reason"
# SQS takes a MessageGroupId of at most 128 characters (letters, digits, punctuation); a tenant may be longer
# (an IAM principal ARN is up to 1,024).
MESSAGE_GROUP_ID_MAX = 128
_GROUP_DIGEST_CHARS = 32


def message_group_of(tenant: str) -> str:
    """The fair-queue tenant of a job's messages: the tenant itself, or, past 128 characters, its first 95
    followed by `~` and 32 hex characters of its SHA-256 (stable, and distinct for distinct tenants)."""
    if len(tenant) <= MESSAGE_GROUP_ID_MAX:
        return tenant
    digest = hashlib.sha256(tenant.encode()).hexdigest()[:_GROUP_DIGEST_CHARS]
    return f"{tenant[: MESSAGE_GROUP_ID_MAX - _GROUP_DIGEST_CHARS - 1]}~{digest}"


VISIBILITY_BATCH_LIMIT = 10
# Finding one job's dead letter (a hand retry, a discard): at most this many receives of 10 messages each per
# request; each receive long-polls for at most DEAD_LETTER_WAIT_S (so an empty answer means nothing is visible).
DEAD_LETTER_RECEIVES = 10
DEAD_LETTER_WAIT_S = 1
# How long the messages passed over stay hidden if their release (visibility 0) is lost: the search's own bound.
DEAD_LETTER_HOLD_S = 30
# The messages waiting on a queue, as SQS counts them (each approximate; GetQueueAttributes): visible or delayed.
DEPTH_ATTRIBUTES = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed")


def _call(operation: Callable[..., Any], **request: Any) -> Any:
    """Call the SDK; no raw SDK error leaves this module."""
    try:
        return operation(**request)
    except botocore.exceptions.ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        raise QueueUnavailableError(f"SQS {code or 'error'}") from error
    except botocore.exceptions.BotoCoreError as error:
        raise QueueUnavailableError(f"SQS unreachable: {type(error).__name__}") from error


def default_client() -> SQSClient:
    import boto3

    return boto3.client("sqs", config=SDK_CONFIG)


class SqsJobQueue:
    def __init__(
        self, queue_urls: Mapping[str, str], dlq_urls: Mapping[str, str], client: SQSClient | None = None
    ) -> None:
        self.queue_urls = dict(queue_urls)
        self.dlq_urls = dict(dlq_urls)
        self.client = client or default_client()

    def send(self, queue: str, message: JobMessage, *, delay_s: int = 0) -> None:
        _call(
            self.client.send_message,
            QueueUrl=self.queue_urls[queue],
            MessageBody=message.to_body(),
            DelaySeconds=max(0, min(MAX_DELAY_S, delay_s)),
            MessageGroupId=message_group_of(message.tenant),
            **_trace_of(message),
        )

    def send_batch(self, queue: str, messages: list[JobMessage]) -> list[JobMessage]:
        unsent: list[JobMessage] = []
        for start in range(0, len(messages), SEND_BATCH_LIMIT):
            chunk = messages[start : start + SEND_BATCH_LIMIT]
            try:
                response = _call(
                    self.client.send_message_batch,
                    QueueUrl=self.queue_urls[queue],
                    Entries=[
                        {
                            "Id": str(i),
                            "MessageBody": m.to_body(),
                            "MessageGroupId": message_group_of(m.tenant),
                            **_trace_of(m),
                        }
                        for i, m in enumerate(chunk)
                    ],
                )
            except QueueUnavailableError:
                unsent.extend(chunk)
                continue
            unsent.extend(chunk[int(failure["Id"])] for failure in response.get("Failed", []))
        return unsent

    def change_visibility(self, queue: str, receipt_handle: str, timeout_s: int) -> None:
        _call(
            self.client.change_message_visibility,
            QueueUrl=self.queue_urls[queue],
            ReceiptHandle=receipt_handle,
            VisibilityTimeout=timeout_s,
        )

    def change_visibility_batch(self, queue: str, receipt_handles: Sequence[str], timeout_s: int) -> list[str]:
        """ChangeMessageVisibilityBatch, 10 entries a request; the handles not changed are returned (a request
        that fails as a whole counts each of its entries)."""
        unchanged: list[str] = []
        for start in range(0, len(receipt_handles), VISIBILITY_BATCH_LIMIT):
            chunk = list(receipt_handles[start : start + VISIBILITY_BATCH_LIMIT])
            try:
                response = _call(
                    self.client.change_message_visibility_batch,
                    QueueUrl=self.queue_urls[queue],
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": timeout_s}
                        for i, handle in enumerate(chunk)
                    ],
                )
            except QueueUnavailableError:
                unchanged.extend(chunk)
                continue
            unchanged.extend(chunk[int(failure["Id"])] for failure in response.get("Failed", []))
        return unchanged

    def depth(self, queue: str) -> int:
        """GetQueueAttributes: visible + delayed messages (not those in flight)."""
        response = _call(
            self.client.get_queue_attributes,
            QueueUrl=self.queue_urls[queue],
            AttributeNames=list(DEPTH_ATTRIBUTES),
        )
        attributes = response.get("Attributes", {})
        return sum(int(attributes.get(name, 0)) for name in DEPTH_ATTRIBUTES)

    def send_to_dlq(self, queue: str, message: JobMessage, *, reason: str) -> None:
        _call(
            self.client.send_message,
            QueueUrl=self.dlq_urls[queue],
            MessageBody=message.to_body(),
            MessageAttributes={REASON_ATTRIBUTE: {"DataType": "String", "StringValue": reason[:1000] or "failed"}},
            MessageGroupId=message_group_of(message.tenant),
        )

    def remove_dead_letter(
        self, queue: str, job_id: str, *, max_receives: int = DEAD_LETTER_RECEIVES
    ) -> JobMessage | None:
        """Delete the job's message from the queue's DLQ and return it (None: not found within `max_receives`
        receives). The messages passed over are held (hidden) during the search, so each receive sees new ones,
        and released at its end (visibility 0). The DLQ's depth is not asked first: SQS's count may lag a message
        sent within the last minute. QueueUnavailableError when SQS cannot be reached (a release that fails is
        only logged: those messages return after DEAD_LETTER_HOLD_S)."""
        url = self.dlq_urls[queue]
        held: list[str] = []
        found: JobMessage | None = None
        try:
            for _ in range(max_receives):
                response = _call(
                    self.client.receive_message,
                    QueueUrl=url,
                    MaxNumberOfMessages=10,
                    VisibilityTimeout=DEAD_LETTER_HOLD_S,
                    WaitTimeSeconds=DEAD_LETTER_WAIT_S,
                )
                messages = response.get("Messages", [])
                if not messages:
                    break
                for message in messages:
                    job = _job_message(message.get("Body", ""))
                    if job is not None and job.job_id == job_id:
                        # Every copy of the job's message in this receive (a failure recorded twice leaves two).
                        _call(self.client.delete_message, QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                        found = found or job
                    else:
                        held.append(message["ReceiptHandle"])
                if found is not None:
                    break
        finally:
            self._release(url, held)
        return found

    def _release(self, url: str, receipt_handles: list[str]) -> None:
        for start in range(0, len(receipt_handles), VISIBILITY_BATCH_LIMIT):
            chunk = receipt_handles[start : start + VISIBILITY_BATCH_LIMIT]
            try:
                _call(
                    self.client.change_message_visibility_batch,
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": 0}
                        for i, handle in enumerate(chunk)
                    ],
                )
            except QueueUnavailableError:
                logger.warning("dead letters not released; they return by themselves", extra={"count": len(chunk)})


def _job_message(body: str) -> JobMessage | None:
    try:
        return JobMessage.from_body(body)
    except (ValueError, KeyError, TypeError):
        return None


def _group_of_body(body: str) -> dict[str, str]:
    """A re-sent job message's MessageGroupId (its tenant), from its body; nothing for a body that is not one."""
    try:
        return {"MessageGroupId": message_group_of(JobMessage.from_body(body).tenant)}
    except (ValueError, KeyError, TypeError):
        return {}


class SqsQueueMonitor:
    """Queue depths from SQS attributes; the oldest message's age from CloudWatch, which is the only
    place SQS publishes it (None until CloudWatch has a data point)."""

    def __init__(
        self,
        queue_urls: Mapping[str, str],
        dlq_urls: Mapping[str, str],
        client: SQSClient | None = None,
        cloudwatch: CloudWatchClient | None = None,
    ) -> None:
        self.queue_urls = dict(queue_urls)
        self.dlq_urls = dict(dlq_urls)
        self.client = client or default_client()
        self._cloudwatch = cloudwatch

    def stats(self) -> list[QueueStats]:
        from offpath.domain.operations import QueueStats

        ages = self._oldest_ages()
        result = []
        for name, url in sorted(self.queue_urls.items()):
            attributes = self._attributes(url)
            dlq = self._attributes(self.dlq_urls[name]) if name in self.dlq_urls else {}
            result.append(
                QueueStats(
                    name=name,
                    visible=int(attributes.get("ApproximateNumberOfMessages", 0)),
                    in_flight=int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
                    delayed=int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)),
                    oldest_age_s=ages.get(url.rsplit("/", 1)[-1]),
                    dlq_depth=int(dlq.get("ApproximateNumberOfMessages", 0)),
                )
            )
        return result

    def _attributes(self, url: str) -> dict[str, str]:
        try:
            response = self.client.get_queue_attributes(
                QueueUrl=url,
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                    "ApproximateNumberOfMessagesDelayed",
                ],
            )
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
            raise QueueUnavailableError(f"SQS unavailable: {type(error).__name__}") from error
        return {str(k): v for k, v in response.get("Attributes", {}).items()}

    def _oldest_ages(self) -> dict[str, float]:
        import datetime as dt

        if self._cloudwatch is None:
            import boto3

            self._cloudwatch = boto3.client("cloudwatch", config=SDK_CONFIG)
        names = [url.rsplit("/", 1)[-1] for url in self.queue_urls.values()]
        now = dt.datetime.now(dt.UTC)
        queries = [
            {
                "Id": f"q{i}",
                "MetricStat": {
                    "Metric": {
                        "Namespace": "AWS/SQS",
                        "MetricName": "ApproximateAgeOfOldestMessage",
                        "Dimensions": [{"Name": "QueueName", "Value": name}],
                    },
                    "Period": 60,
                    "Stat": "Maximum",
                },
            }
            for i, name in enumerate(names)
        ]
        try:
            response = self._cloudwatch.get_metric_data(
                MetricDataQueries=queries,  # type: ignore[arg-type]
                StartTime=now - dt.timedelta(minutes=10),
                EndTime=now,
                ScanBy="TimestampDescending",
            )
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError):
            return {}
        ages: dict[str, float] = {}
        for series in response.get("MetricDataResults", []):
            values = series.get("Values", [])
            if values:
                ages[names[int(series["Id"][1:])]] = float(values[0])
        return ages


class SqsRedriver:
    """Moves a queue class's DLQ messages back to its queue.

    `move_task` uses SQS StartMessageMoveTask (asynchronous, rate-limitable, one task per queue).
    `copy` receives, re-sends and deletes in this process: for emulators that lack move tasks.
    Either way the messages keep their attributes, so the worker knows a delivery is a redrive.
    """

    COPY_LIMIT = 10_000

    def __init__(
        self,
        queue_urls: Mapping[str, str],
        dlq_urls: Mapping[str, str],
        *,
        mode: str = "move_task",
        client: SQSClient | None = None,
    ) -> None:
        self.queue_urls = dict(queue_urls)
        self.dlq_urls = dict(dlq_urls)
        self.mode = mode
        self.client = client or default_client()
        self._last_copy: dict[str, RedriveTask] = {}

    def start(self, queue: str, *, max_per_second: int | None) -> RedriveTask:
        from offpath.domain.operations import RedriveTask

        if self.mode == "copy":
            return self._copy(queue, max_per_second)
        # The worker puts messages on the DLQ itself, so SQS records no source queue for them:
        # the destination is named rather than left to "each message's original source".
        request: dict[str, Any] = {
            "SourceArn": self._arn(self.dlq_urls[queue]),
            "DestinationArn": self._arn(self.queue_urls[queue]),
        }
        if max_per_second:
            request["MaxNumberOfMessagesPerSecond"] = max_per_second
        try:
            response = self.client.start_message_move_task(**request)
        except botocore.exceptions.ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            message = error.response.get("Error", {}).get("Message", "")
            if "already" in message.lower() or code in {"AlreadyExists", "ResourceInUseException"}:
                raise RedriveInProgressError(f"a redrive of {queue} is already running") from None
            raise QueueUnavailableError(f"SQS {code or 'error'}") from error
        except botocore.exceptions.BotoCoreError as error:
            raise QueueUnavailableError(f"SQS unreachable: {type(error).__name__}") from error
        return RedriveTask(queue=queue, status="RUNNING", task_id=response.get("TaskHandle"))

    def latest(self, queue: str) -> RedriveTask | None:
        from offpath.domain.operations import RedriveTask

        if self.mode == "copy":
            return self._last_copy.get(queue)
        try:
            response = self.client.list_message_move_tasks(SourceArn=self._arn(self.dlq_urls[queue]), MaxResults=1)
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError):
            return None
        results = response.get("Results", [])
        if not results:
            return None
        task = results[0]
        return RedriveTask(
            queue=queue,
            status=str(task.get("Status", "UNKNOWN")),
            moved=task.get("ApproximateNumberOfMessagesMoved"),
            to_move=task.get("ApproximateNumberOfMessagesToMove"),
            task_id=task.get("TaskHandle"),
        )

    def _copy(self, queue: str, max_per_second: int | None) -> RedriveTask:
        import time

        from offpath.domain.operations import RedriveTask

        moved = 0
        started = time.monotonic()
        while moved < self.COPY_LIMIT:
            response = _call(
                self.client.receive_message,
                QueueUrl=self.dlq_urls[queue],
                MaxNumberOfMessages=10,
                MessageAttributeNames=["All"],
                VisibilityTimeout=60,
            )
            messages = response.get("Messages", [])
            if not messages:
                break
            for message in messages:
                _call(
                    self.client.send_message,
                    QueueUrl=self.queue_urls[queue],
                    MessageBody=message["Body"],
                    MessageAttributes=message.get("MessageAttributes", {}),
                    **_group_of_body(message["Body"]),
                )
                _call(self.client.delete_message, QueueUrl=self.dlq_urls[queue], ReceiptHandle=message["ReceiptHandle"])
                moved += 1
                if max_per_second:
                    ahead = moved / max_per_second - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
        task = RedriveTask(queue=queue, status="COMPLETED", moved=moved, to_move=0)
        self._last_copy[queue] = task
        return task

    def _arn(self, url: str) -> str:
        response = _call(self.client.get_queue_attributes, QueueUrl=url, AttributeNames=["QueueArn"])
        return str(response["Attributes"]["QueueArn"])


def _trace_of(message: JobMessage) -> dict[str, Any]:
    """The message's `traceparent` attribute (the job's trace; its parent id derived from the job id, the span
    that sent it), or nothing for a message without a trace."""
    if message.trace_id is None:
        return {}
    span_id = hashlib.sha256(message.job_id.encode()).hexdigest()[:16]
    value = traceparent_of(message.trace_id, span_id)
    return {"MessageAttributes": {TRACEPARENT_ATTRIBUTE: {"DataType": "String", "StringValue": value}}}
