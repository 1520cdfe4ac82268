"""A stand-in for SQS fair queues: the order in which a standard queue hands out its visible messages.

What AWS does (SQS fair queues, standard queues, 2025): a message's tenant is its `MessageGroupId` (a message
without one is a tenant of its own). SQS flags a tenant as a noisy neighbour when it holds more than about 10%
of the queue's messages in flight and at least about 30 of them, or more than about 10% of the consumers' recent
processing time. While a tenant is noisy, a receive returns quiet tenants' messages whenever any are waiting;
among noisy tenants, the one with the fewest messages in flight comes first. Nothing is dropped or throttled:
with no quiet message waiting, a noisy tenant's messages are delivered as usual. The flag clears when the
tenant's backlog is drained or it has sent nothing for 5 minutes.

What the stand-in does: at every receive it counts each tenant's messages in flight in moto's queue and flags
as noisy every tenant over both thresholds of the in-flight measure (`NOISY_SHARE`, `NOISY_MIN_IN_FLIGHT`);
the queue's visible messages are then handed out quiet tenants' first (in the queue's order), then the noisy
tenants' (fewest in flight first). Where it differs: the thresholds are exact, not approximate; the
processing-time measure is not modelled (a tenant with few but slow messages is never noisy here); the flag is
not kept between receives (it is recomputed from the messages in flight each time, so it clears as soon as
the tenant's share drops, not when its backlog drains); FIFO queues keep moto's own order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TypeVar

# The in-flight measure of a noisy tenant, as the SQS documentation gives it (both must hold).
NOISY_SHARE = 0.10
NOISY_MIN_IN_FLIGHT = 30

M = TypeVar("M")


def noisy_tenants(in_flight: Counter[str]) -> dict[str, int]:
    """The tenants a fair queue treats as noisy, with their messages in flight."""
    total = sum(in_flight.values())
    if total == 0:
        return {}
    return {
        tenant: count
        for tenant, count in in_flight.items()
        if count >= NOISY_MIN_IN_FLIGHT and count / total > NOISY_SHARE
    }


def fair_order(visible: Sequence[M], in_flight: Counter[str], tenant_of: Callable[[M], str | None]) -> list[M]:
    """`visible` in the order a fair queue hands them out: quiet tenants' messages first, in their order, then
    each noisy tenant's, the tenant with the fewest messages in flight first."""
    noisy = noisy_tenants(in_flight)
    if not noisy:
        return list(visible)
    quiet: list[M] = []
    held: dict[str, list[M]] = {}
    for message in visible:
        tenant = tenant_of(message)
        if tenant and tenant in noisy:
            held.setdefault(tenant, []).append(message)
        else:
            quiet.append(message)
    for tenant in sorted(held, key=lambda name: noisy[name]):
        quiet.extend(held[tenant])
    return quiet
