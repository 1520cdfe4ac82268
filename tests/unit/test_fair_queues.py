"""The fair-queue stand-in's rule (offpath_local/fair_queues.py): which tenants are noisy, and the order in which
visible messages are handed out."""

from __future__ import annotations

from collections import Counter

from offpath_local.fair_queues import NOISY_MIN_IN_FLIGHT, fair_order, noisy_tenants


def tenant_of(message: str) -> str | None:
    return message.split("-", 1)[0] or None


def test_a_tenant_with_a_large_share_and_at_least_30_in_flight_is_noisy() -> None:
    assert noisy_tenants(Counter({"a": 40, "b": 2})) == {"a": 40}


def test_a_tenant_under_30_in_flight_is_never_noisy_whatever_its_share() -> None:
    assert noisy_tenants(Counter({"a": NOISY_MIN_IN_FLIGHT - 1})) == {}


def test_a_tenant_with_10_percent_or_less_of_the_messages_in_flight_is_not_noisy() -> None:
    in_flight = Counter({f"t{n}": 30 for n in range(10)})  # ten tenants, 10% each

    assert noisy_tenants(in_flight) == {}


def test_quiet_tenants_messages_are_handed_out_before_a_noisy_ones() -> None:
    visible = ["a-1", "a-2", "a-3", "b-1", "c-1", "b-2"]

    order = fair_order(visible, Counter({"a": 40}), tenant_of)

    assert order == ["b-1", "c-1", "b-2", "a-1", "a-2", "a-3"]


def test_among_noisy_tenants_the_one_with_fewest_in_flight_comes_first() -> None:
    visible = ["a-1", "b-1", "a-2", "b-2", "q-1"]

    order = fair_order(visible, Counter({"a": 60, "b": 35}), tenant_of)

    assert order == ["q-1", "b-1", "b-2", "a-1", "a-2"]


def test_without_a_noisy_tenant_the_queue_order_is_kept() -> None:
    visible = ["a-1", "a-2", "b-1"]

    assert fair_order(visible, Counter({"a": 20}), tenant_of) == visible


def test_a_message_without_a_tenant_is_a_quiet_tenant_of_its_own() -> None:
    visible = ["a-1", "-x", "a-2"]

    assert fair_order(visible, Counter({"a": 30}), tenant_of) == ["-x", "a-1", "a-2"]
