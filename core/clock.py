"""Injected clocks and id sources, so recording can be made deterministic.

Production code takes ``now`` and new ids from these objects, never from ``datetime.now`` or
``uuid4`` directly: the same script then gives the same hashes under a fixed clock and
sequential ids.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol


def utc(dt: datetime) -> datetime:
    """Return ``dt`` as an aware UTC datetime (naive values are taken to be UTC)."""
    if dt.tzinfo is None:
        return dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def stored_time(dt: datetime) -> str:
    """Fixed-width ISO-8601 UTC text with microseconds, so stored times sort as text."""
    return utc(dt).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_stored_time(value: str) -> datetime:
    """The inverse of :func:`stored_time` (any ISO-8601 text; ``Z`` or an offset), as aware UTC."""
    return utc(datetime.fromisoformat(value.replace("Z", "+00:00")))


def when(moment: datetime) -> str:
    """A moment as people read it, the one display format of a time: ISO-8601 UTC to the
    second with the ``Z`` marker (``2026-03-01T12:00:00Z``). Reasons, findings, CLI output and
    the inspector all show times this way; a table's column header says ``(UTC)`` as well.
    JSON keeps stored precision (:func:`stored_time`, or pydantic's ISO text, also with ``Z``)."""
    return utc(moment).isoformat(timespec="seconds").replace("+00:00", "Z")


def when_stored(value: str) -> str:
    """A stored time (ISO-8601 text) as :func:`when` shows it; text that is not a time (a damaged
    row) is shown as it is, so a listing still opens."""
    try:
        return when(parse_stored_time(value))
    except ValueError:
        return value


class Clock(Protocol):
    def now(self) -> datetime: ...


class IdSource(Protocol):
    def new_id(self, prefix: str) -> str: ...


class SystemClock:
    """The wall clock, in UTC, truncated to microseconds."""

    def now(self) -> datetime:
        return datetime.now(UTC)


@dataclass
class SteppingClock:
    """A deterministic clock: starts at ``start`` and advances by ``step`` on each read."""

    start: datetime
    step: timedelta = timedelta(seconds=1)
    _current: datetime | None = field(default=None, init=False, repr=False)

    def now(self) -> datetime:
        self._current = self.start if self._current is None else self._current + self.step
        return self._current

    def advance(self, delta: timedelta) -> None:
        """Move the clock forward (scripts use this to stage drift)."""
        base = self.start if self._current is None else self._current
        self._current = base + delta - self.step


class RandomIds:
    """Random, collision-free ids: ``<prefix>-<12 hex>``."""

    def new_id(self, prefix: str) -> str:
        return f"{prefix}-{uuid.uuid4().hex[:12]}"


@dataclass
class SequentialIds:
    """Deterministic ids: ``<prefix>-<namespace>-0001``, counting per prefix."""

    namespace: str = "t"
    _counters: dict[str, itertools.count[int]] = field(default_factory=dict, repr=False)

    def new_id(self, prefix: str) -> str:
        counter = self._counters.setdefault(prefix, itertools.count(1))
        return f"{prefix}-{self.namespace}-{next(counter):04d}"
