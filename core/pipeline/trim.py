"""Budget trimming: fit the packed items into the token budget, keeping anchor lines.

* **Token estimate.** Each CJK character (Han, Kana, Hangul: the tokenizer's table,
  ``CJK_RANGES``, the only one) counts as one token; other text as one token per four
  characters (rounded up), per line. Every item also costs ``ITEM_OVERHEAD`` tokens for its
  header and fences.
* **Trimming.** An item that does not fit whole keeps, in order of priority, its first line
  (heading or signature), the lines that hit an anchor or a strong query term (with one line
  of context), then lines from the top, until it fits. Each removed run is recorded as a
  :class:`TrimRange` in source lines and in code points of the untrimmed text, and shown in
  the visible text as one marker line. Trimming works on whole lines, so it never splits a
  code point.
* **summary-only** items become a deterministic extract: the first line plus the anchor
  lines, labelled ``extract``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from scopelens.core.contracts import Candidate, RejectedItem, TrimRange
from scopelens.core.index.tokenizer import CJK_CHAR
from scopelens.core.pipeline.boundary import rejection
from scopelens.core.vocab import Stage, Visibility

ITEM_OVERHEAD = 24
MIN_USEFUL_TOKENS = 16


def estimate_tokens(text: str) -> int:
    """One token per CJK character (the tokenizer's table), one per four other characters."""
    cjk = len(CJK_CHAR.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


@dataclass(frozen=True)
class Fitted:
    candidate: Candidate
    visible_text: str
    trim_ranges: tuple[TrimRange, ...]
    extract: bool
    tokens: int
    """Estimated tokens this item costs in the block, overhead included."""


@dataclass
class TrimResult:
    fitted: list[Fitted] = field(default_factory=list)
    rejected: list[RejectedItem] = field(default_factory=list)
    estimated_tokens: int = 0


def marker(first: int, last: int) -> str:
    return f"[… lines {first}-{last} trimmed …]" if first != last else f"[… line {first} trimmed …]"


SHORT_NEEDLE = 4
"""Needles shorter than this (``ts``, ``go``, ``v2``) must match a whole word, not a substring."""


def _needle_matchers(needles: list[str]) -> list[re.Pattern[str]]:
    patterns = []
    for needle in dict.fromkeys(n.lower() for n in needles if n.strip()):
        escaped = re.escape(needle)
        patterns.append(re.compile(rf"(?<!\w){escaped}(?!\w)" if len(needle) < SHORT_NEEDLE else escaped))
    return patterns


def _important_lines(lines: list[str], needles: list[str]) -> set[int]:
    keep = {0} if lines else set()
    matchers = _needle_matchers(needles)
    for index, line in enumerate(lines):
        lowered = line.lower()
        if any(m.search(lowered) for m in matchers):
            keep.update({index - 1, index, index + 1})
    return {i for i in keep if 0 <= i < len(lines)}


def _render(candidate: Candidate, lines: list[str], kept: set[int]) -> tuple[str, tuple[TrimRange, ...]]:
    """Visible text for the kept lines, with one marker per removed run, and the trim ranges."""
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    base = candidate.line_start or 1
    out: list[str] = []
    ranges: list[TrimRange] = []
    index = 0
    while index < len(lines):
        if index in kept:
            out.append(lines[index])
            index += 1
            continue
        run_start = index
        while index < len(lines) and index not in kept:
            index += 1
        first, last = base + run_start, base + index - 1
        end_char = min(starts[index], len("\n".join(lines)))
        ranges.append(TrimRange(start_line=first, end_line=last, start_char=starts[run_start], end_char=end_char))
        out.append(marker(first, last))
    return "\n".join(out), tuple(ranges)


def fit_to_budget(
    selected: list[Candidate],
    max_tokens: int,
    needles: list[str],
    *,
    overflow: Sequence[tuple[Candidate, RejectedItem]] = (),
    max_items: int | None = None,
) -> TrimResult:
    """Fit the packed items to the token budget, in rank order; then, while item seats are free
    (an item was dropped for tokens), the ``overflow`` candidates in rank order. An overflow
    candidate never reached keeps its ``max_items`` rejection; one reached and too big says
    the token budget stopped it."""
    result = TrimResult()
    remaining = max_tokens
    needles = [n.lower() for n in needles if n]
    queue: list[tuple[Candidate, RejectedItem | None]] = [(c, None) for c in selected] + list(overflow)
    for candidate, seatless in queue:
        if seatless is not None and max_items is not None and len(result.fitted) >= max_items:
            result.rejected.append(seatless)
            continue
        fitted, rejected = _fit_one(candidate, remaining, max_tokens, needles)
        if rejected is not None:
            result.rejected.append(rejected)
            continue
        assert fitted is not None
        remaining -= fitted.tokens
        result.estimated_tokens += fitted.tokens
        result.fitted.append(fitted)
    return result


def _fit_one(
    candidate: Candidate, remaining: int, max_tokens: int, needles: list[str]
) -> tuple[Fitted | None, RejectedItem | None]:
    """The candidate as it fits into ``remaining`` tokens (whole, trimmed or as an extract), or
    why it does not."""
    lines = candidate.text.split("\n")
    extract = candidate.visibility == Visibility.SUMMARY_ONLY
    kept = _important_lines(lines, needles) if extract else set(range(len(lines)))
    text, ranges = _render(candidate, lines, kept)
    cost = estimate_tokens(text) + ITEM_OVERHEAD
    if cost > remaining and not extract:
        if remaining - ITEM_OVERHEAD < MIN_USEFUL_TOKENS:
            return None, rejection(candidate, Stage.OVER_BUDGET, f"token budget ({max_tokens}) exhausted")
        kept = _important_lines(lines, needles)
        text, ranges = _render(candidate, lines, kept)
        for index in range(len(lines)):
            if index in kept:
                continue
            trial_text, trial_ranges = _render(candidate, lines, kept | {index})
            if estimate_tokens(trial_text) + ITEM_OVERHEAD > remaining:
                break
            kept.add(index)
            text, ranges = trial_text, trial_ranges
        cost = estimate_tokens(text) + ITEM_OVERHEAD
        if cost > remaining:
            return None, rejection(candidate, Stage.TRIMMED_AWAY, "even its anchor lines do not fit the remaining budget")
    elif cost > remaining:
        return None, rejection(candidate, Stage.OVER_BUDGET, f"token budget ({max_tokens}) exhausted")
    return Fitted(candidate, text, ranges, extract, cost), None
