"""Packed postings equal a plain per-chunk count, however the token strings are shared."""

from __future__ import annotations

import random
from collections import Counter
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scopelens.core.index import native
from scopelens.core.index.postings import TF_MAX, PackedPostings, build_postings
from scopelens.core.index.tokenizer import TermCounts, count_terms, tokenize

PACKERS = [
    pytest.param(PackedPostings.from_counts_python, id="python"),
    pytest.param(PackedPostings.from_counts, id="compiled"),
]
"""Both ways of packing a segment's postings meet every test (the compiled one is what an
install with a C compiler runs; ``test_tokenizer`` requires it in CI)."""


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


@pytest.mark.parametrize("from_counts", PACKERS)
@settings(max_examples=80, derandomize=True, deadline=None)
@given(documents=st.lists(TEXTS, max_size=4))
def test_postings_from_counted_documents_equal_postings_from_token_lists(from_counts, documents):
    """What the indexer writes (documents' counted terms, chunks one document after another)
    is what the token lists of the same chunks give."""
    tokens = [[t for text in unit for t in tokenize(text)] for units in documents for unit in units]
    packed = from_counts([count_terms(units) for units in documents])
    assert list(packed.postings()) == reference(tokens)


@pytest.mark.parametrize("from_counts", PACKERS)
@settings(max_examples=80, derandomize=True, deadline=None)
@given(documents=st.lists(TEXTS, min_size=1, max_size=4), data=st.data())
def test_postings_from_documents_of_a_shared_batch_equal_postings_from_token_lists(from_counts, documents, data):
    """Documents prepared in one batch share one list of term strings (``TermCounts.slice``);
    a segment may hold only some of them, and gets the postings of those alone."""
    batch = count_terms([unit for units in documents for unit in units])
    firsts = np.cumsum([0, *map(len, documents)]).tolist()
    slices = [batch.slice(lo, hi) for lo, hi in pairwise(firsts)]
    kept = sorted(data.draw(st.sets(st.integers(0, len(documents) - 1), min_size=1)))
    tokens = [[t for text in unit for t in tokenize(text)] for d in kept for unit in documents[d]]
    packed = from_counts([slices[d] for d in kept])
    assert list(packed.postings()) == reference(tokens)


def _counts(terms: list[str], units: list[dict[int, int]]) -> TermCounts:
    """Counted terms built by hand: unit ``u`` has term id -> tf ``units[u]``."""
    ids = [sorted(unit) for unit in units]
    return TermCounts(
        terms,
        np.cumsum([0, *map(len, ids)]).astype(np.int64),
        np.array([t for unit in ids for t in unit], dtype=np.int32),
        np.array([units[u][t] for u, unit in enumerate(ids) for t in unit], dtype=np.int32),
        np.array([sum(unit.values()) for unit in units], dtype=np.int64),
    )


@pytest.mark.parametrize("from_counts", PACKERS)
def test_packed_terms_are_in_code_point_order_with_capped_tfs(from_counts) -> None:
    """Terms sort as SQLite's BINARY collation and Python compare them (code points: a lone
    surrogate before U+E000, an astral character after every BMP one), a term listed twice
    in two batches' lists is one posting, tfs over 65,535 are capped, and terms that no chunk
    of the segment holds are left out."""
    first = _counts(["\ue000", "b", "\udcff", "\U0001f600", "unused"], [{0: 2, 1: 70_000}, {2: 1, 3: 4}])
    second = _counts(["b", "a"], [{0: 3, 1: 1}])
    packed = from_counts([first, second])
    assert packed.terms == ["a", "b", "\udcff", "\ue000", "\U0001f600"]
    rows = {term: (np.frombuffer(o, "<u4").tolist(), np.frombuffer(t, "<u2").tolist()) for term, o, t in packed.postings()}
    assert rows == {
        "a": ([2], [1]), "b": ([0, 2], [TF_MAX, 3]), "\udcff": ([1], [1]), "\ue000": ([0], [2]), "\U0001f600": ([1], [4])
    }
    empty = from_counts([_counts(["x"], [{}])])
    assert (empty.terms, list(empty.postings()), empty.bounds) == ([], [], [0])


def test_the_compiled_packer_refuses_counts_that_do_not_hold_together() -> None:
    """A term id outside its list, or bounds that do not cover the ids, is a ValueError (never
    a read past an array)."""
    if native.compiled is None:
        pytest.skip("the compiled packer is not built (test_tokenizer requires it in CI)")
    good = _counts(["a", "b"], [{0: 1, 1: 2}])
    with pytest.raises(ValueError, match="term id"):
        PackedPostings.from_counts([TermCounts(["a"], good.bounds, good.term_ids, good.tfs, good.lengths)])
    with pytest.raises(ValueError, match="bounds"):
        PackedPostings.from_counts([TermCounts(good.terms, good.bounds + 1, good.term_ids, good.tfs, good.lengths)])


def test_an_install_without_the_compiled_part_writes_the_same_index(tmp_path, monkeypatch) -> None:
    """Where no C compiler built ``_compiled``, ``count_terms`` and ``from_counts`` fall back
    to their Python specification: the stored chunks and postings are the same."""
    from sqlmodel import select

    from scopelens.core.index import postings, tokenizer
    from scopelens.core.index.indexer import index_workspace
    from scopelens.core.store.store import Store
    from scopelens.core.store.tables import IndexChunkRow, IndexPostingRow

    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "auth.py").write_text(
        "class SessionStore:\n    def getHTTPUser(self, user_id):\n        return self.db_users[user_id]\n"
    )
    (root / "README.md").write_text("# Auth\n\nThe `SessionStore` keeps 日本語 sessions; see src/auth.py::SessionStore.\n")

    def stored(db: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
        with Store.open(f"sqlite:///{db}", create=True) as store:
            index_workspace(store, root, project="p", workers=0)
            with store.read() as conn:
                chunks = [(c.path, c.start_line, c.text, c.token_count) for c in conn.exec(select(IndexChunkRow))]
                rows = [(p.term, bytes(p.chunk_ids), bytes(p.tfs)) for p in conn.exec(select(IndexPostingRow))]
        return sorted(chunks), sorted(rows)

    compiled = stored(tmp_path / "compiled.db")
    monkeypatch.setattr(tokenizer, "compiled", None)
    monkeypatch.setattr(postings, "compiled", None)
    assert stored(tmp_path / "python.db") == compiled
    assert any(term == "sessionstore" for term, _, _ in compiled[1])


@settings(max_examples=40, derandomize=True, deadline=None)
@given(documents=st.lists(TEXTS, max_size=4), rows=st.sampled_from([1, 3, 500]))
def test_row_values_are_the_same_in_c_and_in_python(documents, rows) -> None:
    """The rows a segment's postings are inserted as (``value_batches``, in C where built):
    the same values, batch by batch, as the Python specification gives, blobs as bytearray."""
    packed = PackedPostings.from_counts([count_terms(units) for units in documents])
    compiled = list(packed.value_batches(7, rows))
    python = list(packed.value_batches_python(7, rows))
    assert compiled == python
    assert all(type(value) is bytearray for batch in compiled for value in batch[2::4])
    assert [value for batch in compiled for value in batch[1::4]] == packed.terms


def test_row_values_refuse_bounds_outside_the_packed_postings() -> None:
    if native.compiled is None:
        pytest.skip("the compiled part is not built (test_tokenizer requires it in CI)")
    with pytest.raises(ValueError, match="outside"):
        native.compiled.posting_values(1, ["a"], bytearray(4), bytearray(2), [0, 2], 0, 1)
    with pytest.raises(ValueError, match="outside"):
        native.compiled.posting_values(1, ["a"], bytearray(4), bytearray(2), [0, 1], 0, 2)
