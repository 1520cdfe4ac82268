"""The emulator's SQS keeps every message when sends and deletes meet (found by the burst of TESTPLAN 21: moto's
server lost messages sent while another was deleted, and brought deleted ones back)."""

from __future__ import annotations

from tests.e2e.conftest import emulator_scenario


def test_sends_and_deletes_at_once_on_a_long_queue_lose_no_message_and_revive_none() -> None:
    counts = emulator_scenario("tests.e2e.emulator_queues")

    assert counts["received"] == counts["sent"], counts
    assert (counts["lost"], counts["resurrected"]) == (0, 0)


def test_a_quiet_tenants_messages_are_received_before_a_noisy_tenants_backlog() -> None:
    """The emulator's stand-in for SQS fair queues: with 40 of tenant a's messages in flight (over 10% and at
    least 30), tenant b's newer messages come first; with 20 in flight, a is not noisy and the queue keeps its
    order."""
    received = emulator_scenario("tests.e2e.fair_queue_scenario", timeout_s=120)

    assert received["in_flight_40"] == [f"b-{n}" for n in range(5)] + [f"a-{n}" for n in range(40, 45)]
    assert received["in_flight_20"] == [f"a-{n}" for n in range(20, 30)]
