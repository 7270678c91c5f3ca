"""Session events and artifact windows as postings over numpy arrays, read once per store.

Recall asks, for every sub-query, which events and artifact windows of the scope's own
session match; the scope probe asks which events and artifacts of the project's
*withheld* sessions would have matched. Reading, validating and tokenizing every event of
every other session for each retrieval made a retrieval's cost grow with the store's history
(17 -> 96 ms per retrieval at 0 and 4,500 events, issue [6/9]). ``SessionRecords`` reads each
recallable event once (events are append-only, so a refresh reads only those with a higher
``store_seq``), counts its terms once, and keeps one posting list per term. A probe is then a
few masks (project, session, time window, source, path prefixes) and a BM25 pass over the
postings of the query's terms, whatever the history holds.

Scores are the ones ``small_bm25.bm25_scores`` gives on the same pool (statistics over the
masked records, float64, terms added in query order), so the probe's answer is the same as
scoring a freshly read pool (a test compares them).
"""

from __future__ import annotations

import math
import threading
import weakref
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import select as sa_select
from sqlmodel import col

from scopelens.core.contracts import Event, RejectedItem, RetrievalScope
from scopelens.core.hashing import as_bytes, text_hash
from scopelens.core.index.scorer import BM25_B, BM25_K1, Scorer
from scopelens.core.index.timeutil import to_micros
from scopelens.core.index.tokenizer import count_terms
from scopelens.core.pipeline.session_evidence import (
    RECALLED_EVENT_TYPES,
    SessionInfo,
    artifact_refs,
    artifact_text,
    artifact_windows,
    artifact_withheld,
    event_text,
    project_sessions,
    session_withheld,
)
from scopelens.core.store.store import Store
from scopelens.core.store.tables import EventRow, SessionRow
from scopelens.core.vocab import Source, Stage

if TYPE_CHECKING:
    from scopelens.core.pipeline.recall import TimeWindow

_EVENT, _ARTIFACT = 0, 1
_KIND_OF = {Source.SESSION_EVENT: _EVENT, Source.ARTIFACT: _ARTIFACT}


@dataclass(frozen=True)
class SessionRecord:
    """One event or artifact window: what a probe rejection names, and where recall reads it back."""

    candidate_id: str
    source: Source
    source_ref: str
    source_version: str
    path: str | None = None
    line_start: int | None = None
    line_end: int | None = None
    names: tuple[str, ...] = ()
    """An event: the names of the artifacts it previews. An artifact window: its artifact's."""
    session_id: str = ""
    seq: int = 0
    """The event (of an artifact window: the event that keeps the artifact)."""
    ref_index: int = -1
    """An artifact window: its artifact's place in the event's list."""


@dataclass
class SessionRecords:
    """Every recallable event and artifact window of one store, with their terms counted."""

    store: Store
    last_seq: int = 0
    records: list[SessionRecord] = field(default_factory=list)
    project: array[int] = field(default_factory=lambda: array("i"))
    session: array[int] = field(default_factory=lambda: array("i"))
    kind: array[int] = field(default_factory=lambda: array("b"))
    created_us: array[int] = field(default_factory=lambda: array("q"))
    length: array[int] = field(default_factory=lambda: array("q"))
    postings: dict[str, tuple[array[int], array[int]]] = field(default_factory=dict)
    """``term -> (record indices, term frequencies)``, indices ascending."""
    codes: dict[str, int] = field(default_factory=dict)
    """Project and session ids -> small integers (one table for both)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def refresh(self) -> None:
        """Read the events appended since the last refresh (recallable types only)."""
        statement = (
            sa_select(col(EventRow.store_seq), col(EventRow.body), col(SessionRow.project))
            .join(SessionRow, col(SessionRow.id) == col(EventRow.session_id))
            .where(col(EventRow.store_seq) > self.last_seq)
            .where(col(EventRow.type).in_([t.value for t in RECALLED_EVENT_TYPES]))
            .order_by(col(EventRow.store_seq))
        )
        with self.store.read() as conn:
            rows = conn.execute(statement).all()
        if not rows:
            return
        texts: list[tuple[str]] = []
        first = len(self.records)
        for store_seq, body, project in rows:
            event = Event.model_validate_json(as_bytes(body))
            refs = artifact_refs(event)
            names = tuple(ref.name for ref in refs)
            text = event_text(event)
            if text:
                self._add(project, event, _EVENT, SessionRecord(
                    f"event:{event.session_id}#{event.seq}", Source.SESSION_EVENT, f"{event.session_id}#{event.seq}",
                    text_hash(text), names=names, session_id=event.session_id, seq=event.seq,
                ))
                texts.append((text,))
            for ref_index, ref in enumerate(refs):
                for line_first, line_last, window_text in artifact_windows(artifact_text(self.store, event, ref)):
                    self._add(project, event, _ARTIFACT, SessionRecord(
                        f"artifact:{ref.blob[:16]}:{line_first}-{line_last}", Source.ARTIFACT,
                        f"{ref.name}:{line_first}-{line_last}", ref.blob, ref.name, line_first, line_last, (ref.name,),
                        event.session_id, event.seq, ref_index,
                    ))
                    texts.append((window_text,))
            self.last_seq = int(store_seq)
        counts = count_terms(texts)
        self.length.extend(counts.lengths.tolist())
        bounds = counts.bounds.tolist()
        term_ids, tfs = counts.term_ids.tolist(), counts.tfs.tolist()
        for unit in range(len(texts)):
            record = first + unit
            for k in range(bounds[unit], bounds[unit + 1]):
                entry = self.postings.get(counts.terms[term_ids[k]])
                if entry is None:
                    entry = self.postings[counts.terms[term_ids[k]]] = (array("i"), array("i"))
                entry[0].append(record)
                entry[1].append(tfs[k])

    def _add(self, project: str, event: Event, kind: int, record: SessionRecord) -> None:
        self.records.append(record)
        self.project.append(self._code(project))
        self.session.append(self._code(event.session_id))
        self.kind.append(kind)
        self.created_us.append(to_micros(event.created_at))

    def _code(self, name: str) -> int:
        return self.codes.setdefault(name, len(self.codes))

    def withheld(self, scope: RetrievalScope, window: TimeWindow) -> Pool:
        """What the scope withholds of its project's sessions in its time window, each with
        why (read once per probe; each sub-query then scores it with ``Pool.hits``)."""
        return self._pool(scope, window, withheld=True)

    def admitted(self, scope: RetrievalScope, window: TimeWindow) -> Pool:
        """What the scope admits: its own session's events and artifacts in its time window,
        but those its path prefixes keep out (read once per retrieval; see ``Pool.scored``)."""
        return self._pool(scope, window, withheld=False)

    def _pool(self, scope: RetrievalScope, window: TimeWindow, *, withheld: bool) -> Pool:
        with self.lock:
            self.refresh()
            n = len(self.records)
            pool = np.zeros(n, dtype=bool)
            project = self.codes.get(scope.project)
            if project is not None:
                created = np.frombuffer(self.created_us, dtype=np.int64, count=n)
                pool = np.frombuffer(self.project, dtype=np.int32, count=n) == project
                pool &= created <= to_micros(window.as_of)
                if window.include_after is not None:
                    pool &= created >= to_micros(window.include_after)
                if window.exclude_after is not None:
                    pool &= created <= to_micros(window.exclude_after)
            reasons, texts = self._reasons(pool, scope, project_sessions(self.store, scope.project))
            pool &= (reasons >= 0) if withheld else (reasons < 0)
            return Pool(self, n, pool, reasons, texts)

    def _reasons(
        self, pool: np.ndarray, scope: RetrievalScope, sessions: Sequence[SessionInfo]
    ) -> tuple[np.ndarray, list[str]]:
        """Per record, the index in the returned texts of why the scope withholds it (-1: it
        does not): the session's reason, else (with path prefixes) the first withheld artifact
        an event previews, or the window's artifact (``session_evidence.py``)."""
        texts: list[str] = []
        by_session = np.full(len(self.codes), -1, dtype=np.int64)
        for info in sessions:
            reason = session_withheld(info, scope)
            code = self.codes.get(info.id)
            if reason is not None and code is not None:
                by_session[code] = len(texts)
                texts.append(reason)
        reasons = by_session[np.frombuffer(self.session, dtype=np.int32, count=len(pool))]
        if scope.path_prefixes:
            by_name: dict[str, str | None] = {}
            for position in np.flatnonzero(pool & (reasons < 0)).tolist():
                record = self.records[position]
                for name in record.names:
                    reason = by_name[name] if name in by_name else by_name.setdefault(name, artifact_withheld(name, scope))
                    if reason is not None:
                        reasons[position] = len(texts)
                        texts.append(reason if record.source == Source.ARTIFACT else f"previews artifact {name}: {reason}")
                        break
        return reasons, texts


@dataclass(frozen=True)
class Pool:
    """Some of the records (``pool``) and, for withheld ones, the index of each one's reason."""

    records: SessionRecords
    size: int
    """How many records there were when this was made (later ones are not looked at)."""
    pool: np.ndarray
    reasons: np.ndarray
    texts: list[str]

    def hits(self, sources: frozenset[Source], terms: Sequence[tuple[str, float]], top_k: int) -> list[RejectedItem]:
        """The ``top_k`` records of ``sources`` that score best for ``terms``, as probe
        rejections with their reasons (a pool made by ``SessionRecords.withheld``)."""
        items = []
        for i, _score in self.scored(sources, terms, top_k):
            record = self.records.records[i]
            items.append(RejectedItem(
                candidate_id=record.candidate_id, source=record.source, source_ref=record.source_ref,
                source_version=record.source_version, path=record.path, line_start=record.line_start,
                line_end=record.line_end, stage=Stage.OUT_OF_SCOPE, reason=self.texts[int(self.reasons[i])],
                from_probe=True,
            ))
        return items

    def scored(self, sources: frozenset[Source], terms: Sequence[tuple[str, float]], top_k: int) -> list[tuple[int, float]]:
        """The ``top_k`` records of ``sources`` with a positive score for ``terms``, best first
        (ties by candidate id), as (record index, score): BM25 over the pool's records of those
        sources, as ``bm25_scores`` over their texts."""
        with self.records.lock:  # numpy views of its arrays must not outlive the lock: a refresh appends
            return self._scored(sources, terms, top_k)

    def record(self, index: int) -> SessionRecord:
        return self.records.records[index]

    def _scored(self, sources: frozenset[Source], terms: Sequence[tuple[str, float]], top_k: int) -> list[tuple[int, float]]:
        store = self.records
        kinds = np.frombuffer(store.kind, dtype=np.int8, count=self.size)
        pool = self.pool & np.isin(kinds, [_KIND_OF[s] for s in sources if s in _KIND_OF])
        total = int(pool.sum())
        if total == 0:
            return []
        lengths = np.frombuffer(store.length, dtype=np.int64, count=self.size)
        avgdl = max(int(lengths[pool].sum()) / total, 1.0)
        scores = np.zeros(self.size, dtype=np.float64)
        for term, weight in terms:
            entry = store.postings.get(term)
            if entry is None:
                continue
            at = np.frombuffer(entry[0], dtype=np.int32)
            end = int(np.searchsorted(at, self.size))
            keep = pool[at[:end]]
            df = int(keep.sum())
            if df == 0:
                continue
            tf = np.frombuffer(entry[1], dtype=np.int32)[:end][keep].astype(np.float64)
            at = at[:end][keep]
            idf = math.log(1.0 + (total - df + 0.5) / (df + 0.5))
            scores[at] += weight * idf * tf * (BM25_K1 + 1) / (
                tf + BM25_K1 * (1 - BM25_B + BM25_B * lengths[at] / avgdl)
            )
        positive = np.flatnonzero(scores > 0)
        if len(positive) > top_k:
            threshold = np.partition(scores[positive], len(positive) - top_k)[len(positive) - top_k]
            positive = positive[scores[positive] >= threshold]
        ranked = sorted(positive.tolist(), key=lambda i: (-scores[i], store.records[i].candidate_id))[:top_k]
        return [(i, float(scores[i])) for i in ranked]


_BY_SCORER: weakref.WeakKeyDictionary[Scorer, SessionRecords] = weakref.WeakKeyDictionary()
_BY_SCORER_LOCK = threading.Lock()


def session_records(store: Store, scorer: Scorer) -> SessionRecords:
    """The store's session records, kept as long as ``scorer`` (one per retriever, like its
    index views), so each event is read and tokenized once per process."""
    with _BY_SCORER_LOCK:
        records = _BY_SCORER.get(scorer)
        if records is None or records.store is not store:
            records = _BY_SCORER[scorer] = SessionRecords(store)
        return records
