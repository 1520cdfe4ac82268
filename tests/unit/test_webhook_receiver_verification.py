"""The test receiver verifies a delivery as its receiver would have when it arrived: a run longer than Standard
Webhooks' 5-minute tolerance (the fault ledger's 1,000 jobs take about as long on a slow machine) still finds its
first deliveries signed, while a wrong secret, a changed body or a timestamp far from the arrival never verify."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from standardwebhooks import Webhook

from offpath_tools.webhook_receiver import SIGNATURE_TOLERANCE_S, Received

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OTHER_SECRET = "whsec_" + "AfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
BODY = '{"type":"job.succeeded","data":{"job_id":"j1"}}'


def delivery(sent: datetime, *, arrived: float, body: str = BODY, secret: str = SECRET) -> Received:
    headers = {
        "Webhook-Id": "msg_1",
        "Webhook-Timestamp": str(int(sent.timestamp())),
        "Webhook-Signature": Webhook(secret).sign("msg_1", sent, BODY),
    }
    return Received("/hook", headers, body, time.monotonic(), received_at=arrived)


def test_a_delivery_checked_long_after_it_arrived_still_verifies() -> None:
    sent = datetime.now(tz=UTC) - timedelta(minutes=10)

    assert delivery(sent, arrived=sent.timestamp() + 1).verified_by(SECRET)


def test_a_wrong_secret_a_changed_body_or_a_stale_timestamp_never_verify() -> None:
    sent = datetime.now(tz=UTC)

    assert not delivery(sent, arrived=sent.timestamp()).verified_by(OTHER_SECRET)
    assert not delivery(sent, arrived=sent.timestamp(), body=BODY.replace("j1", "j2")).verified_by(SECRET)
    assert not delivery(sent, arrived=sent.timestamp() + SIGNATURE_TOLERANCE_S + 2).verified_by(SECRET)
    assert not delivery(sent, arrived=sent.timestamp() - SIGNATURE_TOLERANCE_S - 2).verified_by(SECRET)
    assert not delivery(sent, arrived=sent.timestamp(), secret=OTHER_SECRET).verified_by(SECRET)
