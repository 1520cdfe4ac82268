"""What API Gateway and its JWT authorizer do before the api function runs."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from offpath.contract import ROUTES
from offpath_local.gateway import Authorizer, Gateway
from tests.e2e.conftest import TENANT_A, TOKEN_A, TOKEN_B, Local
from tests.e2e.target import Target


def test_health_needs_no_token(target: Target) -> None:
    answer = target.call("GET", "/health", tenant=None)

    assert answer.status == 200
    assert answer.body == {"status": "ok"}


def test_a_request_without_credentials_reaches_no_job(target: Target) -> None:
    """Any target: refused before the function (401 from a bearer-token authorizer, 403 from IAM)."""
    answer = target.call("GET", "/jobs", tenant=None)

    assert answer.status in {401, 403}
    assert "jobs" not in (answer.body if isinstance(answer.body, dict) else {})


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


# -- routes no declaration names ------------------------------------------------------------------


@pytest.fixture
def gateway() -> Iterator[tuple[Gateway, list[dict[str, Any]]]]:
    """A gateway alone, in front of a function that records every event it is invoked with."""
    invoked: list[dict[str, Any]] = []

    def invoke(event: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        invoked.append(event)
        return {"statusCode": 200, "headers": {"content-type": "application/json"}, "body": "{}"}

    gateway = Gateway(invoke, Authorizer({TENANT_A: TOKEN_A}), port=0)
    gateway.start()
    try:
        yield gateway, invoked
    finally:
        gateway.stop()


@pytest.mark.parametrize("token", [TOKEN_A, None])
@pytest.mark.parametrize(("method", "path"), [("GET", "/nope"), ("DELETE", "/jobs"), ("GET", "/jobs/x/cancel")])
def test_an_unknown_route_is_answered_404_by_the_gateway_without_reaching_the_function(
    gateway: tuple[Gateway, list[dict[str, Any]]], method: str, path: str, token: str | None
) -> None:
    server, invoked = gateway

    answer = Local(server.url, Path(), Path()).call(method, path, token=token)

    assert (answer.status, answer.body) == (404, {"message": "Not Found"})
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers.get("apigw-requestid")
    assert invoked == []


def test_every_declared_route_reaches_the_function_with_its_route_key(
    gateway: tuple[Gateway, list[dict[str, Any]]],
) -> None:
    server, invoked = gateway
    client = Local(server.url, Path(), Path())

    for route in ROUTES:
        path = route.path.replace("{job_id}", "a" * 32).replace("{name}", "default")
        answer = client.call(route.method, path, token=TOKEN_A)
        if route.access == "admin":  # tenant-a has no admin scope
            assert answer.status == 403, route.key
        else:
            assert answer.status == 200, route.key

    assert [event["routeKey"] for event in invoked] == [r.key for r in ROUTES if r.access != "admin"]


def test_a_running_runtime_answers_an_unknown_route_404(local: Local) -> None:
    answer = local.call("PUT", "/jobs", token=None)

    assert (answer.status, answer.body) == (404, {"message": "Not Found"})
