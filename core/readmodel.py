"""The read model: frozen views of the audit store, shaped by the inspector's screens.

The inspector (and any other UI) reads only through this module: it never builds queries.
Everything here is read-only (the store is opened with ``read_only=True``, so opening writes
nothing, not even a journal); the two explicit user actions that write, recording a drift
run (or a confirmation of the last one), open a writable handle for that one transaction and
say so.

Lists are paged by key (``after=`` the last key of the previous page), never by offset, so a
store with millions of candidate rows opens without loading them. Verify status is computed
per session on demand and cached in this object, so the first screen never re-hashes.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from sqlalchemy import ColumnElement, func, or_, tuple_
from sqlalchemy import select as sa_select  # sqlmodel's select is typed for up to four columns
from sqlmodel import col, select

from scopelens.core.audit.drift import DriftOutcome as DriftOutcome
from scopelens.core.audit.drift import DriftRecorded as DriftRecorded
from scopelens.core.audit.drift import DriftRunSummary as DriftRunSummary
from scopelens.core.audit.drift import compute_drift, list_drift_runs, load_drift_run, snapshot_turns_of
from scopelens.core.audit.observed import ObservedSession, counterfactual_at, read_observed
from scopelens.core.audit.replay import context_hash_of
from scopelens.core.audit.whynot import QUERY_KINDS as QUERY_KINDS
from scopelens.core.audit.whynot import InputKind as InputKind
from scopelens.core.audit.whynot import QueryKind as QueryKind
from scopelens.core.audit.whynot import WhyNotAnswer as WhyNotAnswer
from scopelens.core.audit.whynot import WhyNotMatch as WhyNotMatch
from scopelens.core.audit.whynot import chunk_number, own_chunk, why_not
from scopelens.core.audit.whynot import detect_kind as detect_kind
from scopelens.core.audit.whynot import query_kind as query_kind
from scopelens.core.clock import Clock, IdSource
from scopelens.core.contracts import (
    SCORE_COLUMNS,
    AuditSnapshot,
    Event,
    Pins,
    RetrievalIntent,
    RetrievalPlan,
    RetrievalScope,
    ScoreBreakdown,
    TrimRange,
)

# DriftReport (with its DriftItems), DriftOutcome, DriftRunSummary and WhyNotAnswer are frozen results the UI
# shows as they are: it imports them from here (re-exported), never from the audit modules.
from scopelens.core.contracts import DriftItem as DriftItem
from scopelens.core.contracts import DriftReport as DriftReport
from scopelens.core.contracts import turn_count as turn_count
from scopelens.core.errors import ScopelensError, StoreNotWritableError, UnknownIdError
from scopelens.core.hashing import sha256_hex, text_hash
from scopelens.core.index.chunks import fetch_chunks
from scopelens.core.record.demo import recorded_findings
from scopelens.core.record.findings import Finding as Finding
from scopelens.core.store.engine import display_url
from scopelens.core.store.store import Store, event_summary, stored_time_or_none
from scopelens.core.store.tables import EventRow, SessionHeadRow, SessionRow, SnapshotCandidateRow, SnapshotRow
from scopelens.core.store.verify import candidate_rows_agree, verify_session
from scopelens.core.vocab import EventType, FindingKind, SnapshotKind, Stage

RowT = TypeVar("RowT")
VerifyState = Literal["pending", "ok", "problem"]


@dataclass(frozen=True)
class Page(Generic[RowT]):
    """One page of a list, the total it is part of, and the key to ask for the next page."""

    rows: tuple[RowT, ...]
    total: int
    next_after: tuple[Any, ...] | None

    @property
    def label(self) -> str:
        return f"{len(self.rows)} of {self.total}"


@dataclass(frozen=True)
class VerifyStatus:
    state: VerifyState
    problems: tuple[str, ...] = ()

    @property
    def mark(self) -> str:
        return {"pending": "…", "ok": "✓", "problem": "✗"}[self.state]


@dataclass(frozen=True)
class SessionView:
    id: str
    project: str
    branch: str | None
    title: str
    agent: str
    started: datetime | None
    """None when the stored start time is not a timestamp (a damaged store): shown as such."""
    turns: int
    events: int
    snapshots: int
    head_hash: str


@dataclass(frozen=True)
class EventView:
    seq: int
    turn: int
    type: EventType
    at: datetime
    summary: str
    text: str
    snapshot_ids: tuple[str, ...] = ()
    cited_ids: tuple[str, ...] = ()
    unsupported_ids: tuple[str, ...] = ()
    """Cited ids that no snapshot of the event's turn showed the model (a reply's ✗)."""
    context_hash: str | None = None
    context_ok: bool | None = None
    """A request's context hash re-derived from the blocks of the snapshots it names (None:
    not a request, or it names none)."""
    command: str = ""
    """A tool event's full call: the tool, its arguments and, when finished, its exit code."""
    tool_output: str = ""


@dataclass(frozen=True)
class TurnView:
    turn: int
    events: tuple[EventView, ...]

    @property
    def snapshot_ids(self) -> tuple[str, ...]:
        return tuple(i for e in self.events if e.type == EventType.RETRIEVAL_SNAPSHOT_CREATED for i in e.snapshot_ids)


@dataclass(frozen=True)
class ItemView:
    citation_id: str
    source_ref: str
    path: str | None
    lines: str
    evidence_kind: str
    trust: str
    authority: str
    label: str | None
    selected_reason: str
    visible_text: str
    visible_text_hash: str
    hash_ok: bool
    trim_ranges: tuple[TrimRange, ...]
    redaction_count: int
    scores: ScoreBreakdown
    rank: int
    cited_by: tuple[str, ...]


@dataclass(frozen=True)
class CandidateRow:
    ordinal: int
    source_ref: str
    path: str | None
    source: str
    stage: Stage
    reason: str
    from_probe: bool
    rank: int | None
    citation_id: str | None
    scores: dict[str, float | None]

    @property
    def number(self) -> int:
        """The row's number as lists show it, from 1 (``ordinal`` is the stored, 0-based key)."""
        return self.ordinal + 1


@dataclass(frozen=True)
class FunnelView:
    """The funnel as the Funnel tab draws it: pipeline steps that add up (recalled, each stage
    that dropped some, selected), and apart from them what the scope withheld from recall."""

    steps: tuple[tuple[str, int], ...]
    withheld: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class SnapshotView:
    id: str
    session_id: str
    turn: int
    created_at: datetime
    content_hash: str
    intent: RetrievalIntent
    scope: RetrievalScope
    plan: RetrievalPlan
    pins: Pins
    funnel: FunnelView
    budget_line: str
    items: tuple[ItemView, ...]
    block: str
    block_ok: bool
    rows_ok: bool
    """The candidate rows (Candidates tab) agree with the snapshot document."""
    missing_evidence: tuple[str, ...]
    response_citations: tuple[tuple[str, tuple[str, ...]], ...]
    """(response event ref, cited ids) for the responses of this turn."""
    kind: SnapshotKind = SnapshotKind.RETRIEVED
    sub_query_hits: dict[str, int] = field(default_factory=dict)
    """Sub-query id -> the recalled candidates (selected or rejected by the pipeline, not the
    probe's) from its sources: what it brought in, read from the snapshot, never re-searched.
    Where sub-queries share a source, its candidates count for each of them."""

    @property
    def kind_label(self) -> str:
        """How a title names the snapshot: ``snapshot``, or a counterfactual as such."""
        if self.kind == SnapshotKind.COUNTERFACTUAL:
            return "counterfactual snapshot (never shown to the session's model) "
        return "snapshot "


@dataclass(frozen=True)
class SeenItemView:
    """One item an imported call had in its context."""

    position: int
    citation_id: str
    kind: str
    tool: str | None
    source_ref: str
    path: str | None
    lines: str
    first_seen: int
    """The turn (call) that first had it: earlier than the call shown, or this one (new)."""
    new: bool
    visible_text: str
    hash_ok: bool
    redaction_count: int
    mentions: tuple[str, ...]
    ref: str


@dataclass(frozen=True)
class ObservedCallView:
    """An observed snapshot as its screen shows it: the call, and everything it had seen."""

    id: str
    session_id: str
    turn: int
    created_at: datetime
    content_hash: str
    format: str
    source_file: str
    call_ref: str
    visible_from: int
    visible_to: int
    replaced: tuple[int, int] | None
    tool_calls: tuple[str, ...]
    not_recorded: tuple[str, ...]
    items: tuple[SeenItemView, ...]
    block_ok: bool
    turns: tuple[int, ...]
    """Every turn of the session with an observed snapshot, for stepping call to call."""
    counterfactual_id: str | None = None
    """The counterfactual retrieval run at this turn (``import --retrieve``), if any."""
    counterfactual_items: tuple[tuple[str, str], ...] = ()
    """Its selected items, (citation id, source_ref), in rank order: what it would have shown."""


FindingOpens = Literal["citation", "item", "candidate", "event"]
REPLY_FINDINGS = frozenset({FindingKind.CITATION_DISTORTION, FindingKind.UNSUPPORTED_CITATION, FindingKind.UNCITED_REPLY})
"""Findings about what a reply cited (or did not): they lead to the reply."""


@dataclass(frozen=True)
class FindingView:
    """A finding recorded for this store, and where in the store it leads."""

    finding: Finding
    seq: int | None
    """The event it is about in its session's timeline: the reply, for a finding about a
    reply; else the snapshot's event; else its turn's first event. None: its session has no
    such event in this store."""
    opens: FindingOpens
    """What shows it best: ``citation``, the reply's citation on the snapshot's Citations tab;
    ``item``, the shown item on the Evidence tab; ``candidate``, the withheld row on the
    Candidates tab (filtered by its source_ref); ``event``, the event ``seq`` in the timeline."""
    reply_ref: str | None = None
    """``session#seq`` of the reply, for a finding about a reply."""


@dataclass(frozen=True)
class FindingsView:
    """Every finding recorded for this store, and where they come from."""

    findings: tuple[FindingView, ...]
    """Session by session (in the order they were recorded), turn by turn."""
    stamp: str | None
    """The file they were read from (the demo's stamp beside the store), if there is one."""
    problem: str | None = None
    """Why a stamp beside the store gives no findings (unreadable, or another store's)."""


SessionSort = Literal["started", "project", "turns", "snapshots"]
SESSION_SORTS: tuple[SessionSort, ...] = ("started", "project", "turns", "snapshots")
SCORE_SORTS = ("final", "lexical", "anchor", "authority", "recency")
SHOWN_SCORES = tuple(name for name in SCORE_COLUMNS if name != "semantic")
"""The scores a candidate row shows: ``semantic`` stays 0 (the engine has no embedding model)."""
"""Candidate sorts by a score: a missing score sorts as -1 (below every real one)."""
CANDIDATE_SORTS = ("ordinal", *SCORE_SORTS, "stage", "source_ref")


@dataclass
class ReadModel:
    """Read-only access to one store for a UI. Close it when done."""

    url: str
    clock: Clock | None = None
    """Clock and ids for the drift runs this read model records (tests fix them)."""
    ids: IdSource | None = None
    store: Store = field(init=False)
    _verify: dict[str, VerifyStatus] = field(default_factory=dict, init=False)
    _observed: dict[str, ObservedSession] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.store = Store.open(self.url, read_only=True)

    def close(self) -> None:
        self.store.close()

    # ------------------------------------------------------------------ sessions

    def sessions(
        self,
        *,
        text: str = "",
        sort: SessionSort = "started",
        descending: bool = True,
        after: tuple[Any, ...] | None = None,
        limit: int = 200,
    ) -> Page[SessionView]:
        """A page of sessions, filtered by ``text`` (id, project, branch, title), paged by key."""
        column = {
            "started": col(SessionRow.created_at),
            "project": col(SessionRow.project),
            "turns": col(SessionHeadRow.last_turn),
            "snapshots": col(SessionHeadRow.snapshot_count),
        }[sort]
        base = sa_select(*_SESSION_VIEW_COLUMNS).join(SessionHeadRow, col(SessionHeadRow.session_id) == col(SessionRow.id))
        count = (
            select(func.count())
            .select_from(SessionRow)
            .join(SessionHeadRow, col(SessionHeadRow.session_id) == col(SessionRow.id))
        )
        if text:
            pattern = f"%{text.lower()}%"
            condition = or_(
                func.lower(col(SessionRow.id)).like(pattern),
                func.lower(col(SessionRow.project)).like(pattern),
                func.lower(func.coalesce(col(SessionRow.branch), "")).like(pattern),
                func.lower(col(SessionRow.title)).like(pattern),
            )
            base, count = base.where(condition), count.where(condition)
        # Tie-break on the id of the sorted column's own table, so one index (value, id) serves
        # both the order and the page key (migration 0007_session_sort_indexes).
        tie = col(SessionHeadRow.session_id) if sort in ("turns", "snapshots") else col(SessionRow.id)
        key = tuple_(column, tie)
        if after is not None:
            base = base.where(key < tuple_(*after) if descending else key > tuple_(*after))
        order = (column.desc(), tie.desc()) if descending else (column, tie)
        with self.store.read() as conn:
            rows = conn.execute(base.order_by(*order).limit(limit)).all()
            total = int(conn.execute(count).scalar_one())
        views = tuple(_session_view(row) for row in rows)
        next_after = None
        if len(rows) == limit:
            last = rows[-1]
            last_value = {"started": last.created_at, "project": last.project,
                          "turns": last.last_turn, "snapshots": last.snapshot_count}[sort]
            next_after = (last_value, last.id)
        return Page(views, total, next_after)

    def session(self, session_id: str) -> SessionView:
        with self.store.read() as conn:
            row = conn.execute(
                sa_select(*_SESSION_VIEW_COLUMNS)
                .join(SessionHeadRow, col(SessionHeadRow.session_id) == col(SessionRow.id))
                .where(col(SessionRow.id) == session_id)
            ).first()
        if row is None:
            raise UnknownIdError(f"no session {session_id!r} in this store")
        return _session_view(row)

    def verify_status(self, session_id: str, *, compute: bool = True) -> VerifyStatus:
        """Cached per session; computed (hashing) only when asked, e.g. from a worker."""
        cached = self._verify.get(session_id)
        if cached is not None or not compute:
            return cached or VerifyStatus("pending")
        problems = verify_session(self.store, session_id)
        status = VerifyStatus(
            "problem" if problems else "ok", tuple(f"{p.kind}: {p.record}: {p.detail}" for p in problems)
        )
        self._verify[session_id] = status
        return status

    # ------------------------------------------------------------------ timeline

    def turn_of_event(self, session_id: str, seq: int) -> int | None:
        """The turn of a session's event ``seq`` (None: no such event)."""
        with self.store.read() as conn:
            found = conn.execute(sa_select(col(EventRow.turn)).where(col(EventRow.session_id) == session_id,
                                                                     col(EventRow.seq) == seq)).scalar()
        return int(found) if found is not None else None

    def timeline(self, session_id: str, *, turns: tuple[int, int] | None = None) -> tuple[TurnView, ...]:
        """The session's events by turn: every turn, or turns ``lo`` to ``hi`` (exclusive), so
        a long imported session is read a page of turns at a time."""
        events = self.store.events(session_id, turns=turns)
        snapshots_of: dict[int, list[str]] = {}
        for snapshot_id, turn in snapshot_turns_of(events):
            snapshots_of.setdefault(turn, []).append(snapshot_id)
        documents: dict[str, AuditSnapshot] = {}

        def document(snapshot_id: str) -> AuditSnapshot:
            """Snapshot documents, read only for turns whose replies cite or requests name them."""
            if snapshot_id not in documents:
                documents[snapshot_id] = self.store.get_snapshot(snapshot_id).snapshot
            return documents[snapshot_id]

        def shown_in(turn: int) -> set[str]:
            return {item.citation_id for i in snapshots_of.get(turn, ()) for item in document(i).selected}

        def context_ok(payload: dict[str, Any]) -> bool | None:
            ids = list(payload.get("snapshot_ids", ()))
            if not ids or "context_hash" not in payload:
                return None
            try:
                blocks = [self.store.get_blob(document(i).projection.block_ref).decode("utf-8") for i in ids]
            except (UnknownIdError, UnicodeDecodeError):
                return False
            return bool(context_hash_of(blocks) == payload["context_hash"])

        by_turn: dict[int, list[EventView]] = {}
        for event in events:
            payload = event.payload
            cited = tuple(payload.get("cited_ids", ()))
            by_turn.setdefault(event.turn, []).append(
                EventView(
                    seq=event.seq,
                    turn=event.turn,
                    type=event.type,
                    at=event.created_at,
                    summary=event_summary(event),
                    text=str(payload.get("text", "")),
                    snapshot_ids=tuple(payload.get("snapshot_ids", ()))
                    or ((payload["snapshot_id"],) if "snapshot_id" in payload else ()),
                    cited_ids=cited,
                    unsupported_ids=tuple(c for c in cited if c not in shown_in(event.turn)) if cited else (),
                    context_hash=payload.get("context_hash"),
                    context_ok=context_ok(payload) if event.type == EventType.MODEL_REQUEST else None,
                    command=_tool_call(payload) if "tool" in payload else "",
                    tool_output=str(payload.get("output_preview", "")),
                )
            )
        return tuple(TurnView(turn, tuple(views)) for turn, views in sorted(by_turn.items()))

    # ------------------------------------------------------------------ snapshots

    def snapshot(self, snapshot_id: str) -> SnapshotView:
        stored = self.store.get_snapshot(snapshot_id)
        snapshot = stored.snapshot
        parts = snapshot.retrieval
        try:
            raw = self.store.get_blob(snapshot.projection.block_ref)
        except UnknownIdError:
            raw = b""
        responses = self._responses(snapshot)
        cited: dict[str, list[str]] = {}
        for ref, ids in responses:
            for citation_id in ids:
                cited.setdefault(citation_id, []).append(ref)
        items = tuple(
            ItemView(
                citation_id=i.citation_id,
                source_ref=i.source_ref,
                path=i.path,
                lines=f"{i.line_start}-{i.line_end}" if i.line_start else "",
                evidence_kind=i.evidence_kind.value,
                trust=i.trust.value,
                authority=i.authority.value,
                label=i.label,
                selected_reason=i.selected_reason,
                visible_text=i.visible_text,
                visible_text_hash=i.visible_text_hash,
                hash_ok=text_hash(i.visible_text) == i.visible_text_hash,
                trim_ranges=i.trim_ranges,
                redaction_count=len(i.redactions),
                scores=i.scores,
                rank=i.rank,
                cited_by=tuple(cited.get(i.citation_id, ())),
            )
            for i in snapshot.selected
        )
        return SnapshotView(
            id=snapshot.id,
            session_id=snapshot.session_id,
            turn=snapshot.turn,
            created_at=snapshot.created_at,
            content_hash=stored.content_hash,
            intent=parts.intent,
            scope=parts.scope,
            plan=parts.plan,
            pins=parts.pins,
            funnel=_funnel(snapshot),
            budget_line=(f"{parts.budget.estimated_tokens} of {parts.budget.max_tokens} tokens, "
                         f"{len(snapshot.selected)} of {parts.budget.max_items} items; {parts.budget.trimming_policy}"),
            items=items,
            block=raw.decode("utf-8", errors="replace"),
            block_ok=sha256_hex(raw) == snapshot.projection.block_ref,
            rows_ok=self._rows_agree(snapshot),
            missing_evidence=tuple(k.value for k in snapshot.missing_evidence),
            response_citations=tuple((ref, tuple(ids)) for ref, ids in responses),
            sub_query_hits=_sub_query_hits(snapshot),
            kind=snapshot.kind,
        )

    def trimmed_texts(self, snapshot_id: str, citation_id: str) -> tuple[str | None, ...]:
        """The text each trim range of an item removed, from the index, for showing on demand
        (marked as never seen by the model). ``None`` for a range whose text the index no longer
        holds as it was: the item's chunk is gone, or is now other lines or another version."""
        snapshot = self.store.get_snapshot(snapshot_id).snapshot
        item = next((i for i in snapshot.selected if i.citation_id == citation_id), None)
        if item is None:
            raise UnknownIdError(f"no item {citation_id!r} in snapshot {snapshot_id!r}")
        number = chunk_number(item.candidate_id)
        chunk = own_chunk(item, fetch_chunks(self.store, [number])) if number is not None else None
        texts: list[str | None] = []
        for trim in item.trim_ranges:
            text = chunk.text[trim.start_char:trim.end_char] if chunk is not None else None
            lines = trim.end_line - trim.start_line + 1
            texts.append(text if text is not None and text.rstrip("\n").count("\n") + 1 == lines else None)
        return tuple(texts)

    def _rows_agree(self, snapshot: AuditSnapshot) -> bool:
        with self.store.read() as conn:
            return candidate_rows_agree(conn, snapshot)

    def _responses(self, snapshot: AuditSnapshot) -> list[tuple[str, list[str]]]:
        return [
            (f"{e.session_id}#{e.seq}", list(e.payload.get("cited_ids", [])))
            for e in self.store.events(snapshot.session_id)
            if e.type == EventType.MODEL_RESPONSE and e.turn == snapshot.turn
        ]

    def candidates(
        self,
        snapshot_id: str,
        *,
        stage: Stage | None = None,
        text: str = "",
        sort: str = "ordinal",
        descending: bool = False,
        after: tuple[Any, ...] | None = None,
        limit: int = 200,
    ) -> Page[CandidateRow]:
        """A page of a snapshot's candidates, from the store, at any size."""
        if sort not in CANDIDATE_SORTS:
            raise ScopelensError(f"cannot sort candidates by {sort!r}")
        table = SnapshotCandidateRow
        column = getattr(table, sort)
        where: list[ColumnElement[bool]] = [col(table.snapshot_id) == snapshot_id]
        if stage is not None:
            where.append(col(table.stage) == stage.value)
        if text:
            pattern = f"%{text.lower()}%"
            where.append(or_(func.lower(col(table.source_ref)).like(pattern), func.lower(col(table.reason)).like(pattern)))
        ordered = func.coalesce(column, -1.0) if sort in SCORE_SORTS else column
        key = tuple_(ordered, table.ordinal)
        statement = select(table).where(*where)
        if after is not None:
            statement = statement.where(key < tuple_(*after) if descending else key > tuple_(*after))
        order = (ordered.desc(), col(table.ordinal).desc()) if descending else (ordered, col(table.ordinal))
        with self.store.read() as conn:
            rows = list(conn.exec(statement.order_by(*order).limit(limit)))
            total = int(conn.execute(select(func.count()).select_from(table).where(*where)).scalar_one())
            if not rows and after is None and total == 0:
                exists = conn.execute(select(col(SnapshotRow.id)).where(col(SnapshotRow.id) == snapshot_id)).scalar()
                if exists is None:
                    raise UnknownIdError(f"no snapshot {snapshot_id!r} in this store")
        views = tuple(_candidate_row(r) for r in rows)
        next_after = None
        if len(rows) == limit:
            last = rows[-1]
            value = getattr(last, sort)
            if sort in SCORE_SORTS and value is None:
                value = -1.0
            next_after = (value, last.ordinal)
        return Page(views, total, next_after)

    # ------------------------------------------------------------------ drift & why-not

    def drift_runs(self, snapshot_id: str) -> tuple[DriftRunSummary, ...]:
        return tuple(list_drift_runs(self.store, snapshot_id))

    def drift_run(self, run_id: str) -> DriftReport:
        return load_drift_run(self.store, run_id)

    def compute_drift(self, snapshot_id: str) -> DriftOutcome:
        """Run drift now. Recorded when the store is writable: a new run, or a confirmation of
        the last run when it found the same (then the outcome's report is that run's).

        Only a store that refuses the write (a read-only file or role) falls back to an
        unrecorded run (``recorded == "not recorded"``); every other failure is raised as it is.
        """
        try:
            with Store.open(self.url, clock=self.clock, ids=self.ids) as writable:
                return compute_drift(writable, snapshot_id)
        except StoreNotWritableError:
            return compute_drift(self.store, snapshot_id, clock=self.clock, record=False)

    def why_not(self, snapshot_id: str, kind: QueryKind, value: str) -> WhyNotAnswer:
        return why_not(self.store, snapshot_id, kind, value)

    # ------------------------------------------------------------------ findings

    def findings(self) -> FindingsView:
        """The findings recorded with this store's sessions (``scopelens demo`` keeps them in its
        stamp, ``demo.json``, beside ``demo.db``), each with the event and row it leads to.

        A store without a stamp has none; a stamp that cannot be read or names another store
        head gives none and says why (``problem``): findings that may not hold are not shown.
        """
        recorded = recorded_findings(self.store)
        stamp = str(recorded.stamp) if recorded.stamp is not None else None
        events: dict[str, list[Event]] = {}
        views: list[FindingView] = []
        for finding in recorded.findings:
            if finding.session_id not in events:
                try:
                    events[finding.session_id] = self.store.events(finding.session_id)
                except UnknownIdError:
                    events[finding.session_id] = []
            views.append(self._locate(finding, events[finding.session_id]))
        order = {session_id: index for index, session_id in enumerate(events)}
        views.sort(key=lambda view: (order[view.finding.session_id], view.finding.turn))  # stable: rule order in a turn
        return FindingsView(tuple(views), stamp, recorded.problem)

    def _locate(self, finding: Finding, events: list[Event]) -> FindingView:
        """The event a finding is about, and what shows it best (see FindingView)."""
        turn = [e for e in events if e.turn == finding.turn]
        if finding.kind in REPLY_FINDINGS:
            replies = [e for e in turn if e.type == EventType.MODEL_RESPONSE]
            citing = [e for e in replies if finding.citation_id in e.payload.get("cited_ids", ())]
            if replies:
                reply = (citing or replies)[0]
                ref = f"{reply.session_id}#{reply.seq}"
                opens: FindingOpens = "citation" if citing and finding.snapshot_id else "event"
                return FindingView(finding, reply.seq, opens, ref)
        if finding.snapshot_id:
            created = next((e for e in events if e.type == EventType.RETRIEVAL_SNAPSHOT_CREATED
                            and e.payload.get("snapshot_id") == finding.snapshot_id), None)
            if created is not None:
                if finding.citation_id and finding.kind not in REPLY_FINDINGS:
                    return FindingView(finding, created.seq, "item")
                if finding.source_ref and self._has_row(finding.snapshot_id, finding.source_ref):
                    return FindingView(finding, created.seq, "candidate")
                return FindingView(finding, created.seq, "event")
        return FindingView(finding, turn[0].seq if turn else None, "event")

    def _has_row(self, snapshot_id: str, source_ref: str) -> bool:
        """Whether a snapshot recorded a candidate row for ``source_ref``."""
        table = SnapshotCandidateRow
        with self.store.read() as conn:
            found = conn.execute(
                sa_select(col(table.ordinal)).where(col(table.snapshot_id) == snapshot_id, col(table.source_ref) == source_ref)
                .limit(1)
            ).first()
        return found is not None

    def snapshot_kind(self, snapshot_id: str) -> SnapshotKind:
        """What a snapshot records, which decides the screen that shows it."""
        return self.store.get_snapshot(snapshot_id).snapshot.kind

    def observed_call(self, snapshot_id: str) -> ObservedCallView:
        """An observed snapshot with every item its call had seen (from the session's snapshots)."""
        stored = self.store.get_snapshot(snapshot_id)
        snapshot, call = stored.snapshot, stored.snapshot.observed
        if call is None:
            raise UnknownIdError(f"snapshot {snapshot_id} is {snapshot.kind.value}, not an observed snapshot")
        session = self._observed_session(snapshot.session_id, refresh=snapshot_id)
        counterfactual = counterfactual_at(self.store, snapshot.session_id, snapshot.turn)
        try:
            raw = self.store.get_blob(snapshot.projection.block_ref)
        except UnknownIdError:
            raw = b""
        items = tuple(
            SeenItemView(
                position=seen.position, citation_id=seen.item.citation_id, kind=seen.observed.kind.value,
                tool=seen.observed.tool, source_ref=seen.item.source_ref, path=seen.item.path,
                lines=f"{seen.item.line_start}-{seen.item.line_end}" if seen.item.line_start is not None else "",
                first_seen=seen.turn, new=seen.turn == snapshot.turn, visible_text=seen.item.visible_text,
                hash_ok=text_hash(seen.item.visible_text) == seen.item.visible_text_hash,
                redaction_count=len(seen.item.redactions), mentions=seen.observed.mentions, ref=seen.observed.ref,
            )
            for seen in session.visible(snapshot.turn)
        )
        return ObservedCallView(
            id=snapshot.id, session_id=snapshot.session_id, turn=snapshot.turn, created_at=snapshot.created_at,
            content_hash=stored.content_hash, format=call.format, source_file=call.source_file, call_ref=call.call_ref,
            visible_from=call.visible_from, visible_to=call.visible_to, replaced=call.replaced,
            tool_calls=call.tool_calls, not_recorded=call.not_recorded, items=items,
            block_ok=sha256_hex(raw) == snapshot.projection.block_ref,
            turns=tuple(s.turn for s in session.snapshots),
            counterfactual_id=counterfactual.id if counterfactual is not None else None,
            counterfactual_items=tuple((i.citation_id, i.source_ref) for i in counterfactual.selected)
            if counterfactual is not None else (),
        )

    def observed_snapshot_at(self, session_id: str, turn: int) -> str:
        """The id of the observed snapshot of a session's call at ``turn``."""
        return self._observed_session(session_id).snapshot(turn).id

    def _observed_session(self, session_id: str, *, refresh: str | None = None) -> ObservedSession:
        """The session's observed side, kept while the screen steps through its calls (read
        again when it does not hold ``refresh``: an import appended since)."""
        cached = self._observed.get(session_id)
        if cached is None or (refresh is not None and all(s.id != refresh for s in cached.snapshots)):
            cached = read_observed(self.store, session_id)
            self._observed = {session_id: cached}  # one session at a time
        return cached

    def snapshot_ids(self, session_id: str) -> tuple[str, ...]:
        """The session's snapshots in the order they were recorded (turn order)."""
        return tuple(snapshot_id for snapshot_id, _turn in self.snapshot_turns(session_id))

    def snapshot_turns(self, session_id: str) -> tuple[tuple[str, int], ...]:
        """(snapshot id, turn) of the session's snapshots, in the order recorded: the session's
        events only, none of their snapshot documents."""
        return tuple(snapshot_turns_of(self.store.events(session_id)))


_SESSION_VIEW_COLUMNS = (
    col(SessionRow.id), col(SessionRow.project), col(SessionRow.branch), col(SessionRow.title), col(SessionRow.agent),
    col(SessionRow.created_at), col(SessionHeadRow.last_turn), col(SessionHeadRow.head_seq),
    col(SessionHeadRow.snapshot_count), col(SessionHeadRow.head_hash),
)
"""What a SessionView needs, selected as columns: no ORM objects are built for a list page."""


def _sub_query_hits(snapshot: AuditSnapshot) -> dict[str, int]:
    recalled = Counter([*(i.source for i in snapshot.selected),
                        *(r.source for r in snapshot.rejected if not r.from_probe)])
    return {q.id: sum(recalled[s] for s in set(q.sources)) for q in snapshot.retrieval.plan.sub_queries}


def _tool_call(payload: dict[str, Any]) -> str:
    """A tool event's call in full: ``tool`` then its arguments as JSON, and the exit code."""
    arguments = payload.get("arguments") or {}
    call = str(payload["tool"]) + (" " + json.dumps(arguments, ensure_ascii=False, sort_keys=True) if arguments else "")
    return call + (f"  → exit {payload['exit_code']}" if "exit_code" in payload else "")


def _session_view(row: Any) -> SessionView:
    return SessionView(
        id=row.id,
        project=row.project,
        branch=row.branch,
        title=row.title,
        agent=row.agent,
        started=stored_time_or_none(row.created_at),
        turns=row.last_turn,
        events=row.head_seq + 1,
        snapshots=row.snapshot_count,
        head_hash=row.head_hash,
    )


def _candidate_row(row: SnapshotCandidateRow) -> CandidateRow:
    return CandidateRow(
        ordinal=row.ordinal,
        source_ref=row.source_ref,
        path=row.path,
        source=row.source,
        stage=Stage(row.stage),
        reason=row.reason,
        from_probe=bool(row.from_probe),
        rank=row.rank,
        citation_id=row.citation_id,
        scores={name: getattr(row, name) for name in SHOWN_SCORES},
    )


def _funnel(snapshot: AuditSnapshot) -> FunnelView:
    funnel = snapshot.funnel()
    steps = (("recalled", funnel.recalled), *((s.value, n) for s, n in funnel.dropped), ("selected", funnel.selected))
    return FunnelView(steps=steps, withheld=tuple((s.value, n) for s, n in funnel.withheld_by_scope))


def store_label(url: str) -> str:
    """A store as a UI header shows it: a SQLite file by name, other URLs without password."""
    return display_url(url, name_only=True)
