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
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import func
from sqlmodel import select

from core.index.timeutil import FOREVER
from core.store.store import Store
from core.store.tables import IndexChunkRow, IndexDocumentRow, IndexPostingRow, IndexRunRow
from core.vocab import Source

BM25_K1 = 1.2
BM25_B = 0.75
SOURCE_CODES: dict[Source, int] = {source: code for code, source in enumerate(Source)}
POSTINGS_CACHE_LIMIT = 400_000


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


@dataclass(frozen=True)
class Hit:
    chunk_id: int
    score: float


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


@dataclass
class _View:
    """Arrays over every chunk of one project (or of all projects, for ``None``)."""

    key: int
    segments: list[_Segment]
    chunk_ids: np.ndarray
    valid_from: np.ndarray
    valid_to: np.ndarray
    source: np.ndarray
    length: np.ndarray
    stats: dict[tuple[object, ...], tuple[np.ndarray, int, np.ndarray]] = field(default_factory=dict)
    df: dict[tuple[object, ...], int] = field(default_factory=dict)


def _prefix_ranges(paths: list[str], prefixes: Sequence[str]) -> list[tuple[int, int]]:
    """Index ranges of ``paths`` (sorted) equal to a prefix or inside it as a directory."""
    ranges: list[tuple[int, int]] = []
    for prefix in prefixes:
        prefix = prefix.strip("/")
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


class Scorer:
    """Scores queries against one store's index. Keep one per store; it caches arrays."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._views: dict[str | None, _View] = {}
        self._postings: dict[tuple[int, str], tuple[np.ndarray, np.ndarray] | None] = {}

    # ------------------------------------------------------------------ loading

    def _current_key(self, project: str | None) -> int:
        statement = select(func.coalesce(func.max(IndexRunRow.id), 0))
        if project is not None:
            statement = statement.where(IndexRunRow.project == project)
        with self.store.read() as conn:
            return int(conn.execute(statement).scalar_one())

    def _view(self, project: str | None) -> _View:
        key = self._current_key(project)
        cached = self._views.get(project)
        if cached is not None and cached.key == key:
            return cached
        view = self._load_view(project, key)
        self._views[project] = view
        return view

    def _load_view(self, project: str | None, key: int) -> _View:
        runs_query = select(IndexRunRow).order_by(IndexRunRow.id)
        chunk_query = (
            select(
                IndexChunkRow.id,
                IndexChunkRow.run_id,
                IndexChunkRow.path,
                IndexChunkRow.token_count,
                IndexDocumentRow.valid_from,
                IndexDocumentRow.valid_to,
                IndexDocumentRow.source,
            )
            .join(IndexDocumentRow, IndexDocumentRow.id == IndexChunkRow.document_id)
            .order_by(IndexChunkRow.id)
        )
        if project is not None:
            runs_query = runs_query.where(IndexRunRow.project == project)
            chunk_query = chunk_query.where(IndexDocumentRow.project == project)
        with self.store.read() as conn:
            runs = list(conn.exec(runs_query))
            rows = conn.execute(chunk_query.execution_options(yield_per=5000)).all()
        n = len(rows)
        chunk_ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)
        valid_from = np.fromiter((r[4] for r in rows), dtype=np.int64, count=n)
        valid_to = np.fromiter((FOREVER if r[5] is None else r[5] for r in rows), dtype=np.int64, count=n)
        source = np.fromiter((SOURCE_CODES[Source(r[6])] for r in rows), dtype=np.int8, count=n)
        length = np.fromiter((r[3] for r in rows), dtype=np.float32, count=n)
        segments: list[_Segment] = []
        position = 0
        for run in runs:
            size = run.chunk_hi - run.chunk_lo
            paths = [r[2] for r in rows[position : position + size]]
            segments.append(_Segment(int(run.id or 0), run.branch, run.root, run.chunk_lo, position, paths))
            position += size
        return _View(key, segments, chunk_ids, valid_from, valid_to, source, length)

    def _load_postings(self, run_ids: Iterable[int], terms: Iterable[str]) -> None:
        wanted = [(r, t) for r in run_ids for t in terms if (r, t) not in self._postings]
        if not wanted:
            return
        if len(self._postings) > POSTINGS_CACHE_LIMIT:
            self._postings.clear()
        want_runs = sorted({r for r, _ in wanted})
        want_terms = sorted({t for _, t in wanted})
        for r, t in wanted:
            self._postings[(r, t)] = None
        with self.store.read() as conn:
            for batch_start in range(0, len(want_terms), 500):
                batch = want_terms[batch_start : batch_start + 500]
                rows = conn.execute(
                    select(IndexPostingRow.run_id, IndexPostingRow.term, IndexPostingRow.chunk_ids, IndexPostingRow.tfs)
                    .where(IndexPostingRow.term.in_(batch))  # type: ignore[attr-defined]
                    .where(IndexPostingRow.run_id.in_(want_runs))  # type: ignore[attr-defined]
                )
                for run_id, term, ids, tfs in rows:
                    self._postings[(int(run_id), term)] = (
                        np.frombuffer(bytes(ids), dtype="<u4").astype(np.int64),
                        np.frombuffer(bytes(tfs), dtype="<u2").astype(np.float32),
                    )

    # ------------------------------------------------------------------ scoring

    def search(self, terms: Sequence[tuple[str, float]], flt: RecallFilter, *, top_k: int = 10) -> list[Hit]:
        """The ``top_k`` chunks for weighted ``terms`` under the masks of ``flt``.

        Ties are broken by chunk id, so results are deterministic.
        """
        weights: dict[str, float] = {}
        for term, weight in terms:
            weights[term] = weights.get(term, 0.0) + weight
        view = self._view(flt.project)
        segments = [
            s
            for s in view.segments
            if (flt.branch is None or s.branch == flt.branch)
            and (flt.workspace_root is None or s.root == flt.workspace_root)
        ]
        if not segments or not weights or top_k <= 0:
            return []
        live, total, norm = self._stats(view, segments, flt)
        if total == 0:
            return []
        self._load_postings([s.run_id for s in segments], weights)
        ranges = {
            s.run_id: _prefix_ranges(s.paths, flt.path_prefixes) if flt.path_prefixes else [(0, len(s.paths))]
            for s in segments
        }
        scores = np.zeros(len(view.chunk_ids), dtype=np.float32)
        for term, weight in weights.items():
            idf = self._idf(view, segments, live, total, flt, term)
            if idf <= 0.0:
                continue
            for segment in segments:
                postings = self._postings.get((segment.run_id, term))
                if postings is None:
                    continue
                offsets, tfs = postings
                for lo, hi in ranges[segment.run_id]:
                    a, b = np.searchsorted(offsets, (lo, hi))
                    if a == b:
                        continue
                    positions = offsets[a:b] + segment.local_start
                    tf = tfs[a:b]
                    scores[positions] += (weight * idf) * tf * (BM25_K1 + 1.0) / (tf + norm[positions])
        candidates = np.concatenate(
            [
                segment.local_start + lo + np.flatnonzero(scores[segment.local_start + lo : segment.local_start + hi])
                for segment in segments
                for lo, hi in ranges[segment.run_id]
            ]
            or [np.zeros(0, dtype=np.int64)]
        )
        if not len(candidates):
            return []
        keep = live[candidates] & self._window_mask(view, candidates, flt)
        candidates = candidates[keep]
        if not len(candidates):
            return []
        candidate_scores = scores[candidates]
        if len(candidates) > top_k:
            cut = np.argpartition(-candidate_scores, top_k - 1)[:top_k]
            threshold = candidate_scores[cut].min()
            # keep every candidate tied at the threshold so tie-breaking by id is exact
            cut = np.flatnonzero(candidate_scores >= threshold)
            candidates, candidate_scores = candidates[cut], candidate_scores[cut]
        ids = view.chunk_ids[candidates]
        order = np.lexsort((ids, -candidate_scores))[:top_k]
        return [Hit(int(ids[i]), float(candidate_scores[i])) for i in order]

    def _stats(
        self, view: _View, segments: list[_Segment], flt: RecallFilter
    ) -> tuple[np.ndarray, int, np.ndarray]:
        """Live mask at ``as_of``, N, and each chunk's BM25 length norm ``k1 (1 - b + b dl/avgdl)``."""
        key = (flt.branch, flt.workspace_root, flt.as_of_us)
        cached = view.stats.get(key)
        if cached is not None:
            return cached
        in_segments = np.zeros(len(view.chunk_ids), dtype=bool)
        for segment in segments:
            in_segments[segment.local_start : segment.local_start + len(segment.paths)] = True
        if flt.as_of_us is None:
            live = in_segments & (view.valid_to == FOREVER)
        else:
            live = in_segments & (view.valid_from <= flt.as_of_us) & (view.valid_to > flt.as_of_us)
        total = int(live.sum())
        avgdl = max(float(view.length[live].mean()) if total else 1.0, 1.0)
        norm = (BM25_K1 * (1.0 - BM25_B + BM25_B * view.length / avgdl)).astype(np.float32)
        result = (live, total, norm)
        view.stats[key] = result
        return result

    def _idf(
        self, view: _View, segments: list[_Segment], live: np.ndarray, total: int, flt: RecallFilter, term: str
    ) -> float:
        key = (flt.branch, flt.workspace_root, flt.as_of_us, term)
        df = view.df.get(key)
        if df is None:
            df = 0
            for segment in segments:
                postings = self._postings.get((segment.run_id, term))
                if postings is not None:
                    df += int(live[postings[0] + segment.local_start].sum())
            view.df[key] = df
        if df == 0:
            return 0.0
        return math.log(1.0 + (total - df + 0.5) / (df + 0.5))

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
