"""Many appends in one transaction, written together: an imported session file.

A batch holds the store-head lock from its start (``Store.batch``), so no other writer can
append meanwhile and the chain heads can be kept in memory: each event is built, checked and
hashed exactly as ``Store.append_event`` does it, and the rows (events, snapshots, their
candidate rows, blobs) are inserted in a few statements when the batch ends, with each
session head and the store head updated once. Nothing is visible to readers before the
transaction commits; an error anywhere writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, col, select

from scopelens.core.clock import stored_time
from scopelens.core.contracts import AuditSnapshot, Contract, Event, SessionHeader, SnapshotCreatedPayload, turn_count
from scopelens.core.errors import InvalidInputError, UnknownIdError
from scopelens.core.hashing import ZERO_HASH, sha256_hex, store_chain_next
from scopelens.core.store.faults import fault_point
from scopelens.core.store.store import (
    Store,
    checked_payload,
    event_row,
    insert_ignore,
    refuse_secrets,
    session_row,
    snapshot_candidate_rows,
    started_payload,
)
from scopelens.core.store.tables import (
    BlobRow,
    EventRow,
    SessionHeadRow,
    SessionRow,
    SnapshotCandidateRow,
    SnapshotRow,
    StoreHeadRow,
    table_of,
)
from scopelens.core.vocab import EventType


@dataclass
class _Head:
    """A session's chain head as the batch has moved it."""

    seq: int
    hash: str
    last_turn: int
    snapshot_count: int
    updated_at: str
    new: bool = False
    """Created by this batch (its head row is inserted, not updated)."""


@dataclass
class Batch:
    store: Store
    conn: Session
    store_seq: int
    store_hash: str
    heads: dict[str, _Head] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    snapshots: list[dict[str, Any]] = field(default_factory=list)
    candidate_rows: list[dict[str, Any]] = field(default_factory=list)
    blobs: dict[str, bytes] = field(default_factory=dict)
    sessions: list[dict[str, Any]] = field(default_factory=list)

    def create_session(self, header: SessionHeader) -> None:
        refuse_secrets(f"session {header.id}", header.model_dump(mode="json"))
        known = self.conn.exec(select(col(SessionRow.id)).where(col(SessionRow.id) == header.id)).first()
        if known is not None or header.id in self.heads:
            raise InvalidInputError(f"session {header.id} already exists")
        self.sessions.append(session_row(header))
        self.heads[header.id] = _Head(-1, ZERO_HASH, 0, 0, stored_time(header.created_at), new=True)
        self.append(header.id, EventType.SESSION_STARTED, started_payload(header), turn=0, created_at=header.created_at)

    def _head(self, session_id: str) -> _Head:
        head = self.heads.get(session_id)
        if head is None:
            row = self.conn.exec(select(SessionHeadRow).where(col(SessionHeadRow.session_id) == session_id)).first()
            if row is None:
                raise UnknownIdError(f"no session {session_id!r} in this store")
            head = self.heads[session_id] = _Head(row.head_seq, row.head_hash, row.last_turn, row.snapshot_count,
                                                  row.updated_at)
        return head

    def current_turn(self, session_id: str) -> int:
        """The session's last turn as this batch has moved it (the turn an event joins by default)."""
        return self._head(session_id).last_turn

    def append(
        self, session_id: str, event_type: EventType, payload: Contract | dict[str, Any], *, turn: int, created_at: datetime
    ) -> Event:
        """Append one event, built and checked as ``Store.append_event`` builds it."""
        checked = checked_payload(event_type, payload)
        head = self._head(session_id)
        event = Event(session_id=session_id, seq=head.seq + 1, store_seq=self.store_seq + 1, turn=turn,
                      type=EventType(event_type), created_at=created_at, payload=checked, prev_hash=head.hash)
        row = event_row(event)
        event_hash = row["hash"]
        self.events.append(row)
        head.seq, head.hash = event.seq, event_hash
        head.last_turn = turn_count((head.last_turn, turn))
        head.snapshot_count += event.type == EventType.RETRIEVAL_SNAPSHOT_CREATED
        head.updated_at = stored_time(event.created_at)
        self.store_seq, self.store_hash = event.store_seq, store_chain_next(self.store_hash, event_hash)
        return event

    def write_snapshot(self, snapshot: AuditSnapshot, context_block: str) -> str:
        """Add a snapshot, its block, its candidate rows and its event (checked as
        ``Store.write_snapshot`` checks them); returns its content hash."""
        block, body, content_hash = self.store._checked_snapshot(snapshot, context_block, None)
        if snapshot.pins is not None:
            raise InvalidInputError(f"snapshot {snapshot.id}: a batch takes snapshots that pin no policy (observed ones)")
        self.blobs.setdefault(sha256_hex(block), block)
        self.snapshots.append({"id": snapshot.id, "session_id": snapshot.session_id, "turn": snapshot.turn,
                               "created_at": stored_time(snapshot.created_at), "body": body, "hash": content_hash})
        self.candidate_rows += snapshot_candidate_rows(snapshot)
        self.append(snapshot.session_id, EventType.RETRIEVAL_SNAPSHOT_CREATED,
                    SnapshotCreatedPayload(snapshot_id=snapshot.id, snapshot_hash=content_hash,
                                           visible_text_hash=snapshot.projection.visible_text_hash,
                                           selected_count=len(snapshot.selected), turn=snapshot.turn),
                    turn=snapshot.turn, created_at=snapshot.created_at)
        return content_hash

    def flush(self) -> None:
        """Insert everything added, and move the heads, in the batch's transaction."""
        conn, dialect = self.conn, self.store.dialect
        if self.sessions:
            conn.execute(table_of(SessionRow).insert(), self.sessions)
        for digest, data in self.blobs.items():
            conn.execute(insert_ignore(dialect, BlobRow, {"sha256": digest, "size": len(data), "data": data}))
        if self.snapshots:
            conn.execute(table_of(SnapshotRow).insert(), self.snapshots)
        if self.candidate_rows:
            conn.execute(table_of(SnapshotCandidateRow).insert(), self.candidate_rows)
        if self.events:
            conn.execute(table_of(EventRow).insert(), self.events)
        fault_point("batch.rows_written")
        for session_id, head in self.heads.items():
            values = {"head_seq": head.seq, "head_hash": head.hash, "last_turn": head.last_turn,
                      "snapshot_count": head.snapshot_count, "updated_at": head.updated_at}
            if head.new:
                conn.execute(table_of(SessionHeadRow).insert().values(session_id=session_id, **values))
            else:
                conn.execute(update(SessionHeadRow).where(col(SessionHeadRow.session_id) == session_id).values(**values))
        if self.events:
            conn.execute(update(StoreHeadRow).where(col(StoreHeadRow.id) == 1)
                         .values(store_seq=self.store_seq, head_hash=self.store_hash))

