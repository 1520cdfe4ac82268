"""What API Gateway and its JWT authorizer do before the api function runs."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tests.e2e.conftest import TOKEN_A, TOKEN_B, Local


def test_health_needs_no_token(local: Local) -> None:
    answer = local.call("GET", "/health", token=None)

    assert answer.status == 200
    assert answer.body == {"status": "ok"}


def test_a_request_without_a_token_is_refused_with_401(local: Local) -> None:
    answer = local.call("GET", "/jobs", token=None)

    assert answer.status == 401
    assert answer.body["error"]["code"] == "unauthorized"


def test_a_request_with_an_unknown_token_is_refused_with_401(local: Local) -> None:
    answer = local.submit("demo.echo", {}, token="not-a-token")

    assert answer.status == 401
    assert answer.body["error"]["code"] == "unauthorized"


def test_an_admin_route_needs_the_admin_scope(local: Local) -> None:
    answer = local.call("POST", "/queues/default/redrive", token=TOKEN_B)

    assert answer.status == 403
    assert answer.body["error"]["code"] == "forbidden"


def test_a_malformed_body_reaches_the_function_and_is_answered_400(local: Local) -> None:
    answer = local.call("POST", "/jobs", raw=b"{not json", headers={"Content-Type": "application/json"})

    assert answer.status == 400
    assert answer.body["error"]["code"] == "malformed_json"


def test_the_response_carries_api_gateways_request_id(local: Local) -> None:
    answer = local.call("GET", "/health", token=None)

    assert answer.headers.get("apigw-requestid")


def test_concurrent_requests_of_two_tenants_each_see_only_their_own_job(local: Local) -> None:
    own = {
        TOKEN_A: local.submit("demo.echo", {"who": "a"}, token=TOKEN_A).body["job_id"],
        TOKEN_B: local.submit("demo.echo", {"who": "b"}, token=TOKEN_B).body["job_id"],
    }

    def read(token: str) -> tuple[str, int, str | None]:
        answer = local.call("GET", f"/jobs/{own[token]}", token=token)
        return token, answer.status, answer.body.get("job_id")

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(read, [TOKEN_A, TOKEN_B] * 60))

    assert all(status == 200 and job_id == own[token] for token, status, job_id in results)
