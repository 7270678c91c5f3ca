"""Re-derive every hash and link in a store, and name the record behind each problem.

What is checked:

* every event's hash against its stored bytes, its columns (``created_at`` included) against
  its body, its ``prev_hash`` against the event before it, and sequence gaps (deleted events);
* every session head against the last event of its chain (a deleted or extra last event),
  and its counters (last turn, snapshot count, last update: what the sessions list shows)
  against what the chain says;
* the store chain over all events in append order against the stored store head (a whole
  session deleted with its head);
* every snapshot's hash against its bytes and against the event that recorded it, its row's
  columns (session, turn, time) against its document, its items' visible-text hashes, its
  context block and policy blobs, and its candidate rows;
* every blob's hash and size against its bytes, and that every blob an event or snapshot
  refers to (artifacts, policies, blocks) is present;
* every memory's version log (``core/store/memory_log.py``): each version's hash against its
  fields and body, its link to the version before, gaps in its numbers (a deleted version), and
  the memory's current row against its last version (a changed status or text, or a deleted
  last version). A memory deleted with all its versions is not caught: memories are state, not
  part of the store chain;
* every drift run's hash against its bytes, its columns against its report, and that its
  snapshot exists. (Drift runs are re-computable reports outside the chain: a deleted or a
  consistently forged run is not caught; the append-only triggers are their defence.)
* every drift confirmation (``drift_checks``): its hash re-derived from its columns and the
  result of the run it confirms (``core/store/drift_checks.py``), that the run exists and is
  of the same snapshot, and that it was checked no earlier than the run was recorded.

What is *not* caught without a checkpoint: someone who rewrites the whole store
consistently, every later hash included. ``verify --checkpoint`` compares with a head
recorded elsewhere (see ``docs/integrity.md`` and ``docs/security.md``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from sqlmodel import Session, col, select

from scopelens.core.clock import stored_time
from scopelens.core.contracts import AuditSnapshot, CheckpointCheck, DriftReport, MemoryRecord, Problem, VerifyReport
from scopelens.core.errors import IntegrityError
from scopelens.core.hashing import ZERO_HASH, as_bytes, sha256_hex, store_chain_next, text_hash
from scopelens.core.store.checkpoint import Checkpoint, origin_of, signature_problem
from scopelens.core.store.drift_checks import drift_check_hash, drift_result_hash
from scopelens.core.store.memory_log import version_hash
from scopelens.core.store.store import Store, snapshot_candidate_rows, stored_time_or_none
from scopelens.core.store.tables import (
    BlobRow,
    DriftCheckRow,
    DriftRunRow,
    EventRow,
    MemoryRow,
    MemoryVersionRow,
    SessionHeadRow,
    SessionRow,
    SnapshotCandidateRow,
    SnapshotRow,
    StoreHeadRow,
)
from scopelens.core.vocab import EventType, MemoryChange

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

Progress = Callable[[int], None]


@dataclass
class _ChainState:
    last_seq: int = -1
    last_hash: str = ZERO_HASH
    previous_hash: str = ZERO_HASH
    events: int = 0
    started: dict[str, Any] | None = None
    """The ``session.started`` event's payload and time: what the header row must say."""
    max_turn: int = 0
    snapshots: int = 0
    last_created_at: str | None = None
    open_calls: dict[str, str] = field(default_factory=dict)
    """Tool calls started and not (yet) finished: call id → the record that started it."""


@dataclass(frozen=True)
class _RecordedSnapshot:
    """What a ``retrieval.snapshot.created`` event says about its snapshot."""

    hash: str
    record: str
    session_id: str
    turn: int | None
    created_at: str | None


@dataclass
class _Findings:
    problems: list[Problem] = field(default_factory=list)
    referenced_blobs: dict[str, str] = field(default_factory=dict)
    """Blob address → the record that needs it (artifacts, policies)."""

    def add(self, kind: str, record: str, detail: str) -> None:
        self.problems.append(Problem(kind=kind, record=record, detail=detail))


def verify_store(
    store: Store,
    *,
    progress: Progress | None = None,
    checkpoint: Checkpoint | None = None,
    checkpoint_key: Ed25519PublicKey | None = None,
) -> VerifyReport:
    """Check the whole store; the report is clean only when no problem was found.

    With a ``checkpoint`` (taken earlier, kept elsewhere), also check that the store's first
    ``checkpoint.size`` events are the ones it pinned, and with ``checkpoint_key`` that it is
    signed by that key.
    """
    findings = _Findings()
    with store.read() as conn:
        sessions = {row.id: row for row in conn.exec(select(SessionRow))}
        heads = {row.session_id: row for row in conn.exec(select(SessionHeadRow))}
        stored = conn.exec(select(StoreHeadRow)).one()
        stored_seq, stored_head = stored.store_seq, stored.head_hash

        chains: dict[str, _ChainState] = {}
        snapshot_events: dict[str, _RecordedSnapshot] = {}
        events_seen = 0
        by_chain = select(EventRow).order_by(col(EventRow.session_id), col(EventRow.seq)).execution_options(yield_per=500)
        for row in conn.exec(by_chain):
            events_seen += 1
            if progress and events_seen % 1000 == 0:
                progress(events_seen)
            _check_event(row, chains.setdefault(row.session_id, _ChainState()), findings, snapshot_events)

        store_hash = ZERO_HASH
        first_event_hash: str | None = None
        head_at_checkpoint: str | None = ZERO_HASH if checkpoint is not None and checkpoint.size == 0 else None
        expected_store_seq = 1
        appended: dict[str, int] = {}
        """Events after the checkpoint, per session: a forged reply appended to an old session shows here."""
        by_append = (
            select(col(EventRow.store_seq), col(EventRow.hash), col(EventRow.session_id))
            .order_by(col(EventRow.store_seq))
            .execution_options(yield_per=2000)
        )
        for store_seq, event_hash, event_session in conn.execute(by_append):
            if store_seq != expected_store_seq:
                findings.add(
                    "deleted",
                    f"store_seq {expected_store_seq}..{store_seq - 1}",
                    f"{store_seq - expected_store_seq} event(s) missing from the store chain",
                )
            expected_store_seq = store_seq + 1
            store_hash = store_chain_next(store_hash, event_hash)
            if first_event_hash is None:
                first_event_hash = event_hash
            if checkpoint is not None and store_seq == checkpoint.size:
                head_at_checkpoint = store_hash
            elif checkpoint is not None and store_seq > checkpoint.size:
                appended[event_session] = appended.get(event_session, 0) + 1

        if events_seen and stored_seq != expected_store_seq - 1:
            findings.add(
                "deleted" if stored_seq > expected_store_seq - 1 else "inserted",
                f"store_seq {expected_store_seq}..{stored_seq}" if stored_seq > expected_store_seq - 1 else "store head",
                f"the store head records {stored_seq} events; the chain ends at {expected_store_seq - 1}",
            )
        elif not events_seen and stored_seq:
            findings.add("deleted", "store", f"the store head records {stored_seq} events; none are present")
        if store_hash != stored_head:
            findings.add(
                "head-mismatch",
                "store head",
                f"recomputed {store_hash[:16]}… but the store records {stored_head[:16]}…",
            )
        _check_sessions(sessions, heads, chains, findings)
        snapshot_count = _check_snapshots(conn, snapshot_events, findings)
        present: set[str] = set()
        blob_count = _check_blobs(conn, findings, present)
        for digest, record in sorted(findings.referenced_blobs.items()):
            if digest not in present:
                findings.add("deleted", f"blob {digest[:16]}…", f"{record} refers to it but it is missing")
        _check_drift_runs(conn, findings)
        _check_drift_checks(conn, findings)
        memory_versions = _check_memories(conn, findings)
    checked = (
        None
        if checkpoint is None
        else _check_checkpoint(
            checkpoint, checkpoint_key, head_at_checkpoint, origin_of(first_event_hash), appended, findings
        )
    )

    return VerifyReport(
        interrupted=_interrupted(chains),
        store_head=store_hash,
        stored_store_head=stored_head,
        sessions=len(sessions),
        events=events_seen,
        snapshots=snapshot_count,
        blobs=blob_count,
        memory_versions=memory_versions,
        problems=tuple(findings.problems),
        checkpoint=checked,
    )


def _check_checkpoint(
    checkpoint: Checkpoint,
    key: Ed25519PublicKey | None,
    head_now: str | None,
    origin: str,
    appended: dict[str, int],
    findings: _Findings,
) -> CheckpointCheck:
    record = f"store head at {checkpoint.size}"
    holds = True
    if checkpoint.origin is not None and checkpoint.origin != origin:
        holds = False
        findings.add(
            "rewritten", "store origin",
            f"the checkpoint is of {checkpoint.origin}; this store's first event makes it {origin} "
            "(another store, or rewritten from its first event)",
        )
    if head_now is None:
        holds = False
        findings.add("rolled-back", record, f"the checkpoint pins {checkpoint.size} events; the store has fewer")
    elif head_now != checkpoint.head:
        holds = False
        findings.add(
            "rewritten", record,
            f"recomputed {head_now[:16]}… but the checkpoint pins {checkpoint.head[:16]}…: "
            f"the first {checkpoint.size} events are not the ones it recorded",
        )
    if key is not None:
        why = signature_problem(checkpoint, key)
        if why is not None:
            holds = False
            findings.add("bad-signature", "checkpoint", why)
    return CheckpointCheck(
        size=checkpoint.size,
        head=checkpoint.head,
        origin=checkpoint.origin,
        head_now=head_now,
        holds=holds,
        signed=checkpoint.signed,
        signature_checked=key is not None and holds,
        appended_since=sum(appended.values()),
        appended_sessions=tuple(sorted(appended)),
    )


def make_checkpoint(store: Store, report: VerifyReport) -> Checkpoint:
    """The checkpoint of a store ``report`` found clean: its size, head and origin."""
    if not report.clean:
        raise IntegrityError(f"the store does not verify ({len(report.problems)} problem(s)): no checkpoint of it")
    with store.read() as conn:
        first = conn.execute(select(col(EventRow.hash)).where(col(EventRow.store_seq) == 1)).scalar()
    return Checkpoint(size=report.events, head=report.store_head, origin=origin_of(first))


def _check_event(
    row: EventRow,
    chain: _ChainState,
    findings: _Findings,
    snapshot_events: dict[str, _RecordedSnapshot],
) -> None:
    record = f"event {row.session_id}#{row.seq}"
    body = as_bytes(row.body)
    if sha256_hex(body) != row.hash:
        findings.add("changed", record, "its bytes do not match its stored hash")
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        findings.add("malformed", record, "its body is not JSON")
        _advance(chain, row)
        return
    mismatched = [
        name
        for name, column in (
            ("session_id", row.session_id),
            ("seq", row.seq),
            ("store_seq", row.store_seq),
            ("type", row.type),
            ("turn", row.turn),
        )
        if data.get(name) != column
    ]
    if _column_time(row.created_at) is None or _column_time(row.created_at) != stored_time_or_none(data.get("created_at")):
        mismatched.append("created_at")
    if mismatched:
        findings.add("changed", record, f"its columns disagree with its body: {', '.join(mismatched)}")
    if row.seq > chain.last_seq + 1:
        findings.add(
            "deleted",
            f"event {row.session_id}#{chain.last_seq + 1}"
            + (f"..{row.seq - 1}" if row.seq - 1 > chain.last_seq + 1 else ""),
            f"missing before {record}",
        )
    elif data.get("prev_hash") != chain.last_hash:
        if chain.events and data.get("prev_hash") == chain.previous_hash:
            findings.add(
                "inserted",
                f"event {row.session_id}#{chain.last_seq}",
                f"not in the chain: {record} links past it to the event before",
            )
        else:
            findings.add("broken-link", record, "its prev_hash does not match the event before it")
    payload = data.get("payload") if isinstance(data.get("payload"), dict) else {}
    if data.get("type") == EventType.RETRIEVAL_SNAPSHOT_CREATED.value:
        chain.snapshots += 1
        turn = payload.get("turn")
        snapshot_events[str(payload.get("snapshot_id"))] = _RecordedSnapshot(
            hash=str(payload.get("snapshot_hash")),
            record=record,
            session_id=row.session_id,
            turn=turn if isinstance(turn, int) else None,
            created_at=data.get("created_at") if isinstance(data.get("created_at"), str) else None,
        )
    elif data.get("type") == EventType.TOOL_STARTED.value:
        chain.open_calls[str(payload.get("call_id"))] = record
    elif data.get("type") == EventType.TOOL_FINISHED.value:
        chain.open_calls.pop(str(payload.get("call_id")), None)
        for artifact in payload.get("artifacts") or ():
            if isinstance(artifact, dict) and isinstance(artifact.get("blob"), str):
                findings.referenced_blobs.setdefault(artifact["blob"], f"{record} (artifact {artifact.get('name')!r})")
    elif row.seq == 0 and data.get("type") == EventType.SESSION_STARTED.value and isinstance(data.get("payload"), dict):
        chain.started = {**data["payload"], "created_at": data.get("created_at")}
    _advance(chain, row)


def _interrupted(chains: dict[str, _ChainState]) -> tuple[Problem, ...]:
    """Sessions whose writer stopped half-way (killed, crashed, or still running): not damage.

    Every write is one transaction, so a process killed inside one leaves nothing; these are
    the gaps between transactions: a session with nothing after its start, and a tool call
    started whose end was never written."""
    found = []
    for session_id, chain in sorted(chains.items()):
        if chain.events == 1 and chain.started is not None:
            found.append(Problem(kind="interrupted", record=f"session {session_id}",
                                 detail="nothing was written after it started"))
        for call_id, record in chain.open_calls.items():
            found.append(Problem(kind="interrupted", record=record,
                                 detail=f"tool call {call_id} started and its end was never written"))
    return tuple(found)


def _advance(chain: _ChainState, row: EventRow) -> None:
    chain.previous_hash = chain.last_hash
    chain.last_seq = row.seq
    chain.last_hash = row.hash
    chain.events += 1
    chain.max_turn = max(chain.max_turn, row.turn)
    chain.last_created_at = row.created_at


def _check_sessions(
    sessions: dict[str, SessionRow],
    heads: dict[str, SessionHeadRow],
    chains: dict[str, _ChainState],
    findings: _Findings,
) -> None:
    for session_id in sorted(set(sessions) | set(heads) | set(chains)):
        record = f"session {session_id}"
        head = heads.get(session_id)
        chain = chains.get(session_id)
        if session_id not in sessions:
            findings.add("missing-session", record, "its header row is missing")
        if head is None:
            findings.add("missing-session", record, "its chain head is missing")
            continue
        if chain is None:
            if head.head_seq >= 0:
                findings.add("deleted", record, f"all {head.head_seq + 1} events are missing")
            continue
        header = sessions.get(session_id)
        if header is not None and chain.started is not None:
            differing = _header_differs(header, chain.started)
            if differing:
                findings.add(
                    "changed", record,
                    f"its header row disagrees with its session.started event: {', '.join(differing)}",
                )
        if chain.last_seq < head.head_seq:
            findings.add(
                "deleted",
                f"event {session_id}#{chain.last_seq + 1}"
                + (f"..{head.head_seq}" if head.head_seq > chain.last_seq + 1 else ""),
                f"the session head records {head.head_seq + 1} events; the chain ends at #{chain.last_seq}",
            )
        elif chain.last_seq > head.head_seq:
            findings.add(
                "inserted",
                f"event {session_id}#{head.head_seq + 1}"
                + (f"..{chain.last_seq}" if chain.last_seq > head.head_seq + 1 else ""),
                "beyond the recorded session head",
            )
        elif chain.last_hash != head.head_hash:
            findings.add("head-mismatch", record, "the last event's hash differs from the recorded head")
        else:
            counters = _counters_differ(head, chain)
            if counters:
                findings.add("changed", record, f"its head's counters disagree with its chain: {', '.join(counters)}")


def _counters_differ(head: SessionHeadRow, chain: _ChainState) -> list[str]:
    """The session head's derived counters (shown in the sessions list) that its chain contradicts."""
    differing = []
    if head.last_turn != chain.max_turn:
        differing.append(f"last_turn {head.last_turn} (the chain says {chain.max_turn})")
    if head.snapshot_count != chain.snapshots:
        differing.append(f"snapshot_count {head.snapshot_count} (the chain says {chain.snapshots})")
    if _column_time(head.updated_at) != stored_time_or_none(chain.last_created_at):
        differing.append("updated_at")
    return differing


def _header_differs(header: SessionRow, started: dict[str, Any]) -> list[str]:
    """Fields of the sessions row (what lists show) that the hashed start event contradicts."""
    differing = [
        name
        for name in ("project", "branch", "workspace_root", "title", "agent")
        if getattr(header, name) != started.get(name)
    ]
    header_start = _column_time(header.created_at)
    if header_start is None or header_start != stored_time_or_none(started.get("created_at")):
        differing.append("created_at")
    return differing


def _check_snapshots(conn: Session, snapshot_events: dict[str, _RecordedSnapshot], findings: _Findings) -> int:
    count = 0
    seen: set[str] = set()
    for row in conn.exec(select(SnapshotRow).order_by(col(SnapshotRow.id)).execution_options(yield_per=200)):
        count += 1
        seen.add(row.id)
        record = f"snapshot {row.id}"
        body = as_bytes(row.body)
        digest = sha256_hex(body)
        if digest != row.hash:
            findings.add("changed", record, "its bytes do not match its stored hash")
        recorded = snapshot_events.get(row.id)
        if recorded is None:
            findings.add("inserted", record, "no retrieval.snapshot.created event records it")
        elif recorded.hash != digest:
            findings.add("changed", record, f"its hash differs from the one {recorded.record} recorded")
        try:
            snapshot = AuditSnapshot.model_validate_json(body)
        except ValidationError:
            findings.add("malformed", record, "its body is not a valid snapshot document")
            continue
        differing = _snapshot_columns_differ(row, snapshot.session_id, snapshot.turn, stored_time(snapshot.created_at))
        if differing:
            findings.add("changed", record, f"its row's columns disagree with its document: {', '.join(differing)}")
        if snapshot.pins is not None:  # an observed snapshot pins no policy
            findings.referenced_blobs.setdefault(snapshot.pins.policy_hash, f"{record} (its policy)")
        for item in snapshot.selected:
            if text_hash(item.visible_text) != item.visible_text_hash:
                findings.add("changed", f"{record} item {item.citation_id}", "visible text does not match its hash")
        block = conn.execute(select(col(BlobRow.data)).where(col(BlobRow.sha256) == snapshot.projection.block_ref)).scalar()
        if block is None:
            findings.add("deleted", f"blob {snapshot.projection.block_ref[:16]}…", f"context block of {row.id} is missing")
        _check_candidate_rows(conn, snapshot, findings)
    for snapshot_id in sorted(set(snapshot_events) - seen):
        findings.add("deleted", f"snapshot {snapshot_id}", f"recorded by {snapshot_events[snapshot_id].record} but missing")
    return count


def _snapshot_columns_differ(row: SnapshotRow, session_id: str, turn: int | None, created_at: str | None) -> list[str]:
    """The snapshot row's columns (what lists and the timeline read) that its hashed record contradicts."""
    differing = []
    if row.session_id != session_id:
        differing.append("session_id")
    if row.turn != turn:
        differing.append("turn")
    if _column_time(row.created_at) is None or _column_time(row.created_at) != stored_time_or_none(created_at):
        differing.append("created_at")
    return differing


def _normalise_rows(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    def value(v: object) -> object:
        return round(v, 9) if isinstance(v, float) else v

    return [{k: value(v) for k, v in row.items()} for row in rows]


def _check_blobs(conn: Session, findings: _Findings, present: set[str]) -> int:
    count = 0
    for digest, size, data in conn.execute(
        select(col(BlobRow.sha256), col(BlobRow.size), col(BlobRow.data)).execution_options(yield_per=100)
    ):
        count += 1
        present.add(digest)
        raw = as_bytes(data)
        if sha256_hex(raw) != digest or len(raw) != size:
            findings.add("changed", f"blob {digest[:16]}…", "its bytes do not match its address")
    return count


_DRIFT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("snapshot_id", "snapshot_id"),
    ("index_version", "index_version_now"),
    ("engine_version", "engine_now"),
)


def _check_drift_runs(conn: Session, findings: _Findings) -> None:
    snapshots = set(conn.execute(select(col(SnapshotRow.id))).scalars())
    for row in conn.exec(select(DriftRunRow).order_by(col(DriftRunRow.id)).execution_options(yield_per=200)):
        record = f"drift run {row.id}"
        body = as_bytes(row.body)
        if sha256_hex(body) != row.hash:
            findings.add("changed", record, "its bytes do not match its stored hash")
            continue
        try:
            report = DriftReport.model_validate_json(body)
        except ValidationError:
            findings.add("malformed", record, "its body is not a drift report")
            continue
        differing = [column for column, field_name in _DRIFT_COLUMNS if getattr(row, column) != getattr(report, field_name)]
        if row.summary != report.summary():
            differing.append("summary")
        if _column_time(row.created_at) != stored_time_or_none(stored_time(report.created_at)):
            differing.append("created_at")
        if report.id != row.id:
            differing.append("id")
        expected_config = report.config_hash or _pinned_config(conn, report)
        if expected_config is not None and row.config_hash != expected_config:
            differing.append("config_hash")
        if differing:
            findings.add("changed", record, f"its columns disagree with its report: {', '.join(differing)}")
        if row.snapshot_id not in snapshots:
            findings.add("deleted", f"snapshot {row.snapshot_id}", f"{record} is about it but it is missing")


def _column_time(value: object) -> datetime | None:
    """A time column as the store writes it (``stored_time``: fixed width, ``T``, microseconds,
    ``Z``), else None: a lenient parse would let ``2026-01-05C09:00:00.000000Z`` pass as the
    same moment, and a changed byte go unreported."""
    moment = stored_time_or_none(value)
    return moment if moment is not None and stored_time(moment) == value else None


def _pinned_config(conn: Session, report: DriftReport) -> str | None:
    """The configuration hash a run recorded before reports held it must have: the one its
    snapshot pinned, when the report says the configuration had not changed. (When it had,
    the old report does not say to what: the column is taken as it is.)"""
    if report.config_changed:
        return None
    body = conn.execute(select(col(SnapshotRow.body)).where(col(SnapshotRow.id) == report.snapshot_id)).scalar()
    if body is None:
        return None  # a missing snapshot is reported on its own
    try:
        pins = AuditSnapshot.model_validate_json(as_bytes(body)).pins
    except ValidationError:
        return None  # so is a malformed one
    return pins.config_hash if pins is not None else None


@dataclass(frozen=True)
class _ConfirmedRun:
    """What a confirmation is held to: its run's snapshot, time and result (None: unreadable)."""

    snapshot_id: str
    created_at: datetime | None
    result_hash: str | None


def _check_drift_checks(conn: Session, findings: _Findings) -> None:
    checks = list(conn.exec(select(DriftCheckRow).order_by(col(DriftCheckRow.run_id), col(DriftCheckRow.id))))
    runs: dict[str, _ConfirmedRun] = {}
    wanted = sorted({check.run_id for check in checks})
    for start in range(0, len(wanted), 500):
        for row in conn.exec(select(DriftRunRow).where(col(DriftRunRow.id).in_(wanted[start : start + 500]))):
            try:
                result: str | None = drift_result_hash(as_bytes(row.body), row.config_hash)
            except ValueError:
                result = None  # _check_drift_runs names the run itself
            runs[row.id] = _ConfirmedRun(row.snapshot_id, stored_time_or_none(row.created_at), result)
    for check in checks:
        record = f"drift check {check.id}"
        run = runs.get(check.run_id)
        if run is None:
            findings.add("deleted", f"drift run {check.run_id}", f"{record} confirms it but it is missing")
            continue
        expected = None if run.result_hash is None else drift_check_hash(
            check_id=check.id, run_id=check.run_id, snapshot_id=check.snapshot_id, checked_at=check.checked_at,
            result_hash=run.result_hash,
        )
        if expected != check.hash:
            findings.add("changed", record,
                         f"its hash does not match its columns and the result of drift run {check.run_id}")
        if check.snapshot_id != run.snapshot_id:
            findings.add("changed", record, f"its snapshot_id is not that of drift run {check.run_id}")
        checked_at = _column_time(check.checked_at)
        if checked_at is None or run.created_at is None or checked_at < run.created_at:
            findings.add("changed", record, f"its checked_at is before drift run {check.run_id} was recorded")


_MEMORY_CHANGES = frozenset(change.value for change in MemoryChange)


def _check_memories(conn: Session, findings: _Findings) -> int:
    """Re-derive every memory version's hash and link, and hold each current row to its last version."""
    current = {row.id: row for row in conn.exec(select(MemoryRow))}
    last: dict[str, MemoryVersionRow] = {}
    count = 0
    by_memory = select(MemoryVersionRow).order_by(col(MemoryVersionRow.memory_id), col(MemoryVersionRow.version))
    for row in conn.exec(by_memory.execution_options(yield_per=500)):
        count += 1
        record = f"memory {row.memory_id} v{row.version}"
        previous = last.get(row.memory_id)
        expected = 1 if previous is None else previous.version + 1
        if row.version != expected:
            findings.add("deleted", f"memory {row.memory_id} v{expected}..v{row.version - 1}",
                         f"{row.version - expected} version(s) missing from its log")
        if row.prev_hash != (ZERO_HASH if previous is None else previous.hash):
            findings.add("broken-link", record, "its prev_hash is not the hash of the version before it")
        body = as_bytes(row.body)
        digest = version_hash(
            memory_id=row.memory_id, version=row.version, project=row.project, status=row.status, change=row.change,
            recorded_at=row.recorded_at, content_hash=row.content_hash, prev_hash=row.prev_hash,
        )
        if sha256_hex(body) != row.content_hash or digest != row.hash:
            findings.add("changed", record, "its bytes do not match its stored hash")
        else:
            try:
                memory = MemoryRecord.model_validate_json(body)
            except ValidationError:
                findings.add("malformed", record, "its body is not a memory record")
            else:
                columns = (("memory_id", memory.id), ("project", memory.project), ("status", memory.status.value))
                differing = [name for name, value in columns if getattr(row, name) != value]
                if row.change not in _MEMORY_CHANGES:
                    differing.append("change")
                if differing:
                    findings.add("changed", record, f"its columns disagree with its body: {', '.join(differing)}")
        last[row.memory_id] = row
    for memory_id, head in sorted(current.items()):
        tail = last.get(memory_id)
        if tail is None:
            findings.add("deleted", f"memory {memory_id}", "its version log is missing")
            continue
        differing = [
            name
            for name, now, then in (
                ("version", head.version, tail.version), ("project", head.project, tail.project),
                ("status", head.status, tail.status), ("body", as_bytes(head.body), as_bytes(tail.body)),
                ("content_hash", head.content_hash, tail.content_hash),
            )
            if now != then
        ]
        try:
            body_says = MemoryRecord.model_validate_json(as_bytes(head.body))
            differing += [name for name, value in (("project", body_says.project), ("status", body_says.status.value))
                          if getattr(head, name) != value and name not in differing]
        except ValidationError:
            differing.append("body")
        if differing:
            findings.add("changed", f"memory {memory_id}",
                         f"its current row disagrees with its last version (v{tail.version}): {', '.join(differing)}")
    for memory_id in sorted(set(last) - set(current)):
        findings.add("deleted", f"memory {memory_id}", "it has a version log but no current row")
    return count


def candidate_rows_agree(conn: Session, snapshot: AuditSnapshot) -> bool:
    """Whether the candidates table (what the inspector pages through) says what the snapshot
    document says. Checked by verify_store for every snapshot and by the read model for the
    one snapshot on screen; the per-session verify leaves it out to stay cheap."""
    stored_rows = [
        r.model_dump()
        for r in conn.exec(
            select(SnapshotCandidateRow)
            .where(col(SnapshotCandidateRow.snapshot_id) == snapshot.id)
            .order_by(col(SnapshotCandidateRow.ordinal))
        )
    ]
    return _normalise_rows(stored_rows) == _normalise_rows(snapshot_candidate_rows(snapshot))


def _check_candidate_rows(conn: Session, snapshot: AuditSnapshot, findings: _Findings) -> None:
    if not candidate_rows_agree(conn, snapshot):
        findings.add("changed", f"snapshot {snapshot.id} candidate rows", "they disagree with the snapshot document")


_BLOCK_REF_KEY = b'"block_ref":"'


def _block_ref(body: bytes) -> str | None:
    """The projection's block_ref, read from canonical JSON without parsing the whole body.

    Only valid for bytes already matched against their hash (written canonically by
    ``write_snapshot``): there the key can only be the projection's, because a quote inside
    any string value is escaped. Falls back to parsing if the bytes look otherwise.
    """
    at = body.find(_BLOCK_REF_KEY)
    if at >= 0 and body.find(_BLOCK_REF_KEY, at + 1) < 0:
        value = body[at + len(_BLOCK_REF_KEY) : at + len(_BLOCK_REF_KEY) + 65]
        if len(value) == 65 and value.endswith(b'"'):
            return value[:64].decode("ascii", errors="replace")
    try:
        return str(json.loads(body)["projection"]["block_ref"])
    except (ValueError, KeyError, TypeError):
        return None


def verify_session(store: Store, session_id: str) -> tuple[Problem, ...]:
    """Check one session: its chain, its head, its snapshots and their blocks.

    Cheaper than :func:`verify_store` (which also checks the store chain and every blob), so
    the inspector can show a per-session status without re-hashing the whole store.
    """
    findings = _Findings()
    with store.read() as conn:
        head = conn.exec(select(SessionHeadRow).where(col(SessionHeadRow.session_id) == session_id)).first()
        header = conn.exec(select(SessionRow).where(col(SessionRow.id) == session_id)).first()
        chain = _ChainState()
        snapshot_events: dict[str, _RecordedSnapshot] = {}
        rows = conn.exec(
            select(EventRow)
            .where(col(EventRow.session_id) == session_id)
            .order_by(col(EventRow.seq))
            .execution_options(yield_per=500)
        )
        seen_any = False
        for row in rows:
            seen_any = True
            _check_event(row, chain, findings, snapshot_events)
        chains = {session_id: chain} if seen_any else {}
        _check_sessions(
            {session_id: header} if header else {}, {session_id: head} if head else {}, chains, findings
        )
        # Two queries for all of the session's snapshots and blocks, not two per snapshot.
        stored = {
            row.id: row
            for row in conn.exec(select(SnapshotRow).where(col(SnapshotRow.id).in_(list(snapshot_events))))
        } if snapshot_events else {}
        block_refs: dict[str, str] = {}
        for snapshot_id, recorded in sorted(snapshot_events.items()):
            if snapshot_id not in stored:
                findings.add("deleted", f"snapshot {snapshot_id}", f"recorded by {recorded.record} but missing")
                continue
            snapshot_row = stored[snapshot_id]
            body = as_bytes(snapshot_row.body)
            if sha256_hex(body) != snapshot_row.hash or snapshot_row.hash != recorded.hash:
                findings.add("changed", f"snapshot {snapshot_id}", "its bytes do not match the hash its event recorded")
                continue
            differing = _snapshot_columns_differ(snapshot_row, recorded.session_id, recorded.turn, recorded.created_at)
            if differing:
                findings.add(
                    "changed", f"snapshot {snapshot_id}", f"its row's columns disagree with its event: {', '.join(differing)}"
                )
            # The bytes match the hash the chain recorded, so every item in them is as written
            # (items were checked on write); only the block blob lives outside those bytes.
            # (The candidate rows are checked where they are shown: see candidate_rows_agree.)
            block_ref = _block_ref(body)
            if block_ref is None:
                findings.add("malformed", f"snapshot {snapshot_id}", "its body is not a snapshot document")
                continue
            block_refs[snapshot_id] = block_ref
        blocks = {
            sha: as_bytes(data)
            for sha, data in conn.execute(
                select(col(BlobRow.sha256), col(BlobRow.data)).where(col(BlobRow.sha256).in_(sorted(set(block_refs.values()))))
            )
        } if block_refs else {}
        for snapshot_id, block_ref in block_refs.items():
            block = blocks.get(block_ref)
            if block is None or sha256_hex(block) != block_ref:
                findings.add("changed", f"snapshot {snapshot_id} block", "the context block is missing or altered")
        artifacts = findings.referenced_blobs
        present = set(
            conn.execute(select(col(BlobRow.sha256)).where(col(BlobRow.sha256).in_(sorted(artifacts)))).scalars()
        ) if artifacts else set()
        for digest, record in sorted(artifacts.items()):
            if digest not in present:
                findings.add("deleted", f"blob {digest[:16]}…", f"{record} refers to it but it is missing")
    return tuple(findings.problems)
