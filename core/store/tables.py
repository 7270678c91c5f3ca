"""The stored tables, as sqlmodel classes used to build queries.

The DDL that creates them lives in ``migrations.py`` (named, ordered, per dialect); a test
asserts that a migrated database has exactly these columns, so the two cannot drift apart.
"""

from __future__ import annotations

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
    store_seq: int
    head_hash: str


class BlobRow(SQLModel, table=True):
    __tablename__ = "blobs"
    sha256: str = Field(primary_key=True)
    size: int
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
    head_seq: int
    head_hash: str
    last_turn: int
    snapshot_count: int
    updated_at: str


class EventRow(SQLModel, table=True):
    __tablename__ = "events"
    session_id: str = Field(primary_key=True)
    seq: int = Field(primary_key=True)
    store_seq: int
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
)
