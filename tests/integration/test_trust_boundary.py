"""Bad input at the trust boundary (issue 10, items 6, 10 and the store's half of 1), through the api handler and
the store against moto: payloads are measured as they are stored, a write the store refuses for its size is a
413, standard JSON only, every validation error named, replays compared in full, one unreadable item never fails
a listing or a sweep."""

from __future__ import annotations

import base64
import io
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from offpath.adapters.dynamodb_store import DynamoDbJobStore, job_key, job_partition, job_shard, to_item
from offpath.domain.errors import ItemTooLargeError, QueueUnavailableError
from offpath.domain.job import Job, JobStatus, Progress, payload_json
from offpath.logic.process import MAX_ERROR_LENGTH, MAX_RESULT_BYTES
from offpath.logic.submit import MAX_IDEMPOTENCY_KEY_LENGTH, SubmitPolicy
from offpath.settings import MAX_PAYLOAD_LIMIT_BYTES, Settings
from tests.integration.conftest import Pipeline

JSON = {"content-type": "application/json"}
LIMIT = 64 * 1024
NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def keyed(key: str) -> dict[str, str]:
    return {**JSON, "idempotency-key": key}


def stored_item(pipeline: Pipeline, job_id: str) -> dict[str, Any]:
    item = pipeline.clients["dynamodb"].get_item(
        TableName=pipeline.resources.table_name, Key=job_key("tenant-a", job_id)
    )["Item"]
    return dict(item)


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    lines = io.StringIO()
    handler = logging.StreamHandler(lines)
    handler.setFormatter(logging.Formatter("%(message)s %(key)s"))
    store_logger = logging.getLogger("offpath.adapters.dynamodb_store")
    store_logger.addHandler(handler)
    try:
        yield lines
    finally:
        store_logger.removeHandler(handler)


# -- 6: payload size, measured as stored ------------------------------------------------------------


def test_a_payload_of_non_ascii_text_is_stored_in_the_bytes_the_limit_measured(pipeline: Pipeline) -> None:
    payload = {"note": "é" * 30_000}  # 60,000 bytes of UTF-8; 180,000 as \u escapes

    status, job, _ = pipeline.submit("demo.echo", payload)

    assert status == 202, job
    stored = stored_item(pipeline, job["job_id"])["payload_json"]["S"]
    assert len(stored.encode()) == len(payload_json(payload).encode()) <= LIMIT
    assert pipeline.store.get(job["job_id"], tenant="tenant-a").payload == payload  # type: ignore[union-attr]


def test_a_payload_over_the_limit_only_as_utf8_is_refused_with_413(pipeline: Pipeline) -> None:
    payload = {"note": "é" * 33_000}  # 66,000 bytes stored: over 64 KiB, though only 33,000 characters

    status, body, _ = pipeline.submit("demo.echo", payload)

    assert status == 413
    assert body["error"]["code"] == "payload_too_large"
    assert f"the limit is {LIMIT} bytes" in body["error"]["message"]


def largest_job(payload_limit: int) -> Job:
    """A job at every bound at once: the largest payload (in 2-byte characters), key, error, progress message."""
    payload = {"note": ""}
    payload["note"] = "é" * ((payload_limit - len(payload_json(payload).encode())) // 2)
    return Job(
        job_id="f" * 32,
        tenant="t" * 128,
        type="x" * 64,
        queue="default",
        payload=payload,
        payload_hash="0" * 64,
        status=JobStatus.QUEUED,
        created_at=NOW,
        updated_at=NOW,
        max_attempts=5,
        idempotency_key="k" * MAX_IDEMPOTENCY_KEY_LENGTH,
        submission_id="s" * 32,
        run_at=NOW,
        sweep_at=NOW,
        error="€" * MAX_ERROR_LENGTH,
        progress=Progress(0.5, "€" * 200),
    )


def test_the_largest_payload_the_setting_allows_fits_an_item_with_the_largest_result(store: DynamoDbJobStore) -> None:
    with pytest.raises(ValueError):
        Settings(table_name="jobs", payload_limit_bytes=MAX_PAYLOAD_LIMIT_BYTES + 1)
    job = largest_job(MAX_PAYLOAD_LIMIT_BYTES)
    result = {"r": "x" * (MAX_RESULT_BYTES - 16)}
    assert len(json.dumps(result).encode()) <= MAX_RESULT_BYTES

    store.create(job)
    running = store.claim(job.job_id, tenant=job.tenant, now=NOW, lease_until=NOW + timedelta(minutes=5))
    store.record_success(running, result=result, now=NOW, expires_at=NOW + timedelta(days=7))

    done = store.get(job.job_id, tenant=job.tenant)
    assert done is not None and done.status is JobStatus.SUCCEEDED
    assert done.payload == job.payload and done.result == result


def test_an_item_dynamodb_refuses_for_its_size_is_a_domain_error_not_an_outage(store: DynamoDbJobStore) -> None:
    job = largest_job(500_000)

    with pytest.raises(ItemTooLargeError):
        store.create(job)


def test_a_submission_the_store_refuses_for_its_size_is_413_never_a_retryable_503(pipeline: Pipeline) -> None:
    # A policy above the settings' ceiling: only DynamoDB's 400 KB item limit stops this payload.
    pipeline.api_services.policy = SubmitPolicy(payload_limit_bytes=1024 * 1024)

    status, body, headers = pipeline.submit("demo.echo", {"note": "x" * 500_000})

    assert status == 413, body
    assert body["error"]["code"] == "payload_too_large"
    assert "Retry-After" not in headers


def test_a_batch_item_the_store_refuses_for_its_size_is_refused_alone_with_413(pipeline: Pipeline) -> None:
    pipeline.api_services.policy = SubmitPolicy(payload_limit_bytes=1024 * 1024)
    jobs = [{"type": "demo.echo", "payload": {"note": "x" * 500_000}}, {"type": "demo.echo"}]

    status, body, _ = pipeline.call("POST", "/jobs/batch", body={"jobs": jobs})

    assert status == 207
    assert [r["status"] for r in body["results"]] == [413, 202]


def test_a_batch_body_over_lambdas_6_mb_is_refused_with_413_in_the_envelope(pipeline: Pipeline) -> None:
    jobs = [{"type": "demo.echo", "payload": {"note": "x" * 64_000}} for _ in range(100)]  # 6.4 MB

    status, body, _ = pipeline.call("POST", "/jobs/batch", body={"jobs": jobs})

    assert status == 413
    assert body["error"]["code"] == "payload_too_large"
    assert "the limit is 6291456 bytes" in body["error"]["message"]
    assert pipeline.call("GET", "/jobs")[1]["jobs"] == []


# -- 10: bad input that used to get through -----------------------------------------------------------


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_number_json_does_not_have_is_refused_with_400(pipeline: Pipeline, number: str) -> None:
    raw = '{"type": "demo.echo", "payload": {"x": ' + number + "}}"

    status, body, _ = pipeline.call("POST", "/jobs", raw_body=raw)

    assert status == 400
    assert body["error"]["code"] == "malformed_json"
    assert pipeline.call("GET", "/jobs")[1]["jobs"] == []


def test_half_a_surrogate_pair_is_refused_with_400(pipeline: Pipeline) -> None:
    status, body, _ = pipeline.call("POST", "/jobs", raw_body='{"type": "demo.echo", "payload": {"x": "\\ud800"}}')

    assert status == 400
    assert body["error"]["code"] == "malformed_json"


def test_a_whole_number_written_with_a_fraction_is_an_integer(pipeline: Pipeline) -> None:
    status, job, _ = pipeline.call("POST", "/jobs", raw_body='{"type": "demo.sleep", "payload": {"ms": 5.0}}')

    assert status == 202, job


@pytest.mark.parametrize("ms", ["true", '"5"', "5.5"], ids=["boolean", "string", "fraction"])
def test_a_payload_value_of_another_json_type_is_refused_not_coerced(pipeline: Pipeline, ms: str) -> None:
    raw = '{"type": "demo.sleep", "payload": {"ms": ' + ms + "}}"
    status, body, _ = pipeline.call("POST", "/jobs", raw_body=raw)

    assert status == 422
    assert body["error"]["field"] == "payload.ms"


@pytest.mark.parametrize(
    ("first", "replay"),
    [
        ({"run_at": "2026-01-01T00:00:00Z"}, {"run_at": "2026-01-02T00:00:00Z"}),
        ({}, {"run_at": "2026-01-01T00:00:00Z"}),
        ({"run_at": "2026-01-01T00:00:00Z"}, {}),
    ],
    ids=["other-run-at", "run-at-added", "run-at-left-out"],
)
def test_a_replay_with_another_run_at_is_a_reused_key(
    pipeline: Pipeline, first: dict[str, Any], replay: dict[str, Any]
) -> None:
    body = {"type": "demo.echo", "payload": {"n": 1}}
    assert pipeline.call("POST", "/jobs", body={**body, **first}, headers=keyed("k-run-at"))[0] == 202

    status, answer, _ = pipeline.call("POST", "/jobs", body={**body, **replay}, headers=keyed("k-run-at"))

    assert status == 422
    assert answer["error"] == {
        "code": "idempotency_key_reused",
        "message": "Idempotency-Key was already used with a different type, payload, queue or run_at",
        "field": "Idempotency-Key",
    }


def test_a_replay_of_the_same_request_naming_the_types_own_queue_is_the_same_job(pipeline: Pipeline) -> None:
    body = {"type": "demo.echo", "payload": {"n": 1}}
    _, first, _ = pipeline.call("POST", "/jobs", body=body, headers=keyed("k-queue"))

    status, again, headers = pipeline.call("POST", "/jobs", body={**body, "queue": "default"}, headers=keyed("k-queue"))

    assert (status, again["job_id"], headers.get("Idempotent-Replayed")) == (200, first["job_id"], "true")


def test_a_batch_items_reused_key_names_the_items_field(pipeline: Pipeline) -> None:
    item = {"type": "demo.echo", "payload": {"n": 1}, "idempotency_key": "k-batch"}
    pipeline.call("POST", "/jobs/batch", body={"jobs": [item]})

    _, body, _ = pipeline.call("POST", "/jobs/batch", body={"jobs": [{**item, "payload": {"n": 2}}]})

    refused = body["results"][0]
    assert refused["status"] == 422
    assert refused["error"]["code"] == "idempotency_key_reused"
    assert refused["error"]["field"] == "idempotency_key"
    assert "Idempotency-Key" not in refused["error"]["message"]


def test_a_cursor_nested_past_the_parsers_depth_is_an_invalid_cursor(pipeline: Pipeline) -> None:
    cursor = base64.urlsafe_b64encode(b"[" * 1500).decode().rstrip("=")

    status, body, _ = pipeline.call("GET", f"/jobs?cursor={cursor}")

    assert status == 422
    assert body["error"] == {
        "code": "invalid_cursor",
        "message": "cursor is not one this listing returned",
        "field": "cursor",
    }


def test_a_cursor_with_characters_base64url_does_not_have_is_refused(pipeline: Pipeline) -> None:
    pipeline.submit("demo.echo", {})
    pipeline.submit("demo.echo", {})
    cursor = pipeline.call("GET", "/jobs?limit=1")[1]["cursor"]

    status, body, _ = pipeline.call("GET", f"/jobs?limit=1&cursor={cursor}!!")

    assert status == 422
    assert body["error"]["code"] == "invalid_cursor"


def test_an_unknown_job_type_is_named(pipeline: Pipeline) -> None:
    status, body, _ = pipeline.submit("reports.build", {})

    assert status == 422
    assert body["error"]["code"] == "unknown_job_type"
    assert "'reports.build'" in body["error"]["message"]


def test_an_unknown_job_type_in_a_listing_is_named(pipeline: Pipeline) -> None:
    status, body, _ = pipeline.call("GET", "/jobs?type=reports.build")

    assert status == 422
    assert "'reports.build'" in body["error"]["message"]


def test_every_invalid_field_of_a_body_is_reported_each_with_its_field(pipeline: Pipeline) -> None:
    body = {"type": "", "payload": [], "queue": "q" * 40, "colour": "red"}

    status, answer, _ = pipeline.call("POST", "/jobs", body=body)

    assert status == 422
    error = answer["error"]
    assert (error["code"], error["field"]) == ("invalid_request", "type")
    assert error["message"].startswith("type: ")
    assert [e["field"] for e in error["errors"]] == ["type", "payload", "queue", "colour"]
    assert error["errors"][3]["message"] == "unknown field"
    assert "red" not in json.dumps(answer)


def test_every_invalid_field_of_a_payload_is_reported(pipeline: Pipeline) -> None:
    status, answer, _ = pipeline.submit("send_welcome_email", {"user_id": 5})

    assert status == 422
    assert {e["field"] for e in answer["error"]["errors"]} == {"payload.user_id", "payload.email"}


def test_an_error_that_is_not_a_validation_has_no_list_of_errors(pipeline: Pipeline) -> None:
    status, answer, _ = pipeline.call("GET", f"/jobs/{'0' * 32}")

    assert (status, answer) == (404, {"error": {"code": "not_found", "message": "no such job"}})


@pytest.mark.parametrize(
    "key",
    ["ключ", "naïve-key", " leading", "trailing ", "tab\tkey", "k" * (MAX_IDEMPOTENCY_KEY_LENGTH + 1)],
    ids=["cyrillic", "latin-1", "leading-space", "trailing-space", "tab", "too-long"],
)
def test_an_idempotency_key_outside_printable_ascii_is_refused_saying_so(pipeline: Pipeline, key: str) -> None:
    status, body, _ = pipeline.submit("demo.echo", {}, headers=keyed(key))

    assert status == 422
    assert body["error"]["field"] == "Idempotency-Key"
    assert "printable ASCII" in body["error"]["message"]


def test_a_printable_ascii_key_with_inner_spaces_and_symbols_is_accepted(pipeline: Pipeline) -> None:
    key = "order 42: ~!@#$%^&*()_+{}|<>?"

    status, job, _ = pipeline.submit("demo.echo", {}, headers=keyed(key))

    assert status == 202, job
    again, replayed, _ = pipeline.submit("demo.echo", {}, headers=keyed(key))
    assert (again, replayed["job_id"]) == (200, job["job_id"])


@pytest.mark.parametrize("run_at", ["2026-01-31T09:00Z", "20260131T090000Z", "2026-01-31 09:00:00Z"])
def test_a_run_at_that_is_not_rfc_3339_is_refused(pipeline: Pipeline, run_at: str) -> None:
    status, body, _ = pipeline.call("POST", "/jobs", body={"type": "demo.echo", "run_at": run_at})

    assert status == 422
    assert body["error"]["field"] == "run_at"


# -- 1 (the store's half): one unreadable item never fails a listing or a sweep -------------------------


def fail_send(*args: Any, **kwargs: Any) -> None:
    raise QueueUnavailableError("SQS unreachable")


def make_unreadable(pipeline: Pipeline, job_id: str) -> None:
    pipeline.clients["dynamodb"].update_item(
        TableName=pipeline.resources.table_name,
        Key=job_key("tenant-a", job_id),
        UpdateExpression="SET created_at = :unreadable",
        ExpressionAttributeValues={":unreadable": {"S": "secret-content-not-a-time"}},
    )


def test_a_listing_leaves_out_an_unreadable_item_and_shows_the_others(
    pipeline: Pipeline, json_logs: io.StringIO
) -> None:
    ids = [pipeline.submit("demo.echo", {"n": n})[1]["job_id"] for n in range(3)]
    make_unreadable(pipeline, ids[1])

    status, page, _ = pipeline.call("GET", "/jobs")

    assert status == 200, page
    assert {job["job_id"] for job in page["jobs"]} == {ids[0], ids[2]}
    assert pipeline.store.unreadable_items == 1
    logged = json_logs.getvalue()
    assert f"{job_partition('tenant-a', job_shard(ids[1]))}/{ids[1]}" in logged
    assert "secret-content" not in logged


def test_a_sweep_goes_on_past_an_unreadable_item(pipeline: Pipeline) -> None:
    # Jobs the sweeper watches: their sends failed, so they were written with a sweep time.
    pipeline.queue.send = fail_send  # type: ignore[method-assign]
    ids = [pipeline.submit("demo.echo", {"n": n})[1]["job_id"] for n in range(3)]
    make_unreadable(pipeline, ids[0])
    later = datetime.now(UTC) + timedelta(hours=1)

    due = pipeline.store.due_for_sweep(now=later, limit=10)

    assert {job.job_id for job in due} == {ids[1], ids[2]}
    assert pipeline.store.unreadable_items == 1


def test_a_raw_item_missing_its_attributes_is_left_out_of_a_listing(pipeline: Pipeline) -> None:
    good = pipeline.submit("demo.echo", {"n": 1})[1]["job_id"]
    item = to_item(largest_job(100))
    raw = {name: item[name] for name in ("pk", "sk")}
    raw["pk"] = {"S": job_partition("tenant-a", job_shard(item["sk"]["S"]))}  # type: ignore[typeddict-item]
    pipeline.clients["dynamodb"].put_item(TableName=pipeline.resources.table_name, Item=raw)

    status, page, _ = pipeline.call("GET", "/jobs")

    assert status == 200, page
    assert [job["job_id"] for job in page["jobs"]] == [good]
