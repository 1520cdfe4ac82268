"""Realtime job events for browsers: the event's JSON, its channel, and the AWS AppSync Events publisher.

A job's events go to the channel `/jobs/<tenant>/<job_id>` (`channel_of`). A channel segment holds letters,
digits and dashes only, so the tenant is written with every other character as `-` and its two hex digits
(`acme.eu` -> `acme-2eeu`); the realtime API's onSubscribe handler (infra/notices.py) writes the tenant of
the subscriber's token the same way and refuses any other tenant's channel.

`AppSyncEventsSink` is the `EventSink` the notifier publishes through on AWS: one signed HTTP request
(SigV4, service `appsync`) per channel and up to 5 events, as AppSync Events' HTTP publish takes them.
The embedded runtime has its own sink (offpath_local.realtime.RealtimeHub), which serves the same JSON
as server-sent events.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from offpath.domain.clock import iso
from offpath.domain.errors import OffpathError
from offpath.domain.events import JobEvent
from offpath.handlers.job_json import job_document
from offpath.naming import REALTIME_NAMESPACE

logger = logging.getLogger(__name__)

# AppSync Events takes at most 5 events in one publish request.
EVENTS_PER_PUBLISH = 5
PUBLISH_TIMEOUT_S = 5.0


class RealtimeUnavailableError(OffpathError):
    """The realtime API refused or did not answer a publish."""


def tenant_segment(tenant: str) -> str:
    """The tenant as a channel segment: letters and digits as they are, anything else `-` + 2 hex digits."""
    return "".join(c if c.isascii() and c.isalnum() else f"-{ord(c):02x}" for c in tenant)


def channel_of(tenant: str, job_id: str) -> str:
    return f"/{REALTIME_NAMESPACE}/{tenant_segment(tenant)}/{job_id}"


def event_document(event: JobEvent) -> dict[str, Any]:
    """What a subscriber receives for one event: its id, type, time and tenant, and the job (no payload)."""
    return {
        "id": event.id,
        "type": str(event.type),
        "time": iso(event.time),
        "tenant": event.tenant,
        "job": job_document(event.job),
    }


Send = Callable[[str, bytes, dict[str, str]], int]


class AppSyncEventsSink:
    """Publishes each event to its job's channel on an AppSync Events API (`url`: its HTTP endpoint's
    `/event`), signed with the function's credentials. `send` (tests) takes the URL, body and signed headers
    and returns the HTTP status."""

    def __init__(
        self, url: str, region: str | None = None, *, credentials: Any = None, send: Send | None = None
    ) -> None:
        """`region`: the API's (by default the function's own, as boto3 finds it)."""
        self.url = url
        self.region = region
        self._credentials = credentials
        self._send = send or _post

    def publish(self, events: Sequence[JobEvent]) -> None:
        by_channel: dict[str, list[str]] = {}
        for event in events:
            if event.batch is not None:
                continue  # a batch event: the job channels carry the jobs' own events only
            document = json.dumps(event_document(event), separators=(",", ":"))
            by_channel.setdefault(channel_of(event.tenant, event.job.job_id), []).append(document)
        for channel, documents in by_channel.items():
            for start in range(0, len(documents), EVENTS_PER_PUBLISH):
                body = json.dumps({"channel": channel, "events": documents[start : start + EVENTS_PER_PUBLISH]})
                status = self._send(self.url, body.encode(), self._signed(body.encode()))
                if not 200 <= status < 300:
                    raise RealtimeUnavailableError(f"the realtime API answered {status} to a publish on {channel}")

    def _signed(self, body: bytes) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        if self._credentials is None or self.region is None:
            import boto3

            session = boto3.Session()
            self._credentials = self._credentials or session.get_credentials()
            self.region = self.region or session.region_name or "us-east-1"
        request = AWSRequest(method="POST", url=self.url, data=body, headers={"content-type": "application/json"})
        SigV4Auth(self._credentials.get_frozen_credentials(), "appsync", self.region).add_auth(request)
        return dict(request.headers.items())


def _post(url: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)  # noqa: S310 - the stack's URL
    try:
        with urllib.request.urlopen(request, timeout=PUBLISH_TIMEOUT_S) as response:  # noqa: S310
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        raise RealtimeUnavailableError(f"the realtime API could not be reached: {error}") from None
