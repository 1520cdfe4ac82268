"""Send a welcome e-mail, at most once per job however often the job runs."""

from __future__ import annotations

import logging
from typing import Protocol

from pydantic import BaseModel, Field

from offpath.domain.context import JobContext
from offpath.domain.registry import job

# Whitespace spelled out beyond `\s`: the validator's regex (Rust's: Unicode White_Space, with U+0085) and the
# document's (JSON Schema, ECMAScript's: with U+FEFF) disagree on those two, so both are named and the pattern
# accepts the same addresses in both.
NOT_SPACE_OR_AT = r"[^@\s\u0085\ufeff]"
EMAIL_PATTERN = rf"^{NOT_SPACE_OR_AT}+@{NOT_SPACE_OR_AT}+\.{NOT_SPACE_OR_AT}+$"


class WelcomeEmail(BaseModel):
    user_id: str = Field(min_length=1, max_length=128)
    email: str = Field(pattern=EMAIL_PATTERN, max_length=254)


class EmailTransport(Protocol):
    def send(self, to: str, subject: str, body: str) -> str: ...


class LoggingEmailTransportStub:
    """STAND-IN: logs the e-mail instead of sending it. Replace with an SES (or SMTP) transport."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self.logger = logging.getLogger("offpath.email.stub")

    def send(self, to: str, subject: str, body: str) -> str:
        self.sent.append((to, subject))
        self.logger.info("stub e-mail transport: message not really sent", extra={"subject": subject})
        return f"stub-{len(self.sent)}"


transport: EmailTransport = LoggingEmailTransportStub()


@job("send_welcome_email", payload=WelcomeEmail, queue="default", max_attempts=5, timeout_s=30)
def send_welcome_email(payload: WelcomeEmail, ctx: JobContext) -> dict[str, str | bool]:
    if not ctx.once("welcome-email"):
        ctx.logger.info("welcome e-mail already sent for this job; not sending again")
        return {"user_id": payload.user_id, "sent": False}
    message_id = transport.send(payload.email, "Welcome!", f"Hello {payload.user_id}, welcome aboard.")
    return {"user_id": payload.user_id, "sent": True, "message_id": message_id}
