"""A run's postings, packed with numpy: one row per term of a segment, chunk-id offsets as
little-endian uint32 and term frequencies as uint16.

They are built from each document's counted terms (only the distinct term strings go through
a dictionary; no per-posting Python loop). Terms come out in code point order, the order of
the (segment_id, term) key within a segment, so SQLite appends to its B-tree.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain, pairwise, repeat
from typing import Any

import numpy as np

from scopelens.core.index.native import compiled
from scopelens.core.index.tokenizer import TermCounts

TF_MAX = np.iinfo(np.uint16).max


def _sort_order(terms: list[str]) -> np.ndarray:
    """Indices that sort ``terms`` (code point order, as Python and SQLite's BINARY compare).

    numpy's variable-width strings sort in C, several times faster than ``sorted``.
    """
    string_dtype = getattr(np.dtypes, "StringDType", None)
    if string_dtype is not None:
        try:
            return np.argsort(np.array(terms, dtype=string_dtype()), kind="stable")
        except (TypeError, ValueError, UnicodeError):  # e.g. a lone surrogate
            pass
    return np.asarray(sorted(range(len(terms)), key=terms.__getitem__), dtype=np.int64)


def build_postings(chunk_token_lists: list[list[str]]) -> list[tuple[str, bytes, bytes]]:
    """Postings of a run: ``(term, chunk offsets as uint32 bytes, tfs as uint16 bytes)``.

    Offsets are positions in ``chunk_token_lists`` (which is in chunk-id order), ascending.
    Terms come out sorted (that is the order in which they are inserted).
    """
    return list(PackedPostings.build(chunk_token_lists).postings())


@dataclass(frozen=True)
class PackedPostings:
    """Every posting of a segment, packed: term ``k`` is ``terms[k]`` with its chunk offsets in
    ``offsets[bounds[k]:bounds[k + 1]]`` (uint32 LE) and tfs likewise in ``tfs`` (uint16 LE).

    The buffers are ``bytearray`` so that their slices are too: Python's ``sqlite3`` binds a
    ``bytearray`` directly but sends every ``bytes`` value through its adapter lookup first,
    which cost about as much as SQLite's own work on the 2 blobs of each posting row."""

    terms: list[str]
    offsets: bytearray
    tfs: bytearray
    bounds: list[int]

    @classmethod
    def build(cls, chunk_token_lists: list[list[str]]) -> PackedPostings:
        """From each chunk's tokens (in chunk-id order)."""
        n = len(chunk_token_lists)
        lengths = np.fromiter(map(len, chunk_token_lists), dtype=np.int64, count=n)
        chunk_of = np.repeat(np.arange(n, dtype=np.int32), lengths)
        return cls._from_occurrences(n, _occurrences_by_term(chunk_token_lists, chunk_of, int(lengths.sum())))

    @classmethod
    def from_counts(cls, documents: list[TermCounts]) -> PackedPostings:
        """From documents' counted terms (their chunks in chunk-id order, one after another).

        In C (``_compiled.c``) where it was built: one pass to count each term's postings,
        one sort of the distinct terms, one pass to place them, instead of numpy's sorts of
        every (term, chunk) pair; ``from_counts_python`` is the specification."""
        if compiled is None:
            return cls.from_counts_python(documents)
        arrays = [
            (counts.terms, np.ascontiguousarray(counts.term_ids, dtype=np.int32),
             np.ascontiguousarray(counts.bounds, dtype=np.int64), np.ascontiguousarray(counts.tfs, dtype=np.int32))
            for counts in documents
        ]
        terms, offsets, tfs, bounds = compiled.pack_postings(arrays)
        return cls(terms, offsets, tfs, bounds)

    @classmethod
    def from_counts_python(cls, documents: list[TermCounts]) -> PackedPostings:
        """``from_counts`` with numpy. Documents of one prepared batch share their list of term
        strings: it is read once."""
        distinct: list[str] = []
        base_of: dict[int, int] = {}
        items, chunks, tfs = [], [], []
        chunk_base = 0
        for counts in documents:
            base = base_of.get(id(counts.terms))
            if base is None:
                base = base_of[id(counts.terms)] = len(distinct)
                distinct += counts.terms
            units = len(counts.bounds) - 1
            items.append(counts.term_ids.astype(np.int64) + base)
            chunks.append(np.repeat(np.arange(chunk_base, chunk_base + units, dtype=np.int64), np.diff(counts.bounds)))
            tfs.append(counts.tfs)
            chunk_base += units
        if not items:
            return cls._from_occurrences(0, ([], np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)))
        occurrences = (distinct, np.concatenate(items), np.concatenate(chunks), np.concatenate(tfs).astype(np.int64))
        return cls._from_occurrences(chunk_base, occurrences)

    @classmethod
    def _from_occurrences(cls, n: int, occurrences: Occurrences) -> PackedPostings:
        distinct, item_of, chunks, tfs = occurrences
        if not len(item_of):
            return cls([], bytearray(), bytearray(), [0])
        # Number the distinct strings (far fewer than the tokens) in sorted order: postings
        # are then inserted in the order of their (segment_id, term) key.
        vocabulary: dict[str, int] = {}
        term_ids = np.fromiter(
            map(vocabulary.setdefault, distinct, map(len, repeat(vocabulary))), dtype=np.int64, count=len(distinct)
        )
        found = list(vocabulary)
        del vocabulary, distinct
        order = _sort_order(found)
        terms = list(map(found.__getitem__, order.tolist()))
        rank = np.empty(len(found), dtype=np.int64)
        rank[order] = np.arange(len(found), dtype=np.int64)
        del found, order
        keys = rank[term_ids][item_of]
        keys *= n
        keys += chunks
        unique, counts = _sum_by_key(keys, tfs)
        term_of, offset = np.divmod(unique, n)
        offsets = bytearray(offset.astype("<u4").data)
        tf_bytes = bytearray(np.minimum(counts, TF_MAX).astype("<u2").data)
        # A run of equal term numbers per term that occurs (a batch's list of strings, shared
        # by its documents, may hold terms that none of these chunks has).
        starts = np.flatnonzero(_changes(term_of))
        present = list(map(terms.__getitem__, term_of[starts].tolist()))
        return cls(present, offsets, tf_bytes, [*starts.tolist(), len(unique)])

    def postings(self) -> Iterator[tuple[str, bytes, bytes]]:
        offsets, tfs = self.offsets, self.tfs
        for term, lo, hi in zip(self.terms, self.bounds[:-1], self.bounds[1:], strict=True):
            yield term, bytes(offsets[4 * lo : 4 * hi]), bytes(tfs[2 * lo : 2 * hi])

    def value_batches(self, segment_id: int, rows: int) -> Iterator[list[Any]]:
        """``segment_id, term, offsets, tfs`` of ``rows`` postings at a time, flattened (the blobs
        as ``bytearray`` slices, see the class); in C where it was built."""
        if compiled is None:
            yield from self.value_batches_python(segment_id, rows)
            return
        for start in range(0, len(self.terms), rows):
            end = min(len(self.terms), start + rows)
            yield compiled.posting_values(segment_id, self.terms, self.offsets, self.tfs, self.bounds, start, end)

    def value_batches_python(self, segment_id: int, rows: int) -> Iterator[list[Any]]:
        """``value_batches`` in Python: its specification."""
        terms, offsets, tfs, bounds = self.terms, self.offsets, self.tfs, self.bounds
        for start in range(0, len(terms), rows):
            end = min(len(terms), start + rows)
            edges = bounds[start : end + 1]
            values: list[Any] = [segment_id] * (4 * (end - start))
            values[1::4] = terms[start:end]
            values[2::4] = [offsets[4 * lo : 4 * hi] for lo, hi in pairwise(edges)]
            values[3::4] = [tfs[2 * lo : 2 * hi] for lo, hi in pairwise(edges)]
            yield values


Occurrences = tuple[list[str], np.ndarray, np.ndarray, np.ndarray]
"""``(distinct, item_of, chunks, tfs)``: (item, chunk) pairs, each occurring ``tfs`` times,
where item ``k`` is the string ``distinct[k]``; equal strings may be several items."""


def _occurrences_by_term(chunk_token_lists: list[list[str]], chunk_of: np.ndarray, total: int) -> Occurrences:
    """Every token is an item of its own (count 1), numbered by a dictionary in one pass."""
    vocabulary: dict[str, int] = {}
    item_of = np.fromiter(
        map(vocabulary.setdefault, chain.from_iterable(chunk_token_lists), map(len, repeat(vocabulary))),
        dtype=np.int64,
        count=total,
    )
    return list(vocabulary), item_of, chunk_of, np.ones(total, dtype=np.int64)


def _changes(values: np.ndarray) -> np.ndarray:
    """``True`` where ``values`` differs from the element before it (and at 0)."""
    changed = np.empty(len(values), dtype=bool)
    changed[:1] = True
    np.not_equal(values[1:], values[:-1], out=changed[1:])
    return changed


def _sum_by_key(keys: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``keys`` (ascending) and the sum of ``counts`` for each; ``keys`` may be
    overwritten.

    When they fit, keys and counts (capped at ``TF_MAX``, which leaves the capped sums
    unchanged) are packed into one int64 and sorted as values, which is several times
    faster than an argsort.
    """
    if len(keys) and int(keys.max()).bit_length() + 16 <= 63:
        packed = keys  # the caller's array, reused in place
        packed <<= 16
        packed |= np.minimum(counts, TF_MAX)
        packed.sort()
        counts = packed & TF_MAX
        keys = packed
        keys >>= 16
    else:
        order = np.argsort(keys, kind="stable")
        keys, counts = keys[order], counts[order]
    starts = np.flatnonzero(_changes(keys))
    return keys[starts], np.add.reduceat(counts, starts) if len(starts) else counts[:0]
