"""Index times are integer microseconds since the epoch (UTC), so masks compare numbers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scopelens.core.clock import utc

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FOREVER = 2**62
"""Stands for "no end" (``valid_to IS NULL``) in time masks."""


def to_micros(dt: datetime) -> int:
    """Exact integer microseconds (no float rounding)."""
    return (utc(dt) - EPOCH) // timedelta(microseconds=1)


def from_micros(value: int) -> datetime:
    return EPOCH + timedelta(microseconds=value)
