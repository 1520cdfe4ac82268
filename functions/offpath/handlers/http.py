"""A router for API Gateway HTTP API events (payload format 2.0), built from the routes of offpath.contract.

Small on purpose: it matches a method and path to a declared route, checks the route's access, calls the
handler registered for its operation and turns what the handler returns (a response model) into the
integration response. A request no route matches is answered as API Gateway answers it.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

from offpath.contract import Route
from offpath.tenancy import is_admin, tenant_of

S = TypeVar("S")

# A JSON escape of a UTF-16 surrogate: either half of a pair (kept) or a lone half (refused).
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")

# API Gateway's own answer to a request no route matches (HTTP API, no $default route).
NOT_FOUND_BODY = '{"message":"Not Found"}'


def not_found() -> dict[str, Any]:
    return {
        "statusCode": 404,
        "body": NOT_FOUND_BODY,
        "isBase64Encoded": False,
        "headers": {"Content-Type": "application/json"},
        "cookies": [],
    }


class UnauthorizedError(Exception):
    """No authenticated caller in the request."""


class ForbiddenError(Exception):
    """The route needs the admin scope."""


class MalformedBodyError(Exception):
    """The body is not JSON (or not UTF-8)."""


@dataclass(frozen=True)
class Caller:
    tenant: str | None
    admin: bool


@dataclass(frozen=True)
class Request:
    event: dict[str, Any]
    route: Route
    path_parameters: dict[str, str]
    tenant: str | None  # set on every route but the public ones
    admin: bool = False

    @property
    def caller(self) -> str:
        """The authenticated caller (routes that are not public only)."""
        if self.tenant is None:
            raise UnauthorizedError()
        return self.tenant

    @property
    def query(self) -> dict[str, str]:
        params: dict[str, str] = self.event.get("queryStringParameters") or {}
        return params

    def header(self, name: str) -> str | None:
        """Payload 2.0 headers arrive lower-cased."""
        headers: dict[str, str] = self.event.get("headers") or {}
        return headers.get(name.lower())

    @property
    def is_admin(self) -> bool:
        return self.admin

    def text(self) -> str:
        """The body as text; a base64 body is decoded (its bytes must be UTF-8)."""
        body: str | None = self.event.get("body")
        if not body:
            return ""
        if not self.event.get("isBase64Encoded"):
            return body
        try:
            return base64.b64decode(body.encode()).decode()
        except ValueError:  # not base64, or bytes that are not UTF-8
            raise MalformedBodyError() from None

    def json(self, raw: str) -> Any:
        return parse_json(raw)


def parse_json(raw: str) -> Any:
    """Standard JSON only: `NaN`, `Infinity` and a number too large for a float (`1e999`, read as infinity)
    are refused, as are arrays or objects nested thousands deep and a \\u escape of half a surrogate pair
    (text no UTF-8 can hold, so no store could keep it)."""
    try:
        data = json.loads(raw, parse_constant=_non_standard, parse_float=_finite)
        if SURROGATE_ESCAPE.search(raw):
            json.dumps(data, ensure_ascii=False).encode()
        return data
    except (ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        raise MalformedBodyError() from None


def _non_standard(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float | int:
    """A number written with a fraction or exponent. One with no fractional part is an integer, as JSON Schema
    reads it (`5.0` is an `integer`), so it is read as one (up to 2**63, exactly)."""
    number = float(text)
    if not math.isfinite(number):
        raise ValueError("a number too large for a float")
    if number.is_integer() and abs(number) < 2**63:
        return int(Decimal(text))
    return number


class Body(Protocol):
    """What an answer's body is: a response model, or a model's JSON form dumped already
    (offpath.handlers.api_models.Dumped)."""

    def model_dump(self, *, mode: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Response:
    """A response model and its status; serialised through the model (or a dump its tests hold equal to the
    model's own), never built by hand in a handler."""

    status: int
    body: Body
    headers: Mapping[str, str] = field(default_factory=dict)

    def integration_response(self) -> dict[str, Any]:
        if self.status == 204:  # no content: no body, no content type
            return {
                "statusCode": 204,
                "body": "",
                "isBase64Encoded": False,
                "headers": dict(self.headers),
                "cookies": [],
            }
        return {
            "statusCode": self.status,
            "body": dump_json(self.body),
            "isBase64Encoded": False,
            "headers": {**self.headers, "Content-Type": "application/json"},
            "cookies": [],
        }


def dump_json(model: Body) -> str:
    """The model's JSON, compact and ASCII-only (non-ASCII escaped, as every answer has always been)."""
    return json.dumps(model.model_dump(mode="json"), separators=(",", ":"))


Handler = Callable[[Request, S], BaseModel | Response]


@dataclass(frozen=True)
class _Compiled(Generic[S]):
    route: Route
    pattern: re.Pattern[str]
    handler: Handler[S]


def path_pattern(template: str) -> re.Pattern[str]:
    """`/jobs/{job_id}` -> a pattern where each parameter is one path segment, as API Gateway matches."""
    regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template))
    return re.compile(f"^{regex}$")


def match_order(routes: Iterable[Route]) -> list[Route]:
    """Literal segments win over parameters (`/jobs/batch` before `/jobs/{job_id}`), as in API Gateway."""
    return sorted(routes, key=lambda r: r.path.count("{"))


class Router(Generic[S]):
    """Every declared route has exactly one handler; a handler without a route, or a route without a
    handler, is refused when the router is built (at import)."""

    def __init__(
        self,
        routes: Iterable[Route],
        handlers: Mapping[str, Handler[S]],
        on_error: Callable[[Exception], Response],
        identify: Callable[[dict[str, Any], S], Caller] | None = None,
    ) -> None:
        """`identify`: the caller of an event (its tenant, or None, and whether it is an admin), given the
        services (where the stack's tenancy settings are); by default the tenancy module's defaults."""
        routes = list(routes)
        declared = {route.operation for route in routes}
        if declared != set(handlers) or len(declared) != len(routes):
            raise ValueError(
                f"routes and handlers disagree: no handler for {sorted(declared - set(handlers))}, "
                f"no route for {sorted(set(handlers) - declared)}"
            )
        self.routes = routes
        self._compiled = [_Compiled(r, path_pattern(r.path), handlers[r.operation]) for r in match_order(routes)]
        self._on_error = on_error
        self._identify = identify or (lambda event, services: Caller(tenant_of(event), is_admin(event)))

    def match(self, method: str, path: str) -> tuple[_Compiled[S], dict[str, str]] | None:
        for compiled in self._compiled:
            if compiled.route.method != method:
                continue
            found = compiled.pattern.match(path)
            if found:
                return compiled, found.groupdict()
        return None

    def resolve(self, event: dict[str, Any], services: S) -> dict[str, Any]:
        context = event.get("requestContext") or {}
        method = str((context.get("http") or {}).get("method", "")).upper()
        matched = self.match(method, _path(event))
        if matched is None:
            return not_found()
        compiled, parameters = matched
        try:
            caller = self._authorised(compiled.route, lambda: self._identify(event, services))
            request = Request(event, compiled.route, parameters, caller.tenant, caller.admin)
            answer = compiled.handler(request, services)
            response = answer if isinstance(answer, Response) else Response(compiled.route.answers[0].status, answer)
            return response.integration_response()
        except Exception as error:
            return self._on_error(error).integration_response()

    @staticmethod
    def _authorised(route: Route, identify: Callable[[], Caller]) -> Caller:
        if route.access == "public":
            return Caller(None, False)
        caller = identify()
        if caller.tenant is None:
            raise UnauthorizedError()
        if route.access == "admin" and not caller.admin:
            raise ForbiddenError()
        return caller


def _path(event: dict[str, Any]) -> str:
    """The path within the stage (a named stage's prefix is not part of a route)."""
    path = str(event.get("rawPath") or "/")
    stage = (event.get("requestContext") or {}).get("stage")
    if stage and stage != "$default" and path.startswith(f"/{stage}"):
        path = path[len(stage) + 1 :] or "/"
    return path
