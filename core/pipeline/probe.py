"""The scope probe: record what the scope's masks withheld, without ever showing its text.

Recall applies project, branch, workspace root, path prefixes, time boundary and sources as
masks, so nothing outside them is read. For the audit to say what was withheld, the probe
re-runs each sub-query *without* those masks (top few per sub-query) and records each hit the
masked recall could not return as a rejection (``out-of-scope``, ``stale``, ``denied-source``)
with source_ref, version and reason. It never fetches chunk text: only provenance columns.
Memories, and the events and artifacts of the project's sessions that the scope withholds
(another session, or an artifact outside the path prefixes), are scored in process to find
the hits; their text goes no further. Its results are runtime-only; no model-visible output
carries them.

Other projects are outside the permission context entirely: the probe counts their hits (one
aggregate rejection per source, ``other-projects:<source>``) and never records which paths,
memory ids or project names matched, so a shared store does not copy one team's file names
into another team's snapshots.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select as sa_select  # sqlmodel's select is typed for up to four columns
from sqlmodel import col

from scopelens.core.clock import when
from scopelens.core.contracts import RejectedItem, RetrievalScope, SubQuery
from scopelens.core.index.scorer import RecallFilter, Scorer
from scopelens.core.index.small_bm25 import bm25_scores
from scopelens.core.index.timeutil import from_micros
from scopelens.core.memory import all_current_memories
from scopelens.core.pathmatch import under_any
from scopelens.core.pipeline.recall import (
    TimeWindow,
    reads_the_past,
    workspace_filter,
)
from scopelens.core.pipeline.session_records import Pool, session_records
from scopelens.core.store.store import Store
from scopelens.core.store.tables import IndexChunkRow, IndexDocumentRow
from scopelens.core.vocab import WORKSPACE_SOURCES, Source, Stage

PROBE_TOP_K = 3
OTHER_PROJECTS_REF = "(other projects)"
"""The source_ref of the probe's aggregate rejections: counts, never names."""
OTHER_PROJECTS_PREFIX = "other-projects:"
SESSION_SOURCES = frozenset({Source.SESSION_EVENT, Source.ARTIFACT})
MEMORY_PROBE_FLOOR = 0.5
"""A memory is recorded as withheld only if it scores at least half the best memory's score:
one shared word is not enough to be worth an audit line."""


def probe(
    store: Store,
    scorer: Scorer,
    sub_queries: Sequence[SubQuery],
    scope: RetrievalScope,
    window: TimeWindow,
    recalled_ids: set[str],
    memory_limit: int = PROBE_TOP_K,
) -> list[RejectedItem]:
    """Rejections for what the scope withheld, one per chunk or memory, in probe order.

    ``memory_limit`` is how many memories the probe takes per sub-query's terms (the policy's
    ``[memory] max_candidates_probed``); 0 leaves memory out of the probe.
    """
    rejected: dict[str, RejectedItem] = {}
    elsewhere: dict[Source, set[str]] = {}
    """Hits in other projects, per source: counted, never recorded by name."""
    memory_probed: set[tuple[tuple[str, float], ...]] = set()
    """Term lists already probed against memory: sub-queries usually share their terms, and
    each probe reads and scores every memory version of every project."""
    withheld_sessions: Pool | None = None
    for sub_query in sub_queries:
        terms = [(t.term, t.weight) for t in sub_query.terms]
        # The best PROBE_TOP_K hits that recall did not return: recalled chunks are searched
        # past, so a scope's own finer chunks do not crowd out what it withheld.
        top_k = PROBE_TOP_K + sum(1 for r in recalled_ids if r.startswith("chunk:"))
        hits = scorer.search(terms, RecallFilter(project=None, all_versions=True), top_k=top_k)
        unrecalled = [h.chunk_id for h in hits if f"chunk:{h.chunk_id}" not in recalled_ids][:PROBE_TOP_K]
        for row in _provenance(store, unrecalled):
            candidate_id = f"chunk:{row['id']}"
            if candidate_id in rejected:
                continue
            if row["project"] != scope.project:
                elsewhere.setdefault(Source(str(row["source"])), set()).add(candidate_id)
                continue
            verdict = _why_withheld(row, scope, window)
            if verdict is not None:
                rejected[candidate_id] = _item(candidate_id, row, *verdict)
        wants_memory = Source.MEMORY in sub_query.sources or Source.MEMORY in scope.denied_sources
        if wants_memory and memory_limit > 0 and tuple(terms) not in memory_probed:
            memory_probed.add(tuple(terms))
            for item in _memory_probe(store, terms, scope, window, elsewhere, memory_limit):
                rejected.setdefault(item.candidate_id, item)
        session_sources = frozenset(sub_query.sources) & SESSION_SOURCES
        if session_sources:
            if withheld_sessions is None:
                withheld_sessions = session_records(store, scorer).withheld(scope, window)
            for item in withheld_sessions.hits(session_sources, terms, PROBE_TOP_K):
                if item.candidate_id not in recalled_ids:
                    rejected.setdefault(item.candidate_id, item)
    for item in _denied_source_probe(store, scorer, list(sub_queries), scope, window, recalled_ids):
        rejected.setdefault(item.candidate_id, item)
    return [*rejected.values(), *_counted(elsewhere)]


def _counted(elsewhere: dict[Source, set[str]]) -> list[RejectedItem]:
    """One aggregate rejection per source for what other projects had: how many, not which."""
    return [
        RejectedItem(
            candidate_id=f"{OTHER_PROJECTS_PREFIX}{source.value}", source=source, source_ref=OTHER_PROJECTS_REF,
            source_version="", stage=Stage.OUT_OF_SCOPE, from_probe=True,
            reason=(
                f"{len(ids)} {'memory record' if source == Source.MEMORY else source.value + ' chunk'}(s) of other "
                "projects matched and were withheld; the probe counts them and never records which"
            ),
        )
        for source, ids in sorted(elsewhere.items(), key=lambda kv: kv[0].value)
    ]


def _denied_source_probe(
    store: Store, scorer: Scorer, sub_queries: list[SubQuery], scope: RetrievalScope, window: TimeWindow,
    recalled_ids: set[str],
) -> list[RejectedItem]:
    """A denied source has no sub-query at all; search it under the other masks to record it."""
    denied = frozenset(s for s in WORKSPACE_SOURCES if not scope.admits_source(s))
    if not denied or not sub_queries:
        return []
    terms = {t.term: t.weight for q in sub_queries for t in q.terms}
    flt = workspace_filter(scope, denied, window, as_of_given=reads_the_past(scope))
    hits = scorer.search(list(terms.items()), flt, top_k=PROBE_TOP_K)
    items = []
    for row in _provenance(store, [h.chunk_id for h in hits]):
        candidate_id = f"chunk:{row['id']}"
        if candidate_id not in recalled_ids:
            items.append(_item(candidate_id, row, Stage.DENIED_SOURCE, f"source {row['source']} is denied in this scope"))
    return items


def _provenance(store: Store, chunk_ids: list[int]) -> list[dict[str, Any]]:
    if not chunk_ids:
        return []
    with store.read() as conn:
        rows = conn.execute(
            sa_select(
                col(IndexChunkRow.id), col(IndexChunkRow.path), col(IndexChunkRow.start_line), col(IndexChunkRow.end_line),
                col(IndexDocumentRow.project), col(IndexDocumentRow.branch), col(IndexDocumentRow.root),
                col(IndexDocumentRow.source), col(IndexDocumentRow.content_hash),
                col(IndexDocumentRow.valid_from), col(IndexDocumentRow.valid_to),
            )
            .join(IndexDocumentRow, col(IndexDocumentRow.id) == col(IndexChunkRow.document_id))
            .where(col(IndexChunkRow.id).in_(chunk_ids))
        ).mappings().all()
    order = {cid: n for n, cid in enumerate(chunk_ids)}
    return sorted((dict(r) for r in rows), key=lambda r: order[int(r["id"])])


def place_withheld(path: str, source: Source, scope: RetrievalScope) -> tuple[Stage, str] | None:
    """Why the scope's masks keep a workspace file's chunks out of recall whatever their time:
    a path outside its prefixes, or a denied source (``None``: they do not)."""
    if scope.path_prefixes and not under_any(path, scope.path_prefixes):
        return Stage.OUT_OF_SCOPE, f"path outside the scope's prefixes ({', '.join(scope.path_prefixes)})"
    if source in WORKSPACE_SOURCES and not scope.admits_source(source):
        return Stage.DENIED_SOURCE, f"source {source.value} is denied in this scope"
    return None


def _why_withheld(row: dict[str, Any], scope: RetrievalScope, window: TimeWindow) -> tuple[Stage, str] | None:
    if scope.branch is not None and row["branch"] != scope.branch:
        return Stage.OUT_OF_SCOPE, f"branch {row['branch'] or '-'} is outside the scope (branch {scope.branch})"
    if scope.workspace_root is not None and row["root"] != scope.workspace_root:
        return Stage.OUT_OF_SCOPE, f"workspace {row['root']} is outside the scope"
    verdict = place_withheld(str(row["path"]), Source(str(row["source"])), scope)
    if verdict is not None:
        return verdict
    valid_from = from_micros(int(row["valid_from"]))
    valid_to = None if row["valid_to"] is None else from_micros(int(row["valid_to"]))
    as_of_given = reads_the_past(scope)
    if valid_to is not None and (not as_of_given or valid_to <= window.as_of):
        return Stage.STALE, f"version superseded at {when(valid_to)}"
    if valid_from > window.as_of:
        return Stage.STALE, f"version indexed at {when(valid_from)}, after as_of {when(window.as_of)}"
    if window.include_after is not None and valid_from < window.include_after:
        return Stage.STALE, f"captured {when(valid_from)}, before include_after {when(window.include_after)}"
    if window.exclude_after is not None and valid_from > window.exclude_after:
        return Stage.STALE, f"captured {when(valid_from)}, after exclude_after {when(window.exclude_after)}"
    return None


def _memory_probe(
    store: Store, terms: list[tuple[str, float]], scope: RetrievalScope, window: TimeWindow,
    elsewhere: dict[Source, set[str]], limit: int,
) -> list[RejectedItem]:
    records = all_current_memories(store, as_of=window.as_of if reads_the_past(scope) else None)
    scores = bm25_scores(terms, [record.content for record, _ in records])
    floor = MEMORY_PROBE_FLOOR * max(scores, default=0.0)
    ranked = sorted(
        ((s, r, d) for s, (r, d) in zip(scores, records, strict=True) if s > 0 and s >= floor), key=lambda t: (-t[0], t[1].id)
    )[:limit]
    items = []
    for _score, record, digest in ranked:
        if record.project != scope.project:
            elsewhere.setdefault(Source.MEMORY, set()).add(f"memory:{record.id}")
            continue
        if not scope.admits_source(Source.MEMORY):
            reason, stage = "source memory is denied in this scope", Stage.DENIED_SOURCE
        else:
            continue
        items.append(
            RejectedItem(
                candidate_id=f"memory:{record.id}", source=Source.MEMORY, source_ref=f"memory:{record.id}",
                source_version=digest, stage=stage, reason=reason, from_probe=True,
            )
        )
    return items


def _item(candidate_id: str, row: dict[str, Any], stage: Stage, reason: str) -> RejectedItem:
    return RejectedItem(
        candidate_id=candidate_id,
        source=Source(str(row["source"])),
        source_ref=f"{row['path']}:{row['start_line']}-{row['end_line']}",
        source_version=str(row["content_hash"]),
        path=str(row["path"]),
        line_start=int(row["start_line"]),
        line_end=int(row["end_line"]),
        stage=stage,
        reason=reason,
        from_probe=True,
    )
