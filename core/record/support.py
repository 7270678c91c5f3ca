"""Does a cited text support a claim? The documented key-term heuristic.

The rule (``docs/session-scripts.md``): the claim's *key terms* are its distinct index
terms (``scopelens.core.index.tokenizer.tokenize``, so identifiers split the way the index splits
them and Japanese becomes character bigrams) minus the planner's stopwords and bare
numbers. A citation supports the claim when at least :data:`SUPPORT_THRESHOLD` of the key
terms occur among the terms of the cited item's **visible text** (what the model was
shown, after trimming). A claim with no key terms supports nothing.

It is a heuristic, deliberately simple and deterministic: it catches a citation pointing at
the wrong item or at text that was trimmed away; it cannot judge a paraphrase.
"""

from __future__ import annotations

from dataclasses import dataclass

from scopelens.core.index.tokenizer import tokenize
from scopelens.core.pipeline.planner import STOPWORDS

SUPPORT_THRESHOLD = 0.6


def key_terms(claim: str) -> list[str]:
    """The distinct terms of ``claim`` that carry its content, in order of first appearance."""
    return [t for t in dict.fromkeys(tokenize(claim)) if t not in STOPWORDS and not t.isdigit()]


@dataclass(frozen=True)
class Support:
    terms: tuple[str, ...]
    found: tuple[str, ...]

    @property
    def coverage(self) -> float:
        return len(self.found) / len(self.terms) if self.terms else 0.0

    @property
    def supported(self) -> bool:
        return bool(self.terms) and self.coverage >= SUPPORT_THRESHOLD

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(t for t in self.terms if t not in self.found)


def check_support(claim: str, visible_text: str) -> Support:
    terms = key_terms(claim)
    present = set(tokenize(visible_text))
    return Support(tuple(terms), tuple(t for t in terms if t in present))
