"""Evidence packing: drop duplicates and weak candidates, apply item caps, in rank order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scopelens.core.contracts import Candidate, RejectedItem, RetrievalBudget
from scopelens.core.hashing import text_hash
from scopelens.core.pipeline.boundary import rejection
from scopelens.core.vocab import WORKSPACE_SOURCES, EvidenceKind, Stage

MIN_FINAL_SCORE = 0.12
"""Below this final score a candidate is noise whatever the budget."""
RELATIVE_CUTOFF = 0.25
"""A candidate scoring under this share of the best final score is cut."""
MAX_ITEMS_PER_FILE = 4
"""At most this many items from one file (half the default ``max_items``): eight chunks of one
test file tell the model less than the test and the code it tests."""
REQUIRED_EVIDENCE_SEATS = "reserve-item-seats"
"""How required evidence kinds are treated (pinned in the engine config, so drift can tell
a snapshot taken before this rule from one taken after)."""


@dataclass
class Packed:
    selected: list[Candidate] = field(default_factory=list)
    rejected: list[RejectedItem] = field(default_factory=list)
    overflow: list[tuple[Candidate, RejectedItem]] = field(default_factory=list)
    """Eligible candidates past ``max_items``, in rank order, each with the rejection it gets if
    no seat frees up: trimming may drop a selected item for tokens, and then the next of these
    takes its seat if it fits (so no item is said to be stopped by a limit that was not reached)."""


def pack(ranked: list[Candidate], budget: RetrievalBudget, required: Sequence[EvidenceKind] = ()) -> Packed:
    """Select in rank order under the item caps.

    A kind of evidence the intent requires keeps a seat for its best eligible candidate:
    without it a low-ranked failing-test log would lose its place to the tenth similar
    source file, and the block would report the evidence as missing although it was found.
    """
    result = Packed()
    if not ranked:
        return result
    best = ranked[0].scores.final
    cutoff = max(MIN_FINAL_SCORE, RELATIVE_CUTOFF * best)
    # A conflicted memory is only meaningful with its counterpart: the pair passes the
    # cutoff together, on the better of their two scores.
    final_of = {c.id: c.scores.final for c in ranked}
    pair_score = {
        c.id: max([c.scores.final, *(final_of.get(other, 0.0) for other in c.conflicts_with)])
        for c in ranked
    }
    seen_text: dict[str, str] = {}
    eligible: list[Candidate] = []
    for candidate in ranked:
        digest = text_hash(candidate.text)
        if digest in seen_text:
            result.rejected.append(rejection(candidate, Stage.DUPLICATE, f"same text as {seen_text[digest]}"))
            continue
        seen_text[digest] = candidate.source_ref
        if pair_score[candidate.id] < cutoff:
            result.rejected.append(
                rejection(candidate, Stage.BELOW_CUTOFF, f"final score {candidate.scores.final:.3f} below cutoff {cutoff:.3f}")
            )
            continue
        eligible.append(candidate)
    reserved = _reserved_seats(eligible, budget, required)
    per_source: dict[str, int] = {}
    per_file: dict[tuple[str, str], int] = {}
    selected_ids: set[str] = set()
    for candidate in eligible:
        file_key = (candidate.path or "", candidate.source_version)  # one path may be in two roots
        if candidate.path and candidate.source in WORKSPACE_SOURCES and per_file.get(file_key, 0) >= MAX_ITEMS_PER_FILE:
            result.rejected.append(rejection(
                candidate, Stage.OVER_BUDGET, f"per-file cap ({MAX_ITEMS_PER_FILE} items of {candidate.path}) reached"
            ))
            continue
        cap = budget.per_source.get(candidate.source)
        used = per_source.get(candidate.source.value, 0)
        if cap is not None and used >= cap:
            result.rejected.append(
                rejection(candidate, Stage.OVER_BUDGET, f"per-source cap for {candidate.source.value} ({cap}) reached")
            )
            continue
        waiting = [kind for kind, seat in reserved.items() if seat.id != candidate.id and seat.id not in selected_ids]
        if len(result.selected) + len(waiting) >= budget.max_items:
            kept = f"; seats kept for required {', '.join(k.value for k in waiting)}" if waiting else ""
            result.overflow.append(
                (candidate, rejection(candidate, Stage.OVER_BUDGET, f"max_items ({budget.max_items}) reached{kept}"))
            )
            continue
        per_source[candidate.source.value] = used + 1
        if candidate.path:
            per_file[file_key] = per_file.get(file_key, 0) + 1
        result.selected.append(candidate)
        selected_ids.add(candidate.id)
    return result


def _reserved_seats(
    eligible: list[Candidate], budget: RetrievalBudget, required: Sequence[EvidenceKind]
) -> dict[EvidenceKind, Candidate]:
    """The best eligible candidate of each required kind (whose source is not capped at 0)."""
    seats: dict[EvidenceKind, Candidate] = {}
    for kind in dict.fromkeys(required):
        seat = next(
            (c for c in eligible if c.evidence_kind == kind and budget.per_source.get(c.source, 1) > 0), None
        )
        if seat is not None:
            seats[kind] = seat
    return dict(list(seats.items())[: budget.max_items])
