"""One declaration per route (offpath.contract): the router, the OpenAPI document and the local gateway's table
are each derived from it, and agree with it exactly; a route added to it appears in all of them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openapi_spec_validator import validate
from pydantic import BaseModel

from offpath import contract
from offpath.contract import Answer, Route
from offpath.domain.backoff import Backoff
from offpath.domain.registry import JobType, Registry
from offpath.handlers import api, api_models
from offpath.handlers.http import Request, Router, dump_json
from offpath.handlers.openapi import openapi_document
from offpath.jobs import load_job_types
from offpath.settings import Settings
from offpath_local.gateway import route_table
from offpath_tools.http_events import body_of, http_event

PROBE = Route("GET", "/probes/{name}", "getProbe", "tenant", "A probe", answers=(Answer(200, "HealthView", "alive"),))


def concrete(route: Route) -> str:
    return route.path.replace("{job_id}", "0" * 32).replace("{name}", "default").replace("{", "").replace("}", "")


def operations(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method.upper(), path): operation
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    }


# -- each derived artefact is the declaration ---------------------------------------------------


@pytest.mark.parametrize("route", contract.ROUTES, ids=lambda r: r.key)
def test_the_router_answers_each_declared_route_with_that_route(route: Route) -> None:
    matched = api.router.match(route.method, concrete(route))

    assert matched is not None
    assert matched[0].route == route


def test_the_router_has_a_handler_for_every_declared_route_and_no_other() -> None:
    assert set(api.HANDLERS) == {route.operation for route in contract.ROUTES}
    assert [r.key for r in api.router.routes] == [r.key for r in contract.ROUTES]


def test_a_route_without_a_handler_is_refused_when_the_router_is_built() -> None:
    handlers = {k: v for k, v in api.HANDLERS.items() if k != "getJob"}

    with pytest.raises(ValueError, match="no handler for \\['getJob'\\]"):
        Router(contract.ROUTES, handlers, api.refusal)


def test_a_handler_without_a_route_is_refused_when_the_router_is_built() -> None:
    routes = [r for r in contract.ROUTES if r.operation != "listQueues"]

    with pytest.raises(ValueError, match="no route for \\['listQueues'\\]"):
        Router(routes, api.HANDLERS, api.refusal)


def test_the_document_has_exactly_the_declared_operations() -> None:
    documented = operations(openapi_document())

    assert set(documented) == {(r.method, r.path) for r in contract.ROUTES}
    for route in contract.ROUTES:
        operation = documented[(route.method, route.path)]
        assert operation["operationId"] == route.operation
        assert (operation.get("security") == []) == (route.access == "public"), route.key
        statuses = {a.status for a in route.answers} | {r.status for r in route.refusals}
        assert {str(s) for s in statuses} <= set(operation["responses"]), route.key


def test_the_local_gateway_routes_exactly_the_declared_routes_with_their_access() -> None:
    table = {(r.method, r.template): (r.admin, r.public) for r in route_table()}

    assert table == {(r.method, r.path): (r.access == "admin", r.access == "public") for r in contract.ROUTES}


# -- a route added in one place -----------------------------------------------------------------


def test_a_route_added_to_the_declaration_is_routed_documented_and_on_the_gateway() -> None:
    routes = (*contract.ROUTES, PROBE)

    def probe(request: Request, services: Any) -> BaseModel:
        return api_models.HealthView(status="ok")

    router = Router(routes, {**api.HANDLERS, PROBE.operation: probe}, api.refusal)
    answer = router.resolve(http_event("GET", "/probes/one"), services=None)
    document = openapi_document(routes=routes)
    gateway = {(r.method, r.template) for r in route_table(routes)}

    assert (answer["statusCode"], body_of(answer)) == (200, {"status": "ok"})
    assert document["paths"]["/probes/{name}"]["get"]["operationId"] == "getProbe"
    validate(document)
    assert ("GET", "/probes/{name}") in gateway


def test_a_route_taken_out_of_the_declaration_is_not_found_anywhere() -> None:
    routes = [r for r in contract.ROUTES if r.operation != "listQueues"]
    handlers = {k: v for k, v in api.HANDLERS.items() if k != "listQueues"}

    answer = Router(routes, handlers, api.refusal).resolve(http_event("GET", "/queues"), services=None)

    assert (answer["statusCode"], body_of(answer)) == (404, {"message": "Not Found"})
    assert "/queues" not in openapi_document(routes=routes)["paths"]
    assert ("GET", "/queues") not in {(r.method, r.template) for r in route_table(routes)}


def test_an_undeclared_method_on_a_declared_path_is_answered_as_api_gateway_answers_it() -> None:
    answer = api.router.resolve(http_event("PATCH", "/jobs"), services=None)

    assert answer["statusCode"] == 404
    assert body_of(answer) == {"message": "Not Found"}


# -- job types in the document ------------------------------------------------------------------


class ReportPayload(BaseModel):
    month: str


def with_report_type() -> Registry:
    base = load_job_types()
    registry = Registry(queues=dict(base.queues), job_types=dict(base.job_types), schedules=dict(base.schedules))
    registry.add_job_type(
        JobType("reports.build", lambda p, c: None, ReportPayload, "default", 4, 30, Backoff(base_s=1, cap_s=10))
    )
    return registry


def test_the_document_describes_each_job_type_with_its_payload_schema() -> None:
    registry = load_job_types()
    document = openapi_document(registry=registry)
    schemas = document["components"]["schemas"]
    submit = schemas["SubmitBody"]

    assert submit["discriminator"]["propertyName"] == "type"
    assert set(submit["discriminator"]["mapping"]) == set(registry.job_types)
    assert schemas["JobTypeName"]["enum"] == sorted(registry.job_types)
    for name, ref in submit["discriminator"]["mapping"].items():
        variant = schemas[ref.rsplit("/", 1)[1]]
        assert variant["properties"]["type"]["const"] == name
        payload = variant["properties"]["payload"]["$ref"].rsplit("/", 1)[1]
        assert schemas[payload]["title"] == registry.job_types[name].payload_model.__name__
    validate(document)


def test_a_job_type_added_to_the_registry_is_in_the_document() -> None:
    document = openapi_document(registry=with_report_type())
    schemas = document["components"]["schemas"]

    variant = schemas[schemas["SubmitBody"]["discriminator"]["mapping"]["reports.build"].rsplit("/", 1)[1]]
    assert variant["required"] == ["type", "payload"]  # its payload has a required field
    assert schemas["ReportPayload"]["required"] == ["month"]
    assert "reports.build" in schemas["JobTypeName"]["enum"]


def test_a_job_type_added_to_the_registry_is_listed_by_get_job_types() -> None:
    registry = with_report_type()
    services = api.ApiServices(
        ports=type("Ports", (), {"registry": registry})(),  # type: ignore[arg-type]
        policy=None,  # type: ignore[arg-type]
        monitor=None,  # type: ignore[arg-type]
        redriver=None,  # type: ignore[arg-type]
        settings=Settings(table_name="jobs"),
    )

    answer = api.router.resolve(http_event("GET", "/job-types"), services)

    listed = {t["name"]: t for t in body_of(answer)["job_types"]}
    assert answer["statusCode"] == 200
    assert listed["reports.build"] == {
        "name": "reports.build",
        "queue": "default",
        "max_attempts": 4,
        "timeout_s": 30,
        "submitted_by": "tenant",
        "payload_schema": ReportPayload.model_json_schema(),
        "limits": None,
        "paused": False,
        "paused_at": None,
        "pause_reason": None,
    }


# -- answers are their models -------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted({a.model for r in contract.ROUTES for a in r.answers} | {"ErrorView"}))
def test_each_answer_models_example_is_what_the_model_serialises(name: str) -> None:
    model = getattr(api_models, name)
    example = api_models.example_of(model)

    assert example is not None
    assert json.loads(dump_json(model.model_validate(example))) == example


def test_an_error_without_a_field_leaves_the_field_out() -> None:
    assert dump_json(api_models.ErrorView.of("not_found", "no such job")) == (
        '{"error":{"code":"not_found","message":"no such job"}}'
    )


def test_the_read_function_answers_the_job_reads_and_nothing_else() -> None:
    """Waits hold an environment each: the route that carries them runs on a function of its own (the stack's
    and the local gateway's routes both follow this field)."""
    from offpath.contract import READ_FUNCTION, ROUTES

    assert {route.key for route in ROUTES if route.function == READ_FUNCTION} == {"GET /jobs/{job_id}"}
    assert {route.function for route in ROUTES} == {"api", "read"}
