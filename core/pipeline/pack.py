"""Evidence packing: drop duplicates and weak candidates, apply item caps, in rank order."""

from __future__ import annotations

from dataclasses import dataclass, field

from core.contracts import Candidate, RejectedItem, RetrievalBudget
from core.hashing import text_hash
from core.pipeline.boundary import rejection
from core.vocab import Stage

MIN_FINAL_SCORE = 0.12
"""Below this final score a candidate is noise whatever the budget."""
RELATIVE_CUTOFF = 0.25
"""A candidate scoring under this share of the best final score is cut."""


@dataclass
class Packed:
    selected: list[Candidate] = field(default_factory=list)
    rejected: list[RejectedItem] = field(default_factory=list)


def pack(ranked: list[Candidate], budget: RetrievalBudget) -> Packed:
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
    per_source: dict[str, int] = {}
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
        cap = budget.per_source.get(candidate.source)
        used = per_source.get(candidate.source.value, 0)
        if cap is not None and used >= cap:
            result.rejected.append(
                rejection(candidate, Stage.OVER_BUDGET, f"per-source cap for {candidate.source.value} ({cap}) reached")
            )
            continue
        if len(result.selected) >= budget.max_items:
            result.rejected.append(rejection(candidate, Stage.OVER_BUDGET, f"max_items ({budget.max_items}) reached"))
            continue
        per_source[candidate.source.value] = used + 1
        result.selected.append(candidate)
    return result
