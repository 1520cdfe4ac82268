"""The HTTP contract as a caller meets it, against any target: the embedded runtime by default, or a live stage
(`make e2e URL=...`). Every test touches only what it makes: its own jobs and its own webhook endpoints (deleted
after each test); a route that could touch more is called only where the caller is refused, or with a name that
does not exist. What the stage held before the suite ran stays as it was."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from offpath.contract import ROUTES
from tests.e2e.conftest import Hook
from tests.e2e.target import DEMO_TYPES, Target

ZERO_JOB = "0" * 32
# A name no queue, schedule or endpoint has: a route reached by mistake finds nothing to act on.
NO_SUCH_NAME = "e2e-no-such-name"
FINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


def concrete(path: str, job_id: str = ZERO_JOB) -> str:
    return path.replace("{job_id}", job_id).replace("{name}", NO_SUCH_NAME)


def is_refusal(body: Any, code: str) -> bool:
    """The envelope (the embedded gateway, the api function), or API Gateway's own `{"message": ...}` (its
    authorizers: "Unauthorized", "Forbidden", or IAM's reason for a request it cannot read as signed)."""
    if not isinstance(body, dict):
        return False
    gateways = set(body) == {"message"} and isinstance(body["message"], str)
    return gateways or body.get("error", {}).get("code") == code


def in_a_month() -> str:
    """Far enough that a delayed job stays SCHEDULED through a test, also where the target's scheduler clock runs
    fast (the suite's own runtime: a minute a second, so an hour would pass in a minute of a loaded run)."""
    return (datetime.now(UTC) + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")


def in_a_second() -> str:
    return (datetime.now(UTC) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- authorization on every route -------------------------------------------------------------------------------

GUARDED = [r for r in ROUTES if r.access != "public"]
ADMIN = [r for r in ROUTES if r.access == "admin"]


@pytest.mark.parametrize("credentials", ["none", "forged token"])
@pytest.mark.parametrize("route", GUARDED, ids=[r.key for r in GUARDED])
def test_every_guarded_route_refuses_a_caller_without_valid_credentials(
    target: Target, route: Any, credentials: str
) -> None:
    headers = {"Authorization": "Bearer forged-e2e-token"} if credentials == "forged token" else {}
    body = {} if route.method in {"POST", "PUT"} else None

    answer = target.call(route.method, concrete(route.path), tenant=None, body=body, headers=headers)

    # 401 from a bearer-token authorizer, 403 from IAM: either way before the function.
    assert answer.status in {401, 403}, (route.key, answer.status, answer.body)
    assert is_refusal(answer.body, "unauthorized" if answer.status == 401 else "forbidden"), answer.body


@pytest.mark.needs("tenant_b")
@pytest.mark.parametrize("route", ADMIN, ids=[r.key for r in ADMIN])
def test_every_admin_route_refuses_a_tenant_without_the_admin_scope(target: Target, route: Any) -> None:
    answer = target.call(route.method, concrete(route.path), tenant="b", body={} if route.method == "POST" else None)

    assert answer.status == 403, (route.key, answer.body)
    assert is_refusal(answer.body, "forbidden"), answer.body


JOB_ROUTES = [("GET", "/jobs/{job_id}"), ("GET", "/jobs/{job_id}?wait=1"), ("POST", "/jobs/{job_id}/cancel")]


@pytest.mark.needs("tenant_b")
@pytest.mark.parametrize(("method", "path"), [*JOB_ROUTES, ("POST", "/jobs/{job_id}/retry")])
def test_another_tenants_job_is_not_found_on_every_job_route(target: Target, method: str, path: str) -> None:
    submitted = target.call("POST", "/jobs", body={"type": "demo.echo", "payload": {}, "run_at": in_a_month()})
    job_id = submitted.body["job_id"]
    try:
        answer = target.call(method, concrete(path, job_id), tenant="b")

        assert answer.status == 404
        assert answer.body["error"]["code"] == "not_found"
        assert target.job(job_id)["status"] == "SCHEDULED", "the owner's job is untouched"
    finally:
        target.call("POST", f"/jobs/{job_id}/cancel")


# -- submit: bad input, limits, run_at -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "type_name",
    ["../../etc/passwd", 'demo"echo', "$where", "demo\x01echo", "<script>alert(1)</script>", "x" * 10_240],
    ids=["path", "quote", "dollar", "control", "markup", "10 KB"],
)
def test_a_hostile_job_type_name_is_refused_and_never_echoed(target: Target, type_name: str) -> None:
    answer = target.call("POST", "/jobs", body={"type": type_name, "payload": {}})

    assert 400 <= answer.status < 500
    assert answer.body["error"]["field"] == "type"
    assert type_name not in str(answer.body)


def test_an_unknown_job_type_is_422_pointing_at_the_listing(target: Target) -> None:
    answer = target.submit("e2e.no_such_type", {})

    assert answer.status == 422
    assert (answer.body["error"]["code"], answer.body["error"]["field"]) == ("unknown_job_type", "type")
    assert "/job-types" in answer.body["error"]["message"]


def test_a_payload_over_the_limit_is_413_naming_the_limit_and_one_at_the_limit_is_accepted(target: Target) -> None:
    over = target.submit("demo.echo", {"x": "a" * 300_000})
    assert over.status == 413
    assert over.body["error"]["code"] == "payload_too_large"
    limit = int(re.search(r"the limit is (\d+) bytes", over.body["error"]["message"]).group(1))  # type: ignore[union-attr]

    # {"x":"…"}: eight bytes around the text. Held for an hour, then cancelled: its echo would be over the
    # result's limit (the same bytes, and a little more).
    body = {"type": "demo.echo", "payload": {"x": "a" * (limit - 8)}, "run_at": in_a_month()}
    at_limit = target.call("POST", "/jobs", body=body)

    assert at_limit.status == 202, at_limit.body
    assert target.call("POST", f"/jobs/{at_limit.body['job_id']}/cancel").status == 200


def test_a_run_at_in_the_past_runs_now(target: Target) -> None:
    answer = target.call(
        "POST", "/jobs", body={"type": "demo.echo", "payload": {"p": 1}, "run_at": "2020-01-01T00:00:00Z"}
    )

    assert answer.status == 202
    assert answer.body["status"] == "QUEUED"
    assert target.wait_for_job(answer.body["job_id"], FINAL)["status"] == "SUCCEEDED"


@pytest.mark.parametrize(
    ("run_at", "message"),
    [("2099-01-01T00:00:00Z", "365 days"), ("tomorrow", "RFC 3339"), ("2026-13-01T00:00:00Z", "RFC 3339")],
)
def test_a_run_at_too_far_or_not_a_time_is_refused(target: Target, run_at: str, message: str) -> None:
    answer = target.call("POST", "/jobs", body={"type": "demo.echo", "payload": {}, "run_at": run_at})

    assert answer.status == 422
    assert answer.body["error"]["field"] == "run_at"
    assert message in answer.body["error"]["message"]


def test_a_delayed_job_waits_as_scheduled_then_runs(target: Target) -> None:
    answer = target.call(
        "POST", "/jobs", body={"type": "demo.echo", "payload": {"later": True}, "run_at": in_a_second()}
    )
    assert answer.status == 202
    assert answer.body["status"] in {"SCHEDULED", "QUEUED"}

    job = target.wait_for_job(answer.body["job_id"], FINAL, timeout_s=90)

    assert job["status"] == "SUCCEEDED"
    assert job["result"] == {"later": True}


# -- idempotency -------------------------------------------------------------------------------------------------


def test_a_replay_answers_200_with_the_same_job_and_says_so(target: Target) -> None:
    key = f"e2e-{uuid.uuid4()}"
    first = target.submit("demo.echo", {"n": 1}, headers={"Idempotency-Key": key})

    again = target.submit("demo.echo", {"n": 1}, headers={"Idempotency-Key": key})

    assert (first.status, again.status) == (202, 200)
    assert again.body["job_id"] == first.body["job_id"]
    assert again.headers.get("idempotent-replayed") == "true"


def test_the_same_key_with_another_payload_is_422_and_the_first_job_is_untouched(target: Target) -> None:
    key = f"e2e-{uuid.uuid4()}"
    first = target.submit("demo.echo", {"n": 1}, headers={"Idempotency-Key": key})
    target.wait_for_job(first.body["job_id"], FINAL)

    other = target.submit("demo.echo", {"n": 2}, headers={"Idempotency-Key": key})

    assert other.status == 422
    assert other.body["error"]["field"]
    job = target.job(first.body["job_id"])
    assert (job["status"], job["result"], job["payload"]) == ("SUCCEEDED", {"n": 1}, {"n": 1})


@pytest.mark.needs("tenant_b")
def test_another_tenant_reusing_a_key_gets_a_job_of_its_own(target: Target) -> None:
    key = f"e2e-{uuid.uuid4()}"
    mine = target.submit("demo.echo", {"who": "a"}, headers={"Idempotency-Key": key})

    theirs = target.submit("demo.echo", {"who": "b"}, headers={"Idempotency-Key": key}, tenant="b")

    assert (mine.status, theirs.status) == (202, 202)
    assert theirs.body["job_id"] != mine.body["job_id"]
    assert target.job(mine.body["job_id"])["payload"] == {"who": "a"}


# -- retries, dead letters, cancel -------------------------------------------------------------------------------


def test_a_job_failing_every_attempt_ends_failed_after_its_max_attempts(target: Target) -> None:
    job_id = target.submit("demo.flaky", {"fail_first": 100}).body["job_id"]
    target.parked.add(job_id)

    job = target.wait_for_job(job_id, FINAL, timeout_s=60)

    assert job["status"] == "FAILED"
    assert job["attempts"] == job["max_attempts"] == 5
    assert "flaky failure on attempt 5" in job["error"]
    assert [a["outcome"] for a in job["attempt_history"]][-1] == "FAILED"


def test_a_finished_job_cannot_be_cancelled_and_a_succeeded_one_not_retried(target: Target) -> None:
    job_id = target.submit("demo.echo", {}).body["job_id"]
    target.wait_for_job(job_id, FINAL)

    cancel = target.call("POST", f"/jobs/{job_id}/cancel")
    retry = target.call("POST", f"/jobs/{job_id}/retry")

    assert (cancel.status, retry.status) == (409, 409)
    assert cancel.body["error"]["code"] and retry.body["error"]["code"]
    assert target.job(job_id)["status"] == "SUCCEEDED"


def test_a_cancelled_job_can_be_retried_and_then_runs(target: Target) -> None:
    run_at = in_a_month()
    job_id = target.call("POST", "/jobs", body={"type": "demo.echo", "payload": {"r": 1}, "run_at": run_at}).body[
        "job_id"
    ]
    assert target.call("POST", f"/jobs/{job_id}/cancel").status == 200

    retried = target.call("POST", f"/jobs/{job_id}/retry?now=true")

    assert retried.status == 202
    assert target.wait_for_job(job_id, FINAL)["status"] == "SUCCEEDED"


def test_a_cancelled_delayed_job_retried_keeps_its_run_at(target: Target) -> None:
    run_at = in_a_month()
    submitted = target.call("POST", "/jobs", body={"type": "demo.echo", "payload": {"r": 2}, "run_at": run_at}).body
    assert target.call("POST", f"/jobs/{submitted['job_id']}/cancel").status == 200

    retried = target.call("POST", f"/jobs/{submitted['job_id']}/retry")

    assert retried.status == 202
    assert (retried.body["status"], retried.body["run_at"]) == ("SCHEDULED", submitted["run_at"])
    assert target.call("GET", f"/jobs/{submitted['job_id']}").body["status"] == "SCHEDULED"
    assert target.call("POST", f"/jobs/{submitted['job_id']}/cancel").status == 200  # leaves nothing due later


# -- reading: listings, long poll, batches -----------------------------------------------------------------------


def test_a_listing_filters_by_status_and_type_and_pages_with_its_cursor(target: Target) -> None:
    ids = [target.submit("demo.echo", {"page": n}).body["job_id"] for n in range(3)]
    for job_id in ids:
        target.wait_for_job(job_id, FINAL)

    first = target.call("GET", "/jobs?status=SUCCEEDED&type=demo.echo&limit=2")
    second = target.call("GET", f"/jobs?status=SUCCEEDED&type=demo.echo&limit=2&cursor={first.body['cursor']}")

    assert first.status == second.status == 200
    listed = first.body["jobs"] + second.body["jobs"]
    assert {(j["status"], j["type"]) for j in listed} == {("SUCCEEDED", "demo.echo")}
    assert len({j["job_id"] for j in listed}) == 4, "a page never repeats the one before"


@pytest.mark.parametrize(("query", "field"), [("limit=0", "limit"), ("status=NOPE", "status"), ("wait=25", "wait")])
def test_a_bad_query_is_422_naming_the_parameter(target: Target, query: str, field: str) -> None:
    path = f"/jobs?{query}"
    if field == "wait":
        path = f"/jobs/{target.submit('demo.echo', {}).body['job_id']}?{query}"

    answer = target.call("GET", path)

    assert answer.status == 422
    assert answer.body["error"]["field"] == field


def test_a_long_poll_on_a_finished_job_answers_at_once_with_it(target: Target) -> None:
    job_id = target.submit("demo.echo", {"poll": 1}).body["job_id"]
    target.wait_for_job(job_id, FINAL)

    answer = target.call("GET", f"/jobs/{job_id}?wait=20")

    assert answer.status == 200
    assert answer.body["status"] == "SUCCEEDED"


def test_a_batch_answers_each_item_and_refuses_only_the_bad_one(target: Target) -> None:
    jobs = [{"type": "demo.echo", "payload": {"i": 0}}, {"type": "e2e.no_such_type"}, {"type": "demo.echo"}]

    answer = target.call("POST", "/jobs/batch", body={"jobs": jobs})

    assert answer.status == 207
    assert [r["status"] for r in answer.body["results"]] == [202, 422, 202]
    done = target.wait_for_job(answer.body["results"][0]["job"]["job_id"], FINAL)
    assert done["result"] == {"i": 0}


def test_a_batch_over_100_jobs_is_refused_whole(target: Target) -> None:
    answer = target.call("POST", "/jobs/batch", body={"jobs": [{"type": "demo.echo"}] * 101})

    assert answer.status == 422
    assert answer.body["error"]["field"] == "jobs"


# -- what the target says about itself --------------------------------------------------------------------------


def test_the_job_types_list_the_demos_with_their_queue_and_payload_schema(target: Target) -> None:
    answer = target.call("GET", "/job-types")

    assert answer.status == 200
    types = {t["name"]: t for t in answer.body["job_types"]}
    assert set(DEMO_TYPES) <= set(types)
    assert types["demo.sleep"]["payload_schema"]["required"] == ["ms"]
    assert {types[name]["queue"] for name in DEMO_TYPES} == {"default"}


def test_the_served_document_names_every_route_and_every_job_types_payload(target: Target) -> None:
    document = target.call("GET", "/openapi.json")
    job_types = target.call("GET", "/job-types").body["job_types"]

    assert document.status == 200
    assert document.body["openapi"].startswith("3.")
    served = {(method.upper(), path) for path, item in document.body["paths"].items() for method in item}
    assert {(r.method, r.path) for r in ROUTES} <= served
    schemas = document.body["components"]["schemas"]
    assert {t["payload_schema"]["title"] for t in job_types} <= set(schemas)


def test_the_callers_quotas_and_usage_are_readable(target: Target) -> None:
    answer = target.call("GET", "/quotas")

    assert answer.status == 200
    assert set(answer.body) == {"tenant", "quotas", "usage"}
    assert set(answer.body["quotas"]) == {"submits_per_s", "burst", "open_jobs", "delayed_jobs"}
    assert set(answer.body["usage"]) == {"open_jobs", "delayed_jobs"}


def test_queues_show_each_class_with_its_dlq_depth(target: Target) -> None:
    answer = target.call("GET", "/queues")

    assert answer.status == 200
    queues = {q["name"]: q for q in answer.body["queues"]}
    assert {"critical", "default", "bulk"} <= set(queues)
    assert all(q["dlq_depth"] >= 0 and q["visible"] >= 0 for q in queues.values())


def test_schedules_list_the_declared_ones_with_their_next_firings(target: Target) -> None:
    answer = target.call("GET", "/schedules")

    assert answer.status == 200
    names = {s["name"]: s for s in answer.body["schedules"]}
    assert "monthly-billing" in names
    assert names["monthly-billing"]["next_firings"]


@pytest.mark.parametrize(
    ("method", "path", "what"),
    [("POST", "/queues/{name}/redrive", "queue"), ("POST", "/schedules/{name}/trigger", "schedule")],
)
def test_an_operation_on_a_name_that_does_not_exist_is_404_in_the_envelope(
    target: Target, method: str, path: str, what: str
) -> None:
    answer = target.call(method, concrete(path))

    assert answer.status == 404
    assert answer.body["error"] == {"code": "not_found", "message": f"no such {what}"}


# -- webhooks: only the suite's own endpoints, each deleted after its test ---------------------------------------


def test_an_endpoint_is_registered_read_rotated_and_its_secret_shown_only_when_made(
    target: Target, webhooks: Any
) -> None:
    hook: Hook = webhooks(["job.succeeded"])
    assert hook.secret.startswith("whsec_")

    shown = target.call("GET", f"/webhooks/{hook.name}")
    listed = target.call("GET", "/webhooks")
    rotated = target.call("POST", f"/webhooks/{hook.name}/rotate-secret")

    assert shown.status == 200 and "secret" not in shown.body
    assert (shown.body["url"], shown.body["events"], shown.body["enabled"]) == (hook.url, ["job.succeeded"], True)
    assert hook.name in [w["name"] for w in listed.body["webhooks"]]
    assert rotated.status == 200 and rotated.body["secret"] not in {hook.secret, None}


def test_an_endpoint_with_an_unknown_event_is_refused(target: Target) -> None:
    name = f"e2e-{uuid.uuid4().hex[:12]}"
    answer = target.call("PUT", f"/webhooks/{name}", body={"url": "https://example.com/h", "events": ["job.nope"]})
    if answer.status < 300:  # not refused: the endpoint goes, and the test fails
        target.call("DELETE", f"/webhooks/{name}")

    assert answer.status == 422
    assert answer.body["error"]["field"] == "events.0"
    assert target.call("GET", f"/webhooks/{name}").status == 404


@pytest.mark.needs("receiver")
def test_a_test_event_reaches_the_receiver_signed_and_is_in_the_delivery_log(target: Target, webhooks: Any) -> None:
    hook: Hook = webhooks(["job.failed"])

    sent = target.call("POST", f"/webhooks/{hook.name}/test")

    assert sent.status == 202 and sent.body["type"] == "webhook.test"
    log = target.wait_for(lambda: _attempts(target, hook, sent.body["event_id"]), timeout_s=30)
    assert 200 <= log[0]["status_code"] < 300
    if hook.receiver is not None:
        delivery = target.wait_for(lambda: hook.receiver.at(hook.path) or None)  # type: ignore[union-attr]
        assert delivery[0].verified_by(hook.secret)
        assert delivery[0].webhook_id == sent.body["event_id"]


@pytest.mark.needs("receiver")
def test_a_jobs_end_is_delivered_to_the_tenants_endpoint(target: Target, webhooks: Any) -> None:
    """The notifier reads a tenant's endpoints every few seconds: a job ending before it knew the new endpoint is
    not delivered to it, so the test submits again until one is."""
    hook: Hook = webhooks(["job.succeeded"])
    submitted: list[str] = []

    def delivered() -> list[dict[str, Any]] | None:
        log = target.call("GET", f"/webhooks/{hook.name}/deliveries").body["deliveries"]
        ok = [d for d in log if d["type"] == "job.succeeded" and 200 <= (d["status_code"] or 0) < 300]
        if not ok and len(submitted) < 20:
            submitted.append(target.submit("demo.echo", {"notice": len(submitted)}).body["job_id"])
        return ok or None

    log = target.wait_for(delivered, timeout_s=60, interval_s=1.0)

    assert log[0]["event_id"].startswith("evt_")
    if hook.receiver is not None:
        received = [r for r in hook.receiver.at(hook.path) if r.event["type"] == "job.succeeded"]
        assert received and all(r.verified_by(hook.secret) for r in received)
        assert {r.event["data"]["job_id"] for r in received} <= set(submitted)


@pytest.mark.needs("tenant_b")
@pytest.mark.parametrize(
    ("method", "suffix"),
    [("GET", ""), ("DELETE", ""), ("POST", "/rotate-secret"), ("POST", "/test"), ("GET", "/deliveries")],
)
def test_another_tenants_endpoint_is_not_found(target: Target, webhooks: Any, method: str, suffix: str) -> None:
    hook: Hook = webhooks(["job.succeeded"])

    answer = target.call(method, f"/webhooks/{hook.name}{suffix}", tenant="b")

    assert answer.status == 404
    assert answer.body["error"]["code"] == "not_found"
    assert target.call("GET", f"/webhooks/{hook.name}").status == 200, "the owner's endpoint is still there"


def _attempts(target: Target, hook: Hook, event_id: str) -> list[dict[str, Any]] | None:
    log = target.call("GET", f"/webhooks/{hook.name}/deliveries").body["deliveries"]
    return [d for d in log if d["event_id"] == event_id and d["status_code"]] or None
