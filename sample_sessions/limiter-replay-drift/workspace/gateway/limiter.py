"""Per-client rate limiting with a token bucket (see docs/decisions/0001-token-bucket.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

BURST_CAPACITY = 10
"""Requests a client may send at once (docs/decisions/0003-burst-capacity.md)."""
REFILL_PER_SECOND = 5.0


@dataclass
class TokenBucket:
    capacity: int = BURST_CAPACITY
    refill_per_second: float = REFILL_PER_SECOND
    tokens: float = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = float(self.capacity)

    def refill(self, elapsed_seconds: float) -> None:
        self.tokens = min(self.capacity, self.tokens + elapsed_seconds * self.refill_per_second)

    def allow(self) -> bool:
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False
