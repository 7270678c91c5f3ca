"""Where the literals of the secret formats occur in a text, all found in one pass.

Every secret format holds a literal that any match of it contains (``AKIA``, ``-----BEGIN ``,
``://``, ``authorization``…); a format whose literals a text lacks cannot match it, so its
regex need not run. One regex scan per format cost about 0.04 s per 30 MB each, two dozen of
them most of redaction's time; Hyperscan's multi-literal engine finds every literal of every
format at once, faster than one of those scans.

This is a prefilter only: a format whose literal is present is matched by its own regex as
before, so what is redacted does not depend on it (a test compares with and without). It
answers ``None`` (run every regex) for text that is not ASCII (a caseless literal must match
wherever ``str.lower()`` would make it, which is the same as ASCII case folding only for ASCII
text, and offsets are then byte offsets too) and wherever Hyperscan cannot load.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

try:
    import hyperscan
except ImportError:  # a platform without a wheel: every regex runs
    hyperscan = None  # type: ignore[assignment]


@dataclass(frozen=True)
class LiteralGroup:
    """The literals of one format: ``caseless`` ones match the text lowercased; ``every``
    asks for the start of each occurrence (else only whether one occurs)."""

    literals: tuple[str, ...]
    caseless: bool = False
    every: bool = False


class LiteralFinder:
    """Finds the literals of several groups in one scan (``find``)."""

    def __init__(self, groups: Sequence[LiteralGroup]) -> None:
        assert hyperscan is not None
        expressions: list[bytes] = []
        self._group_of: list[int] = []
        self._length_of: list[int] = []
        flags: list[int] = []
        for g, group in enumerate(groups):
            for literal in group.literals:
                data = literal.encode("ascii")
                expressions.append(b"".join(b"\\x%02x" % byte for byte in data))
                self._group_of.append(g)
                self._length_of.append(len(data))
                flag = hyperscan.HS_FLAG_CASELESS if group.caseless else 0
                flags.append(flag if group.every else flag | hyperscan.HS_FLAG_SINGLEMATCH)
        self._groups = len(groups)
        self._database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self._database.compile(
            expressions=expressions, ids=list(range(len(expressions))), elements=len(expressions), flags=flags
        )
        self._lock = threading.Lock()
        """The database's one scratch space serves one scan at a time."""

    def find(self, text: str) -> list[list[int]] | None:
        """Per group, the start offsets of its literals in ``text`` (ascending, for groups that
        ask for ``every``; else one offset when a literal occurs); ``None`` when ``text`` is not
        ASCII, so no answer is given."""
        if not text.isascii():
            return None
        found: list[list[int]] = [[] for _ in range(self._groups)]
        group_of, length_of = self._group_of, self._length_of

        def on_match(literal: int, _from: int, to: int, _flags: int, _context: Any) -> None:
            found[group_of[literal]].append(to - length_of[literal])

        try:
            with self._lock:
                self._database.scan(text.encode("ascii"), match_event_handler=on_match)
        except hyperscan.error:  # no answer: every regex runs
            return None
        for starts in found:
            starts.sort()
        return found


def literal_finder(groups: Sequence[LiteralGroup]) -> LiteralFinder | None:
    """A finder for ``groups``; ``None`` where Hyperscan is missing or cannot compile on this
    machine (it needs SSSE3 on x86), or its API is not the one this was written for."""
    if hyperscan is None:
        return None
    try:
        return LiteralFinder(groups)
    except Exception:  # noqa: BLE001  (a prefilter only: without it every regex runs)
        return None
