"""Why-not: where a path, symbol, text or source_ref dropped out of a retrieval, with the evidence.

The answer is a stage from the shared vocabulary:

* ``cited`` / ``selected``: it reached the model (and was, or was not, cited by the reply
  recorded for that turn);
* ``trimmed-away``: its item was selected but the budget trimmed that part (the range);
* any rejection stage: the snapshot's rejection row says so (including what the scope probe
  withheld);
* ``out-of-scope``: it exists only outside the snapshot's project (never said where);
* ``not-recalled``: no sub-query returned it. The answer gives its best chunk's would-be rank
  under each sub-query of the frozen plan against that sub-query's ``top_k``, and the query
  terms it lacked.

Every recorded row that matches is answered, best stage first (``matches``): a file with
several chunks is answered per chunk, so a chunk dropped at ``over-budget`` is not hidden
behind one dropped at ``below-cutoff``. Rows the pipeline recorded come before the scope
probe's; for a symbol, the item that *is* the symbol comes before one that defines it, and
that before one that only mentions it. ``--path`` also takes any ``source_ref`` a screen
shows (``src/x.py:1-5``, ``main:src/x.py:1-5``, ``memory:mem-1``, ``s-1#4``) and the citation id
of a shown item (``code#2``). Each match names the candidate row it is (``ordinal``), so a screen
can open that row. When no recorded row matches, every chunk of the index that does is a match
too: ``not-recalled`` (the best chunk first, with its would-be rank) or ``out-of-scope`` on
another branch or root of the project; what lies only in other projects is never named.

``detect_kind`` says what a typed value most likely is (a source_ref, a path, a symbol or
text), for a form that asks without making a person choose.

Why-not reads the snapshot, the session's events and the versioned index as it was at the
snapshot's ``as_of`` (its creation time when it had none); it never changes anything. A row
that records no ``symbol`` (every item of a snapshot recorded before items kept theirs, and
every row of the scope probe, which records provenance only) takes the symbol of the chunk it
names, while that chunk is still the row's own lines of its own version: the symbol the index
gave it then. Its match says so (``symbol <name> from the index: the snapshot did not record
it``). A row with no symbol either way is matched by its text, as a memory or event is.

``WhyNot`` answers many questions about one snapshot, reading what they share once (the
snapshot, the chunks its rows name, the turn's replies, the memories); ``why_not`` asks one.
What the answers mean, old snapshots included, is in docs/audit.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from pathlib import PurePosixPath
from typing import Literal

from sqlalchemy import func, or_
from sqlmodel import col, select

from scopelens.core.contracts import (
    SCHEMA_VERSION,
    AuditSnapshot,
    Contract,
    Event,
    MemoryRecord,
    RejectedItem,
    SnapshotItem,
    SubQuery,
    TrimRange,
)
from scopelens.core.errors import InvalidInputError
from scopelens.core.index.chunks import ChunkRecord, fetch_chunks
from scopelens.core.index.languages import language_of
from scopelens.core.index.scorer import Scorer
from scopelens.core.index.timeutil import to_micros
from scopelens.core.index.tokenizer import tokenize
from scopelens.core.memory import all_current_memories
from scopelens.core.pathmatch import normalise_prefix, under_prefix
from scopelens.core.pipeline.probe import OTHER_PROJECTS_PREFIX, OTHER_PROJECTS_REF, place_withheld
from scopelens.core.pipeline.recall import (
    CHUNKS_PER_FILE,
    DOC_FILES_KEPT,
    FILES_KEPT,
    defined_names,
    kept_files,
    rank_files,
    time_window,
    workspace_filter,
)
from scopelens.core.store.store import Store
from scopelens.core.store.tables import IndexChunkRow, IndexDocumentRow
from scopelens.core.textsafety import listing
from scopelens.core.vocab import WORKSPACE_SOURCES, EventType, Source, Stage

QueryKind = Literal["path", "symbol", "text"]
QUERY_KINDS: tuple[QueryKind, ...] = ("path", "symbol", "text")
InputKind = Literal["source_ref", "path", "symbol", "text"]
"""What a typed value is: a source_ref (or candidate or citation id) is asked as a path."""

INDEX_LOOKUP_LIMIT = 500
"""Matching chunks read from the index for one question (ordered by path and line)."""
RANK_SEARCH_LIMIT = 5000
"""How deep the would-be rank of a never-recalled chunk is looked for."""

_STAGE_ORDER: tuple[Stage, ...] = (
    Stage.CITED, Stage.SELECTED, Stage.TRIMMED_AWAY, Stage.OVER_BUDGET, Stage.DUPLICATE, Stage.BELOW_CUTOFF,
    Stage.MEMORY_STATUS, Stage.STALE, Stage.NOT_VISIBLE, Stage.DENIED_SOURCE, Stage.OUT_OF_SCOPE, Stage.NOT_RECALLED,
)
"""Best first: how far a thing got towards the model."""


class SubQueryRun(Contract):
    id: str
    intent: str
    top_k: int
    query_text: str
    would_be_rank: int | None = None
    """For a never-recalled chunk: its rank under this sub-query at the snapshot's time (None:
    not in the first RANK_SEARCH_LIMIT, or not one of this sub-query's sources)."""
    would_be_file_rank: int | None = None
    """Its file's rank among the files of the sub-query's ``top_k`` chunks, when the chunk was
    within ``top_k`` (a recall keeps the ``files_kept`` best files, and a few chunks of each)."""
    files_kept: int | None = None
    docs_cut: bool = False
    """The file is a doc, and a recall keeps at most ``files_kept`` docs."""


class WhyNotMatch(Contract):
    """One row that matches the question: a chunk, an item, a memory, an event; recorded by
    the snapshot, or (when none is) a chunk of the index no sub-query returned."""

    stage: Stage
    source_ref: str
    citation_id: str | None = None
    reason: str
    from_probe: bool = False
    ordinal: int | None = None
    """The snapshot's candidate row it is (selected items, then rejections, from 0, as the store
    pages them; the inspector's Candidates tab numbers them from 1); None for a chunk no row records."""


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
    matches: tuple[WhyNotMatch, ...] = ()
    """Every row that matched, best stage first (the answer is the first); when no recorded
    row matches, every chunk of the index that does (none that only other projects hold)."""


@dataclass(frozen=True)
class _Row:
    """A recorded row that matches, with what ranks it."""

    stage: Stage
    strength: int
    ordinal: int
    """The row's place among the snapshot's candidate rows (selected, then rejected)."""
    item: SnapshotItem | None = None
    rejection: RejectedItem | None = None
    trim: TrimRange | None = None
    indexed_symbol: str | None = None
    """The symbol the row matched by, when it came from the index (the row records none)."""

    def key(self) -> tuple[int, int, int]:
        probe = 1 if self.rejection is not None and self.rejection.from_probe else 0
        return (-self.strength, probe, _STAGE_ORDER.index(self.stage))


def _strip_branch(value: str, snapshot: AuditSnapshot) -> str:
    """``main:src/x.py:1-2`` (as a block shows it) is ``src/x.py:1-2`` on the snapshot's branch."""
    branch = snapshot.retrieval.scope.branch
    return value[len(branch) + 1 :] if branch and value.startswith(branch + ":") else value


def _path_matches(
    value: str, path: str | None, source_ref: str, candidate_id: str, citation_id: str | None = None
) -> bool:
    """A path (or folder) prefix, or the exact source_ref, candidate id or citation id a screen shows."""
    if value in (source_ref, candidate_id, citation_id):
        return True
    return path is not None and under_prefix(path, value)


def _symbol_strength(value: str, symbol: str | None, text: str | None) -> int:
    """3: the item is the symbol; 2: the item is its class, or a member of it; 1: the item's text
    defines it; 0: it only mentions it; -1: no match."""
    if symbol:
        if symbol == value or symbol.endswith("." + value) or value.endswith("." + symbol):
            return 3
        if value.startswith(symbol + ".") or symbol.startswith(value + "."):
            return 2  # the item holds the symbol (its class), or is a member of the class asked
    if text is None:
        return -1
    last = value.rsplit(".", 1)[-1]
    definition = re.compile(rf"\b(?:def|class|function|func|fn|interface|type|const|let|var)\s+{re.escape(last)}\b")
    if definition.search(text):
        return 1
    return 0 if value in text or last in text else -1


def _text_matches(value: str, text: str | None) -> bool:
    return text is not None and value.casefold() in text.casefold()


_LINE_RANGE = re.compile(r":\d+-\d+$")
_SOURCE_REF = re.compile(
    r"""(?:[^\s:]+:)?[^\s:]+:\d+-\d+   # src/x.py:1-5, or main:src/x.py:1-5 as a block shows it
    | memory:\S+                      # memory:mem-1
    | chunk:\d+                       # a candidate id
    | [\w.-]+\#\d+                    # an event (s-1#4), or a shown item's citation id (code#2)""",
    re.VERBOSE,
)
_SYMBOL = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")
_FILE_SUFFIXES = frozenset({
    ".toml", ".yaml", ".yml", ".ini", ".cfg", ".conf", ".env", ".txt", ".rst", ".lock", ".mod", ".sum", ".sh",
    ".sql", ".html", ".xml", ".csv", ".rb", ".lua", ".proto", ".tcss", ".gradle", ".tf",
})
"""Suffixes of files the chunker reads as text, beside those it has a language for."""
_BARE_FILE_NAMES = frozenset({"Makefile", "Dockerfile", "LICENSE", "README", "Procfile", "Gemfile", "Rakefile"})


def detect_kind(value: str) -> InputKind:
    """What ``value`` most likely names, by its shape alone (no store is read).

    A source_ref a screen shows (or a candidate or citation id) is ``source_ref``; something
    with a slash, a file suffix or a dotfile's dot is a ``path``; an identifier, dotted or not
    (``createUserMock``, ``DataTable.move_cursor``), is a ``symbol``; anything else, a phrase
    most of all, is ``text``. ``README.md`` is a path and ``invoice.total`` a symbol: a dotted
    name is a path only when its last part is a file suffix.
    """
    value = value.strip()
    if value == OTHER_PROJECTS_REF or _SOURCE_REF.fullmatch(value):
        return "source_ref"
    if not value or any(c.isspace() for c in value):
        return "text"
    if "/" in value or "\\" in value or value in _BARE_FILE_NAMES:
        return "path"
    if value.startswith(".") or language_of(value) != "text" or PurePosixPath(value).suffix.lower() in _FILE_SUFFIXES:
        return "path"
    return "symbol" if _SYMBOL.fullmatch(value) else "text"


def query_kind(kind: InputKind) -> QueryKind:
    """How a detected kind is asked: a source_ref is looked up as a path."""
    return "path" if kind == "source_ref" else kind


def why_not(store: Store, snapshot_id: str, kind: QueryKind, value: str) -> WhyNotAnswer:
    """One question about one snapshot (see ``WhyNot`` for many)."""
    return WhyNot(store, snapshot_id).ask(kind, value)


class WhyNot:
    """Questions about one snapshot. What every answer needs is read once, at the first
    question that needs it: the snapshot, the chunks its rows name, the replies recorded for
    its turn and the memories. So answers from one instance see the store as it was then;
    ask a new one to see replies recorded since."""

    def __init__(self, store: Store, snapshot_id: str) -> None:
        self.store = store
        self.snapshot_id = snapshot_id
        self.snapshot = store.get_snapshot(snapshot_id).snapshot

    @cached_property
    def _row_chunks(self) -> dict[int, ChunkRecord]:
        """The chunk each row names (selected or rejected), whatever its time."""
        ids = [item.candidate_id for item in self.snapshot.selected] + [row.candidate_id for row in self.snapshot.rejected]
        return fetch_chunks(self.store, [n for candidate in ids if (n := chunk_number(candidate)) is not None])

    @cached_property
    def _replies(self) -> _Replies:
        return _Replies.of(self.store, self.snapshot)

    @cached_property
    def _memories(self) -> list[MemoryRecord]:
        return [record for record, _digest in all_current_memories(self.store, as_of=_moment(self.snapshot))]

    def ask(self, kind: QueryKind, value: str) -> WhyNotAnswer:
        if not value.strip():
            raise InvalidInputError(f"why-not --{kind} needs a non-empty value")
        store, snapshot = self.store, self.snapshot
        value = value.strip()
        if kind == "path":
            value = _strip_branch(value, snapshot)
        base = {"snapshot_id": self.snapshot_id, "kind": kind, "value": value}
        lookup = _LINE_RANGE.sub("", value) if kind == "path" else value
        # Memories matching a symbol or text (a path names none): for the rows, and for whether
        # only other projects' memories hold it.
        memories = [r for r in self._memories if _text_matches(value, r.content)] if kind != "path" else []
        rows = _recorded_rows(snapshot, kind, value, self._row_chunks, {f"memory:{r.id}" for r in memories})
        rows.sort(key=_Row.key)
        if rows and (kind != "symbol" or rows[0].strength >= 1):
            return _answer(self._replies, rows, base)
        known = _index_chunks_for(store, snapshot, kind, lookup, project=snapshot.retrieval.scope.project)
        in_scope = [c for c in known if _in_scope(c, snapshot)]
        if rows:  # only mentions of the symbol were recorded: where did its definition go?
            defining = [c for c in in_scope if _symbol_strength(value, c.symbol, c.text) >= 1]
            if not defining:
                return _answer(self._replies, rows, base)
            return _with_mentions(_unrecorded(store, snapshot, defining, base), _answer(self._replies, rows, base))
        if in_scope:
            return _unrecorded(store, snapshot, in_scope, base)
        if known:  # in the project, on another branch or root: say where (the same permission context)
            return _outside_the_scope(snapshot, known, base)
        elsewhere = bool(_index_chunks_for(store, snapshot, kind, lookup, project=None, limit=1))
        elsewhere = elsewhere or any(record.project != snapshot.retrieval.scope.project for record in memories)
        if elsewhere:
            return _outside_the_project(snapshot, base)
        return _not_recalled(store, snapshot, [], base)


def chunk_number(candidate_id: str) -> int | None:
    """The index chunk id a ``chunk:<id>`` candidate names (None for a memory, event…)."""
    prefix, _, number = candidate_id.partition(":")
    return int(number) if prefix == "chunk" and number.isdigit() else None


def _in_scope(chunk: ChunkRecord, snapshot: AuditSnapshot) -> bool:
    scope = snapshot.retrieval.scope
    return (
        chunk.project == scope.project
        and (scope.branch is None or chunk.branch == scope.branch)
        and (scope.workspace_root is None or chunk.root == scope.workspace_root)
    )


def _unrecorded(store: Store, snapshot: AuditSnapshot, chunks: list[ChunkRecord], base: dict[str, str]) -> WhyNotAnswer:
    """Chunks of the scope's project, branch and root that no row records."""
    searched = [c for c in chunks if place_withheld(c.path, c.source, snapshot.retrieval.scope) is None]
    if searched:
        return _not_recalled(store, snapshot, searched, base)
    return _kept_out_by_scope(snapshot, chunks, base)  # recall never searched where they are


def _with_mentions(definition: WhyNotAnswer, mentions: WhyNotAnswer) -> WhyNotAnswer:
    """The answer about a symbol's definition, with the recorded rows that only mention it."""
    shown = listing([f"{m.source_ref} {m.stage.value}" for m in mentions.matches], 4, "; ")
    return definition.model_copy(update={
        "summary": f"{definition.summary} (rows that mention it: {shown})",
        "matches": (*definition.matches, *mentions.matches),
    })


def _kept_out_by_scope(snapshot: AuditSnapshot, chunks: list[ChunkRecord], base: dict[str, str]) -> WhyNotAnswer:
    """Every match lies where the scope does not reach: it was never searched for, whatever its words."""
    scope = snapshot.retrieval.scope
    verdicts = [(c, verdict) for c in chunks if (verdict := place_withheld(c.path, c.source, scope)) is not None]
    first, (stage, reason) = verdicts[0]
    inside = "recall searches inside the scope only"
    matches = tuple(WhyNotMatch(stage=s, source_ref=c.source_ref, reason=f"{r}: {inside}") for c, (s, r) in verdicts)
    return WhyNotAnswer(
        **base, stage=stage, best_chunk=first.source_ref, matches=matches,
        summary=f"{stage.value}: {first.source_ref}: {reason}; {inside}, so it was never a candidate",
    )


def own_chunk(row: SnapshotItem | RejectedItem, chunks: dict[int, ChunkRecord]) -> ChunkRecord | None:
    """The chunk a row names, while it is still the row's own lines of its own version (a store
    rebuilt without its index reuses chunk ids for other chunks)."""
    number = chunk_number(row.candidate_id)
    chunk = chunks.get(number) if number is not None else None
    if chunk is None or (chunk.path, chunk.start_line, chunk.end_line, chunk.content_hash) != (
        row.path, row.line_start, row.line_end, row.source_version
    ):
        return None
    return chunk


def _symbol_row_strength(
    value: str, row: SnapshotItem | RejectedItem, text: str | None, chunks: dict[int, ChunkRecord]
) -> tuple[int, str | None]:
    """How strongly a row matches a symbol, and the index's symbol when the row records none."""
    if row.symbol is None:
        chunk = own_chunk(row, chunks)
        if chunk is not None and chunk.symbol:
            strength = _symbol_strength(value, chunk.symbol, text)
            return strength, chunk.symbol if strength >= 2 else None
    return _symbol_strength(value, row.symbol, text), None


def _recorded_rows(
    snapshot: AuditSnapshot, kind: QueryKind, value: str, chunks: dict[int, ChunkRecord], memory_ids: set[str]
) -> list[_Row]:
    """Every recorded row that matches; ``chunks`` holds the chunks the rows name."""
    rows: list[_Row] = []
    for ordinal, item in enumerate(snapshot.selected):
        indexed: str | None = None
        if kind == "path":
            strength = 0 if _path_matches(value, item.path, item.source_ref, item.candidate_id, item.citation_id) else -1
        elif kind == "symbol":
            strength, indexed = _symbol_row_strength(value, item, item.visible_text, chunks)
        else:
            strength = 0 if _text_matches(value, item.visible_text) else -1
        if strength >= 0:
            rows.append(_Row(stage=Stage.SELECTED, strength=strength, ordinal=ordinal, item=item, indexed_symbol=indexed))
    if kind != "path":
        rows += _trimmed_rows(snapshot, kind, value, {id(r.item) for r in rows}, chunks)
    # The rejected rows' own chunks, whatever their time: a stale row is about a version that
    # was not live at the snapshot's as_of, and is still the answer for its text.
    for ordinal, rejected in enumerate(snapshot.rejected, start=len(snapshot.selected)):
        if rejected.candidate_id.startswith(OTHER_PROJECTS_PREFIX):
            continue
        number = chunk_number(rejected.candidate_id)
        chunk = chunks.get(number) if number is not None else None
        indexed = None
        if kind == "path":
            strength = 0 if _path_matches(value, rejected.path, rejected.source_ref, rejected.candidate_id) else -1
        elif kind == "symbol":
            strength, indexed = _symbol_row_strength(value, rejected, chunk.text if chunk else None, chunks)
            if strength < 0 and rejected.candidate_id in memory_ids:
                strength = 0
        else:
            matched = chunk is not None and _text_matches(value, chunk.text)
            strength = 0 if matched or rejected.candidate_id in memory_ids else -1
        if strength >= 0:
            rows.append(_Row(stage=rejected.stage, strength=strength, ordinal=ordinal, rejection=rejected,
                             indexed_symbol=indexed))
    return rows


def _trimmed_rows(
    snapshot: AuditSnapshot, kind: QueryKind, value: str, shown: set[int], chunks: dict[int, ChunkRecord]
) -> list[_Row]:
    """Items whose *trimmed* part held the text (and whose visible part did not)."""
    rows = []
    for ordinal, item in enumerate(snapshot.selected):
        number = chunk_number(item.candidate_id)
        if not item.trim_ranges or number is None or id(item) in shown:
            continue
        original = chunks.get(number)
        if original is None:
            continue
        for trim in item.trim_ranges:
            removed = original.text[trim.start_char : trim.end_char]
            if (kind == "text" and _text_matches(value, removed)) or (
                kind == "symbol" and _symbol_strength(value, None, removed) >= 0
            ):
                rows.append(_Row(stage=Stage.TRIMMED_AWAY, strength=0, ordinal=ordinal, item=item, trim=trim))
                break
    return rows


@dataclass(frozen=True)
class _Replies:
    """The model replies recorded for the snapshot's turn, read once per question."""

    responses: tuple[Event, ...]

    @classmethod
    def of(cls, store: Store, snapshot: AuditSnapshot) -> _Replies:
        return cls(tuple(
            e for e in store.events(snapshot.session_id)
            if e.type == EventType.MODEL_RESPONSE and e.turn == snapshot.turn
        ))

    def citing(self, citation_id: str) -> tuple[str, ...]:
        return tuple(f"{e.session_id}#{e.seq}" for e in self.responses if citation_id in e.payload.get("cited_ids", []))


def _symbol_note(row: _Row) -> str:
    return f"; symbol {row.indexed_symbol} from the index: the snapshot did not record it" if row.indexed_symbol else ""


def _match(replies: _Replies, row: _Row) -> WhyNotMatch:
    note = _symbol_note(row)
    if row.item is not None and row.stage == Stage.TRIMMED_AWAY and row.trim is not None:
        return WhyNotMatch(
            stage=Stage.TRIMMED_AWAY, source_ref=row.item.source_ref, citation_id=row.item.citation_id,
            reason=f"lines {row.trim.start_line}-{row.trim.end_line} were trimmed to fit the budget", ordinal=row.ordinal,
        )
    if row.item is not None:
        cited_by = replies.citing(row.item.citation_id)
        stage = Stage.CITED if cited_by else Stage.SELECTED
        reason = f"cited by event {', '.join(cited_by)}" if cited_by else "shown to the model"
        return WhyNotMatch(
            stage=stage, source_ref=row.item.source_ref, citation_id=row.item.citation_id, reason=reason + note,
            ordinal=row.ordinal,
        )
    assert row.rejection is not None
    return WhyNotMatch(
        stage=row.rejection.stage, source_ref=row.rejection.source_ref, reason=row.rejection.reason + note,
        from_probe=row.rejection.from_probe, ordinal=row.ordinal,
    )


def _answer(replies: _Replies, rows: list[_Row], base: dict[str, str]) -> WhyNotAnswer:
    matches = tuple(_match(replies, row) for row in rows)
    best, first = rows[0], matches[0]
    others = [m for m in matches[1:] if m.source_ref != first.source_ref or m.stage != first.stage]
    also = ""
    if others:
        also = f" (also: {listing([f'{m.source_ref} {m.stage.value}' for m in others], 4, '; ')})"
    if best.item is not None and first.stage == Stage.TRIMMED_AWAY:
        summary = (f"trimmed-away: [{first.citation_id}] {first.source_ref} was shown, but {first.reason}")
        return WhyNotAnswer(
            **base, stage=Stage.TRIMMED_AWAY, citation_id=first.citation_id, source_ref=first.source_ref,
            trim_range=best.trim, summary=summary + also, matches=matches,
        )
    if best.item is not None:
        cited_by = replies.citing(best.item.citation_id)
        if cited_by:
            summary = f"cited: shown as [{first.citation_id}] {first.source_ref} and cited by event {', '.join(cited_by)}"
        else:
            reply = (
                "the reply of this turn did not cite it" if replies.responses
                else "no model reply is recorded for this turn"
            )
            summary = f"selected but not cited: shown as [{first.citation_id}] {first.source_ref}; {reply}"
        return WhyNotAnswer(
            **base, stage=first.stage, citation_id=first.citation_id, source_ref=first.source_ref, cited_by=cited_by,
            summary=summary + _symbol_note(best) + also, matches=matches,
        )
    rejected = best.rejection
    assert rejected is not None
    origin = "the scope probe recorded it" if rejected.from_probe else "it was recalled"
    return WhyNotAnswer(
        **base, stage=rejected.stage, rejection=rejected, source_ref=rejected.source_ref, matches=matches,
        summary=f"{rejected.stage.value}: {rejected.source_ref}: {rejected.reason} ({origin}{_symbol_note(best)}){also}",
    )


def _moment(snapshot: AuditSnapshot) -> datetime:
    """The index time the snapshot read: its scope's ``as_of`` (capped by ``exclude_after``),
    else its creation."""
    return time_window(snapshot.retrieval.scope, snapshot.created_at).as_of


def _index_chunks_for(
    store: Store, snapshot: AuditSnapshot, kind: QueryKind, value: str, *, project: str | None,
    limit: int = INDEX_LOOKUP_LIMIT,
) -> list[ChunkRecord]:
    """Chunks of ``project`` (None: any) live at the snapshot's time that match, in path and line
    order. Text is matched case-insensitively and literally (no LIKE wildcards) on both backends."""
    moment = to_micros(_moment(snapshot))
    statement = (
        select(col(IndexChunkRow.id))
        .join(IndexDocumentRow, col(IndexDocumentRow.id) == col(IndexChunkRow.document_id))
        .where(col(IndexDocumentRow.valid_from) <= moment)
        .where(or_(col(IndexDocumentRow.valid_to).is_(None), col(IndexDocumentRow.valid_to) > moment))
    )
    if kind == "path":
        wanted = normalise_prefix(value)
        statement = statement.where(
            or_(col(IndexChunkRow.path) == wanted, col(IndexChunkRow.path).startswith(wanted + "/", autoescape=True))
        )
    elif kind == "symbol":
        last = value.rsplit(".", 1)[-1]
        statement = statement.where(
            or_(
                col(IndexChunkRow.symbol) == value,
                col(IndexChunkRow.symbol).endswith("." + value, autoescape=True),
                col(IndexChunkRow.text).contains(last, autoescape=True),
            )
        )
    else:
        statement = statement.where(func.lower(col(IndexChunkRow.text)).contains(value.lower(), autoescape=True))
    if project is not None:
        statement = statement.where(col(IndexDocumentRow.project) == project)
    statement = statement.order_by(col(IndexChunkRow.path), col(IndexChunkRow.start_line), col(IndexChunkRow.id))
    with store.read() as conn:
        ids = list(conn.execute(statement.limit(limit)).scalars())
    chunks = sorted(fetch_chunks(store, ids).values(), key=lambda c: (c.path, c.start_line, c.chunk_id))
    if kind == "text":  # the database's lower() folds ASCII only on SQLite: decide in Python
        chunks = [c for c in chunks if _text_matches(value, c.text)]
    elif kind == "symbol":
        chunks = [c for c in chunks if _symbol_strength(value, c.symbol, c.text) >= 0]
    return chunks


def _outside_the_project(snapshot: AuditSnapshot, base: dict[str, str]) -> WhyNotAnswer:
    """It exists only outside the snapshot's scope: out of scope, said without naming where."""
    counted = [r for r in snapshot.rejected if r.candidate_id.startswith(OTHER_PROJECTS_PREFIX)]
    probe = "; ".join(r.reason for r in counted) if counted else "the probe recorded no hit of other projects"
    return WhyNotAnswer(
        **base, stage=Stage.OUT_OF_SCOPE,
        summary=(
            f"out-of-scope: nothing matching {base['kind']} {base['value']!r} is in the snapshot's scope "
            f"(project {snapshot.retrieval.scope.project}{_branch_text(snapshot)}); what lies outside it is never named ({probe})"
        ),
    )


def _outside_the_scope(snapshot: AuditSnapshot, known: list[ChunkRecord], base: dict[str, str]) -> WhyNotAnswer:
    """It exists in the snapshot's project, but only on other branches or roots."""
    places = sorted({f"branch {c.branch or '-'} at {c.root}" for c in known})
    first = known[0]
    matches = tuple(
        WhyNotMatch(stage=Stage.OUT_OF_SCOPE, source_ref=c.source_ref,
                    reason=f"only on branch {c.branch or '-'} at {c.root}, outside the snapshot's scope")
        for c in known
    )
    scope = snapshot.retrieval.scope
    return WhyNotAnswer(
        **base, stage=Stage.OUT_OF_SCOPE, best_chunk=first.source_ref, matches=matches,
        summary=(
            f"out-of-scope: {base['kind']} {base['value']!r} is in project {scope.project} only on "
            f"{listing(places, 3, '; ')}; the snapshot read{_branch_text(snapshot) or ' no branch'}"
            + (f" at {scope.workspace_root}" if scope.workspace_root else "")
        ),
    )


def _branch_text(snapshot: AuditSnapshot) -> str:
    branch = snapshot.retrieval.scope.branch
    return f", branch {branch}" if branch else ""


def _would_be_ranks(
    store: Store, snapshot: AuditSnapshot, chunk: ChunkRecord, others: list[ChunkRecord]
) -> tuple[dict[str, tuple[int | None, int | None, bool]], dict[int, tuple[int, SubQuery]]]:
    """The chunk's rank under each sub-query of the frozen plan, at the snapshot's time, and
    (when within ``top_k``) its file's rank as recall aggregates chunks to files, and whether
    its file was a doc past the docs a recall keeps. Beside it, each of ``others``' best rank
    and the sub-query it has it under (the same searches: none is run for them alone, unless
    their source is one the chunk's is not)."""
    scorer = Scorer(store)
    parts = snapshot.retrieval
    window = time_window(parts.scope, _moment(snapshot))
    ranks: dict[str, tuple[int | None, int | None, bool]] = {}
    best_of: dict[int, tuple[int, SubQuery]] = {}
    wanted = {c.chunk_id for c in others}
    wanted_sources = {chunk.source} | {c.source for c in others}
    try:
        for query in parts.plan.sub_queries:
            sources = frozenset(s for s in query.sources if s in WORKSPACE_SOURCES and parts.scope.admits_source(s))
            ranks[query.id] = (None, None, False)
            if not wanted_sources & sources or not query.terms:
                continue
            flt = workspace_filter(parts.scope, sources, window, as_of_given=True)
            hits = scorer.search([(t.term, t.weight) for t in query.terms], flt, top_k=RANK_SEARCH_LIMIT, with_places=True)
            for n, hit in enumerate(hits, start=1):
                if hit.chunk_id in wanted and (hit.chunk_id not in best_of or n < best_of[hit.chunk_id][0]):
                    best_of[hit.chunk_id] = (n, query)
            if chunk.source not in sources:
                continue
            rank = next((n for n, hit in enumerate(hits, start=1) if hit.chunk_id == chunk.chunk_id), None)
            file_rank = None
            doc_cut = False
            if rank is not None and rank <= query.top_k:
                files = rank_files(hits[: query.top_k], defined_names(query))
                file_rank = next((n for n, (_s, _k, group) in enumerate(files, start=1)
                                  if any(h.chunk_id == chunk.chunk_id for h in group)), None)
                kept = {key for _s, key, _g in kept_files(files)}
                doc_cut = (file_rank is not None and file_rank <= FILES_KEPT and chunk.source == Source.WORKSPACE_DOC
                           and files[file_rank - 1][1] not in kept)
            ranks[query.id] = (rank, file_rank, doc_cut)
    finally:
        scorer.close()
    return ranks, best_of


def _unrecalled_reason(placed: tuple[int, SubQuery] | None) -> str:
    """Why a chunk other than the best one was not recalled: where it would have ranked."""
    if placed is None:
        return f"no sub-query returned it, nor ranks it in its first {RANK_SEARCH_LIMIT}"
    rank, query = placed
    if rank <= query.top_k:
        return (f"no sub-query returned it; it would rank {rank} of top {query.top_k} under {query.id}, "
                "but recall keeps a few chunks of the best files")
    return f"no sub-query returned it; its best would-be rank is {rank} under {query.id} (top {query.top_k})"


def _with_ranks(run: SubQueryRun, rank: int | None, file_rank: int | None, docs_cut: bool) -> SubQueryRun:
    files_kept = None if file_rank is None else DOC_FILES_KEPT if docs_cut else FILES_KEPT
    return run.model_copy(update={"would_be_rank": rank, "would_be_file_rank": file_rank,
                                  "files_kept": files_kept, "docs_cut": docs_cut})


def _placed(run: SubQueryRun) -> str:
    if not run.would_be_rank:
        return f"{run.id} not ranked"
    if run.would_be_file_rank is None:
        return f"{run.id} rank {run.would_be_rank} of top {run.top_k}"
    if run.docs_cut:
        return (f"{run.id} rank {run.would_be_rank} of top {run.top_k}, but its file ranks {run.would_be_file_rank} "
                f"and a recall keeps at most {run.files_kept} docs, which ranked above it")
    if run.files_kept is not None and run.would_be_file_rank > run.files_kept:
        return (f"{run.id} rank {run.would_be_rank} of top {run.top_k}, but its file ranks {run.would_be_file_rank} "
                f"and a recall keeps the best {run.files_kept} files")
    return (f"{run.id} rank {run.would_be_rank} of top {run.top_k}, but not among the {CHUNKS_PER_FILE} best "
            f"chunks kept of its file (file rank {run.would_be_file_rank})")


def _not_recalled(store: Store, snapshot: AuditSnapshot, in_project: list[ChunkRecord], base: dict[str, str]) -> WhyNotAnswer:
    """No recorded row matches: the chunks of the index that do, best first, with their ranks."""
    parts = snapshot.retrieval
    runs = tuple(
        SubQueryRun(id=q.id, intent=q.intent.value, top_k=q.top_k, query_text=q.query_text)
        for q in parts.plan.sub_queries
    )
    if not in_project:
        return WhyNotAnswer(
            **base, stage=Stage.NOT_RECALLED, sub_queries=runs,
            summary=(
                f"not-recalled: nothing matching {base['kind']} {base['value']!r} was in the index of project "
                f"{parts.scope.project} at the snapshot's time"
            ),
        )
    weights: dict[str, float] = {}
    for query in parts.plan.sub_queries:
        for term in query.terms:
            weights[term.term] = max(weights.get(term.term, 0.0), term.weight)

    def tokens_of(chunk: ChunkRecord) -> set[str]:
        return set(tokenize(chunk.text)) | set(tokenize(chunk.path)) | set(tokenize(chunk.symbol or ""))

    best = max(in_project, key=lambda c: (sum(w for t, w in weights.items() if t in tokens_of(c)), -c.chunk_id))
    tokens = tokens_of(best)
    missing = tuple(t for t, _w in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0])) if t not in tokens)
    others = [c for c in in_project if c.chunk_id != best.chunk_id]
    if base["kind"] == "symbol":  # the chunks that are the symbol before those that mention it (a stable sort)
        others.sort(key=lambda c: -_symbol_strength(base["value"], c.symbol, c.text))
    ranks, best_of = _would_be_ranks(store, snapshot, best, others)
    runs = tuple(_with_ranks(run, *ranks.get(run.id, (None, None, False))) for run in runs)
    placed = "; ".join(_placed(run) for run in runs) or "no sub-query ran"
    shown = listing(missing, 8) or "none"
    matches = (
        WhyNotMatch(stage=Stage.NOT_RECALLED, source_ref=best.source_ref,
                    reason=f"no sub-query returned it; the best chunk would rank: {placed}"),
        *(WhyNotMatch(stage=Stage.NOT_RECALLED, source_ref=c.source_ref, reason=_unrecalled_reason(best_of.get(c.chunk_id)))
          for c in others),
    )
    return WhyNotAnswer(
        **base, stage=Stage.NOT_RECALLED, sub_queries=runs, best_chunk=best.source_ref, missing_terms=missing,
        matches=matches,
        summary=(f"not-recalled: no sub-query returned it; its best chunk {best.source_ref} would rank: "
                 f"{placed}; it lacks the query terms: {shown}"),
    )
