"""SQS message move tasks (DLQ redrive), which moto does not implement, answered in front of it.

As on SQS: `StartMessageMoveTask` starts an asynchronous task that moves the messages a dead-letter
queue holds when it starts, at most `MaxNumberOfMessagesPerSecond` a second, to `DestinationArn` or
else back to their source queue; one active task per source queue; `ListMessageMoveTasks` shows the
most recent tasks first; `CancelMessageMoveTask` stops a running task. A moved message is a new
message on its destination (receive count 0) with the same body and message attributes, and the same
`MessageGroupId` (its fair-queue tenant), if it had one.

The source queue of a message is the queue whose redrive policy names this DLQ. SQS records where a
message came from when its redrive policy moved it; the emulator does not, so a DLQ that serves more
than one source queue needs a `DestinationArn`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("offpath.local.move_tasks")

MOVE_TASK_TARGETS = frozenset(
    {"AmazonSQS.StartMessageMoveTask", "AmazonSQS.ListMessageMoveTasks", "AmazonSQS.CancelMessageMoveTask"}
)
MAX_RATE = 500
RECEIVE_VISIBILITY_S = 30
ALREADY_RUNNING = (
    "There is already a task running. Only one active task is allowed for a source queue arn at a given time."
)


class SqsError(Exception):
    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


@dataclass
class MoveTask:
    handle: str
    source_arn: str
    destination_arn: str | None
    max_per_second: int | None
    to_move: int
    started_ms: int
    status: str = "RUNNING"
    moved: int = 0
    failure: str | None = None
    cancel: threading.Event = field(default_factory=threading.Event)

    def view(self) -> dict[str, Any]:
        view: dict[str, Any] = {
            "Status": self.status,
            "SourceArn": self.source_arn,
            "ApproximateNumberOfMessagesMoved": self.moved,
            "ApproximateNumberOfMessagesToMove": self.to_move,
            "StartedTimestamp": self.started_ms,
        }
        if self.status == "RUNNING":
            view["TaskHandle"] = self.handle
        if self.destination_arn:
            view["DestinationArn"] = self.destination_arn
        if self.max_per_second:
            view["MaxNumberOfMessagesPerSecond"] = self.max_per_second
        if self.failure:
            view["FailureReason"] = self.failure
        return view


class MessageMoveTasks:
    def __init__(self, client_factory: Callable[[str], Any]) -> None:
        self._client_factory = client_factory
        self._sqs: Any = None
        self._lock = threading.Lock()
        self._tasks: list[MoveTask] = []
        self._threads: list[threading.Thread] = []

    # -- WSGI ---------------------------------------------------------------------------------

    def handle(self, target: str, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        try:
            request = json.loads(raw or b"{}")
            operation = target.split(".", 1)[1]
            if operation == "StartMessageMoveTask":
                body = self.start(request)
            elif operation == "ListMessageMoveTasks":
                body = self.list(request)
            else:
                body = self.cancel(request)
            return _respond(start_response, 200, body)
        except SqsError as error:
            return _respond(
                start_response,
                error.status,
                {"__type": f"com.amazonaws.sqs#{error.code}", "message": error.message},
                {"x-amzn-query-error": f"AWS.SimpleQueueService.{error.code};Sender"},
            )
        except Exception:
            logger.exception("message move task request failed")
            return _respond(start_response, 500, {"__type": "com.amazonaws.sqs#InternalError", "message": "error"})

    # -- operations ---------------------------------------------------------------------------

    def start(self, request: dict[str, Any]) -> dict[str, Any]:
        source_arn = str(request.get("SourceArn") or "")
        destination_arn = request.get("DestinationArn") or None
        rate = request.get("MaxNumberOfMessagesPerSecond")
        if rate is not None and not (isinstance(rate, int) and 1 <= rate <= MAX_RATE):
            raise SqsError("InvalidParameterValue", f"MaxNumberOfMessagesPerSecond must be 1 to {MAX_RATE}")
        source_url = self._url(source_arn)
        sources = self._sources_of(source_arn)
        if not sources:
            raise SqsError("InvalidParameterValue", "Source queue must be configured as a Dead Letter Queue.")
        if destination_arn is not None:
            self._url(str(destination_arn))
        with self._lock:
            if any(t.source_arn == source_arn and t.status == "RUNNING" for t in self._tasks):
                raise SqsError("UnsupportedOperation", ALREADY_RUNNING)
            attributes = self.sqs.get_queue_attributes(
                QueueUrl=source_url, AttributeNames=["ApproximateNumberOfMessages"]
            )["Attributes"]
            task = MoveTask(
                handle=uuid.uuid4().hex,
                source_arn=source_arn,
                destination_arn=str(destination_arn) if destination_arn else None,
                max_per_second=rate,
                to_move=int(attributes.get("ApproximateNumberOfMessages", 0)),
                started_ms=int(time.time() * 1000),
            )
            self._tasks.append(task)
        thread = threading.Thread(target=self._run, args=(task, source_url, sources), name="sqs-move-task", daemon=True)
        self._threads.append(thread)
        thread.start()
        return {"TaskHandle": task.handle}

    def list(self, request: dict[str, Any]) -> dict[str, Any]:
        source_arn = str(request.get("SourceArn") or "")
        self._url(source_arn)
        limit = int(request.get("MaxResults") or 1)
        with self._lock:
            tasks = [t for t in reversed(self._tasks) if t.source_arn == source_arn][: max(1, min(10, limit))]
            return {"Results": [t.view() for t in tasks]}

    def cancel(self, request: dict[str, Any]) -> dict[str, Any]:
        handle = str(request.get("TaskHandle") or "")
        with self._lock:
            task = next((t for t in self._tasks if t.handle == handle and t.status == "RUNNING"), None)
            if task is None:
                raise SqsError("ResourceNotFoundException", "Task does not exist or is not running.")
            task.status = "CANCELLING"
            task.cancel.set()
            return {"ApproximateNumberOfMessagesMoved": task.moved}

    def stop(self) -> None:
        with self._lock:
            for task in self._tasks:
                task.cancel.set()
        for thread in self._threads:
            thread.join(timeout=5)

    # -- the task -----------------------------------------------------------------------------

    def _run(self, task: MoveTask, source_url: str, sources: list[str]) -> None:
        started = time.monotonic()
        try:
            destination_url = self._url(task.destination_arn) if task.destination_arn else None
            if destination_url is None and len(sources) > 1:
                raise SqsError("UnsupportedOperation", "the DLQ serves several source queues: give DestinationArn")
            target_url = destination_url or sources[0]
            while task.moved < task.to_move and not task.cancel.is_set():
                wanted = min(10, task.to_move - task.moved)
                messages = self.sqs.receive_message(
                    QueueUrl=source_url,
                    MaxNumberOfMessages=wanted,
                    VisibilityTimeout=RECEIVE_VISIBILITY_S,
                    MessageAttributeNames=["All"],
                    MessageSystemAttributeNames=["MessageGroupId"],
                ).get("Messages", [])
                if not messages:
                    break
                for message in messages:
                    if task.cancel.is_set():
                        break
                    request: dict[str, Any] = {"QueueUrl": target_url, "MessageBody": message["Body"]}
                    attributes = _sendable(message.get("MessageAttributes") or {})
                    if attributes:
                        request["MessageAttributes"] = attributes
                    group = (message.get("Attributes") or {}).get("MessageGroupId")
                    if group:
                        request["MessageGroupId"] = group
                    self.sqs.send_message(**request)
                    self.sqs.delete_message(QueueUrl=source_url, ReceiptHandle=message["ReceiptHandle"])
                    task.moved += 1
                    if task.max_per_second:
                        ahead = task.moved / task.max_per_second - (time.monotonic() - started)
                        if ahead > 0:
                            task.cancel.wait(ahead)
            with self._lock:
                task.status = "CANCELLED" if task.cancel.is_set() else "COMPLETED"
        except Exception as error:
            logger.exception("message move task failed")
            with self._lock:
                task.status = "FAILED"
                task.failure = error.message if isinstance(error, SqsError) else type(error).__name__

    # -- helpers ------------------------------------------------------------------------------

    @property
    def sqs(self) -> Any:
        if self._sqs is None:
            self._sqs = self._client_factory("sqs")
        return self._sqs

    def _url(self, arn: str) -> str:
        parts = arn.split(":")
        if len(parts) != 6 or parts[2] != "sqs":
            raise SqsError("InvalidParameterValue", "not an SQS queue ARN")
        try:
            return str(self.sqs.get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])["QueueUrl"])
        except Exception:
            raise SqsError("ResourceNotFoundException", "The specified queue does not exist.") from None

    def _sources_of(self, dlq_arn: str) -> list[str]:
        """The queues whose redrive policy names this DLQ."""
        sources = []
        for url in self.sqs.list_queues().get("QueueUrls", []):
            attributes = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])
            policy = attributes.get("Attributes", {}).get("RedrivePolicy")
            if policy and json.loads(policy).get("deadLetterTargetArn") == dlq_arn:
                sources.append(url)
        return sources


def _sendable(attributes: dict[str, Any]) -> dict[str, Any]:
    result = {}
    for name, value in attributes.items():
        kept = {k: v for k, v in value.items() if k in ("DataType", "StringValue", "BinaryValue") and v is not None}
        if "DataType" in kept:
            result[name] = kept
    return result


def _respond(
    start_response: Callable[..., Any], status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> list[bytes]:
    data = json.dumps(body).encode()
    reason = {200: "OK", 400: "Bad Request", 500: "Internal Server Error"}.get(status, "Error")
    start_response(
        f"{status} {reason}",
        [
            ("Content-Type", "application/x-amz-json-1.0"),
            ("Content-Length", str(len(data))),
            ("x-amzn-RequestId", uuid.uuid4().hex),
            *((headers or {}).items()),
        ],
    )
    return [data]
