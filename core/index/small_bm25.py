"""BM25 over a small in-memory list of texts (events, artifacts, memories).

Same tokenizer and parameters as the workspace scorer (``scorer.BM25_K1``/``BM25_B``), so
scores from different recallers are on comparable scales.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

from scopelens.core.index.scorer import BM25_B, BM25_K1
from scopelens.core.index.tokenizer import tokenize


def bm25_scores(terms: Sequence[tuple[str, float]], texts: Sequence[str]) -> list[float]:
    """A BM25 score per text for weighted query terms (0.0 where nothing matches)."""
    if not texts:
        return []
    counts = [_counted(text) for text in texts]
    lengths = [sum(c.values()) for c in counts]
    avgdl = max(sum(lengths) / len(lengths), 1.0)
    total = len(texts)
    scores = [0.0] * total
    for term, weight in terms:
        df = sum(1 for c in counts if term in c)
        if df == 0:
            continue
        idf = math.log(1.0 + (total - df + 0.5) / (df + 0.5))
        for i, c in enumerate(counts):
            tf = c.get(term, 0)
            if tf:
                scores[i] += weight * idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * lengths[i] / avgdl))
    return scores


@lru_cache(maxsize=16384)
def _counted(text: str) -> Counter[str]:
    """A text's term counts; cached, because memory contents are scored on every retrieval.
    (Callers only read the counters.)"""
    return Counter(tokenize(text))
