"""Exponential backoff with full jitter, capped (the AWS Architecture Blog's "Full Jitter")."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    base_s: float = 2.0
    cap_s: float = 900.0

    def ceiling(self, attempt: int) -> float:
        """The largest delay after failed attempt number `attempt` (1-based)."""
        return float(min(self.cap_s, self.base_s * 2 ** max(attempt - 1, 0)))

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        return (rng or random).uniform(0.0, self.ceiling(attempt))
