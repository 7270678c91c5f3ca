"""An event appended on PostgreSQL by one statement: the head lock is never held across a round trip.

An append must read both chain heads, hash the new event over bytes that contain them, and move
both heads to it, all under the store-head lock. Done from the client, the lock is held from the
statement that takes it to the commit: three round trips, during which a writer descheduled on a
busy machine keeps every other writer waiting (``docs/reliability.md``, Concurrency). Here the
client sends the event's canonical JSON cut at the four values that depend on the heads
(``prev_hash``, ``seq``, ``store_seq``, ``turn``); one autocommit statement takes the lock,
joins the pieces with those values, hashes them with PostgreSQL's ``sha256`` and writes the event
and both heads. The stored bytes and every hash are exactly those ``store.event_row`` makes
(a test checks it), so verify, checkpoints and old stores see no difference.
"""

from __future__ import annotations

import os
import select
import threading
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import PoolProxiedConnection

from scopelens.core.clock import stored_time
from scopelens.core.contracts import Event
from scopelens.core.errors import IntegrityError
from scopelens.core.hashing import canonical_json, sha256_hex
from scopelens.core.vocab import EventType

CHAIN_FIELDS = ("prev_hash", "seq", "store_seq", "turn")
"""The event's fields that depend on the heads, in the order canonical JSON writes them."""

_APPEND_SQL = """
WITH heads AS MATERIALIZED (
    SELECT s.store_seq, s.head_hash AS store_hash, h.head_seq, h.head_hash AS session_hash,
           h.last_turn, h.snapshot_count
    FROM store_head s, session_heads h WHERE s.id = 1 AND h.session_id = %(session_id)s FOR UPDATE
), link AS MATERIALIZED (
    SELECT heads.*, CASE WHEN CAST(%(turn)s AS bigint) IS NOT NULL THEN CAST(%(turn)s AS bigint)
                         WHEN %(opens_turn)s THEN heads.last_turn + 1 ELSE heads.last_turn END AS turn
    FROM heads
), body AS MATERIALIZED (
    SELECT link.*, %(piece0)s || convert_to(link.session_hash, 'UTF8') || %(piece1)s
           || convert_to(CAST(link.head_seq + 1 AS text), 'UTF8') || %(piece2)s
           || convert_to(CAST(link.store_seq + 1 AS text), 'UTF8') || %(piece3)s
           || convert_to(CAST(link.turn AS text), 'UTF8') || %(piece4)s AS body
    FROM link
), hashed AS MATERIALIZED (
    SELECT body.*, encode(sha256(body.body), 'hex') AS hash FROM body
), new_event AS (
    INSERT INTO events (session_id, seq, store_seq, turn, type, created_at, body, hash)
    SELECT %(session_id)s, head_seq + 1, store_seq + 1, turn, %(type)s, %(created_at)s, body, hash FROM hashed
), session_link AS (
    UPDATE session_heads SET head_seq = hashed.head_seq + 1, head_hash = hashed.hash,
        last_turn = GREATEST(hashed.last_turn, hashed.turn),
        snapshot_count = hashed.snapshot_count + %(snapshots)s, updated_at = %(created_at)s
    FROM hashed WHERE session_heads.session_id = %(session_id)s
)
UPDATE store_head SET store_seq = hashed.store_seq + 1,
    head_hash = encode(sha256(convert_to(hashed.store_hash || ':' || hashed.hash, 'UTF8')), 'hex')
FROM hashed WHERE store_head.id = 1
RETURNING hashed.head_seq + 1, hashed.store_seq + 1, hashed.turn, hashed.session_hash, hashed.hash
"""
"""The statement, in psycopg's parameter style."""


class AppendConnection:
    """One autocommit connection a PostgreSQL store keeps for its appends.

    Checking a connection out of SQLAlchemy's pool for each append (a ping, a round trip, and
    SQLAlchemy's own work) cost twice the client CPU of the append itself, and on a busy
    machine writers spent it while others waited. The connection is checked out once (the
    pool pings it then) and used by one thread at a time. Before each append it looks, without
    waiting, whether the server sent anything since the last: a connection the server closed
    (a restart, an administrator's terminate) is found so and replaced, as the pool's ping
    would. One that breaks during an append is dropped and the error raised as SQLAlchemy's,
    like any write's.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        self._proxied: PoolProxiedConnection | None = None
        self._pid = os.getpid()
        """The process that holds ``_proxied`` (a forked child must not use, nor close, it)."""
        self._inherited: list[PoolProxiedConnection] = []
        """A forked child's reference to its parent's connection, kept so that it is never
        collected: collecting it would check it in to the child's pool, whose pre-ping on the
        next checkout would talk over the parent's socket (a test hung so, once in many runs)."""

    def execute(self, params: dict[str, Any]) -> Any:
        """Run the append statement; its one row, or None when the session does not exist."""
        import psycopg

        with self._lock:
            connection = self._connection()
            try:
                return connection.execute(_APPEND_SQL, params).fetchone()
            except psycopg.Error as exc:
                if connection.broken:
                    self._drop()
                raise DBAPIError.instance(_APPEND_SQL, params, exc, psycopg.Error) from exc

    def _connection(self) -> Any:
        self._leave_if_forked()
        if self._proxied is not None:
            kept: Any = self._proxied.driver_connection
            # Between appends the server has nothing to say: anything to read (its goodbye on a
            # terminate or a shutdown, the end of the socket) means the connection is done.
            if kept.closed or kept.broken or select.select([kept.fileno()], [], [], 0)[0]:
                self._drop()
        if self._proxied is None:
            self._proxied = self._engine.raw_connection()
            self._proxied.driver_connection.autocommit = True  # type: ignore[union-attr]
        return self._proxied.driver_connection

    def _leave_if_forked(self) -> None:
        """In a forked child, forget the parent's connection without closing it (closing would
        end the parent's session); the child opens its own."""
        if self._pid != os.getpid():
            if self._proxied is not None:
                self._inherited.append(self._proxied)
            self._proxied, self._pid = None, os.getpid()

    def _drop(self) -> None:
        proxied, self._proxied = self._proxied, None
        if proxied is not None:
            proxied.invalidate()  # closed, never handed out again
            proxied.close()

    def close(self) -> None:
        """Give the connection back to the pool (which the store disposes of next), or drop it
        if it is no longer usable."""
        with self._lock:
            self._leave_if_forked()
            proxied = self._proxied
            if proxied is None:
                return
            kept: Any = proxied.driver_connection
            if kept.closed or kept.broken:
                self._drop()
                return
            self._proxied = None
            kept.autocommit = False
            proxied.close()


def append_params(
    session_id: str, event_type: EventType, payload: dict[str, Any], *, turn: int | None, created_at: datetime
) -> dict[str, Any]:
    """The append statement's parameters for this event (``payload`` already checked and redacted).

    ``turn`` None: the session's current turn, or the next one for a ``user.message``."""
    pieces = body_pieces(session_id, event_type, payload, created_at)
    params: dict[str, Any] = {f"piece{i}": piece for i, piece in enumerate(pieces)}
    params.update(
        session_id=session_id,
        turn=turn,
        opens_turn=event_type == EventType.USER_MESSAGE,
        type=event_type.value,
        created_at=stored_time(created_at),
        snapshots=1 if event_type == EventType.RETRIEVAL_SNAPSHOT_CREATED else 0,
    )
    return params


def body_pieces(session_id: str, event_type: EventType, payload: dict[str, Any], created_at: datetime) -> list[bytes]:
    """The event's canonical JSON cut at its ``CHAIN_FIELDS`` values: five pieces of bytes, the
    values to go between them in ``CHAIN_FIELDS`` order."""
    dumped = Event(
        session_id=session_id, seq=0, store_seq=0, turn=0, type=event_type, created_at=created_at,
        payload=payload, prev_hash="",
    ).model_dump(mode="json")
    # Markers no payload can hold (a fresh random id each), written in place of the values.
    nonce = uuid.uuid4().hex
    markers = {name: f"@{nonce}:{name}@" for name in CHAIN_FIELDS}
    dumped.update(markers)
    body = canonical_json(dumped)
    pieces = []
    for name in CHAIN_FIELDS:
        # prev_hash stays a JSON string (its quotes in the pieces); the numbers replace theirs.
        marker = markers[name].encode("ascii")
        before, found, body = body.partition(marker if name == "prev_hash" else b'"' + marker + b'"')
        if not found:
            raise AssertionError(f"the marker of {name} is not in the event's canonical JSON")
        pieces.append(before)
    pieces.append(body)
    return pieces


def appended_event(
    session_id: str, event_type: EventType, payload: dict[str, Any], created_at: datetime, row: Any
) -> Event:
    """The event as the statement stored it, from the row it returned; its hash is checked
    against the one Python makes of the same event (the two must never differ)."""
    seq, store_seq, turn, prev_hash, stored_hash = row
    event = Event(
        session_id=session_id, seq=int(seq), store_seq=int(store_seq), turn=int(turn), type=event_type,
        created_at=created_at, payload=payload, prev_hash=str(prev_hash),
    )
    if sha256_hex(canonical_json(event)) != stored_hash:
        raise IntegrityError(f"event {session_id}#{seq}: stored bytes differ from its canonical JSON")
    return event
