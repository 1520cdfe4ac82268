"""The record of the functions' AWS calls (offpath_local.aws_calls): a call is its function's when made inside
the function, its pools' threads included; a test's own calls are no function's."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
from botocore.stub import Stubber

from offpath_local.aws_calls import Recorder, install_from_environment, outside_functions, read
from offpath_local.output import invocation

QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/offpath-default"


def stubbed_sqs(recorder: Recorder, answers: int) -> tuple[Any, Stubber]:
    client = boto3.Session(region_name="us-east-1").client("sqs")
    # This client reports to the test's recorder alone, not to the session's (tests/conftest.py).
    client.meta.events.unregister("provide-client-params", install_from_environment())
    client.meta.events.register("provide-client-params", recorder)
    stubber = Stubber(client)
    for _ in range(answers):
        stubber.add_response("send_message", {"MessageId": "m", "MD5OfMessageBody": "x"})
    stubber.activate()
    return client, stubber


def test_only_calls_made_inside_a_function_are_recorded_once_each_with_what_they_name(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "calls-1.jsonl")
    sqs, _ = stubbed_sqs(recorder, 5)

    sqs.send_message(QueueUrl=QUEUE, MessageBody="set-up")  # a test's own call
    with invocation("api"):
        sqs.send_message(QueueUrl=QUEUE, MessageBody="a")
        sqs.send_message(QueueUrl=QUEUE, MessageBody="b")
        with outside_functions():  # Lambda's poller, run from inside the handler's wait
            sqs.send_message(QueueUrl=QUEUE, MessageBody="poller")
    with invocation("worker-default"):
        sqs.send_message(QueueUrl=QUEUE, MessageBody="c")

    assert list(read(tmp_path)) == [
        {"function": "api", "operation": "SendMessage", "resources": [["queue", QUEUE]], "service": "sqs"},
        {"function": "worker-default", "operation": "SendMessage", "resources": [["queue", QUEUE]], "service": "sqs"},
    ]


def test_a_call_from_a_functions_thread_pool_is_the_functions(tmp_path: Path) -> None:
    # The recording is installed by tests/conftest.py: a function's pools run in its context.
    recorder = Recorder(tmp_path / "calls-2.jsonl")
    sqs, _ = stubbed_sqs(recorder, 1)

    with invocation("api"), ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(sqs.send_message, QueueUrl=QUEUE, MessageBody="from a pool").result()

    assert [call["function"] for call in read(tmp_path)] == ["api"]


def test_a_record_whose_directory_was_removed_makes_it_again_and_the_call_goes_through(tmp_path: Path) -> None:
    # A test session that ends removes the record's directory (tests/conftest.py); a runtime still running records on.
    directory = tmp_path / "record"
    recorder = Recorder(directory / "calls-3.jsonl")
    sqs, _ = stubbed_sqs(recorder, 1)

    with invocation("api"):
        answer = sqs.send_message(QueueUrl=QUEUE, MessageBody="after the removal")

    assert answer["MessageId"] == "m"
    assert [call["operation"] for call in read(directory)] == ["SendMessage"]
