"""A small HTTP client of the offpath API: the local server (bearer token) or a deployed API (a bearer
token, or SigV4 signing with the standard AWS credential chain for the default IAM authorisation)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

TIMEOUT_S = 35.0
EXECUTE_API_HOST = re.compile(r"\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")


class CannotConnectError(Exception):
    """The API could not be reached at all."""


class MissingCredentialsError(Exception):
    """Nothing to sign a request with."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    headers: dict[str, str]

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def error_text(self) -> str:
        if isinstance(self.body, dict):
            error = self.body.get("error")
            if isinstance(error, dict):
                return f"{error.get('code', 'error')}: {error.get('message', '')}".strip()
            if "message" in self.body:
                return str(self.body["message"])
        return str(self.body)[:300] if self.body else "no details"


class ApiClient:
    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        sign: bool = False,
        region: str | None = None,
        profile: str | None = None,
    ):
        """`profile`: the AWS profile whose credentials sign (default: the standard credential chain)."""
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.sign = sign
        self.region = region
        self.profile = profile
        self._credentials: Any = None

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        target = path
        if query:
            target += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = json.dumps(body).encode() if body is not None else None
        all_headers = {"Accept": "application/json"}
        if data is not None:
            all_headers["Content-Type"] = "application/json"
        all_headers.update(headers or {})
        status, raw, answered = self.send(method, target, data, all_headers)
        return _answer(status, raw, answered)

    def send(
        self, method: str, target: str, data: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes, dict[str, str]]:
        """One request as it is (`target`: the path and query under the base URL), authorised: status,
        body, headers. CannotConnectError when the API cannot be reached."""
        url = self.base_url + target
        all_headers = {"User-Agent": "offpath-cli", **headers}
        if self.token:
            all_headers["Authorization"] = f"Bearer {self.token}"
        elif self.sign:
            all_headers.update(self._sigv4(method, url, data, all_headers))
        request = urllib.request.Request(url, data=data, method=method, headers=all_headers)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310 - the user's API URL
                return response.status, response.read(), dict(response.headers)
        except urllib.error.HTTPError as error:
            return error.code, error.read(), dict(error.headers or {})
        except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
            reason = getattr(error, "reason", error)
            raise CannotConnectError(f"cannot connect to {self.base_url}: {reason}") from None

    def _sigv4(self, method: str, url: str, data: bytes | None, headers: dict[str, str]) -> dict[str, str]:
        import botocore.session
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        if self._credentials is None:
            from botocore.exceptions import ProfileNotFound

            session = botocore.session.Session(profile=self.profile)
            try:
                credentials = session.get_credentials()
            except ProfileNotFound:
                raise MissingCredentialsError(f"no AWS profile named {self.profile!r}") from None
            if credentials is None:
                raise MissingCredentialsError(
                    "no AWS credentials found (environment, profile or instance role) to sign requests with; "
                    "give --token for a JWT-authorised API"
                )
            self._credentials = credentials
            if self.region is None:
                host = urllib.parse.urlsplit(url).hostname or ""
                match = EXECUTE_API_HOST.search(host)
                self.region = match.group(1) if match else session.get_config_variable("region") or "us-east-1"
        request = AWSRequest(method=method, url=url, data=data or b"", headers=dict(headers))
        SigV4Auth(self._credentials.get_frozen_credentials(), "execute-api", self.region).add_auth(request)
        return {k: v for k, v in request.headers.items() if k.lower() not in {h.lower() for h in headers}}


def _answer(status: int, raw: bytes, headers: dict[str, str]) -> Answer:
    text = raw.decode("utf-8", errors="replace")
    try:
        body: Any = json.loads(text) if text else None
    except ValueError:
        body = text
    return Answer(status, body, {k.lower(): v for k, v in headers.items()})
