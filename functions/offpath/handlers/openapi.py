"""The OpenAPI document of the HTTP API, generated from the route declarations (offpath.contract), the models
they name (api_models) and the registered job types.

`POST /jobs` takes a discriminated union on `type`: one variant per registered job type, whose `payload` is that
type's own model, so a generated client gets typed payloads. A batch's items stay loose (`type` a string,
`payload` an object): an unknown type or a payload that does not fit refuses that item alone (in the 207), not the
request. Built only when the document is asked for.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field, RootModel, WithJsonSchema, create_model
from pydantic.json_schema import models_json_schema

from offpath import contract
from offpath.contract import RESPONSE_HEADERS, Refusal, Route
from offpath.domain.registry import JobType, Registry
from offpath.handlers import api_models
from offpath.handlers.api_models import ErrorView, GatewayErrorView, SubmitBody

REF = "#/components/schemas/{model}"

# What API Gateway or the platform may answer on every route with credentials, besides the route's own refusals.
GATEWAY_REFUSALS = (
    Refusal(
        401,
        "no or invalid credentials (a JWT authorizer, or the embedded runtime's bearer tokens)",
        "unauthorized",
        "no authenticated caller in the request",
    ),
    Refusal(
        403,
        "IAM authorisation: no or a refused SigV4 signature; tenant_refused: the authorizer names a tenant outside "
        "the documented charset or length, or a reserved one; forbidden: an admin route and the caller is not an "
        "admin (the admin scope, or a listed IAM principal)",
        "forbidden",
        "this route is for admins (the admin scope, or a listed IAM principal)",
    ),
    Refusal(
        503,
        "a backing service is unavailable (retry after Retry-After seconds), or API Gateway's 30 s timeout",
        "unavailable",
        "a backing service is unavailable; retry later",
    ),
)
THROTTLED = "API Gateway's throttling of the stage (GatewayErrorView)"
# Statuses whose answer may come from API Gateway instead of the function.
GATEWAY_STATUSES = {401, 403, 413, 429, 503}
RETRY_AFTER = {
    "description": "seconds to wait before retrying",
    "required": False,
    "schema": {"type": "string", "pattern": "^[0-9]+$"},
}


def openapi_document(
    server_url: str | None = None,
    *,
    registry: Registry | None = None,
    routes: Iterable[Route] = contract.ROUTES,
) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the HTTP API (the registry's job types by default: every one registered)."""
    if registry is None:
        from offpath.jobs import load_job_types

        registry = load_job_types()
    routes = list(routes)
    job_types = sorted(registry.job_types.values(), key=lambda jt: jt.name)
    documented = _documented_models(job_types)
    models: list[type[BaseModel]] = [ErrorView, GatewayErrorView]
    for route in routes:
        names = [answer.model for answer in route.answers] + ([route.request] if route.request else [])
        models += [documented.get(name) or getattr(api_models, name) for name in names]
    models = list(dict.fromkeys(models))
    _, schemas = models_json_schema([(model, "validation") for model in models], ref_template=REF)
    components: dict[str, Any] = schemas.get("$defs", {})
    _document_chains(components, job_types)
    components["JobTypeName"] = {
        "type": "string",
        "enum": [jt.name for jt in job_types],
        "description": "a registered job type",
    }
    components["QueueName"] = {
        "type": "string",
        "enum": sorted(registry.queues),
        "description": "a queue class",
    }
    paths: dict[str, Any] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, documented, routes)
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "offpath", "version": "1.0.0", "description": "Background jobs on AWS serverless."},
        "paths": paths,
        "components": {"schemas": components, "securitySchemes": SECURITY_SCHEMES},
        "security": [{"jwt": []}, {"iam": []}],
    }
    if server_url:
        document["servers"] = [{"url": server_url}]
    return document


def _ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(model=name)}


def _operation(route: Route, documented: dict[str, type[BaseModel]], routes: list[Route]) -> dict[str, Any]:
    operation: dict[str, Any] = {"operationId": route.operation, "summary": route.summary}
    if route.access == "public":
        operation["security"] = []
    parameters = route.documented_parameters()
    if parameters:
        operation["parameters"] = [
            {
                "name": p.name,
                "in": p.where,
                **({"required": True} if p.required else {}),
                **({"description": p.description} if p.description else {}),
                "schema": p.schema,
            }
            for p in parameters
        ]
    if route.request:
        schema = _ref(documented[route.request].__name__ if route.request in documented else route.request)
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": schema}}}
    responses: dict[str, Any] = {}
    for answer in route.answers:
        if answer.status == 204:  # no content
            responses["204"] = {"description": answer.description}
            continue
        model = documented.get(answer.model) or getattr(api_models, answer.model)
        media: dict[str, Any] = {"schema": _ref(model.__name__)}
        example = api_models.example_of(model)
        if example is not None:
            media["example"] = example
        answered: dict[str, Any] = {"description": answer.description, "content": {"application/json": media}}
        if answer.headers:
            answered["headers"] = {
                name: {"description": RESPONSE_HEADERS[name][0], "required": True, "schema": RESPONSE_HEADERS[name][1]}
                for name in answer.headers
            }
        links = _links(model, routes)
        if links:
            answered["links"] = links
        responses[str(answer.status)] = answered
    refusals = [*route.refusals, *(GATEWAY_REFUSALS if route.access != "public" else ())]
    for refusal in refusals:
        responses[str(refusal.status)] = _refused(refusal)
    # A route's own 429 (a quota) is documented with API Gateway's throttling in its description and schema.
    responses["429"] = responses.get("429") or {
        "description": THROTTLED,
        "content": {
            "application/json": {"schema": _ref("GatewayErrorView"), "example": {"message": "Too Many Requests"}}
        },
    }
    operation["responses"] = dict(sorted(responses.items()))
    return operation


def _links(model: type[BaseModel], routes: list[Route]) -> dict[str, Any]:
    """An answer that always names a job (a required, non-null `job_id`) links to every route of that job:
    each route whose one path parameter is `job_id`."""
    links: dict[str, Any] = {}
    for name, what in (("job_id", "job"), ("batch_id", "batch")):
        field = model.model_fields.get(name)
        if field is None or field.annotation is not str:
            continue
        links.update(
            {
                route.operation: {
                    "operationId": route.operation,
                    "parameters": {name: f"$response.body#/{name}"},
                    "description": f"{route.summary}: the {what} this answer names",
                }
                for route in routes
                if route.path_parameters == (name,)
            }
        )
    return links


def _refused(refusal: Refusal) -> dict[str, Any]:
    """An error the function answers (ErrorView), or for some statuses API Gateway itself (GatewayErrorView)."""
    schema = (
        {"anyOf": [_ref("ErrorView"), _ref("GatewayErrorView")]}
        if refusal.status in GATEWAY_STATUSES
        else _ref("ErrorView")
    )
    example = ErrorView.of(refusal.code, refusal.message, refusal.field).model_dump(mode="json")
    refused: dict[str, Any] = {
        "description": refusal.description,
        "content": {"application/json": {"schema": schema, "example": example}},
    }
    if refusal.status in (429, 503):
        refused["headers"] = {"Retry-After": RETRY_AFTER}
    return refused


def _documented_models(job_types: list[JobType]) -> dict[str, type[BaseModel]]:
    """The request bodies as the document describes them: `SubmitBody` as one variant per job type."""
    if not job_types:
        return {}
    variants = tuple(_variant(job_type) for job_type in job_types)
    union: Any = variants[0] if len(variants) == 1 else Annotated[Union[variants], Field(discriminator="type")]  # noqa: UP007
    submit = create_model("SubmitBody", __base__=RootModel[union], __doc__=SUBMIT_DOC)
    return {"SubmitBody": submit, **_batch_models(job_types, union)}


def _batch_models(job_types: list[JobType], union: Any) -> dict[str, type[BaseModel]]:
    """The batch routes' bodies as precise as POST /jobs's: each job one of the job types' variants, each callback
    a job type's name with that type's payload."""
    from offpath.domain.batch import MAX_PAGE
    from offpath.handlers.api_models_batches import BatchCreateBody, BatchJobsBody, CallbackBody

    callbacks = tuple(_callback_variant(job_type, CallbackBody) for job_type in job_types)
    callback: Any = (
        callbacks[0] if len(callbacks) == 1 else Annotated[Union[callbacks], Field(discriminator="type")]  # noqa: UP007
    )
    create = create_model(
        "BatchCreateBody",
        __base__=BatchCreateBody,
        __doc__=BatchCreateBody.__doc__,
        jobs=(list[union], Field(default_factory=list, max_length=MAX_PAGE)),
        on_complete=(callback | None, None),
        on_success=(callback | None, None),
    )
    add = create_model(
        "BatchJobsBody",
        __base__=BatchJobsBody,
        __doc__=BatchJobsBody.__doc__,
        jobs=(list[union], Field(min_length=1, max_length=MAX_PAGE)),
    )
    return {"BatchCreateBody": create, "BatchJobsBody": add}


def _callback_variant(job_type: JobType, base: type[BaseModel]) -> type[BaseModel]:
    payload_model = job_type.payload_model
    required = any(field.is_required() for field in payload_model.model_fields.values())
    payload: Any = (payload_model, ...) if required else (payload_model, Field(default_factory=dict))
    name = "".join(part.capitalize() for part in job_type.name.replace(".", "_").split("_")) + "Callback"
    return create_model(
        name,
        __base__=base,
        __doc__=f"A {job_type.name} job as a batch's callback.",
        type=(Literal[job_type.name], Field(description="the job type")),  # type: ignore[arg-type]
        payload=payload,
    )


SUBMIT_DOC = "A job to run: `type` names a registered job type, and `payload` follows that type's own schema."


RUN_AT_DOC = (
    "when to run it: an RFC 3339 date-time with a zone, from 1970-01-01T00:00:00Z (a time in the past runs now) "
    "to at most a year ahead"
)
RunAt = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]
EXPIRES_AT_DOC = (
    "by when the job must have started: an RFC 3339 date-time with a zone, in the future, after `run_at` (or the "
    "debounce's run) and at most the retention (7 days) ahead; not started by then, it ends EXPIRED without running"
)


def _variant_name(job_type: JobType) -> str:
    return "".join(part.capitalize() for part in job_type.name.replace(".", "_").split("_")) + "Submission"


CHAIN_STEP = "ChainStep"
THEN_DOC = (
    "the job to submit when this one succeeds (a chain, docs/workflows.md): one of the job types open to callers, "
    "its payload that type's, and its own `then`; at most 10 steps and 16 KiB in all. On failure the chain stops."
)


def _document_chains(components: dict[str, Any], job_types: list[JobType]) -> None:
    """`then` of each POST /jobs variant as precise as the api's checks: a `ChainStep`, one variant per job type a
    caller may submit (`type` its name, `payload` its model, `then` again), as the variants themselves are. (A batch
    item's `then` stays loose, like the item: a bad one refuses that item alone.)"""
    steps: dict[str, str] = {}
    for job_type in job_types:
        submission = components.get(_variant_name(job_type))
        if submission is None:
            continue
        submission["properties"]["then"] = {
            "anyOf": [_ref(CHAIN_STEP), {"type": "null"}],
            "default": None,
            "description": THEN_DOC,
        }
        if job_type.submitted_by == "system":
            continue  # never a chain's step: only its schedules submit it
        name = _variant_name(job_type).removesuffix("Submission") + "Step"
        payload = submission["properties"]["payload"]
        components[name] = {
            "type": "object",
            "title": name,
            "description": f"A chain's step: a {job_type.name} job.",
            "properties": {
                "type": {"type": "string", "const": job_type.name, "description": "the job type"},
                "payload": payload,
                "then": {"anyOf": [_ref(CHAIN_STEP), {"type": "null"}], "default": None},
            },
            "required": ["type", *(["payload"] if "payload" in submission.get("required", []) else [])],
            "additionalProperties": False,
        }
        steps[job_type.name] = REF.format(model=name)
    if steps:
        components[CHAIN_STEP] = {
            "oneOf": [{"$ref": ref} for ref in steps.values()],
            "discriminator": {"propertyName": "type", "mapping": steps},
            "description": "A chain's next step: `{type, payload, then?}`, one variant per job type.",
        }


def _variant(job_type: JobType) -> type[BaseModel]:
    """SubmitBody for one job type, as precise as the api's checks: `type` is its name, `payload` its model
    (optional when every field is), `queue` its queue class, `run_at` and `expires_at` date-times."""
    payload_model = job_type.payload_model
    required = any(field.is_required() for field in payload_model.model_fields.values())
    payload: Any = (payload_model, ...) if required else (payload_model, Field(default_factory=dict))
    name = _variant_name(job_type)
    queue: Any = Literal[job_type.queue]
    return create_model(
        name,
        __base__=SubmitBody,
        __doc__=f"Submit a {job_type.name} job (queue {job_type.queue}).",
        type=(Literal[job_type.name], Field(description="the job type")),  # type: ignore[arg-type]
        payload=payload,
        queue=(queue | None, Field(default=None, description="the job type's queue class")),
        run_at=(RunAt | None, Field(default=None, description=RUN_AT_DOC)),
        expires_at=(RunAt | None, Field(default=None, description=EXPIRES_AT_DOC)),
    )


SECURITY_SCHEMES = {
    "jwt": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "With a JWT authorizer: the tenant is the token's tenant claim (the stack's "
        "tenant_claims); admin routes need the offpath/admin scope. The embedded runtime checks its own bearer "
        "tokens.",
    },
    "iam": {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "The default on AWS: a SigV4 signature (service execute-api); the tenant is the "
        "caller's IAM principal; admins are the principals the stack lists (admin_principals), and admin "
        "routes are also granted by IAM policy.",
        "x-amazon-apigateway-authtype": "awsSigv4",
    },
}
