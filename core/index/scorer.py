"""Vectorised BM25 over the store's postings, with scope applied as masks during scoring.

**BM25 parameters.** ``k1 = 1.2``, ``b = 0.75``, and the non-negative IDF
``ln(1 + (N - df + 0.5) / (df + 0.5))``. ``N``, ``df`` and the average chunk length are taken
over the chunks live at ``as_of`` in the scoped project, branch and root (not narrowed by
path prefix or source), so a scoped query ranks its chunks exactly as the unscoped query
would. A query term's weight multiplies its BM25 contribution.

**Scope as masks.** Nothing out of scope is scored, let alone read:

* project, branch and workspace root choose which *runs* (segments) take part at all;
* a path prefix becomes a range of chunk ids inside each run (a run's chunk ids are sorted
  by path), and postings are sliced to that range with ``searchsorted`` before any
  arithmetic, so a query scoped to 5% of the corpus does about 5% of the work;
* the time boundary (``as_of``, ``include_after``, ``exclude_after``) and the allowed sources
  are boolean masks over the scored chunks, applied before top-k selection.

Arrays for a project are loaded once and cached until a new run of that project lands.

**Speed** (figures in ``docs/performance.md``). A query costs a few numpy calls per term plus
work proportional to the postings it reads, with no Python loop over postings:

* per (scope key, term), the term's live postings are concatenated once across segments into
  view positions with their tf, BM25 denominator ``tf + k1 (1 - b + b dl/avgdl)`` and
  weight-1 contribution, and cached;
* terms are added in query order: runs of sparse terms with one ``np.add.at``; a term in at
  least 1/16 of the chunks as a cached dense row (one contiguous add, of the scoped ranges
  only when scoped). Every chunk's float32 sum is the same as adding one term after another;
* top-k candidates come from ``scores >= bound``, ``bound`` being the k-th best score of a
  strided sample (a lower bound of the true k-th score), instead of sorting every score;
* "has a new run landed?" is asked on SQLite through one long-lived read-only connection
  (autocommit, each statement run to completion, so it holds no lock between queries)
  instead of opening a connection per query.
"""

from __future__ import annotations

import hashlib
import math
import sqlite3
import threading
import weakref
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote

import numpy as np
from sqlalchemy import text as sa_text
from sqlmodel import col, select

from scopelens.core.hashing import as_bytes
from scopelens.core.index.timeutil import FOREVER
from scopelens.core.pathmatch import normalise_prefix
from scopelens.core.store.engine import SQLITE_BUSY_TIMEOUT_S, sqlite_path_of
from scopelens.core.store.store import Store
from scopelens.core.store.tables import IndexPostingRow
from scopelens.core.vocab import Source

BM25_K1 = 1.2
BM25_B = 0.75
SOURCE_CODES: dict[Source, int] = {source: code for code, source in enumerate(Source)}
_SOURCES: tuple[Source, ...] = tuple(Source)
POSTINGS_CACHE_LIMIT = 400_000
TERMS_CACHE_LIMIT = 200_000
LIVE_SETS_CACHED = 8
"""Distinct live sets (as_of, branch, root) whose statistics and terms a view keeps, LRU."""
SCOPE_KEYS_REMEMBERED = 4096
"""Scope keys whose live set a view remembers (a digest each: 32 bytes) before forgetting all."""
_K1_PLUS_1 = BM25_K1 + 1.0
_NO_POSITIONS = np.zeros(0, dtype=np.int64)
DENSE_MIN_SHARE = 16
"""A term in at least 1/16 of the chunks is also kept as a dense row (see ``_Term``)."""
DENSE_BYTES_LIMIT = 64 * 1024 * 1024


@dataclass(frozen=True)
class RecallFilter:
    """The scope of one recall, as masks. ``None`` means "not restricted"."""

    project: str | None
    branch: str | None = None
    workspace_root: str | None = None
    path_prefixes: tuple[str, ...] = ()
    sources: frozenset[Source] | None = None
    as_of_us: int | None = None
    include_after_us: int | None = None
    exclude_after_us: int | None = None
    all_versions: bool = False
    """Score superseded versions too (the scope probe uses this to record ``stale``)."""


@dataclass(frozen=True)
class Hit:
    chunk_id: int
    score: float
    path: str = ""
    """The chunk's path (read from the view, so grouping hits by file costs no query)."""
    symbol: str | None = None
    """What the chunk defines, if anything (``Class.method``), also from the view."""
    root: str = ""
    """The workspace root the chunk was indexed under (one path may be in several roots)."""
    source: Source | None = None
    """The chunk's source (code, doc, rule, decision record)."""


@dataclass
class _Segment:
    run_id: int
    branch: str
    root: str
    lo: int
    """First global chunk id of the run."""
    local_start: int
    """Position of the run's first chunk in the view's arrays."""
    paths: list[str]
    """The run's chunk paths, in chunk-id order (sorted)."""
    symbols: list[str | None] = field(default_factory=list)
    """The run's chunk symbols (``Class.method``), in chunk-id order."""


@dataclass(frozen=True)
class _Part:
    """One index segment: the postings of chunks ``lo..hi-1`` written (or merged) together.

    A run writes one per batch of files (``core/index/run_writer.py``); compaction merges
    those of consecutive runs (``core/index/compaction.py``), so a part may span runs."""

    id: int
    lo: int
    hi: int
    base: int | None
    """View position of chunk ``lo`` when the part's chunks are consecutive positions of the
    view (then a chunk id maps to ``id - lo + base``); ``None``: looked up by id."""


@dataclass
class _View:
    """Arrays over every chunk of one project (or of all projects, for ``None``)."""

    key: tuple[int, int]
    """(newest finished run, newest index segment of a finished run): a new run or a
    compaction makes a new view."""
    segments: list[_Segment]
    parts: list[_Part]
    """Every index segment of the view's runs, by ``lo``."""
    chunk_ids: np.ndarray
    valid_from: np.ndarray
    valid_to: np.ndarray
    source: np.ndarray
    length: np.ndarray
    stats: OrderedDict[bytes, tuple[np.ndarray, int, np.ndarray]] = field(default_factory=OrderedDict)
    """``live set -> (live mask, N, length norms)``, least recently used first, at most
    ``LIVE_SETS_CACHED``: keyed by the set of live chunks, not by ``as_of``, so a harness that
    pins ``as_of`` to each request's time shares one entry between index runs."""
    live_set_of: dict[tuple[object, ...], bytes] = field(default_factory=dict)
    """``scope key -> live set``: the digest of the live mask a scope key gave (bounded)."""
    terms: dict[bytes, dict[str, _Term | None]] = field(default_factory=dict)
    """``live set -> term -> _Term`` (``None``: no live chunk has the term); dropped with its
    live set."""
    cached_terms: int = 0
    dense_bytes: int = 0
    """Memory taken by the dense rows of this view's terms."""
    ranges: dict[tuple[object, ...], tuple[list[tuple[int, int]], np.ndarray]] = field(default_factory=dict)
    """Path ranges per (segments, path prefixes): see ``Scorer._ranges``."""
    live_paths: dict[tuple[object, ...], tuple[str, ...]] = field(default_factory=dict)
    """Distinct live paths per scope: see ``Scorer.live_paths``."""
    chosen_parts: dict[tuple[int, ...], tuple[list[_Part], bool]] = field(default_factory=dict)
    """Per set of runs: the parts holding their chunks, and whether those parts overlap."""


@dataclass
class _Term:
    """One term's live postings under one scope key, over the view's positions."""

    idf: float
    positions: np.ndarray
    """Positions in the view's arrays, ascending (segments are in run order)."""
    tf: np.ndarray
    denominator: np.ndarray
    """``tf + norm[positions]``, float32."""
    unweighted: np.ndarray
    """``idf * tf * (k1 + 1) / denominator``: the contribution of a term of weight 1."""
    dense: np.ndarray | None = None
    """``unweighted`` spread over every position (0.0 elsewhere), for very common terms."""
    sparse_only: bool = False
    """Set once the term is found too rare for a dense row (or the memory for one is spent)."""

    def dense_unweighted(self, view: _View) -> np.ndarray | None:
        """The dense contributions of weight 1, if this term is common enough to keep them.

        Adding a dense row adds exactly 0.0 where the term is absent, so the sums are the
        same as a sparse add, but a contiguous add of every position is several times
        cheaper than scattering into a large share of them. Dense rows of one view take at
        most ``DENSE_BYTES_LIMIT``.
        """
        if self.dense is None:
            if self.sparse_only:
                return None
            size = len(view.chunk_ids)
            if len(self.positions) * DENSE_MIN_SHARE < size or view.dense_bytes + 4 * size > DENSE_BYTES_LIMIT:
                self.sparse_only = True
                return None
            self.dense = np.zeros(size, dtype=np.float32)
            self.dense[self.positions] = self.unweighted
            view.dense_bytes += self.dense.nbytes
        return self.dense

    def contribution(self, weight: float, a: int = 0, b: int | None = None) -> np.ndarray:
        """``weight * idf * tf * (k1 + 1) / denominator`` over postings ``a:b``."""
        if weight == 1.0:  # (1.0 * idf) == idf, so this is the same float32 result
            return self.unweighted[a:b]
        scored: np.ndarray = (weight * self.idf) * self.tf[a:b] * _K1_PLUS_1 / self.denominator[a:b]
        return scored


def _scope_key(flt: RecallFilter) -> tuple[object, ...]:
    """What decides the live chunks and the BM25 statistics of a recall (not the path prefix)."""
    return (flt.branch, flt.workspace_root, flt.as_of_us, flt.all_versions)


def _prefix_ranges(paths: list[str], prefixes: Sequence[str]) -> list[tuple[int, int]]:
    """Index ranges of ``paths`` (sorted) that are under a prefix (:func:`pathmatch.under_prefix`)."""
    ranges: list[tuple[int, int]] = []
    for given in prefixes:
        prefix = normalise_prefix(given)
        if not prefix:
            return [(0, len(paths))]
        exact_lo = bisect_left(paths, prefix)
        exact_hi = bisect_left(paths, prefix + "\x00")
        if exact_hi > exact_lo:
            ranges.append((exact_lo, exact_hi))
        directory = prefix + "/"
        lo = bisect_left(paths, directory)
        hi = bisect_left(paths, directory + "\U0010ffff")
        if hi > lo:
            ranges.append((lo, hi))
    return _merge(ranges)


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


def _accumulate(scores: np.ndarray, positions: list[np.ndarray], values: list[np.ndarray], offset: int) -> None:
    """``scores[p - offset] += v`` for each term's postings, in term order (so float32 sums are
    the same as one term after another), with one ``np.add.at`` instead of one call per term."""
    if len(positions) == 1:
        at = positions[0] - offset if offset else positions[0]
        scores[at] += values[0]  # a term's positions are distinct
    elif positions:
        at = np.concatenate(positions)
        if offset:
            at -= offset
        np.add.at(scores, at, np.concatenate(values))
    positions.clear()
    values.clear()


def _parts(rows: Sequence[tuple[int, int, int]], chunk_ids: np.ndarray) -> list[_Part]:
    """The view's index segments from ``(id, chunk_lo, chunk_hi)`` rows (ordered by ``chunk_lo``)."""
    parts = []
    for part_id, lo, hi in rows:
        base: int | None = int(np.searchsorted(chunk_ids, lo))
        last = base + (hi - lo) - 1  # type: ignore[operator]
        if hi <= lo or last >= len(chunk_ids) or chunk_ids[base] != lo or chunk_ids[last] != hi - 1:
            base = None
        parts.append(_Part(int(part_id), int(lo), int(hi), base))
    return parts


def _composed(views: Sequence[_View], key: tuple[int, int]) -> _View:
    """One view over the chunks of ``views`` (of distinct projects), in chunk-id order: the
    same arrays, runs and parts as loading every project's chunks at once."""
    runs = sorted(((segment.lo, segment.run_id, view, segment) for view in views for segment in view.segments),
                  key=lambda entry: entry[:2])
    segments: list[_Segment] = []
    slices: list[tuple[_View, int, int]] = []
    position = 0
    for _lo, _run_id, view, segment in runs:
        size = len(segment.paths)
        segments.append(replace(segment, local_start=position))
        slices.append((view, segment.local_start, size))
        position += size

    def joined(name: str) -> np.ndarray:
        return np.concatenate([getattr(view, name)[start : start + size] for view, start, size in slices])

    chunk_ids = joined("chunk_ids")
    rows = sorted(((part.id, part.lo, part.hi) for view in views for part in view.parts), key=lambda row: (row[1], row[0]))
    return _View(key, segments, _parts(rows, chunk_ids), chunk_ids, joined("valid_from"), joined("valid_to"),
                 joined("source"), joined("length"))


def _places_at(view: _View, positions: list[int]) -> list[tuple[str, str | None, str]]:
    """The path, symbol and root of each view position (segments are in ascending ``local_start`` order)."""
    starts = [segment.local_start for segment in view.segments]
    out = []
    for position in positions:
        segment = view.segments[bisect_left(starts, position + 1) - 1]
        local = position - segment.local_start
        out.append((segment.paths[local], segment.symbols[local] if segment.symbols else None, segment.root))
    return out


def _top_k_lower_bound(scores: np.ndarray, top_k: int) -> float:
    """A value at most the ``top_k``-th largest score: the ``top_k``-th largest of a sample.

    With non-negative scores, every chunk of the top k (ties included) scores at least this,
    so ``scores >= bound`` (when the bound is positive) is a short candidate list found without
    sorting every score. 0.0 when the sample has too few scores.
    """
    sample = scores[:: max(1, len(scores) // 4096)]
    if len(sample) <= top_k:
        return 0.0
    return float(np.partition(sample, len(sample) - top_k)[len(sample) - top_k])


class Scorer:
    """Scores queries against one store's index. Keep one per store; it caches arrays."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._views: dict[str | None, _View] = {}
        self._postings: dict[tuple[int, str], tuple[np.ndarray, np.ndarray] | None] = {}
        # A long-lived reader of the newest run id, for writable SQLite stores only: on a
        # read-only store it could not join the WAL without creating files (engine.py).
        path = sqlite_path_of(store.url) if store.dialect == "sqlite" and not store.read_only else None
        self._probe_uri = "file:" + quote(str(path.resolve()), safe="/") + "?mode=ro" if path is not None else None
        self._probe: sqlite3.Connection | None = None
        self._probe_lock = threading.Lock()

    def close(self) -> None:
        """Close the long-lived read-only connection, if one was opened."""
        with self._probe_lock:
            if self._probe is not None:
                self._probe.close()
                self._probe = None

    # ------------------------------------------------------------------ loading

    _KEY_SQL = (
        "SELECT (SELECT coalesce(max(id), 0) FROM index_runs WHERE finished_at IS NOT NULL AND project = :project), "
        "(SELECT coalesce(max(s.id), 0) FROM index_segments s JOIN index_runs r ON r.id = s.run_id "
        "WHERE r.finished_at IS NOT NULL AND r.project = :project)"
    )
    _PROJECT_KEYS_SQL = (
        "SELECT r.project, max(r.id), (SELECT coalesce(max(s.id), 0) FROM index_segments s "
        "JOIN index_runs q ON q.id = s.run_id WHERE q.finished_at IS NOT NULL AND q.project = r.project) "
        "FROM index_runs r WHERE r.finished_at IS NOT NULL GROUP BY r.project"
    )
    _VIEW_SQL = (
        "SELECT id, branch, root, chunk_lo, chunk_hi FROM index_runs WHERE finished_at IS NOT NULL{runs} ORDER BY id",
        "SELECT s.id, s.chunk_lo, s.chunk_hi FROM index_segments s JOIN index_runs r ON r.id = s.run_id "
        "WHERE r.finished_at IS NOT NULL{parts} ORDER BY s.chunk_lo, s.id",
        "SELECT c.id, c.run_id, c.path, c.token_count, d.valid_from, d.valid_to, d.source, c.symbol "
        "FROM index_chunks c JOIN index_documents d ON d.id = c.document_id{chunks} ORDER BY c.id",
    )
    """A view's runs, index segments and chunk rows (finished runs only: a run is invisible
    until its final commit, see run_writer.py; its chunks are those with a document row)."""

    def _current_key(self, project: str) -> tuple[int, int]:
        """A project's view key: (newest finished run, newest index segment of a finished run)."""
        [[row]] = self._read([self._KEY_SQL], {"project": project})
        return int(row[0]), int(row[1])

    def _read(self, statements: Sequence[str], params: dict[str, object]) -> list[list[Any]]:
        """The rows of each statement, read in one transaction: through the long-lived read-only
        SQLite connection where there is one (SQLAlchemy cost about 5 ms more per view load,
        which an unrelated project's run made every probe pay), else through the store, which
        is also asked when that connection fails (it reports errors properly)."""
        if self._probe_uri is not None:
            with self._probe_lock:
                try:
                    connection = self._probe_connection()
                    connection.execute("BEGIN")
                    try:
                        return [connection.execute(sql, params).fetchall() for sql in statements]
                    finally:
                        connection.execute("COMMIT")
                except sqlite3.Error:
                    pass
        with self.store.read() as conn:
            return [list(conn.execute(sa_text(sql), params).all()) for sql in statements]

    def _probe_connection(self) -> sqlite3.Connection:
        """The long-lived read-only connection (opened on first use; hold ``_probe_lock``)."""
        if self._probe is None:
            assert self._probe_uri is not None
            self._probe = sqlite3.connect(
                self._probe_uri, uri=True, timeout=SQLITE_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            weakref.finalize(self, self._probe.close)
        return self._probe

    def _view(self, project: str | None) -> _View:
        if project is None:
            return self._all_projects_view()
        return self._project_view(project, self._current_key(project))

    def _project_view(self, project: str, key: tuple[int, int]) -> _View:
        cached = self._views.get(project)
        if cached is not None and cached.key == key:
            return cached
        view = self._load_view(project, key)
        self._views[project] = view
        return view

    def _all_projects_view(self) -> _View:
        """Every project's chunks (the scope probe's view), composed from the projects' own
        views: a run of one project reloads that project's view only, not every project's
        (an unrelated one-file run made the next probe reload them all: 14 -> 127 ms)."""
        keys = self._project_keys()
        key = (max((k[0] for k in keys.values()), default=0), max((k[1] for k in keys.values()), default=0))
        cached = self._views.get(None)
        if cached is not None and cached.key == key:
            return cached
        if not keys:
            view = self._load_view(None, key)
        else:
            view = _composed([self._project_view(project, keys[project]) for project in sorted(keys)], key)
        self._views[None] = view
        return view

    def _project_keys(self) -> dict[str, tuple[int, int]]:
        """Each project's view key (see ``_current_key``), in one query."""
        [rows] = self._read([self._PROJECT_KEYS_SQL], {})
        return {str(project): (int(run), int(part)) for project, run, part in rows}

    def _load_view(self, project: str | None, key: tuple[int, int]) -> _View:
        """Every chunk of ``project``'s finished runs (of every project for ``None``)."""
        runs_sql, parts_sql, chunks_sql = self._VIEW_SQL
        only = project is not None
        runs, parts, rows = self._read(
            [
                runs_sql.format(runs=" AND project = :project" if only else ""),
                parts_sql.format(parts=" AND r.project = :project" if only else ""),
                chunks_sql.format(chunks=" WHERE d.project = :project" if only else ""),
            ],
            {"project": project} if only else {},
        )
        n = len(rows)
        chunk_ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)
        valid_from = np.fromiter((r[4] for r in rows), dtype=np.int64, count=n)
        valid_to = np.fromiter((FOREVER if r[5] is None else r[5] for r in rows), dtype=np.int64, count=n)
        source = np.fromiter((SOURCE_CODES[Source(r[6])] for r in rows), dtype=np.int8, count=n)
        length = np.fromiter((r[3] for r in rows), dtype=np.float32, count=n)
        segments: list[_Segment] = []
        position = 0
        for run_id, branch, root, chunk_lo, chunk_hi in runs:
            size = chunk_hi - chunk_lo
            paths = [r[2] for r in rows[position : position + size]]
            symbols = [r[7] for r in rows[position : position + size]]
            segments.append(_Segment(int(run_id), branch, root, chunk_lo, position, paths, symbols))
            position += size
        return _View(key, segments, _parts(parts, chunk_ids), chunk_ids, valid_from, valid_to, source, length)

    def _load_postings(self, parts: Iterable[_Part], terms: Iterable[str]) -> None:
        """Cache each index segment's postings of ``terms``, as chunk ids (ascending) and tfs."""
        wanted = [(p.id, p.lo, t) for p in parts for t in terms if (p.id, t) not in self._postings]
        if not wanted:
            return
        if len(self._postings) > POSTINGS_CACHE_LIMIT:
            self._postings.clear()
        lo_of = {part_id: lo for part_id, lo, _ in wanted}
        want_parts = sorted(lo_of)
        want_terms = sorted({t for _, _, t in wanted})
        with self.store.read() as conn:
            for batch_start in range(0, len(want_terms), 500):
                batch = want_terms[batch_start : batch_start + 500]
                rows = conn.execute(
                    select(
                        col(IndexPostingRow.segment_id),
                        col(IndexPostingRow.term),
                        col(IndexPostingRow.chunk_ids),
                        col(IndexPostingRow.tfs),
                    )
                    .where(col(IndexPostingRow.term).in_(batch))
                    .where(col(IndexPostingRow.segment_id).in_(want_parts))
                )
                for segment_id, term, ids, tfs in rows:
                    chunk_ids = np.frombuffer(as_bytes(ids), dtype="<u4").astype(np.int64)
                    chunk_ids += lo_of[int(segment_id)]
                    self._postings[(int(segment_id), term)] = (
                        chunk_ids, np.frombuffer(as_bytes(tfs), dtype="<u2").astype(np.float32)
                    )
        for part_id, _lo, term in wanted:
            self._postings.setdefault((part_id, term), None)

    # ------------------------------------------------------------------ scoring

    def search(
        self, terms: Sequence[tuple[str, float]], flt: RecallFilter, *, top_k: int = 10, with_places: bool = False
    ) -> list[Hit]:
        """The ``top_k`` chunks for weighted ``terms`` under the masks of ``flt``.

        Ties are broken by chunk id, so results are deterministic. ``with_places``: each hit
        also carries its path, symbol, root and source (for aggregating hits to files).
        """
        weights: dict[str, float] = {}
        for term, weight in terms:
            weights[term] = weights.get(term, 0.0) + weight
        view = self._view(flt.project)
        segments = self._segments(view, flt)
        if not segments or not weights or top_k <= 0:
            return []
        live, total, norm, live_set = self._stats(view, segments, flt)
        if total == 0:
            return []
        found = self._terms(view, segments, live, total, norm, live_set, weights)
        if not found:
            return []
        windowed = flt.include_after_us is not None or flt.exclude_after_us is not None or flt.sources is not None
        # Scores are summed in an array over the scored positions only: every chunk when
        # unscoped, the span of the path ranges when scoped (``offset`` is its first position).
        # Terms are added in query order so that every chunk's float32 sum is the same whatever
        # the path: runs of sparse terms go in one np.add.at, common terms as dense rows.
        positions: list[np.ndarray] = []
        values: list[np.ndarray] = []
        sparse_only = True
        if flt.path_prefixes:
            ranges, bounds = self._ranges(view, segments, flt.path_prefixes)
            if not ranges:
                return []
            offset = ranges[0][0]
            scores = np.zeros(ranges[-1][1] - offset, dtype=np.float32)
            single = len(ranges) == 1
            for entry, weight in found:
                dense = None
                if weight == 1.0 and not entry.sparse_only:
                    dense = entry.dense if entry.dense is not None else entry.dense_unweighted(view)
                if dense is not None:
                    if positions:
                        _accumulate(scores, positions, values, offset)
                    for lo, hi in ranges:
                        scores[lo - offset : hi - offset] += dense[lo:hi]
                elif single:
                    a, b = entry.positions.searchsorted(bounds).tolist()
                    if a < b:
                        positions.append(entry.positions[a:b])
                        values.append(entry.unweighted[a:b] if weight == 1.0 else entry.contribution(weight, a, b))
                else:
                    cut = entry.positions.searchsorted(bounds).tolist()
                    for a, b in zip(cut[::2], cut[1::2], strict=True):
                        if a < b:
                            positions.append(entry.positions[a:b])
                            values.append(entry.contribution(weight, a, b))
            sparse_only = False
        else:
            offset = 0
            scores = np.zeros(len(view.chunk_ids), dtype=np.float32)
            for entry, weight in found:
                dense = None
                if weight == 1.0 and not entry.sparse_only:
                    dense = entry.dense if entry.dense is not None else entry.dense_unweighted(view)
                if dense is not None:
                    sparse_only = False
                    if positions:
                        _accumulate(scores, positions, values, 0)
                    scores += dense
                else:
                    positions.append(entry.positions)
                    values.append(entry.contribution(weight))
        if sparse_only and sum(map(len, positions)) * 16 <= len(scores):
            # few postings: their union is cheaper than scanning every chunk's score
            local = np.unique(np.concatenate(positions)) if len(positions) > 1 else positions[0]
            _accumulate(scores, positions, values, 0)
            local = local[scores[local] != 0]
        else:
            if positions:
                _accumulate(scores, positions, values, offset)
            bound = 0.0
            if not windowed and all(weight > 0 for _, weight in found):
                bound = _top_k_lower_bound(scores, top_k)
            # (outside the path ranges, scores stay 0.0)
            local = np.flatnonzero(scores >= bound) if bound > 0 else np.flatnonzero(scores != 0)
        candidates = local + offset if offset else local
        # Only live chunks of the chosen segments have postings here, so no live mask is needed.
        if len(candidates) and windowed:
            keep = self._window_mask(view, candidates, flt)
            candidates, local = candidates[keep], local[keep]
        if not len(candidates):
            return []
        candidate_scores = scores[local]
        if len(candidates) > max(top_k, 256):  # (a short list is simply sorted)
            cut = np.argpartition(-candidate_scores, top_k - 1)[:top_k]
            threshold = candidate_scores[cut].min()
            # keep every candidate tied at the threshold so tie-breaking by id is exact
            cut = np.flatnonzero(candidate_scores >= threshold)
            candidates, candidate_scores = candidates[cut], candidate_scores[cut]
        ids = view.chunk_ids[candidates]
        order = np.lexsort((ids, -candidate_scores))[:top_k]
        if not with_places:
            return [Hit(i, s) for i, s in zip(ids[order].tolist(), candidate_scores[order].tolist(), strict=True)]
        top = candidates[order]
        places = _places_at(view, top.tolist())
        sources = [_SOURCES[code] for code in view.source[top].tolist()]
        return [
            Hit(i, s, p, symbol, root, source)
            for i, s, (p, symbol, root), source in zip(
                ids[order].tolist(), candidate_scores[order].tolist(), places, sources, strict=True
            )
        ]

    def live_paths(self, flt: RecallFilter) -> tuple[str, ...]:
        """The distinct paths with a live chunk under ``flt`` (sorted): the files a task may name.

        Sources and path prefixes narrow the list; the time window is the view's ``as_of``.
        Cached per view, so it is computed once per index version and scope.
        """
        view = self._view(flt.project)
        segments = self._segments(view, flt)
        if not segments:
            return ()
        live, _total, _norm, live_set = self._stats(view, segments, flt)
        key = (live_set, None if flt.sources is None else tuple(sorted(flt.sources)), flt.path_prefixes)
        cached = view.live_paths.get(key)
        if cached is not None:
            return cached
        allowed = None
        if flt.sources is not None:
            allowed = np.zeros(len(SOURCE_CODES), dtype=bool)
            allowed[[SOURCE_CODES[s] for s in flt.sources]] = True
        found: set[str] = set()
        for segment in segments:
            lo, hi = segment.local_start, segment.local_start + len(segment.paths)
            mask = live[lo:hi]
            if allowed is not None:
                mask = mask & allowed[view.source[lo:hi]]
            ranges = _prefix_ranges(segment.paths, flt.path_prefixes) if flt.path_prefixes else [(0, hi - lo)]
            paths = segment.paths
            for a, b in ranges:
                found.update(map(paths.__getitem__, (np.flatnonzero(mask[a:b]) + a).tolist()))
        if len(view.live_paths) > 64:
            view.live_paths.clear()
        result = view.live_paths[key] = tuple(sorted(found))
        return result

    def document_frequencies(self, terms: Iterable[str], flt: RecallFilter) -> tuple[dict[str, int], int]:
        """How many live chunks under ``flt``'s statistics hold each term (a term none holds is
        left out), and how many live chunks there are."""
        wanted = dict.fromkeys(terms, 1.0)
        view = self._view(flt.project)
        segments = self._segments(view, flt)
        if not segments:
            return {}, 0
        live, total, norm, live_set = self._stats(view, segments, flt)
        if total == 0 or not wanted:
            return {}, total
        self._terms(view, segments, live, total, norm, live_set, wanted)
        cache = view.terms.get(live_set, {})
        return {term: len(entry.positions) for term in wanted if (entry := cache.get(term)) is not None}, total

    @staticmethod
    def _segments(view: _View, flt: RecallFilter) -> list[_Segment]:
        return [
            s
            for s in view.segments
            if (flt.branch is None or s.branch == flt.branch)
            and (flt.workspace_root is None or s.root == flt.workspace_root)
        ]

    @staticmethod
    def _ranges(
        view: _View, segments: list[_Segment], prefixes: tuple[str, ...]
    ) -> tuple[list[tuple[int, int]], np.ndarray]:
        """The view positions under ``prefixes``, as ascending ranges and as flat bounds."""
        key = (tuple(s.run_id for s in segments), tuple(prefixes))
        cached = view.ranges.get(key)
        if cached is None:
            ranges = [
                (segment.local_start + lo, segment.local_start + hi)
                for segment in segments
                for lo, hi in _prefix_ranges(segment.paths, prefixes)
            ]
            ranges.sort()
            if len(view.ranges) > 1024:
                view.ranges.clear()
            cached = view.ranges[key] = (ranges, np.asarray(ranges, dtype=np.int64).reshape(-1))
        return cached

    def _terms(
        self,
        view: _View,
        segments: list[_Segment],
        live: np.ndarray,
        total: int,
        norm: np.ndarray,
        live_set: bytes,
        weights: dict[str, float],
    ) -> list[tuple[_Term, float]]:
        """The query's terms that occur in a live chunk, with their weights, in query order."""
        cache = view.terms.get(live_set)
        if cache is None:
            cache = view.terms[live_set] = {}
        missing = [term for term in weights if term not in cache]
        if missing:
            if view.cached_terms + len(missing) > TERMS_CACHE_LIMIT:
                for other in view.terms.values():
                    other.clear()
                view.cached_terms = view.dense_bytes = 0
                missing = list(weights)
            parts, overlapping = self._chosen_parts(view, segments)
            self._load_postings(parts, missing)
            for term in missing:
                cache[term] = self._term(view, parts, overlapping, live, total, norm, term)
            view.cached_terms += len(missing)
        return [
            (entry, weight)
            for entry, weight in zip(map(cache.__getitem__, weights), weights.values(), strict=True)
            if entry is not None
        ]

    def _term(
        self,
        view: _View,
        parts: list[_Part],
        overlapping: bool,
        live: np.ndarray,
        total: int,
        norm: np.ndarray,
        term: str,
    ) -> _Term | None:
        pieces = []
        for part in parts:
            postings = self._postings.get((part.id, term))
            if postings is not None:
                chunk_ids, tfs = postings
                if part.base is not None:
                    positions = chunk_ids - (part.lo - part.base)
                else:
                    positions = np.searchsorted(view.chunk_ids, chunk_ids)
                keep = live[positions]
                pieces.append((positions[keep], tfs[keep]))
        df = sum(len(p) for p, _ in pieces)
        if df == 0:
            return None
        idf = math.log(1.0 + (total - df + 0.5) / (df + 0.5))
        if idf <= 0.0:
            return None
        positions = np.concatenate([p for p, _ in pieces]) if len(pieces) > 1 else pieces[0][0]
        tf = np.concatenate([t for _, t in pieces]) if len(pieces) > 1 else pieces[0][1]
        if overlapping:  # parts of different branches or roots interleave: positions ascend again
            order = np.argsort(positions, kind="stable")
            positions, tf = positions[order], tf[order]
        denominator = tf + norm[positions]
        return _Term(idf, positions, tf, denominator, idf * tf * _K1_PLUS_1 / denominator)

    @staticmethod
    def _chosen_parts(view: _View, segments: list[_Segment]) -> tuple[list[_Part], bool]:
        """The index segments holding the chunks of ``segments`` (runs), by ``lo``, and whether
        any two of them overlap (merged parts of one line can span runs of another)."""
        key = tuple(segment.run_id for segment in segments)
        cached = view.chosen_parts.get(key)
        if cached is None:
            los = np.fromiter((part.lo for part in view.parts), dtype=np.int64, count=len(view.parts))
            his = np.fromiter((part.hi for part in view.parts), dtype=np.int64, count=len(view.parts))
            hit = np.zeros(len(view.parts), dtype=bool)
            for segment in segments:  # parts overlapping the run's chunk ids [lo, lo + size)
                hit |= (los < segment.lo + len(segment.paths)) & (his > segment.lo)
            chosen = np.flatnonzero(hit).tolist()
            parts = [view.parts[k] for k in chosen]
            overlapping = bool(len(chosen) > 1 and np.any(los[chosen][1:] < np.maximum.accumulate(his[chosen])[:-1]))
            if len(view.chosen_parts) > 1024:
                view.chosen_parts.clear()
            cached = view.chosen_parts[key] = (parts, overlapping)
        return cached

    def _stats(
        self, view: _View, segments: list[_Segment], flt: RecallFilter
    ) -> tuple[np.ndarray, int, np.ndarray, bytes]:
        """Live mask at ``as_of``, N, each chunk's BM25 length norm ``k1 (1 - b + b dl/avgdl)``,
        and the live set's digest (the key of every per-scope cache)."""
        scope = _scope_key(flt)
        digest = view.live_set_of.get(scope)
        cached = view.stats.get(digest) if digest is not None else None
        if cached is not None and digest is not None:
            view.stats.move_to_end(digest)
            return (*cached, digest)
        live = self._live_mask(view, segments, flt)
        digest = hashlib.blake2b(np.packbits(live).tobytes(), digest_size=16).digest()
        if len(view.live_set_of) >= SCOPE_KEYS_REMEMBERED:
            view.live_set_of.clear()
        view.live_set_of[scope] = digest
        cached = view.stats.get(digest)
        if cached is not None:  # another as_of with the same live chunks
            view.stats.move_to_end(digest)
            return (*cached, digest)
        total = int(live.sum())
        avgdl = max(float(view.length[live].mean()) if total else 1.0, 1.0)
        norm = (BM25_K1 * (1.0 - BM25_B + BM25_B * view.length / avgdl)).astype(np.float32)
        view.stats[digest] = (live, total, norm)
        while len(view.stats) > LIVE_SETS_CACHED:
            self._forget(view, view.stats.popitem(last=False)[0])
        return live, total, norm, digest

    @staticmethod
    def _live_mask(view: _View, segments: list[_Segment], flt: RecallFilter) -> np.ndarray:
        in_segments = np.zeros(len(view.chunk_ids), dtype=bool)
        for segment in segments:
            in_segments[segment.local_start : segment.local_start + len(segment.paths)] = True
        if flt.all_versions:
            return in_segments
        live: np.ndarray
        if flt.as_of_us is None:
            live = in_segments & (view.valid_to == FOREVER)
        else:
            live = in_segments & (view.valid_from <= flt.as_of_us) & (view.valid_to > flt.as_of_us)
        return live

    @staticmethod
    def _forget(view: _View, digest: bytes) -> None:
        """Drop what a view keeps for one live set (its terms and their dense rows)."""
        terms = view.terms.pop(digest, {})
        view.cached_terms -= len(terms)
        view.dense_bytes -= sum(t.dense.nbytes for t in terms.values() if t is not None and t.dense is not None)
        for key in [k for k in view.live_paths if k[0] == digest]:
            del view.live_paths[key]

    @staticmethod
    def _window_mask(view: _View, candidates: np.ndarray, flt: RecallFilter) -> np.ndarray:
        keep = np.ones(len(candidates), dtype=bool)
        if flt.include_after_us is not None:
            keep &= view.valid_from[candidates] >= flt.include_after_us
        if flt.exclude_after_us is not None:
            keep &= view.valid_from[candidates] <= flt.exclude_after_us
        if flt.sources is not None:
            allowed = np.zeros(len(SOURCE_CODES), dtype=bool)
            allowed[[SOURCE_CODES[s] for s in flt.sources]] = True
            keep &= allowed[view.source[candidates]]
        return keep
