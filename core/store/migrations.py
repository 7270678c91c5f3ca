"""Named, ordered schema migrations, recorded in the database they were applied to.

Each migration is a name and DDL per dialect. ``scopelens_migrations`` records which ran, so
a store knows its schema exactly; a store recording a migration this code does not know was
written by a newer scopelens and is refused rather than misread. Migrations only ever add:
stored documents must stay readable by later versions.

Append-only tables get triggers that refuse UPDATE and DELETE (and TRUNCATE on PostgreSQL),
so a bug or a careless ``sqlite3`` session cannot quietly rewrite the audit record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

APPEND_ONLY_TABLES: tuple[str, ...] = ("sessions", "events", "snapshots", "snapshot_rows", "blobs")


@dataclass(frozen=True)
class ColumnTypes:
    """The spelling of portable column types in one SQL dialect."""

    int64: str
    blob: str
    real: str


SQLITE_TYPES = ColumnTypes(int64="INTEGER", blob="BLOB", real="REAL")
POSTGRES_TYPES = ColumnTypes(int64="BIGINT", blob="BYTEA", real="DOUBLE PRECISION")


def types_for(dialect: str) -> ColumnTypes:
    return POSTGRES_TYPES if dialect == "postgresql" else SQLITE_TYPES


def _audit_core(t: ColumnTypes) -> list[str]:
    return [
        "CREATE TABLE scopelens_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"CREATE TABLE store_head (id INTEGER PRIMARY KEY, store_seq {t.int64} NOT NULL, "
        "head_hash TEXT NOT NULL)",
        f"CREATE TABLE blobs (sha256 TEXT PRIMARY KEY, size {t.int64} NOT NULL, data {t.blob} NOT NULL)",
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, project TEXT NOT NULL, branch TEXT, "
        "workspace_root TEXT, title TEXT NOT NULL, agent TEXT NOT NULL, created_at TEXT NOT NULL)",
        "CREATE INDEX sessions_project ON sessions (project, created_at)",
        f"CREATE TABLE session_heads (session_id TEXT PRIMARY KEY, head_seq {t.int64} NOT NULL, "
        "head_hash TEXT NOT NULL, last_turn INTEGER NOT NULL, snapshot_count INTEGER NOT NULL, "
        "updated_at TEXT NOT NULL)",
        f"CREATE TABLE events (session_id TEXT NOT NULL, seq {t.int64} NOT NULL, "
        f"store_seq {t.int64} NOT NULL UNIQUE, turn INTEGER NOT NULL, type TEXT NOT NULL, "
        f"created_at TEXT NOT NULL, body {t.blob} NOT NULL, hash TEXT NOT NULL, "
        "PRIMARY KEY (session_id, seq))",
        "CREATE INDEX events_by_type ON events (session_id, type)",
        "CREATE TABLE snapshots (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, turn INTEGER NOT NULL, "
        f"created_at TEXT NOT NULL, body {t.blob} NOT NULL, hash TEXT NOT NULL)",
        "CREATE INDEX snapshots_by_session ON snapshots (session_id, turn)",
        "CREATE TABLE snapshot_rows (snapshot_id TEXT NOT NULL, ordinal INTEGER NOT NULL, "
        "candidate_id TEXT NOT NULL, source TEXT NOT NULL, source_ref TEXT NOT NULL, path TEXT, "
        "line_start INTEGER, line_end INTEGER, stage TEXT NOT NULL, reason TEXT NOT NULL, "
        "from_probe INTEGER NOT NULL, rank INTEGER, citation_id TEXT, "
        f"semantic {t.real}, lexical {t.real}, anchor {t.real}, authority {t.real}, "
        f"recency {t.real}, scope {t.real}, actionability {t.real}, diversity {t.real}, "
        f"final {t.real}, PRIMARY KEY (snapshot_id, ordinal))",
        "CREATE INDEX snapshot_rows_by_stage ON snapshot_rows (snapshot_id, stage, ordinal)",
    ]


def _append_only_triggers(dialect: str) -> list[str]:
    if dialect == "postgresql":
        statements = [
            "CREATE FUNCTION scopelens_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN RAISE EXCEPTION 'scopelens: % is append-only', TG_TABLE_NAME; END $$"
        ]
        for table in APPEND_ONLY_TABLES:
            statements.append(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION scopelens_refuse_change()"
            )
            statements.append(
                f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION scopelens_refuse_change()"
            )
        return statements
    statements = []
    for table in APPEND_ONLY_TABLES:
        for action in ("UPDATE", "DELETE"):
            statements.append(
                f"CREATE TRIGGER {table}_no_{action.lower()} BEFORE {action} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, 'scopelens: {table} is append-only'); END"
            )
    return statements


@dataclass(frozen=True)
class Migration:
    """One schema step: its name, and the statements it runs for a dialect."""

    name: str
    statements: Callable[[str], Sequence[str]]


MIGRATIONS: tuple[Migration, ...] = (
    Migration("0001_audit_core", lambda d: _audit_core(types_for(d))),
    Migration("0002_append_only_triggers", _append_only_triggers),
)
"""Every migration, in order. Append only; never edit or reorder a released one."""

MIGRATIONS_TABLE_DDL = (
    "CREATE TABLE IF NOT EXISTS scopelens_migrations (ordinal INTEGER PRIMARY KEY, "
    "name TEXT NOT NULL UNIQUE, applied_at TEXT NOT NULL)"
)


def schema_version() -> int:
    """The schema version this code writes: the number of migrations it knows."""
    return len(MIGRATIONS)
