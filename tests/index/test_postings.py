"""Packed postings equal a plain per-chunk count, however the token strings are shared."""

from __future__ import annotations

import random
from collections import Counter
from itertools import pairwise

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scopelens.core.index.postings import TF_MAX, PackedPostings, build_postings
from scopelens.core.index.tokenizer import count_terms, tokenize


def reference(chunks: list[list[str]]) -> list[tuple[str, bytes, bytes]]:
    """Term -> (chunk offsets, tfs), terms in code point order: the obvious way."""
    by_term: dict[str, list[tuple[int, int]]] = {}
    for offset, tokens in enumerate(chunks):
        for term, tf in Counter(tokens).items():
            by_term.setdefault(term, []).append((offset, min(tf, TF_MAX)))
    return [
        (
            term,
            np.array([o for o, _ in rows], dtype="<u4").tobytes(),
            np.array([tf for _, tf in rows], dtype="<u2").tobytes(),
        )
        for term, rows in sorted(by_term.items())
    ]


def copies(word: str) -> str:
    """An equal string that is a different object."""
    return "".join(list(word))


def corpus(seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    words = ["a", "ab", "b", "ß", "σ", "ς", "日本", "z" * 40, "x_y", "\udcff"]
    shared = {w: w for w in words}
    chunks = []
    for _ in range(60):
        size = rng.choice([0, 1, 5, 30])
        chunks.append([shared[w] if rng.random() < 0.5 else copies(w) for w in rng.choices(words, k=size)])
    return chunks


def test_postings_match_a_plain_count():
    for seed in range(5):
        chunks = corpus(seed)
        assert build_postings(chunks) == reference(chunks)
    assert build_postings([]) == [] and build_postings([[], []]) == []


def test_tf_is_capped_after_equal_strings_are_merged():
    word = "w"
    chunks = [[word] * (TF_MAX - 5) + [copies(word) for _ in range(10)], [copies(word)]]
    assert build_postings(chunks) == reference(chunks)
    [(_, _, tfs)] = build_postings(chunks)
    assert np.frombuffer(tfs, dtype="<u2").tolist() == [TF_MAX, 1]


TEXTS = st.lists(
    st.lists(
        st.text(alphabet=st.sampled_from(list("ab_.Cd/ -xß日本語ＡＢ\n0")), max_size=30), min_size=1, max_size=3
    ),
    max_size=6,
)


@settings(max_examples=80, derandomize=True, deadline=None)
@given(documents=st.lists(TEXTS, max_size=4))
def test_postings_from_counted_documents_equal_postings_from_token_lists(documents):
    """What the indexer writes (documents' counted terms, chunks one document after another)
    is what the token lists of the same chunks give."""
    tokens = [[t for text in unit for t in tokenize(text)] for units in documents for unit in units]
    packed = PackedPostings.from_counts([count_terms(units) for units in documents])
    assert list(packed.postings()) == reference(tokens)


@settings(max_examples=80, derandomize=True, deadline=None)
@given(documents=st.lists(TEXTS, min_size=1, max_size=4), data=st.data())
def test_postings_from_documents_of_a_shared_batch_equal_postings_from_token_lists(documents, data):
    """Documents prepared in one batch share one list of term strings (``TermCounts.slice``);
    a segment may hold only some of them, and gets the postings of those alone."""
    batch = count_terms([unit for units in documents for unit in units])
    firsts = np.cumsum([0, *map(len, documents)]).tolist()
    slices = [batch.slice(lo, hi) for lo, hi in pairwise(firsts)]
    kept = sorted(data.draw(st.sets(st.integers(0, len(documents) - 1), min_size=1)))
    tokens = [[t for text in unit for t in tokenize(text)] for d in kept for unit in documents[d]]
    packed = PackedPostings.from_counts([slices[d] for d in kept])
    assert list(packed.postings()) == reference(tokens)
