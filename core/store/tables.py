"""The stored tables, as sqlmodel classes used to build queries.

The DDL that creates them lives in ``migrations.py`` (named, ordered, per dialect); a test
asserts that a migrated database has exactly these columns, so the two cannot drift apart.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Table
from sqlmodel import Field, SQLModel


class MetaRow(SQLModel, table=True):
    __tablename__ = "scopelens_meta"
    key: str = Field(primary_key=True)
    value: str


class MigrationRow(SQLModel, table=True):
    __tablename__ = "scopelens_migrations"
    ordinal: int = Field(primary_key=True)
    name: str
    applied_at: str


class StoreHeadRow(SQLModel, table=True):
    __tablename__ = "store_head"
    id: int = Field(primary_key=True)
    store_seq: int = Field(sa_type=BigInteger)
    head_hash: str


class BlobRow(SQLModel, table=True):
    __tablename__ = "blobs"
    sha256: str = Field(primary_key=True)
    size: int = Field(sa_type=BigInteger)
    data: bytes


class SessionRow(SQLModel, table=True):
    __tablename__ = "sessions"
    id: str = Field(primary_key=True)
    project: str
    branch: str | None = None
    workspace_root: str | None = None
    title: str
    agent: str
    created_at: str


class SessionHeadRow(SQLModel, table=True):
    __tablename__ = "session_heads"
    session_id: str = Field(primary_key=True)
    head_seq: int = Field(sa_type=BigInteger)
    head_hash: str
    last_turn: int
    snapshot_count: int
    updated_at: str


class EventRow(SQLModel, table=True):
    __tablename__ = "events"
    session_id: str = Field(primary_key=True)
    seq: int = Field(primary_key=True, sa_type=BigInteger)
    store_seq: int = Field(sa_type=BigInteger)
    turn: int
    type: str
    created_at: str
    body: bytes
    hash: str


class SnapshotRow(SQLModel, table=True):
    __tablename__ = "snapshots"
    id: str = Field(primary_key=True)
    session_id: str
    turn: int
    created_at: str
    body: bytes
    hash: str


class SnapshotCandidateRow(SQLModel, table=True):
    """One candidate of a snapshot, its fate and scores: the pageable index of a snapshot."""

    __tablename__ = "snapshot_rows"
    snapshot_id: str = Field(primary_key=True)
    ordinal: int = Field(primary_key=True)
    candidate_id: str
    source: str
    source_ref: str
    path: str | None = None
    line_start: int | None = None
    line_end: int | None = None
    stage: str
    reason: str
    from_probe: int
    rank: int | None = None
    citation_id: str | None = None
    semantic: float | None = None
    lexical: float | None = None
    anchor: float | None = None
    authority: float | None = None
    recency: float | None = None
    scope: float | None = None
    actionability: float | None = None
    diversity: float | None = None
    final: float | None = None


class IndexRunRow(SQLModel, table=True):
    """One indexing run of a workspace: a segment of chunks and postings."""

    __tablename__ = "index_runs"
    id: int | None = Field(default=None, primary_key=True, sa_type=BigInteger)
    project: str
    branch: str
    root: str
    started_at: int = Field(sa_type=BigInteger)
    finished_at: int | None = Field(default=None, sa_type=BigInteger)
    git_commit: str | None = None
    git_dirty: int | None = None
    added: int
    changed: int
    removed: int
    unchanged: int
    chunk_lo: int = Field(sa_type=BigInteger)
    chunk_hi: int = Field(sa_type=BigInteger)
    version: int = Field(sa_type=BigInteger)
    """The run's number within its (project, branch), from 1: the ``#N`` of its index version.
    Runs written before migration ``0009_index_versions`` keep their id as their version."""


class IndexDocumentRow(SQLModel, table=True):
    """One version of one workspace file; ``valid_to`` is set when it is replaced or removed."""

    __tablename__ = "index_documents"
    id: int | None = Field(default=None, primary_key=True, sa_type=BigInteger)
    run_id: int = Field(sa_type=BigInteger)
    project: str
    branch: str
    root: str
    path: str
    source: str
    language: str
    content_hash: str
    size: int = Field(sa_type=BigInteger)
    valid_from: int = Field(sa_type=BigInteger)
    valid_to: int | None = Field(default=None, sa_type=BigInteger)
    redactions: bytes
    mtime_ns: int | None = Field(default=None, sa_type=BigInteger)
    """The file's modification time when it was indexed, if it can be trusted (migration
    ``0013_document_stats``): a re-index does not read a file of the same size and time."""


class IndexChunkRow(SQLModel, table=True):
    __tablename__ = "index_chunks"
    id: int = Field(primary_key=True, sa_type=BigInteger)
    run_id: int = Field(sa_type=BigInteger)
    document_id: int = Field(sa_type=BigInteger)
    ordinal: int
    path: str
    start_line: int
    end_line: int
    kind: str
    symbol: str | None = None
    token_count: int
    text: str


class IndexSegmentRow(SQLModel, table=True):
    """A contiguous range of one run's chunk ids whose postings were written together
    (migration ``0012_index_segments``): a run streams, one segment per batch of files."""

    __tablename__ = "index_segments"
    id: int | None = Field(default=None, primary_key=True, sa_type=BigInteger)
    run_id: int = Field(sa_type=BigInteger)
    chunk_lo: int = Field(sa_type=BigInteger)
    chunk_hi: int = Field(sa_type=BigInteger)


class IndexPostingRow(SQLModel, table=True):
    """The postings of one term in one segment: chunk-id offsets from the segment's first
    chunk (uint32) and term frequencies (uint16), packed.

    Keyed by (segment_id, term) (migration ``0012_index_segments``; ``WITHOUT ROWID`` on
    SQLite): a segment's rows are appended to the key's B-tree, and recall seeks each
    (segment, term) pair. The first column was ``run_id`` before 0012."""

    __tablename__ = "index_postings"
    segment_id: int = Field(primary_key=True, sa_type=BigInteger)
    term: str = Field(primary_key=True)
    chunk_ids: bytes
    tfs: bytes


class MemoryRow(SQLModel, table=True):
    """A governed memory record; ``body`` is its canonical JSON (a ``MemoryRecord``)."""

    __tablename__ = "memories"
    id: str = Field(primary_key=True)
    project: str
    status: str
    body: bytes
    content_hash: str
    updated_at: str
    version: int = 0
    """The number of its last entry in ``memory_versions`` (migration ``0010_memory_versions``)."""


class MemoryVersionRow(SQLModel, table=True):
    """One version of a memory, append-only and chained per memory (``core/store/memory_log.py``)."""

    __tablename__ = "memory_versions"
    memory_id: str = Field(primary_key=True)
    version: int = Field(primary_key=True)
    project: str
    status: str
    change: str
    recorded_at: str
    body: bytes
    content_hash: str
    prev_hash: str
    hash: str


class DriftRunRow(SQLModel, table=True):
    """One drift run of one snapshot; ``body`` is the canonical JSON of its report."""

    __tablename__ = "drift_runs"
    id: str = Field(primary_key=True)
    snapshot_id: str
    created_at: str
    index_version: str
    engine_version: str
    config_hash: str
    summary: str
    body: bytes
    hash: str


class DriftCheckRow(SQLModel, table=True):
    """A drift re-run that found what run ``run_id`` found: a confirmation, not a new run.

    ``hash`` covers the columns and the result of the run (``core/store/drift_checks.py``)."""

    __tablename__ = "drift_checks"
    id: str = Field(primary_key=True)
    run_id: str
    snapshot_id: str
    checked_at: str
    hash: str


class ImportRow(SQLModel, table=True):
    """One import of an agent session file's content into a session (``core/store/imports.py``)."""

    __tablename__ = "imports"
    sha256: str = Field(primary_key=True)
    session_id: str
    format: str
    agent_session: str
    """The agent's own id of the session (a Claude Code ``sessionId``, a trajectory's name)."""
    source_name: str
    size: int = Field(sa_type=BigInteger)
    items: int
    """Context items of the session imported so far (its observed snapshots hold them)."""
    calls: int
    digest: str
    """A hash of the items and calls as read (``core/importers/store_import.py``)."""
    imported_at: str


STORE_TABLES: tuple[type[SQLModel], ...] = (
    MetaRow,
    MigrationRow,
    StoreHeadRow,
    BlobRow,
    SessionRow,
    SessionHeadRow,
    EventRow,
    SnapshotRow,
    SnapshotCandidateRow,
    IndexRunRow,
    IndexDocumentRow,
    IndexChunkRow,
    IndexSegmentRow,
    IndexPostingRow,
    MemoryRow,
    MemoryVersionRow,
    DriftRunRow,
    DriftCheckRow,
    ImportRow,
)


def table_of(model: type[SQLModel]) -> Table:
    """The Core ``Table`` of a table model, for bulk inserts and DDL."""
    table: Table = model.__table__  # type: ignore[attr-defined]  # set by SQLModel's metaclass, undeclared in its stubs
    return table
