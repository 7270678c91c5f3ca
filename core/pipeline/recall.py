"""Recallers: find candidates for each sub-query, inside the scope's masks.

Each recaller returns :class:`Candidate` objects with provenance, never prompt text. Project,
branch, workspace root and the time boundary are masks here (nothing outside them is read);
so are, for session events and artifacts, the scope's own session and, for artifacts named
by a path, the path prefixes (docs/scope.md). What they withheld is recorded separately by
the probe (``probe.py``). Candidates found by several sub-queries are merged, keeping every
sub-query id and the best lexical score.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from sqlmodel import col, select

from scopelens.core.contracts import ArtifactRef, Candidate, Event, RetrievalScope, ScoreBreakdown, SubQuery
from scopelens.core.hashing import text_hash
from scopelens.core.index.chunks import ChunkRecord, fetch_chunks
from scopelens.core.index.scorer import Hit, RecallFilter, Scorer
from scopelens.core.index.small_bm25 import bm25_scores
from scopelens.core.index.timeutil import to_micros
from scopelens.core.index.tokenizer import tokenize
from scopelens.core.memory import current_memories
from scopelens.core.pipeline.locate import PathIndex
from scopelens.core.pipeline.planner import TERM_WEIGHTS
from scopelens.core.pipeline.policy import Policy
from scopelens.core.pipeline.session_evidence import artifact_refs, artifact_text, event_text, window_text
from scopelens.core.pipeline.session_records import Pool, SessionRecord, session_records
from scopelens.core.store.store import Store
from scopelens.core.store.tables import EventRow
from scopelens.core.vocab import (
    WORKSPACE_SOURCES,
    Authority,
    EvidenceKind,
    MemoryStatus,
    Source,
    Trust,
    Visibility,
)

SOURCE_AUTHORITY: dict[Source, Authority] = {
    Source.PROJECT_RULE: Authority.HIGH,
    Source.DECISION_RECORD: Authority.HIGH,
    Source.WORKSPACE_CODE: Authority.HIGH,
    Source.WORKSPACE_DOC: Authority.MEDIUM,
    Source.ARTIFACT: Authority.MEDIUM,
    Source.SESSION_EVENT: Authority.LOW,
    Source.MEMORY: Authority.MEDIUM,
}
MEMORY_AUTHORITY: dict[MemoryStatus, Authority] = {
    MemoryStatus.VERIFIED: Authority.HIGH,
    MemoryStatus.CONFLICTED: Authority.MEDIUM,
    MemoryStatus.DEPRECATED: Authority.LOW,
    MemoryStatus.CANDIDATE: Authority.LOW,
    MemoryStatus.PRIVATE: Authority.MEDIUM,
}
FILES_KEPT = 100
"""Files a deep workspace recall keeps, by file score: the candidates rerank sees."""
DOC_FILES_KEPT = 20
"""Of which at most a fifth docs: prose matches a report's prose better than code does, and a
repository with a thousand pages of docs must not crowd its code out of recall."""
CHUNKS_PER_FILE = 4
"""Chunks kept of each of the best ``FILES_WITH_CHUNKS`` files: its best, and a few more for
packing to choose from (as many as packing may select from one file, ``pack.MAX_ITEMS_PER_FILE``)."""
FILES_WITH_CHUNKS = 8
"""Files past the best eight (the default ``max_items``) keep their best chunk only: they are
there to be ranked (where did the right file stand?), seldom to fill the block, and every
candidate costs reading, scoring and recording."""
FILE_BONUS = 0.25
"""A file's score is its best chunk's, raised by up to a quarter for other matching chunks
(their scores summed, relative to the best, capped at 1): a file that matches in several
places is likelier the place than one lucky chunk, but only boundedly (a long file is not
better for being long)."""
FILE_BONUS_CHUNKS = 3
"""How many further chunks of a file count towards its bonus."""
DEFINES_BONUS = 0.5
"""A chunk that defines a name the task uses as a whole identifier (its symbol is
``from_file`` or ``Config.from_file`` for ``Config.from_file``) scores half again: the place
that defines a name is likelier the place of a fix than the many that mention it (the symbol
as a field, beside the text)."""
DEFINED_KINDS = frozenset({"anchor", "identifier", "frame", "exception", "quoted"})


@dataclass(frozen=True)
class TimeWindow:
    """The scope's time boundary in index units; ``as_of`` is always set (``now`` by default)."""

    as_of: datetime
    include_after: datetime | None
    exclude_after: datetime | None

    def admits(self, moment: datetime) -> bool:
        if moment > self.as_of:
            return False
        if self.include_after is not None and moment < self.include_after:
            return False
        return not (self.exclude_after is not None and moment > self.exclude_after)


def time_window(scope: RetrievalScope, now: datetime) -> TimeWindow:
    """The scope's window. ``exclude_after`` caps ``as_of``: evidence captured after it is out,
    so the index is read as it was then (a file changed since keeps its version of that time,
    instead of being dropped as superseded)."""
    boundary = scope.time_boundary
    as_of = boundary.as_of or now
    if boundary.exclude_after is not None:
        as_of = min(as_of, boundary.exclude_after)
    return TimeWindow(as_of, boundary.include_after, boundary.exclude_after)


def reads_the_past(scope: RetrievalScope) -> bool:
    """Whether the scope reads the index as of a past moment (``as_of`` or ``exclude_after``)
    rather than the live index."""
    return scope.time_boundary.as_of is not None or scope.time_boundary.exclude_after is not None


def workspace_filter(scope: RetrievalScope, sources: frozenset[Source], window: TimeWindow, *, as_of_given: bool) -> RecallFilter:
    """The scorer masks for a scope (``as_of`` unset means the live index)."""
    return RecallFilter(
        project=scope.project,
        branch=scope.branch,
        workspace_root=scope.workspace_root,
        path_prefixes=scope.path_prefixes,
        sources=sources,
        as_of_us=to_micros(window.as_of) if as_of_given else None,
        include_after_us=None if window.include_after is None else to_micros(window.include_after),
        exclude_after_us=None if window.exclude_after is None else to_micros(window.exclude_after),
    )


def chunk_candidate(chunk: ChunkRecord, score: float, sub_query: SubQuery, policy: Policy, as_of: datetime) -> Candidate:
    default_trust = Trust.UNTRUSTED_OBSERVATION if chunk.evidence_kind == EvidenceKind.TEST_LOG else Trust.EVIDENCE
    return Candidate(
        id=f"chunk:{chunk.chunk_id}",
        source=chunk.source,
        source_ref=chunk.source_ref,
        source_version=chunk.content_hash,
        path=chunk.path,
        line_start=chunk.start_line,
        line_end=chunk.end_line,
        symbol=chunk.symbol,
        project=chunk.project,
        branch=chunk.branch or None,
        captured_at=chunk.valid_from,
        valid_as_of=as_of,
        text=chunk.text,
        evidence_kind=chunk.evidence_kind,
        visibility=policy.rules_for(chunk.path).visibility,
        trust=policy.trust_for(chunk.path, default_trust),
        authority=SOURCE_AUTHORITY[chunk.source],
        scores=ScoreBreakdown(lexical=score),
        sub_query_ids=(sub_query.id,),
        redactions=chunk.redactions,
    )


FILE_CHUNKS_LIMIT = 2000
"""How many chunks of one file planning reads (a failing test's file, for its imports and calls)."""


@lru_cache(maxsize=8)
def path_index(paths: tuple[str, ...]) -> PathIndex:
    """One lookup per set of live paths (a retriever asks for the same set until the index changes)."""
    return PathIndex(paths)


class IndexLexicon:
    """The planner's view of the index in scope (``planner.Lexicon``): the workspace's paths
    and term rarity, both under the scope's masks."""

    def __init__(self, scorer: Scorer, scope: RetrievalScope, window: TimeWindow) -> None:
        sources = frozenset(s for s in WORKSPACE_SOURCES if scope.admits_source(s))
        self.scorer = scorer
        self.filter = workspace_filter(scope, sources, window, as_of_given=reads_the_past(scope))
        self._paths: PathIndex | None = None

    def paths(self) -> PathIndex:
        if self._paths is None:
            self._paths = path_index(self.scorer.live_paths(self.filter) if self.filter.sources else ())
        return self._paths

    def document_frequencies(self, terms: Iterable[str]) -> tuple[dict[str, int], int]:
        return self.scorer.document_frequencies(terms, self.filter) if self.filter.sources else ({}, 0)

    def file_chunks(self, path: str) -> list[tuple[str | None, str]]:
        """Found through the file's whole-path term, which each of its chunks is indexed under."""
        whole = path.lower()
        if not self.filter.sources or tokenize(path)[:1] != [whole]:
            return []
        hits = self.scorer.search([(whole, 1.0)], self.filter, top_k=FILE_CHUNKS_LIMIT, with_places=True)
        chunks = fetch_chunks(self.scorer.store, [h.chunk_id for h in hits if h.path == path])
        return [(c.symbol, c.text) for c in sorted(chunks.values(), key=lambda c: (c.root, c.start_line))]


def defined_names(sub_query: SubQuery) -> frozenset[str]:
    """The whole identifiers of a sub-query (at their kind's full weight), lowercased."""
    return frozenset(
        t.term for t in sub_query.terms if t.kind in DEFINED_KINDS and t.weight >= TERM_WEIGHTS[t.kind] and len(t.term) > 2
    )


def defines(symbol: str | None, names: frozenset[str]) -> bool:
    """Whether a chunk's symbol (``Class.method``) is one of ``names`` or ends with one."""
    if not symbol or not names:
        return False
    symbol = symbol.lower()
    return symbol in names or symbol.rsplit(".", 1)[-1] in names or any(n.endswith("." + symbol) for n in names)


FileKey = tuple[str, str]
"""A file of the index: (workspace root, path)."""


def rank_files(hits: Sequence[Hit], names: frozenset[str] = frozenset()) -> list[tuple[float, FileKey, list[Hit]]]:
    """Chunk hits grouped by file, best file first: ``(file score, file, its hits best first)``.

    A chunk that defines one of ``names`` counts ``DEFINES_BONUS`` more first; a file scores
    its best chunk's score plus up to ``FILE_BONUS`` of it for its next ``FILE_BONUS_CHUNKS``.
    """
    groups: dict[FileKey, list[Hit]] = {}
    boosted = [
        Hit(h.chunk_id, h.score * (1.0 + DEFINES_BONUS), h.path, h.symbol, h.root, h.source)
        if defines(h.symbol, names) else h
        for h in hits
    ]
    for hit in sorted(boosted, key=lambda h: (-h.score, h.chunk_id)):
        groups.setdefault((hit.root, hit.path), []).append(hit)
    scored = []
    for key, group in groups.items():
        best = group[0].score
        others = sum(h.score for h in group[1 : 1 + FILE_BONUS_CHUNKS])
        file_score = best * (1.0 + FILE_BONUS * min(1.0, others / best)) if best > 0 else 0.0
        scored.append((file_score, key, group))
    scored.sort(key=lambda entry: (-entry[0], entry[1]))
    return scored


def kept_files(files: Sequence[tuple[float, FileKey, list[Hit]]]) -> list[tuple[float, FileKey, list[Hit]]]:
    """Of files ranked by :func:`rank_files`, those a recall keeps: the ``FILES_KEPT`` best,
    at most ``DOC_FILES_KEPT`` of them docs."""
    kept: list[tuple[float, FileKey, list[Hit]]] = []
    docs = 0
    for entry in files:
        if len(kept) == FILES_KEPT:
            break
        if entry[2][0].source == Source.WORKSPACE_DOC:
            if docs == DOC_FILES_KEPT:
                continue
            docs += 1
        kept.append(entry)
    return kept


def by_file(hits: Sequence[Hit], names: frozenset[str] = frozenset()) -> list[Hit]:
    """Chunk hits aggregated to files (:func:`rank_files`, :func:`kept_files`), the first
    ``FILES_WITH_CHUNKS`` files with their ``CHUNKS_PER_FILE`` best chunks and the others with
    their best, scaled so that a file's best chunk carries the file score."""
    out = []
    for rank, (file_score, _key, group) in enumerate(kept_files(rank_files(hits, names))):
        scale = file_score / group[0].score if group[0].score > 0 else 1.0
        kept = group[:CHUNKS_PER_FILE] if rank < FILES_WITH_CHUNKS else group[:1]
        out += [Hit(h.chunk_id, h.score * scale, h.path, h.symbol, h.root, h.source) for h in kept]
    return out


class Recall:
    """All recallers over one store, for one retrieval."""

    def __init__(self, store: Store, scorer: Scorer, policy: Policy) -> None:
        self.store = store
        self.scorer = scorer
        self.policy = policy
        self._admitted: dict[tuple[object, ...], Pool] = {}
        """The scope's session records, masked once per retrieval however many sub-queries want them."""
        self.sessions = SessionCandidates(store, policy)

    def run(self, sub_queries: Sequence[SubQuery], scope: RetrievalScope, window: TimeWindow) -> list[Candidate]:
        merged: dict[str, Candidate] = {}
        for sub_query in sub_queries:
            for candidate in self.recall_one(sub_query, scope, window):
                current = merged.get(candidate.id)
                if current is None:
                    merged[candidate.id] = candidate
                    continue
                merged[candidate.id] = current.model_copy(
                    update={
                        "sub_query_ids": (*current.sub_query_ids, sub_query.id),
                        "scores": current.scores.model_copy(
                            update={"lexical": max(current.scores.lexical, candidate.scores.lexical)}
                        ),
                    }
                )
        return sorted(merged.values(), key=lambda c: (-c.scores.lexical, c.id))

    def recall_one(self, sub_query: SubQuery, scope: RetrievalScope, window: TimeWindow) -> list[Candidate]:
        terms = [(t.term, t.weight) for t in sub_query.terms]
        found: list[Candidate] = []
        workspace = frozenset(sub_query.sources) & WORKSPACE_SOURCES
        if workspace:
            flt = workspace_filter(scope, workspace, window, as_of_given=reads_the_past(scope))
            hits = by_file(self.scorer.search(terms, flt, top_k=sub_query.top_k, with_places=True), defined_names(sub_query))
            chunks = fetch_chunks(self.store, [h.chunk_id for h in hits])
            found += [chunk_candidate(chunks[h.chunk_id], h.score, sub_query, self.policy, window.as_of) for h in hits]
        if Source.SESSION_EVENT in sub_query.sources or Source.ARTIFACT in sub_query.sources:
            found += self._session_candidates(sub_query, scope, window, terms)
        if Source.MEMORY in sub_query.sources:
            found += self._memory_candidates(sub_query, scope, window, terms)
        return found

    # ------------------------------------------------------------------ sessions & artifacts

    def _session_candidates(
        self, sub_query: SubQuery, scope: RetrievalScope, window: TimeWindow, terms: list[tuple[str, float]]
    ) -> list[Candidate]:
        """The best events and artifact windows of the scope's own session (BM25 over those the
        scope admits, from the store's session records: masks, not a pass over its events)."""
        key = (scope.project, scope.branch, scope.session_id, scope.workspace_root, scope.path_prefixes, window)
        pool = self._admitted.get(key)
        if pool is None:
            pool = self._admitted[key] = session_records(self.store, self.scorer).admitted(scope, window)
        ranked = pool.scored(frozenset(sub_query.sources), terms, sub_query.top_k)
        candidates = self.sessions.for_records([pool.record(i) for i, _score in ranked], scope, window)
        return [
            c.model_copy(update={"scores": ScoreBreakdown(lexical=score), "sub_query_ids": (sub_query.id,)})
            for (_i, score), c in zip(ranked, candidates, strict=True)
        ]

    # ------------------------------------------------------------------ memory

    def _memory_candidates(
        self, sub_query: SubQuery, scope: RetrievalScope, window: TimeWindow, terms: list[tuple[str, float]]
    ) -> list[Candidate]:
        pool = []
        as_of = window.as_of if reads_the_past(scope) else None
        for record, digest in current_memories(self.store, scope.project, as_of=as_of):
            if record.branch is not None and scope.branch is not None and record.branch != scope.branch:
                continue
            if not window.admits(record.valid_from):
                continue
            pool.append(
                Candidate(
                    id=f"memory:{record.id}",
                    source=Source.MEMORY,
                    source_ref=f"memory:{record.id}",
                    source_version=digest,
                    project=record.project,
                    branch=record.branch,
                    captured_at=record.valid_from,
                    valid_as_of=record.valid_until,
                    text=record.content,
                    evidence_kind=EvidenceKind.MEMORY,
                    trust=Trust.EVIDENCE,
                    authority=MEMORY_AUTHORITY[record.status],
                    memory_status=record.status,
                    owner=record.private_to,
                    conflicts_with=tuple(f"memory:{other}" for other in record.conflicts_with),
                    visibility=Visibility.RAW,
                )
            )
        return _top(pool, terms, sub_query)


class SessionCandidates:
    """Candidates for the session records recall keeps (``session_records.py``), with the
    policy's path rules applied: events and artifacts are read back for these only."""

    def __init__(self, store: Store, policy: Policy) -> None:
        self.store = store
        self.policy = policy
        self._lines: dict[str, list[str]] = {}
        """Each artifact's lines, by blob (several of its windows may be candidates)."""

    def for_records(self, records: Sequence[SessionRecord], scope: RetrievalScope, window: TimeWindow) -> list[Candidate]:
        """One candidate per record, in the order given."""
        events = read_events_at(self.store, sorted({(r.session_id, r.seq) for r in records}))
        out = []
        for record in records:
            event = events[(record.session_id, record.seq)]
            refs = artifact_refs(event)
            if record.source == Source.SESSION_EVENT:
                out.append(self._event_candidate(event, event_text(event), refs, scope, window))
            else:
                out.append(self._artifact_candidate(event, refs[record.ref_index], record, scope, window))
        return out

    def _event_candidate(
        self, event: Event, text: str, refs: list[ArtifactRef], scope: RetrievalScope, window: TimeWindow
    ) -> Candidate:
        about = tuple(ref.name for ref in refs)
        return Candidate(
            id=f"event:{event.session_id}#{event.seq}",
            source=Source.SESSION_EVENT,
            source_ref=f"{event.session_id}#{event.seq}",
            source_version=text_hash(text),
            project=scope.project,
            branch=scope.branch,
            captured_at=event.created_at,
            valid_as_of=window.as_of,
            text=text,
            evidence_kind=EvidenceKind.EVENT,
            visibility=self.policy.rules_for_all(about).visibility,
            trust=Trust.UNTRUSTED_OBSERVATION,
            authority=SOURCE_AUTHORITY[Source.SESSION_EVENT],
            about_paths=about,
        )

    def _artifact_candidate(
        self, event: Event, ref: ArtifactRef, record: SessionRecord, scope: RetrievalScope, window: TimeWindow
    ) -> Candidate:
        if ref.blob not in self._lines:
            self._lines[ref.blob] = artifact_text(self.store, event, ref).splitlines()
        first, last = record.line_start or 1, record.line_end or 1
        text = window_text(self._lines[ref.blob], first, last)
        return Candidate(
            id=f"artifact:{ref.blob[:16]}:{first}-{last}",
            source=Source.ARTIFACT,
            source_ref=f"{ref.name}:{first}-{last}",
            source_version=ref.blob,
            path=ref.name,
            line_start=first,
            line_end=last,
            project=scope.project,
            branch=scope.branch,
            captured_at=event.created_at,
            valid_as_of=window.as_of,
            text=text,
            evidence_kind=ref.evidence_kind,
            visibility=self.policy.rules_for(ref.name).visibility,
            trust=Trust.UNTRUSTED_OBSERVATION,
            authority=SOURCE_AUTHORITY[Source.ARTIFACT],
        )


def read_events_at(store: Store, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], Event]:
    """Events by (session id, seq)."""
    found: dict[tuple[str, int], Event] = {}
    by_session: dict[str, list[int]] = {}
    for session_id, seq in keys:
        by_session.setdefault(session_id, []).append(seq)
    with store.read() as conn:
        for session_id, seqs in by_session.items():
            statement = select(col(EventRow.body)).where(
                col(EventRow.session_id) == session_id, col(EventRow.seq).in_(seqs)
            )
            for body in conn.execute(statement).scalars():
                event = Event.model_validate_json(bytes(body))
                found[(event.session_id, event.seq)] = event
    return found


def _top(pool: list[Candidate], terms: list[tuple[str, float]], sub_query: SubQuery) -> list[Candidate]:
    scores = bm25_scores(terms, [c.text for c in pool])
    ranked = sorted(
        ((score, c) for score, c in zip(scores, pool, strict=True) if score > 0), key=lambda pair: (-pair[0], pair[1].id)
    )[: sub_query.top_k]
    return [
        c.model_copy(update={"scores": ScoreBreakdown(lexical=score), "sub_query_ids": (sub_query.id,)})
        for score, c in ranked
    ]
