"""TESTPLAN 30 (routes): every route but GET /health has an authorizer; admin routes stand apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offpath import contract
from offpath.contract import ROUTES, Answer, Route
from offpath.tenancy import ADMIN_SCOPE
from offpath_tools.cost import ASSUMPTIONS
from tests.infra.stacks import EXTENDED_CONTEXT, Synthesized, cdk_json_context, synthesize
from tests.infra.template_view import of_type, render

EXPECTED_ROUTES = {
    "POST /batches",
    "GET /batches",
    "GET /batches/{batch_id}",
    "GET /batches/{batch_id}/jobs",
    "POST /batches/{batch_id}/jobs",
    "POST /batches/{batch_id}/seal",
    "POST /batches/{batch_id}/cancel",
    "POST /jobs",
    "POST /jobs/batch",
    "GET /jobs",
    "GET /jobs/{job_id}",
    "POST /jobs/{job_id}/cancel",
    "POST /jobs/{job_id}/retry",
    "POST /jobs/bulk",
    "GET /jobs/bulk/{operation_id}",
    "GET /job-types",
    "GET /queues",
    "GET /schedules",
    "GET /openapi.json",
    "GET /health",
    "POST /queues/{name}/redrive",
    "POST /queues/{name}/pause",
    "POST /queues/{name}/resume",
    "POST /job-types/{name}/pause",
    "POST /job-types/{name}/resume",
    "DELETE /queues/{name}/dead-letters/{job_id}",
    "POST /schedules/{name}/trigger",
    "GET /stats",
    "GET /alarms",
    "GET /quotas",
    # Webhooks (notices).
    "PUT /webhooks/{name}",
    "GET /webhooks",
    "GET /webhooks/{name}",
    "DELETE /webhooks/{name}",
    "POST /webhooks/{name}/rotate-secret",
    "POST /webhooks/{name}/test",
    "GET /webhooks/{name}/deliveries",
}


def routes(stack: Synthesized) -> dict[str, dict[str, object]]:
    return {
        r["Properties"]["RouteKey"]: r["Properties"] for r in of_type(stack.json, "AWS::ApiGatewayV2::Route").values()
    }


def test_the_api_has_exactly_the_documented_routes(any_stack: Synthesized) -> None:
    assert set(routes(any_stack)) == EXPECTED_ROUTES
    assert {route.key for route in ROUTES} == EXPECTED_ROUTES


def test_each_declared_route_is_deployed_with_the_authorization_its_access_names(extended_stack: Synthesized) -> None:
    deployed = routes(extended_stack)

    assert set(deployed) == {route.key for route in ROUTES}
    for route in ROUTES:
        expected = (
            ("NONE", None) if route.access == "public" else ("JWT", [ADMIN_SCOPE] if route.access == "admin" else None)
        )
        assert (deployed[route.key]["AuthorizationType"], deployed[route.key].get("AuthorizationScopes")) == expected


def test_a_route_added_to_the_declaration_is_deployed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    added = Route(
        "POST", "/probes/{name}/poke", "pokeProbe", "admin", "A probe", answers=(Answer(202, "HealthView", "ok"),)
    )
    monkeypatch.setattr(contract, "ROUTES", (*ROUTES, added))

    stack = synthesize(tmp_path, {**cdk_json_context(), **EXTENDED_CONTEXT}, None)

    deployed = routes(stack)
    assert set(deployed) == EXPECTED_ROUTES | {"POST /probes/{name}/poke"}
    assert deployed["POST /probes/{name}/poke"]["AuthorizationScopes"] == [ADMIN_SCOPE]


def test_every_route_but_health_needs_iam_by_default(default_stack: Synthesized) -> None:
    for key, route in routes(default_stack).items():
        expected = "NONE" if key == "GET /health" else "AWS_IAM"
        assert route["AuthorizationType"] == expected, key


def test_with_jwt_context_every_route_but_health_has_the_jwt_authorizer(extended_stack: Synthesized) -> None:
    (authorizer_id, authorizer) = next(iter(of_type(extended_stack.json, "AWS::ApiGatewayV2::Authorizer").items()))
    assert authorizer["Properties"]["AuthorizerType"] == "JWT"
    assert authorizer["Properties"]["JwtConfiguration"] == {
        "Audience": EXTENDED_CONTEXT["jwt_audience"].split(","),
        "Issuer": EXTENDED_CONTEXT["jwt_issuer"],
    }
    for key, route in routes(extended_stack).items():
        if key == "GET /health":
            assert route["AuthorizationType"] == "NONE"
            continue
        assert route["AuthorizationType"] == "JWT", key
        assert render(route["AuthorizerId"]) == f"<{authorizer_id}>"


def test_with_jwt_only_admin_routes_need_the_admin_scope(extended_stack: Synthesized) -> None:
    admin = {route.key for route in ROUTES if route.access == "admin"}
    for key, route in routes(extended_stack).items():
        scopes = route.get("AuthorizationScopes")
        assert scopes == ([ADMIN_SCOPE] if key in admin else None), key


def test_the_job_read_goes_to_the_read_function_and_every_other_route_to_the_api_function(
    default_stack: Synthesized,
) -> None:
    """Waits (GET /jobs/{id}?wait=N) hold an environment each: they run on a function of their own."""
    integrations = of_type(default_stack.json, "AWS::ApiGatewayV2::Integration")
    function_of = {}
    for integration_id, integration in integrations.items():
        assert integration["Properties"]["PayloadFormatVersion"] == "2.0"
        uri = render(integration["Properties"]["IntegrationUri"])
        function_of[f"integrations/<{integration_id}>"] = "read" if uri.startswith("<JobApiReaderFunction") else uri
    assert len(integrations) == 2
    for key, route in routes(default_stack).items():
        target = function_of[render(route["Target"])]
        if key == "GET /jobs/{job_id}":
            assert target == "read", key
        else:
            assert target.startswith("<JobApiHandlerFunction"), key


def test_the_stage_throttles_by_default_and_writes_json_access_logs(default_stack: Synthesized) -> None:
    (stage,) = of_type(default_stack.json, "AWS::ApiGatewayV2::Stage").values()
    properties = stage["Properties"]
    options = default_stack.stack.options
    assert properties["StageName"] == "$default"
    assert properties["DefaultRouteSettings"]["ThrottlingRateLimit"] == options.api_rate_limit
    assert properties["DefaultRouteSettings"]["ThrottlingBurstLimit"] == options.api_burst_limit
    destination = render(properties["AccessLogSettings"]["DestinationArn"])
    groups = of_type(default_stack.json, "AWS::Logs::LogGroup")
    assert destination.removeprefix("<").removesuffix(".Arn>") in groups
    assert '"requestId":"$context.requestId"' in properties["AccessLogSettings"]["Format"]


def test_an_access_log_line_is_no_longer_than_the_cost_model_prices(default_stack: Synthesized) -> None:
    (stage,) = of_type(default_stack.json, "AWS::ApiGatewayV2::Stage").values()
    line_format = stage["Properties"]["AccessLogSettings"]["Format"]
    typical = {  # a batch submit from an IPv4 caller, as HTTP APIs fill the variables
        "$context.requestId": "JZb3xj3KoAMEbRw=",
        "$context.identity.sourceIp": "203.0.113.42",
        "$context.requestTimeEpoch": "1796155170059",
        "$context.routeKey": "POST /jobs/batch",
        "$context.status": "202",
        "$context.responseLength": "4312",
        "$context.responseLatency": "127",
        "$context.integrationErrorMessage": "-",
        "$context.authorizer.error": "-",
    }
    line = line_format
    for variable, value in sorted(typical.items(), key=lambda item: -len(item[0])):
        line = line.replace(variable, value)
    assert "$context" not in line  # every variable the format uses has its typical value above
    fields = json.loads(line)
    assert {"requestId", "ip", "routeKey", "status", "responseLatency", "integrationError"} <= fields.keys()
    assert len(line.encode()) + 1 <= ASSUMPTIONS.access_log_bytes  # the line and its newline
