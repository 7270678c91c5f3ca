"""Why-not: where a path, symbol or text dropped out of a retrieval, with the evidence.

The answer is a stage from the shared vocabulary:

* ``cited`` / ``selected``: it reached the model (and was, or was not, cited by the reply
  recorded for that turn);
* ``trimmed-away``: its item was selected but the budget trimmed that part (the range);
* any rejection stage: the snapshot's rejection row says so (including what the scope probe
  withheld);
* ``not-recalled``: no sub-query returned it. The answer lists the sub-queries that ran and
  the query terms that the thing's best chunk (at the snapshot's time) lacked.

Why-not reads the snapshot, the session's events and the versioned index as it was at the
snapshot's time; it never changes anything.
"""

from __future__ import annotations

import re
from typing import Literal

from sqlalchemy import or_
from sqlmodel import col, select

from scopelens.core.contracts import SCHEMA_VERSION, AuditSnapshot, Contract, RejectedItem, SnapshotItem, TrimRange
from scopelens.core.errors import InvalidInputError
from scopelens.core.index.chunks import ChunkRecord, fetch_chunks
from scopelens.core.index.timeutil import to_micros
from scopelens.core.index.tokenizer import tokenize
from scopelens.core.memory import all_memory_versions
from scopelens.core.pathmatch import normalise_prefix, under_prefix
from scopelens.core.pipeline.probe import OTHER_PROJECTS_PREFIX
from scopelens.core.store.store import Store
from scopelens.core.store.tables import IndexChunkRow, IndexDocumentRow
from scopelens.core.vocab import EventType, Stage

QueryKind = Literal["path", "symbol", "text"]
QUERY_KINDS: tuple[QueryKind, ...] = ("path", "symbol", "text")


class SubQueryRun(Contract):
    id: str
    intent: str
    top_k: int
    query_text: str


class WhyNotAnswer(Contract):
    schema_version: int = SCHEMA_VERSION
    snapshot_id: str
    kind: QueryKind
    value: str
    stage: Stage
    summary: str
    citation_id: str | None = None
    source_ref: str | None = None
    rejection: RejectedItem | None = None
    trim_range: TrimRange | None = None
    cited_by: tuple[str, ...] = ()
    sub_queries: tuple[SubQueryRun, ...] = ()
    best_chunk: str | None = None
    missing_terms: tuple[str, ...] = ()


def _matches(kind: QueryKind, value: str, path: str | None, symbol: str | None, text: str | None) -> bool:
    if kind == "path":
        return path is not None and under_prefix(path, value)
    if kind == "symbol":
        if symbol and (symbol == value or symbol.endswith("." + value) or value.endswith("." + symbol)):
            return True
        return text is not None and value in text
    return text is not None and value.lower() in text.lower()


def _symbol_strength(value: str, symbol: str | None, text: str) -> int:
    """2: the item is the symbol; 1: the item defines it; 0: it only mentions it."""
    if symbol and (symbol == value or symbol.endswith("." + value)):
        return 2
    definition = re.compile(rf"\b(?:def|class|function|func|fn|interface|type|const|let|var)\s+{re.escape(value)}\b")
    return 1 if definition.search(text) else 0


def why_not(store: Store, snapshot_id: str, kind: QueryKind, value: str) -> WhyNotAnswer:
    if not value.strip():
        raise InvalidInputError(f"why-not --{kind} needs a non-empty value")
    snapshot = store.get_snapshot(snapshot_id).snapshot
    base = {"snapshot_id": snapshot_id, "kind": kind, "value": value}
    shown = [i for i in snapshot.selected if _matches(kind, value, i.path, i.symbol, i.visible_text)]
    if shown:
        best = max(shown, key=lambda i: (_symbol_strength(value, i.symbol, i.visible_text) if kind == "symbol" else 0, -i.rank))
        return _selected_answer(store, snapshot, best, base)
    trimmed = _trimmed_answer(store, snapshot, kind, value, base)
    if trimmed is not None:
        return trimmed
    known = _index_chunks_for(store, snapshot, kind, value)
    known_ids = {f"chunk:{c.chunk_id}" for c in known}
    memories_elsewhere = False
    if kind != "path":
        for record, _digest in all_memory_versions(store):
            if value.lower() in record.content.lower():
                known_ids.add(f"memory:{record.id}")
                memories_elsewhere = memories_elsewhere or record.project != snapshot.scope.project
    for rejected in snapshot.rejected:
        if rejected.candidate_id in known_ids or _matches(kind, value, rejected.path, rejected.symbol, None):
            origin = "the scope probe recorded it" if rejected.from_probe else "it was recalled"
            return WhyNotAnswer(
                **base, stage=rejected.stage, rejection=rejected, source_ref=rejected.source_ref,
                summary=f"{rejected.stage.value}: {rejected.source_ref}: {rejected.reason} ({origin})",
            )
    in_project = any(c.project == snapshot.scope.project for c in known)
    if not in_project and (known or memories_elsewhere):
        return _outside_the_project(snapshot, base)
    return _not_recalled(snapshot, known, base)


def _outside_the_project(snapshot: AuditSnapshot, base: dict[str, str]) -> WhyNotAnswer:
    """It exists only outside the snapshot's project: out of scope, said without naming where."""
    counted = [r for r in snapshot.rejected if r.candidate_id.startswith(OTHER_PROJECTS_PREFIX)]
    probe = "; ".join(r.reason for r in counted) if counted else "the probe recorded no hit of other projects"
    return WhyNotAnswer(
        **base, stage=Stage.OUT_OF_SCOPE,
        summary=(
            f"out-of-scope: nothing matching {base['kind']} {base['value']!r} is in project {snapshot.scope.project}, "
            f"the snapshot's scope; other projects are outside it and are never named ({probe})"
        ),
    )


def _selected_answer(store: Store, snapshot: AuditSnapshot, item: SnapshotItem, base: dict[str, str]) -> WhyNotAnswer:
    responses = [
        e for e in store.events(snapshot.session_id)
        if e.type == EventType.MODEL_RESPONSE and e.turn == snapshot.turn
    ]
    cited_by = tuple(f"{e.session_id}#{e.seq}" for e in responses if item.citation_id in e.payload.get("cited_ids", []))
    if cited_by:
        return WhyNotAnswer(
            **base, stage=Stage.CITED, citation_id=item.citation_id, source_ref=item.source_ref, cited_by=cited_by,
            summary=f"cited: shown as [{item.citation_id}] {item.source_ref} and cited by event {', '.join(cited_by)}",
        )
    reply = "the reply of this turn did not cite it" if responses else "no model reply is recorded for this turn"
    return WhyNotAnswer(
        **base, stage=Stage.SELECTED, citation_id=item.citation_id, source_ref=item.source_ref,
        summary=f"selected but not cited: shown as [{item.citation_id}] {item.source_ref}; {reply}",
    )


def _trimmed_answer(
    store: Store, snapshot: AuditSnapshot, kind: QueryKind, value: str, base: dict[str, str]
) -> WhyNotAnswer | None:
    if kind == "path":
        return None
    trimmed_items = [i for i in snapshot.selected if i.trim_ranges and i.candidate_id.startswith("chunk:")]
    originals = fetch_chunks(store, [int(i.candidate_id.split(":")[1]) for i in trimmed_items])
    for item in trimmed_items:
        original = originals.get(int(item.candidate_id.split(":")[1]))
        if original is None:
            continue
        for trim in item.trim_ranges:
            removed = original.text[trim.start_char : trim.end_char]
            if _matches("text", value, None, None, removed):
                return WhyNotAnswer(
                    **base, stage=Stage.TRIMMED_AWAY, citation_id=item.citation_id, source_ref=item.source_ref,
                    trim_range=trim,
                    summary=(f"trimmed-away: [{item.citation_id}] {item.source_ref} was shown, but lines "
                             f"{trim.start_line}-{trim.end_line} were trimmed to fit the budget"),
                )
    return None


def _index_chunks_for(store: Store, snapshot: AuditSnapshot, kind: QueryKind, value: str) -> list[ChunkRecord]:
    """Chunks of the snapshot's project that match, as the index was at the snapshot's time."""
    moment = to_micros(snapshot.created_at)
    statement = (
        select(col(IndexChunkRow.id))
        .join(IndexDocumentRow, col(IndexDocumentRow.id) == col(IndexChunkRow.document_id))
        .where(col(IndexDocumentRow.valid_from) <= moment)
        .where(or_(col(IndexDocumentRow.valid_to).is_(None), col(IndexDocumentRow.valid_to) > moment))
    )
    if kind == "path":
        wanted = normalise_prefix(value)
        statement = statement.where(or_(col(IndexChunkRow.path) == wanted, col(IndexChunkRow.path).startswith(wanted + "/")))
    elif kind == "symbol":
        statement = statement.where(or_(col(IndexChunkRow.symbol) == value, col(IndexChunkRow.symbol).endswith("." + value),
                                        col(IndexChunkRow.text).contains(value)))
    else:
        statement = statement.where(col(IndexChunkRow.text).contains(value))
    with store.read() as conn:
        ids = list(conn.execute(statement.limit(200)).scalars())
    return sorted(fetch_chunks(store, ids).values(), key=lambda c: c.chunk_id)


def _not_recalled(snapshot: AuditSnapshot, known: list[ChunkRecord], base: dict[str, str]) -> WhyNotAnswer:
    runs = tuple(
        SubQueryRun(id=q.id, intent=q.intent.value, top_k=q.top_k, query_text=q.query_text)
        for q in snapshot.plan.sub_queries
    )
    in_project = [c for c in known if c.project == snapshot.scope.project]
    if not in_project:
        where = "in the index" if not known else f"in project {snapshot.scope.project}"
        return WhyNotAnswer(
            **base, stage=Stage.NOT_RECALLED, sub_queries=runs,
            summary=f"not-recalled: nothing matching {base['kind']} {base['value']!r} was {where} at the snapshot's time",
        )
    weights: dict[str, float] = {}
    for query in snapshot.plan.sub_queries:
        for term in query.terms:
            weights[term.term] = max(weights.get(term.term, 0.0), term.weight)

    def coverage(chunk: ChunkRecord) -> float:
        tokens = set(tokenize(chunk.text)) | set(tokenize(chunk.path)) | set(tokenize(chunk.symbol or ""))
        return sum(w for t, w in weights.items() if t in tokens)

    best = max(in_project, key=lambda c: (coverage(c), -c.chunk_id))
    tokens = set(tokenize(best.text)) | set(tokenize(best.path)) | set(tokenize(best.symbol or ""))
    missing = tuple(t for t, _w in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0])) if t not in tokens)
    shown = ", ".join(missing[:8]) or "none"
    return WhyNotAnswer(
        **base, stage=Stage.NOT_RECALLED, sub_queries=runs, best_chunk=best.source_ref, missing_terms=missing,
        summary=(f"not-recalled: no sub-query returned it ({len(runs)} ran); its best chunk {best.source_ref} "
                 f"lacks the query terms: {shown}"),
    )
