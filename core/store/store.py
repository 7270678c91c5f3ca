"""The audit store: sessions, hash-chained events, content-addressed blobs and snapshots.

Everything that is appended goes through one write transaction that holds the write lock
from its start (see ``engine.py``), reads the chain heads, and writes the next links; on
PostgreSQL an event appended on its own is one statement doing all three (``pg_append.py``). The
store head is a chain over every event in append order, so it covers every session head:
deleting a whole session is caught, not only a changed event.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from sqlalchemy import Engine, TextClause, func, inspect, text
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import IntegrityError as SAIntegrityError
from sqlmodel import Session, col, select

from scopelens.core.clock import Clock, IdSource, RandomIds, SystemClock, parse_stored_time, stored_time
from scopelens.core.contracts import (
    EVENT_PAYLOADS,
    SCORE_COLUMNS,
    AuditSnapshot,
    Contract,
    Event,
    SessionHeader,
    SessionStartedPayload,
    SnapshotCreatedPayload,
    turn_count,
)
from scopelens.core.errors import (
    ImmutableRecordError,
    IntegrityError,
    InvalidInputError,
    NewerSchemaError,
    NotAScopelensStoreError,
    ScopelensError,
    SecretRefusedError,
    StoreNotWritableError,
    StoreUnavailableError,
    UnknownIdError,
)
from scopelens.core.hashing import ZERO_HASH, as_bytes, canonical_json, sha256_hex, store_chain_next, text_hash
from scopelens.core.redact import RedactionKey, secrets_in
from scopelens.core.store.engine import display_url, make_engine, normalise_url, sqlite_path_of
from scopelens.core.store.faults import fault_point
from scopelens.core.store.index_lock import index_run_lock
from scopelens.core.store.keys import key_path_for, load_or_create_key
from scopelens.core.store.migrations import MIGRATIONS, MIGRATIONS_TABLE_DDL
from scopelens.core.store.pg_append import AppendConnection, append_params, appended_event
from scopelens.core.store.tables import (
    BlobRow,
    EventRow,
    IndexRunRow,
    MemoryRow,
    MetaRow,
    MigrationRow,
    SessionHeadRow,
    SessionRow,
    SnapshotCandidateRow,
    SnapshotRow,
    StoreHeadRow,
    table_of,
)
from scopelens.core.textsafety import clip, listing
from scopelens.core.vocab import EventType, SnapshotKind, Stage

if TYPE_CHECKING:
    from scopelens.core.store.batch import Batch

APP_ID = "scopelens"
SQLITE_MAGIC = b"SQLite format 3\x00"
MIGRATION_LOCK = 7133701
"""PostgreSQL advisory lock key held while migrating."""
OBSERVED_ID_PREFIX = "obs"
COUNTERFACTUAL_ID_PREFIX = "cf"
"""Ids of observed snapshots (``scopelens import``) start ``obs-``, of counterfactual ones
(``import --retrieve``) ``cf-``, retrievals' ``snap-``: listings say which without reading the
document (the kind itself is in the document)."""
KNOWN_PROJECTS_SHOWN = 20
"""How many project names an unknown-project error lists (a shared store may hold many)."""


class StoreNeedsMigrationError(ScopelensError):
    """A store written by an older scopelens, opened where nothing may be written."""


@dataclass(frozen=True)
class SessionSummary:
    """A session as the sessions list shows it."""

    header: SessionHeader
    events: int
    turns: int
    snapshots: int
    head_hash: str
    updated_at: datetime


@dataclass(frozen=True)
class StoredSnapshot:
    """A snapshot as read back, with the hash of its stored bytes."""

    snapshot: AuditSnapshot
    content_hash: str
    body: bytes


@dataclass(frozen=True)
class ChainHeads:
    """Both chain heads as an append reads them under the store-head lock."""

    store_seq: int
    store_hash: str
    session_seq: int
    session_hash: str
    last_turn: int
    snapshot_count: int


_BOTH_HEADS = (
    "SELECT s.store_seq, s.head_hash, h.head_seq, h.head_hash, h.last_turn, h.snapshot_count"
    " FROM store_head s, session_heads h WHERE s.id = 1 AND h.session_id = :sid"
)
_LOCK_BOTH_HEADS: dict[bool, TextClause] = {
    # SQLite: the transaction holds the write lock from its BEGIN IMMEDIATE.
    False: text(_BOTH_HEADS),
    # PostgreSQL: both rows locked, so one that waited reads both as they are now (a statement
    # reads rows it locks again after the wait, and no others). Every writer locks the store
    # head before any session head, so the two locks cannot deadlock.
    True: text(_BOTH_HEADS + " FOR UPDATE"),
}
"""Both chain heads, read under the store-head lock; keyed by 'is PostgreSQL'."""
_LAST_SNAPSHOT_TURN = text("SELECT COALESCE(max(turn), 0) FROM snapshots WHERE session_id = :sid")
"""Read only to choose a retrieval's turn, after the lock (a statement of its own sees now)."""
_INSERT_EVENT = (
    "INSERT INTO events (session_id, seq, store_seq, turn, type, created_at, body, hash)"
    " VALUES (:session_id, :seq, :store_seq, :turn, :type, :created_at, :body, :hash)"
)
_MOVE_SESSION_HEAD = (
    "UPDATE session_heads SET head_seq = :seq, head_hash = :hash, last_turn = :last_turn,"
    " snapshot_count = :snapshot_count, updated_at = :created_at WHERE session_id = :session_id"
)
_MOVE_STORE_HEAD = "UPDATE store_head SET store_seq = :store_seq, head_hash = :store_hash WHERE id = 1"
_LINK_STATEMENTS: dict[bool, tuple[TextClause, ...]] = {
    # SQLite runs in the process: three statements cost no round trips.
    False: (text(_INSERT_EVENT), text(_MOVE_SESSION_HEAD), text(_MOVE_STORE_HEAD)),
    # PostgreSQL: one round trip while the lock is held, not three.
    True: (text(f"WITH new_event AS ({_INSERT_EVENT}), session_link AS ({_MOVE_SESSION_HEAD}) {_MOVE_STORE_HEAD}"),),
}
"""An appended event's row and both heads moved to it; keyed by 'is PostgreSQL'."""


def stored_time_or_none(value: object) -> datetime | None:
    """A stored ISO-8601 time as aware UTC, or None when it is not one (a damaged row)."""
    try:
        return parse_stored_time(str(value))
    except ValueError:
        return None


CLOSING_CHECKPOINT_WAIT_MS = 200
"""How long closing a SQLite store waits to move its WAL into the file (see ``Store.close``)."""
OLDEST_POSTGRESQL = (11,)
"""An event is appended in one statement that hashes it with PostgreSQL's ``sha256``, which
version 11 added (``pg_append.py``)."""


def require_supported_server(dialect: str, version: tuple[Any, ...] | None, url: str) -> None:
    """Refuse, in one line, a server too old for the statements the store runs."""
    if dialect == "postgresql" and version is not None and tuple(version[:1]) < OLDEST_POSTGRESQL:
        shown = ".".join(str(part) for part in version)
        raise StoreUnavailableError(
            f"{display_url(url)} is PostgreSQL {shown}; scopelens needs PostgreSQL {OLDEST_POSTGRESQL[0]} or newer"
        )


class Store:
    """An open audit store. Use :meth:`open`; close it (or use it as a context manager)."""

    def __init__(
        self,
        engine: Engine,
        url: str,
        *,
        read_only: bool,
        clock: Clock,
        ids: IdSource,
        redaction_key: RedactionKey | None = None,
    ) -> None:
        self.engine = engine
        self.url = url
        self.read_only = read_only
        self.clock = clock
        self.ids = ids
        self.dialect = engine.dialect.name
        self._redaction_key = redaction_key
        self._append_connection = AppendConnection(engine)
        self._opened_pid = os.getpid()

    @property
    def redaction_key(self) -> RedactionKey:
        """The key that hashes this store's redaction records (core/store/keys.py says where
        it lives); made on first use. The deterministic recorder passes a fixed one."""
        if self._redaction_key is None:
            self._redaction_key = load_or_create_key(key_path_for(self.url))
        return self._redaction_key

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        url_or_path: str,
        *,
        create: bool = False,
        read_only: bool = False,
        clock: Clock | None = None,
        ids: IdSource | None = None,
        redaction_key: RedactionKey | None = None,
    ) -> Store:
        """Open a store, creating and migrating it when ``create`` is set.

        Raises a :class:`ScopelensError` for a missing store, a file that is not a SQLite
        database, a database that is not a scopelens store, or a newer schema.
        """
        url = normalise_url(url_or_path)
        path = sqlite_path_of(url)
        if path is not None:
            _check_sqlite_file(path, create=create)
            if create and not read_only:
                path.parent.mkdir(parents=True, exist_ok=True)
        engine = make_engine(url, read_only=read_only)
        store = cls(
            engine, url, read_only=read_only, clock=clock or SystemClock(), ids=ids or RandomIds(),
            redaction_key=redaction_key,
        )
        try:
            store._prepare(create=create)
        except ScopelensError:
            engine.dispose()
            raise
        except OperationalError as exc:
            engine.dispose()
            raise StoreUnavailableError(f"cannot open store {display_url(url)}: {_first_line(exc)}") from None
        except DBAPIError as exc:
            engine.dispose()
            raise NotAScopelensStoreError(
                f"{display_url(url)} is not a readable scopelens store: {_first_line(exc)}"
            ) from None
        return store

    def close(self) -> None:
        """Close the store. A writable SQLite store first moves its WAL into the main file, so
        the file alone holds every committed transaction (a copy of it is whole)."""
        if self.dialect == "sqlite" and not self.read_only and sqlite_path_of(self.url) is not None:
            try:
                with self.engine.connect() as conn:
                    # A full checkpoint waits for older readers and holds off every new writer
                    # while it waits: with the store's 60 s busy timeout, closing a store while
                    # another process read (a verify of a big store) stopped all writers for a
                    # minute, and then failed them with "database is locked". Waiting briefly
                    # keeps that stall short; a checkpoint that cannot finish now is done by a
                    # later one (SQLite reads the WAL meanwhile: nothing is lost).
                    conn.exec_driver_sql(f"PRAGMA busy_timeout = {CLOSING_CHECKPOINT_WAIT_MS}")
                    conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            except DBAPIError:
                pass  # a busy checkpoint is retried by the next writer; nothing is lost
        self._append_connection.close()
        # A forked child leaves its parent's pooled connections open for the parent.
        self.engine.dispose(close=os.getpid() == self._opened_pid)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _prepare(self, *, create: bool) -> None:
        with self.engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
        require_supported_server(self.engine.dialect.name, self.engine.dialect.server_version_info, self.url)
        if not tables:
            if not create or self.read_only:
                raise NotAScopelensStoreError(f"{display_url(self.url)} is an empty database, not a scopelens store")
            self._migrate()
            return
        if "scopelens_meta" not in tables or "scopelens_migrations" not in tables:
            listed = listing(sorted(tables), 5)
            raise NotAScopelensStoreError(
                f"{display_url(self.url)} is a database but not a scopelens store (it has tables: {listed})"
            )
        with self.engine.connect() as conn:
            app = conn.execute(select(col(MetaRow.value)).where(col(MetaRow.key) == "app")).scalar()
            applied = [row.name for row in conn.execute(select(col(MigrationRow.name)).order_by(col(MigrationRow.ordinal)))]
        if app != APP_ID:
            raise NotAScopelensStoreError(f"{display_url(self.url)} is not a scopelens store (app id {app!r})")
        known = [m.name for m in MIGRATIONS]
        unknown = [name for name in applied if name not in known]
        if unknown or len(applied) > len(known):
            raise NewerSchemaError(
                f"{display_url(self.url)} was written by a newer scopelens (schema {len(applied)}, "
                f"migration {(unknown or applied)[-1]!r}); this scopelens knows schema {len(known)}: upgrade scopelens"
            )
        if applied != known[: len(applied)]:
            raise NotAScopelensStoreError(f"{display_url(self.url)} has migrations out of order: {applied}")
        if len(applied) < len(known):
            if self.read_only:
                raise StoreNeedsMigrationError(
                    f"{display_url(self.url)} is at schema {len(applied)} and needs {len(known)}: "
                    "run `scopelens migrate` on it first"
                )
            self._migrate()

    def _migrate(self) -> None:
        """Apply pending migrations in one locked transaction (idempotent under races)."""
        with self.write() as conn:
            if self.dialect == "postgresql":
                conn.execute(text(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})"))
            conn.execute(text(MIGRATIONS_TABLE_DDL))
            done = set(conn.execute(select(col(MigrationRow.name))).scalars())
            for ordinal, migration in enumerate(MIGRATIONS, start=1):
                if migration.name in done:
                    continue
                for statement in migration.statements(self.dialect):
                    conn.execute(text(statement))
                if migration.backfill is not None:
                    migration.backfill(conn)
                if ordinal == 1:
                    conn.execute(table_of(MetaRow).insert().values(key="app", value=APP_ID))
                    conn.execute(table_of(StoreHeadRow).insert().values(id=1, store_seq=0, head_hash=ZERO_HASH))
                conn.execute(
                    table_of(MigrationRow).insert().values(
                        ordinal=ordinal, name=migration.name, applied_at=stored_time(self.clock.now())
                    )
                )
            conn.execute(
                _upsert(self.dialect, MetaRow, {"key": "schema_version", "value": str(len(MIGRATIONS))}, ["key"])
            )

    # ------------------------------------------------------------------ transactions

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A transaction holding the write lock from its start; commits on success."""
        with self._writing(), self.engine.connect().execution_options(write=True) as conn, conn.begin(), \
                Session(bind=conn) as session:
            fault_point("write.begun")
            yield session
            session.flush()  # objects added with session.add() are written before commit
            fault_point("write.before_commit")

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Around any write: refused on a read-only store; a database that refuses writes or is
        damaged is a one-line error."""
        if self.read_only:
            raise ImmutableRecordError("this store was opened read-only")
        try:
            yield
        except DBAPIError as exc:
            if _denies_writing(exc):
                raise StoreNotWritableError(
                    f"cannot write to store {display_url(self.url)}: {_first_line(exc)}"
                ) from None
            self._raise_if_damaged(exc)
            raise

    @contextmanager
    def batch(self) -> Iterator[Batch]:
        """One write transaction for many records (an imported session file): all or nothing,
        written together when the block ends (``core/store/batch.py``)."""
        from scopelens.core.store.batch import Batch

        with self.write() as conn:
            batch = Batch(self, conn, *self._lock_store_head(conn))
            yield batch
            batch.flush()

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A read transaction: one consistent snapshot on both backends.

        PostgreSQL's default (READ COMMITTED) gives each statement its own snapshot, so a read
        spanning several statements while others append (verify) saw a chain that was never
        whole; REPEATABLE READ READ ONLY fixes one snapshot at the first statement. SQLite's
        deferred transaction does so already (WAL: without blocking writers).
        """
        connection = self.engine.connect()
        if self.dialect == "postgresql":
            connection = connection.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
        try:
            with connection as conn, conn.begin(), Session(bind=conn) as session:
                yield session
        except DBAPIError as exc:
            self._raise_if_damaged(exc)
            raise

    def _raise_if_damaged(self, exc: DBAPIError) -> None:
        """A SQLite file damaged past reading (cut short, overwritten) fails at whichever page a
        query reaches, not when it opens: say so in one line, as an integrity error."""
        message = str(exc.orig).lower()
        if self.dialect == "sqlite" and any(sign in message for sign in _DAMAGE_SIGNS):
            raise IntegrityError(f"store {display_url(self.url)} is damaged: {_first_line(exc)}") from None

    @contextmanager
    def index_run_lock(self) -> Iterator[None]:
        """Make index runs of this store run one at a time (``index_lock.py``): held from before
        a run's diff to after its final commit. Readers and event appends never wait for it."""
        if self.read_only:
            raise ImmutableRecordError("this store was opened read-only")
        with index_run_lock(self.engine, self.url):
            yield

    def _lock_store_head(self, conn: Session) -> tuple[int, str]:
        statement = select(col(StoreHeadRow.store_seq), col(StoreHeadRow.head_hash)).where(col(StoreHeadRow.id) == 1)
        if self.dialect == "postgresql":
            statement = statement.with_for_update()
        row = conn.execute(statement).one()
        return int(row.store_seq), str(row.head_hash)

    # ------------------------------------------------------------------ sessions & events

    def create_session(
        self,
        *,
        project: str,
        branch: str | None = None,
        workspace_root: str | None = None,
        title: str = "",
        agent: str = "",
        session_id: str | None = None,
        created_at: datetime | None = None,
    ) -> SessionHeader:
        """Create a session and append its ``session.started`` event (fields already redacted)."""
        header = SessionHeader(
            id=session_id or self.ids.new_id("s"),
            project=project,
            branch=branch,
            workspace_root=workspace_root,
            title=title,
            agent=agent,
            created_at=created_at or self.clock.now(),
        )
        with self.write() as conn:
            self._lock_store_head(conn)
            self._create_session_in(conn, header)
        return header

    def _create_session_in(self, conn: Session, header: SessionHeader) -> None:
        """Create a session inside a transaction that holds the store-head lock."""
        refuse_secrets(f"session {header.id}", header.model_dump(mode="json"))
        try:
            conn.execute(table_of(SessionRow).insert().values(**session_row(header)))
        except SAIntegrityError:
            raise InvalidInputError(f"session {header.id} already exists") from None
        fault_point("session.row_written")
        conn.execute(
            table_of(SessionHeadRow).insert().values(
                session_id=header.id,
                head_seq=-1,
                head_hash=ZERO_HASH,
                last_turn=0,
                snapshot_count=0,
                updated_at=stored_time(header.created_at),
            )
        )
        self._append_in(
            conn,
            header.id,
            EventType.SESSION_STARTED,
            started_payload(header),
            turn=0,
            created_at=header.created_at,
        )

    def append_event(
        self,
        session_id: str,
        event_type: EventType,
        payload: Contract | dict[str, Any],
        *,
        turn: int | None = None,
        created_at: datetime | None = None,
    ) -> Event:
        """Append one event to a session's chain, safely under concurrent writers.

        ``turn`` defaults to the session's current turn; a ``user.message`` opens the next.
        The payload is checked before the transaction: only the links are made under the lock.
        """
        checked = checked_payload(event_type, payload)
        if self.dialect == "postgresql":
            return self._append_in_one_statement(session_id, EventType(event_type), checked, turn, created_at)
        with self.write() as conn:
            return self._append_in(conn, session_id, event_type, checked, turn=turn, created_at=created_at, checked=True)

    def _append_in_one_statement(
        self, session_id: str, event_type: EventType, payload: dict[str, Any], turn: int | None,
        created_at: datetime | None,
    ) -> Event:
        """PostgreSQL: the event and both heads written by one autocommit statement, so the
        store-head lock is held inside the server only (``pg_append.py``)."""
        created_at = created_at or self.clock.now()
        params = append_params(session_id, event_type, payload, turn=turn, created_at=created_at)
        with self._writing():
            row = self._append_connection.execute(params)
        if row is None:
            raise UnknownIdError(f"no session {session_id!r} in this store")
        return appended_event(session_id, event_type, payload, created_at, row)

    def _lock_heads(self, conn: Session, session_id: str) -> ChainHeads:
        """Take the store-head lock and read both chain heads, in one statement.

        Every append runs this first, so the lock is held for this, the links' hashes, one
        write statement on PostgreSQL (``_LINK_STATEMENTS``) and the commit."""
        statement = _LOCK_BOTH_HEADS[self.dialect == "postgresql"]
        row = conn.connection().execute(statement, {"sid": session_id}).first()
        if row is None:
            raise UnknownIdError(f"no session {session_id!r} in this store")
        return ChainHeads(*row)

    def _append_in(
        self,
        conn: Session,
        session_id: str,
        event_type: EventType,
        payload: Contract | dict[str, Any],
        *,
        turn: int | None,
        created_at: datetime | None,
        checked: bool = False,
        heads: ChainHeads | None = None,
    ) -> Event:
        """Append inside a write transaction (``heads``: already locked and read by it)."""
        dumped = payload if checked and isinstance(payload, dict) else checked_payload(event_type, payload)
        if heads is None:
            heads = self._lock_heads(conn, session_id)
        fault_point("append.heads_locked")
        if turn is None:
            turn = heads.last_turn + 1 if event_type == EventType.USER_MESSAGE else heads.last_turn
        event = Event(
            session_id=session_id,
            seq=heads.session_seq + 1,
            store_seq=heads.store_seq + 1,
            turn=turn,
            type=EventType(event_type),
            created_at=created_at or self.clock.now(),
            payload=dumped,
            prev_hash=heads.session_hash,
        )
        row = event_row(event)
        params = dict(
            row,
            last_turn=turn_count((heads.last_turn, turn)),
            snapshot_count=heads.snapshot_count + (1 if event.type == EventType.RETRIEVAL_SNAPSHOT_CREATED else 0),
            store_hash=store_chain_next(heads.store_hash, row["hash"]),
        )
        connection = conn.connection()
        for statement in _LINK_STATEMENTS[self.dialect == "postgresql"]:
            connection.execute(statement, params)
        fault_point("append.linked")
        return event

    # ------------------------------------------------------------------ blobs

    def put_blob(self, data: bytes) -> str:
        """Store bytes once, addressed by their SHA-256; returns the hash. Text with a detectable
        secret is refused (an artifact is redacted where it is captured)."""
        refuse_secrets("blob", data.decode("utf-8", errors="replace"))
        with self.write() as conn:
            return self._put_blob_in(conn, data)

    def _put_blob_in(self, conn: Session, data: bytes) -> str:
        digest = sha256_hex(data)
        conn.execute(insert_ignore(self.dialect, BlobRow, {"sha256": digest, "size": len(data), "data": data}))
        return digest

    def get_blob(self, digest: str) -> bytes:
        with self.read() as conn:
            data = conn.execute(select(col(BlobRow.data)).where(col(BlobRow.sha256) == digest)).scalar()
        if data is None:
            raise UnknownIdError(f"no blob {digest[:12]}… in this store")
        return as_bytes(data)

    # ------------------------------------------------------------------ snapshots

    def write_snapshot(
        self,
        snapshot: AuditSnapshot,
        context_block: str,
        *,
        blobs: Sequence[bytes] = (),
        document: bytes | None = None,
        new_session: SessionHeader | None = None,
    ) -> str:
        """Commit a snapshot, its blobs, its candidate rows and its event in one transaction.

        ``blobs`` are further content-addressed blobs the snapshot refers to: the policy it pins
        must be among them or already stored. ``document`` is the canonical JSON to store when
        it is not ``snapshot``'s own: a copy of a document written by an older version, with
        fields this one no longer has (``rebuild``). It must read back as ``snapshot``.
        ``new_session`` is created in the same transaction (the snapshot's session).

        Returns the snapshot's content hash (SHA-256 of its stored bytes).
        """
        return self._write_snapshot(snapshot, context_block, blobs, document, next_turn=False, new_session=new_session)[1]

    def write_snapshot_at_next_turn(
        self,
        snapshot: AuditSnapshot,
        context_block: str,
        *,
        blobs: Sequence[bytes] = (),
        new_session: SessionHeader | None = None,
    ) -> tuple[AuditSnapshot, str]:
        """``write_snapshot`` for a retrieval that names no turn: its turn is decided inside the
        write transaction, under the store-head lock, so concurrent retrievals into one session
        get distinct turns in the order they commit. It is the session's current turn when no
        snapshot has it yet (a retrieval answering the latest user message), else the next one.

        Returns the snapshot as stored (with that turn) and its content hash."""
        return self._write_snapshot(snapshot, context_block, blobs, None, next_turn=True, new_session=new_session)

    def _write_snapshot(
        self,
        snapshot: AuditSnapshot,
        context_block: str,
        blobs: Sequence[bytes],
        document: bytes | None,
        *,
        next_turn: bool,
        new_session: SessionHeader | None,
    ) -> tuple[AuditSnapshot, str]:
        block, body, content_hash = self._checked_snapshot(snapshot, context_block, document)
        if new_session is not None and new_session.id != snapshot.session_id:
            raise InvalidInputError(f"snapshot {snapshot.id} is not of the new session {new_session.id}")
        with self.write() as conn:
            if new_session is not None:
                self._create_session_in(conn, new_session)
            # Content first: it links to nothing, so other appends need not wait for it.
            self._write_snapshot_content(conn, snapshot, block, blobs)
            fault_point("snapshot.content_written")
            heads = self._lock_heads(conn, snapshot.session_id)
            if next_turn:
                last_snapshot_turn = conn.connection().execute(_LAST_SNAPSHOT_TURN, {"sid": snapshot.session_id}).scalar_one()
                turn = heads.last_turn if last_snapshot_turn < heads.last_turn else heads.last_turn + 1
                snapshot = snapshot.model_copy(update={"turn": max(turn, 1)})
                body = canonical_json(snapshot)
                content_hash = sha256_hex(body)
            self._write_snapshot_in(conn, snapshot, body, content_hash, heads)
        return snapshot, content_hash

    def _checked_snapshot(
        self, snapshot: AuditSnapshot, context_block: str, document: bytes | None
    ) -> tuple[bytes, bytes, str]:
        """The block's bytes, the document to store and its hash, once every check passed."""
        block = context_block.encode("utf-8")
        if sha256_hex(block) != snapshot.projection.block_ref:
            raise InvalidInputError(f"snapshot {snapshot.id}: context block does not match projection.block_ref")
        for item in snapshot.selected:
            if text_hash(item.visible_text) != item.visible_text_hash:
                raise InvalidInputError(f"snapshot {snapshot.id}: item {item.item_id} visible_text_hash is wrong")
        if document is not None and AuditSnapshot.model_validate_json(document) != snapshot:
            raise InvalidInputError(f"snapshot {snapshot.id}: the document to store does not read as the snapshot")
        body = canonical_json(snapshot) if document is None else document
        refuse_secrets(f"snapshot {snapshot.id}", snapshot.model_dump(mode="json") if document is None else json.loads(body))
        refuse_secrets(f"snapshot {snapshot.id} context block", context_block)
        return block, body, sha256_hex(body)

    def _write_snapshot_content(
        self, conn: Session, snapshot: AuditSnapshot, block: bytes, blobs: Sequence[bytes]
    ) -> None:
        """A snapshot's blobs and candidate rows: everything of it that no chain links to."""
        self._put_blob_in(conn, block)
        for extra in blobs:
            self._put_blob_in(conn, extra)
        policy = snapshot.pins.policy_hash if snapshot.pins is not None else None  # observed: none
        stored_policy = select(col(BlobRow.sha256)).where(col(BlobRow.sha256) == policy)
        if policy is not None and conn.execute(stored_policy).first() is None:
            # Drift re-runs a snapshot under its recorded policy: without it, it could not.
            raise InvalidInputError(f"snapshot {snapshot.id}: its policy (blob {policy[:12]}…) is neither given nor stored")
        rows = snapshot_candidate_rows(snapshot)
        if rows:
            try:
                conn.execute(table_of(SnapshotCandidateRow).insert(), rows)
            except SAIntegrityError:
                raise InvalidInputError(f"snapshot {snapshot.id} already exists") from None

    def _write_snapshot_in(
        self, conn: Session, snapshot: AuditSnapshot, body: bytes, content_hash: str, heads: ChainHeads
    ) -> None:
        """Insert a snapshot's row and append its event, holding the store-head lock (``heads``)."""
        try:
            conn.execute(
                table_of(SnapshotRow).insert().values(
                    id=snapshot.id,
                    session_id=snapshot.session_id,
                    turn=snapshot.turn,
                    created_at=stored_time(snapshot.created_at),
                    body=body,
                    hash=content_hash,
                )
            )
        except SAIntegrityError:
            raise InvalidInputError(f"snapshot {snapshot.id} already exists") from None
        fault_point("snapshot.row_written")
        self._append_in(
            conn,
            snapshot.session_id,
            EventType.RETRIEVAL_SNAPSHOT_CREATED,
            SnapshotCreatedPayload(
                snapshot_id=snapshot.id,
                snapshot_hash=content_hash,
                visible_text_hash=snapshot.projection.visible_text_hash,
                selected_count=len(snapshot.selected),
                turn=snapshot.turn,
            ),
            turn=snapshot.turn,
            created_at=snapshot.created_at,
            heads=heads,
        )

    def get_snapshot(self, snapshot_id: str) -> StoredSnapshot:
        with self.read() as conn:
            row = conn.exec(select(SnapshotRow).where(col(SnapshotRow.id) == snapshot_id)).first()
        if row is None:
            raise UnknownIdError(f"no snapshot {snapshot_id!r} in this store")
        body = as_bytes(row.body)
        return StoredSnapshot(AuditSnapshot.model_validate_json(body), sha256_hex(body), body)

    def snapshots_of(
        self, session_id: str, *, kind: SnapshotKind | None = None, turn: int | None = None
    ) -> list[StoredSnapshot]:
        """Every snapshot of a session (of one turn, of one kind), by turn: one read, not one per id."""
        statement = select(SnapshotRow).where(col(SnapshotRow.session_id) == session_id)
        if turn is not None:
            statement = statement.where(col(SnapshotRow.turn) == turn)
        with self.read() as conn:
            rows = conn.exec(statement.order_by(col(SnapshotRow.turn), col(SnapshotRow.created_at), col(SnapshotRow.id))).all()
        stored = [StoredSnapshot(AuditSnapshot.model_validate_json(body := as_bytes(r.body)), sha256_hex(body), body)
                  for r in rows]
        return [s for s in stored if kind is None or s.snapshot.kind == kind]

    # ------------------------------------------------------------------ reading

    def get_session(self, session_id: str) -> SessionHeader:
        with self.read() as conn:
            row = conn.exec(select(SessionRow).where(col(SessionRow.id) == session_id)).first()
        if row is None:
            raise UnknownIdError(f"no session {session_id!r} in this store")
        return _header(row)

    def list_sessions(self, *, project: str | None = None) -> list[SessionSummary]:
        statement = select(SessionRow, SessionHeadRow).join(
            SessionHeadRow, col(SessionHeadRow.session_id) == col(SessionRow.id)
        )
        if project is not None:
            statement = statement.where(col(SessionRow.project) == project)
        with self.read() as conn:
            rows = conn.execute(statement.order_by(col(SessionRow.created_at), col(SessionRow.id))).all()
        return [
            SessionSummary(
                header=_header(session),
                events=head.head_seq + 1,
                turns=head.last_turn,
                snapshots=head.snapshot_count,
                head_hash=head.head_hash,
                updated_at=parse_stored_time(head.updated_at),
            )
            for session, head in rows
        ]

    def known_projects(self) -> list[str]:
        """Every project the store knows, sorted: each one with an index run, a session or a memory."""
        columns = (col(IndexRunRow.project), col(SessionRow.project), col(MemoryRow.project))
        with self.read() as conn:
            found = {str(p) for column in columns for p in conn.execute(select(column).distinct()).scalars()}
        return sorted(found)

    def require_project(self, project: str) -> None:
        """Raise :class:`UnknownIdError` unless the store knows ``project`` (see ``known_projects``).

        A project becomes known when it is indexed, when a session of it is created or when a
        memory of it is stored, so a project of memories or sessions alone can be retrieved on.
        """
        with self.read() as conn:
            for column in (col(IndexRunRow.project), col(SessionRow.project), col(MemoryRow.project)):
                if conn.execute(select(column).where(column == project).limit(1)).first() is not None:
                    return
        known = self.known_projects()
        if not known:
            raise UnknownIdError(
                f"no project {project!r} in this store (it has none yet: index a workspace with "
                f"`scopelens index PATH --project {project}`)"
            )
        shown = ", ".join(known[:KNOWN_PROJECTS_SHOWN])
        more = f" and {len(known) - KNOWN_PROJECTS_SHOWN} more" if len(known) > KNOWN_PROJECTS_SHOWN else ""
        raise UnknownIdError(f"no project {project!r} in this store (it has: {shown}{more})")

    def events(self, session_id: str, *, turns: tuple[int, int] | None = None) -> list[Event]:
        """Every event of a session (or of its turns ``lo`` to ``hi``, exclusive), in chain
        order (raises for an unknown session)."""
        self.get_session(session_id)
        statement = select(col(EventRow.body)).where(col(EventRow.session_id) == session_id)
        if turns is not None:
            statement = statement.where(col(EventRow.turn) >= turns[0], col(EventRow.turn) < turns[1])
        with self.read() as conn:
            bodies = conn.execute(statement.order_by(col(EventRow.seq))).scalars()
            return [Event.model_validate_json(as_bytes(body)) for body in bodies]

    def store_head(self) -> tuple[int, str]:
        """The stored store head: (number of events appended, head hash)."""
        with self.read() as conn:
            row = conn.execute(select(col(StoreHeadRow.store_seq), col(StoreHeadRow.head_hash))).one()
        return int(row.store_seq), str(row.head_hash)

    def count(self, table: type[Any]) -> int:
        with self.read() as conn:
            return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def snapshot_candidate_rows(snapshot: AuditSnapshot) -> list[dict[str, Any]]:
    """The pageable rows of a snapshot: selected items, then rejections, in record order.

    Derived from the snapshot document alone, so ``verify`` can recompute and compare them.
    """
    ranks = {entry.candidate_id: entry.rank for entry in snapshot.ranked}
    rows: list[dict[str, Any]] = []
    for item in snapshot.selected:
        rows.append(
            _row(snapshot.id, len(rows), item.candidate_id, item.source.value, item.source_ref, item.path,
                 item.line_start, item.line_end, Stage.SELECTED.value, item.selected_reason, False,
                 ranks.get(item.candidate_id, item.rank), item.citation_id, item.scores.model_dump())
        )
    for rejected in snapshot.rejected:
        rows.append(
            _row(snapshot.id, len(rows), rejected.candidate_id, rejected.source.value, rejected.source_ref,
                 rejected.path, rejected.line_start, rejected.line_end, rejected.stage.value, rejected.reason,
                 rejected.from_probe, ranks.get(rejected.candidate_id), None,
                 rejected.scores.model_dump() if rejected.scores else {})
        )
    return rows


def _row(
    snapshot_id: str, ordinal: int, candidate_id: str, source: str, source_ref: str, path: str | None,
    line_start: int | None, line_end: int | None, stage: str, reason: str, from_probe: bool,
    rank: int | None, citation_id: str | None, scores: dict[str, float],
) -> dict[str, Any]:
    return {
        "snapshot_id": snapshot_id,
        "ordinal": ordinal,
        "candidate_id": candidate_id,
        "source": source,
        "source_ref": source_ref,
        "path": path,
        "line_start": line_start,
        "line_end": line_end,
        "stage": stage,
        "reason": reason,
        "from_probe": int(from_probe),
        "rank": rank,
        "citation_id": citation_id,
        **{name: scores.get(name) for name in SCORE_COLUMNS},
    }


def _header(row: SessionRow) -> SessionHeader:
    return SessionHeader(
        id=row.id,
        project=row.project,
        branch=row.branch,
        workspace_root=row.workspace_root,
        title=row.title,
        agent=row.agent,
        created_at=parse_stored_time(row.created_at),
    )


def _insert_of(dialect: str) -> Any:
    """The dialect's INSERT with ON CONFLICT. PostgreSQL's is imported when first used: its
    dialect package costs a SQLite-only process (``scopelens index``) about 50 ms to load."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert
    return sqlite_insert


def insert_ignore(dialect: str, table: type[Any], values: dict[str, Any]) -> Any:
    return _insert_of(dialect)(table_of(table)).values(**values).on_conflict_do_nothing()


def _upsert(dialect: str, table: type[Any], values: dict[str, Any], keys: list[str]) -> Any:
    statement = _insert_of(dialect)(table_of(table)).values(**values)
    return statement.on_conflict_do_update(
        index_elements=keys, set_={k: v for k, v in values.items() if k not in keys}
    )


def _check_sqlite_file(path: Path, *, create: bool) -> None:
    if not path.exists():
        if create:
            return
        raise StoreUnavailableError(
            f"no store at {path} (create one with `scopelens demo` or `scopelens index`, or pass --db)"
        )
    if path.is_dir():
        raise NotAScopelensStoreError(f"{path} is a directory, not a scopelens store")
    try:
        with path.open("rb") as handle:
            magic = handle.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise StoreUnavailableError(f"cannot read store {path}: {exc.strerror}") from None
    if magic and magic != SQLITE_MAGIC:
        raise NotAScopelensStoreError(f"{path} is not a SQLite database (not a scopelens store)")


_READ_ONLY_SQLSTATES = frozenset({"25006", "42501"})
"""PostgreSQL: read_only_sql_transaction, insufficient_privilege."""


def _denies_writing(exc: DBAPIError) -> bool:
    """Whether the database refused a write for lack of permission (not for a bad statement)."""
    original = exc.orig
    sqlite_name = getattr(original, "sqlite_errorname", "")
    if sqlite_name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN")):
        return True
    return getattr(original, "sqlstate", None) in _READ_ONLY_SQLSTATES


_DAMAGE_SIGNS = ("malformed", "not a database", "disk image", "corrupt", "could not decode")
"""What SQLite says when a database file's pages cannot be read as a database."""


def _first_line(exc: BaseException) -> str:
    message = str(getattr(exc, "orig", None) or exc).strip()
    return message.splitlines()[0] if message else exc.__class__.__name__


SUMMARY_WIDTH = 100
"""Characters of an event's one-line summary; a longer one ends in "…"."""


def event_summary(event: Event) -> str:
    """A one-line human summary of an event, for listings (display text: never stored)."""
    payload = event.payload
    match event.type:
        case EventType.USER_MESSAGE | EventType.MODEL_RESPONSE:
            return clip(str(payload.get("text", "")), SUMMARY_WIDTH)
        case EventType.MODEL_REQUEST:
            return f"request {payload['request_id']} snapshots={','.join(payload.get('snapshot_ids', []))}"
        case EventType.TOOL_STARTED | EventType.TOOL_FINISHED:
            return f"{payload['tool']} ({payload['call_id']})"
        case EventType.RETRIEVAL_SNAPSHOT_CREATED:
            if str(payload["snapshot_id"]).startswith(OBSERVED_ID_PREFIX + "-"):
                return f"observed {payload['snapshot_id']} ({payload['selected_count']} new in context)"
            if str(payload["snapshot_id"]).startswith(COUNTERFACTUAL_ID_PREFIX + "-"):
                return f"counterfactual {payload['snapshot_id']} ({payload['selected_count']} selected, never shown)"
            return f"snapshot {payload['snapshot_id']} ({payload['selected_count']} selected)"
        case EventType.SESSION_STARTED:
            where = f"{payload.get('project', '')}@{payload.get('branch') or '-'}"
            agent = f" by {payload['agent']}" if payload.get("agent") else ""
            return clip(f"session on {where}{agent}" + (f": {payload['title']}" if payload.get("title") else ""), SUMMARY_WIDTH)
        case _:
            return clip(json.dumps(payload, ensure_ascii=False), SUMMARY_WIDTH)


def session_row(header: SessionHeader) -> dict[str, Any]:
    """The ``sessions`` row of a session."""
    return {"id": header.id, "project": header.project, "branch": header.branch, "workspace_root": header.workspace_root,
            "title": header.title, "agent": header.agent, "created_at": stored_time(header.created_at)}


def started_payload(header: SessionHeader) -> SessionStartedPayload:
    """The payload of a session's first event, ``session.started``."""
    return SessionStartedPayload(project=header.project, branch=header.branch, workspace_root=header.workspace_root,
                                 title=header.title, agent=header.agent)


def event_row(event: Event) -> dict[str, Any]:
    """The ``events`` row of an event: its columns, its canonical bytes and their hash (the
    link the next event and the store head chain to)."""
    body = canonical_json(event)
    return {"session_id": event.session_id, "seq": event.seq, "store_seq": event.store_seq, "turn": event.turn,
            "type": event.type.value, "created_at": stored_time(event.created_at), "body": body, "hash": sha256_hex(body)}


def checked_payload(event_type: EventType, payload: Contract | dict[str, Any]) -> dict[str, Any]:
    """An event's payload validated against its type's model (no unknown field) and free of
    detectable secrets, as the JSON the event stores."""
    payload_model = EVENT_PAYLOADS[EventType(event_type)]
    try:
        checked = payload_model.model_validate(
            payload.model_dump(mode="json") if isinstance(payload, Contract) else payload, extra="forbid"
        )
    except ValidationError as exc:
        raise InvalidInputError(f"{event_type} payload: {_first_line(exc)}") from None
    dumped: dict[str, Any] = checked.model_dump(mode="json")
    refuse_secrets(f"{event_type} payload", dumped)
    return dumped


def refuse_secrets(what: str, value: Any) -> None:
    """Raise :class:`SecretRefusedError` if ``value`` (JSON-like) holds a detectable secret.

    The message names the field and the kind of secret, never the secret.
    """
    found = secrets_in(value)
    if found:
        where = ", ".join(f"{path} ({kind.value})" for path, kind in found[:3])
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        raise SecretRefusedError(
            f"refused {what}: it holds a detectable secret at {where}{more}; redact text where it "
            f"enters (scopelens.core.redact.redact / redact_values) before storing it"
        )
