"""A batch whose store fails part-way, and cursors the API never handed out."""

from __future__ import annotations

import base64
import json
import types
from typing import Any

import botocore.endpoint
import pytest
from botocore.awsrequest import AWSPreparedRequest

from offpath.adapters.dynamodb_store import encode_cursor
from offpath.naming import JOB_SHARDS
from tests.integration.conftest import Answer, Pipeline, operation_of


def test_a_store_outage_mid_batch_fails_only_the_items_it_hit(
    pipeline: Pipeline, aws_answers: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=lambda s: None))
    puts: list[int] = []

    def outage_after_two_items(request: AWSPreparedRequest) -> Answer | None:
        if operation_of(request) != "DynamoDB_20120810.PutItem":
            return None
        puts.append(1)
        if len(puts) <= 4:  # two items: a keyed item's key record and its job
            return None
        body = json.dumps({"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError", "message": "down"})
        return 500, {"Content-Type": "application/x-amz-json-1.0"}, body

    aws_answers.append(outage_after_two_items)
    jobs = [{"type": "demo.echo", "payload": {"i": i}, "idempotency_key": f"k{i}"} for i in range(4)]
    monkeypatch.setattr("offpath.logic.submit.BATCH_WRITERS", 1)  # items written in order

    status, body, _ = pipeline.call("POST", "/jobs/batch", body={"jobs": jobs})

    assert status == 207
    statuses = [r["status"] for r in body["results"]]
    assert statuses == [202, 202, 503, 503]
    assert body["results"][2]["error"]["code"] == "unavailable"
    aws_answers.clear()
    retry_status, retry_body, _ = pipeline.call("POST", "/jobs/batch", body={"jobs": jobs})
    assert [r["status"] for r in retry_body["results"]] == [200, 200, 202, 202]
    assert retry_status == 207


def forged(plain: dict[str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(plain).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        forged({"pk": "", "gsi1pk": "tenant-a", "gsi_sk": ""}),
        forged({"pk": "JOB#" + "a" * 32, "gsi1pk": "tenant-a", "gsi_sk": "x" * 2000}),
        forged({"pk": "JOB#" + "a" * 32, "gsi1pk": "tenant-b", "gsi_sk": "2026-01-01T00:00:00.000000Z#" + "a" * 32}),
        "not-base64-!!",
        encode_cursor("tenant-b", [None] * JOB_SHARDS),
    ],
    ids=["empty-keys", "oversized-key", "other-tenant", "garbage", "other-tenant-shards"],
)
def test_a_cursor_the_api_did_not_hand_out_is_rejected(pipeline: Pipeline, cursor: str) -> None:
    status, body, _ = pipeline.call("GET", f"/jobs?cursor={cursor}")

    assert status == 422
    assert body["error"]["field"] == "cursor"


def test_a_cursor_the_api_handed_out_pages_on(pipeline: Pipeline) -> None:
    for i in range(3):
        pipeline.submit("demo.echo", {"i": i})

    _, first, _ = pipeline.call("GET", "/jobs?limit=2")
    _, second, _ = pipeline.call("GET", f"/jobs?limit=2&cursor={first['cursor']}")

    assert len(first["jobs"]) == 2
    assert len(second["jobs"]) == 1
    assert len({j["job_id"] for j in first["jobs"] + second["jobs"]}) == 3


def test_a_payload_nested_deeper_than_the_validator_allows_is_refused(pipeline: Pipeline) -> None:
    payload = json.loads('{"a":' * 300 + "1" + "}" * 300)

    status, body, _ = pipeline.submit("demo.echo", payload)

    assert status == 422
    assert body["error"]["field"] == "payload"
