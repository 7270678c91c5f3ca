"""Named, ordered schema migrations, recorded in the database they were applied to.

Each migration is a name and DDL per dialect. ``scopelens_migrations`` records which ran, so
a store knows its schema exactly; a store recording a migration this code does not know was
written by a newer scopelens and is refused rather than misread. Migrations only ever add
(or re-key derived index data): stored documents must stay readable by later versions.

Append-only tables get triggers that refuse UPDATE and DELETE (and TRUNCATE on PostgreSQL),
and on SQLite an INSERT that would REPLACE an existing row, so a bug or a careless ``sqlite3``
session cannot quietly rewrite the audit record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlmodel import Session

from scopelens.core.store.memory_log import backfill_versions

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


def _workspace_index(t: ColumnTypes) -> list[str]:
    """Versioned documents, their chunks, and postings packed per (run, term).

    Times here are integer microseconds since the epoch (UTC), so masks compare numbers.
    Chunk ids of one run are contiguous and sorted by path, so a path prefix is a range.
    """
    identity = "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY" if t is POSTGRES_TYPES else "INTEGER PRIMARY KEY"
    return [
        f"CREATE TABLE index_runs (id {identity}, project TEXT NOT NULL, branch TEXT NOT NULL, "
        f"root TEXT NOT NULL, started_at {t.int64} NOT NULL, finished_at {t.int64}, git_commit TEXT, "
        "git_dirty INTEGER, added INTEGER NOT NULL, changed INTEGER NOT NULL, removed INTEGER NOT NULL, "
        f"unchanged INTEGER NOT NULL, chunk_lo {t.int64} NOT NULL, chunk_hi {t.int64} NOT NULL)",
        "CREATE INDEX index_runs_scope ON index_runs (project, branch, id)",
        f"CREATE TABLE index_documents (id {identity}, run_id {t.int64} NOT NULL, project TEXT NOT NULL, "
        "branch TEXT NOT NULL, root TEXT NOT NULL, path TEXT NOT NULL, source TEXT NOT NULL, "
        f"language TEXT NOT NULL, content_hash TEXT NOT NULL, size {t.int64} NOT NULL, "
        f"valid_from {t.int64} NOT NULL, valid_to {t.int64}, redactions {t.blob} NOT NULL)",
        "CREATE INDEX index_documents_live ON index_documents (project, branch, root, path, valid_to)",
        f"CREATE TABLE index_chunks (id {t.int64} PRIMARY KEY, run_id {t.int64} NOT NULL, "
        f"document_id {t.int64} NOT NULL, ordinal INTEGER NOT NULL, path TEXT NOT NULL, "
        "start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, kind TEXT NOT NULL, symbol TEXT, "
        "token_count INTEGER NOT NULL, text TEXT NOT NULL)",
        "CREATE INDEX index_chunks_by_document ON index_chunks (document_id, ordinal)",
        f"CREATE TABLE index_postings (run_id {t.int64} NOT NULL, term TEXT NOT NULL, "
        f"chunk_ids {t.blob} NOT NULL, tfs {t.blob} NOT NULL, PRIMARY KEY (run_id, term))",
        "CREATE INDEX index_postings_by_term ON index_postings (term)",
    ]


def _memories(t: ColumnTypes) -> list[str]:
    """Governed memory records. Governance changes a record's status in place (it is state,
    not audit record); snapshots pin the content hash of the version they used."""
    return [
        "CREATE TABLE memories (id TEXT PRIMARY KEY, project TEXT NOT NULL, status TEXT NOT NULL, "
        f"body {t.blob} NOT NULL, content_hash TEXT NOT NULL, updated_at TEXT NOT NULL)",
        "CREATE INDEX memories_by_project ON memories (project, status)",
    ]


def _drift_runs(dialect: str) -> list[str]:
    """Recorded drift runs: when, against which index, and the report (never the snapshot)."""
    t = types_for(dialect)
    statements = [
        "CREATE TABLE drift_runs (id TEXT PRIMARY KEY, snapshot_id TEXT NOT NULL, created_at TEXT NOT NULL, "
        "index_version TEXT NOT NULL, engine_version TEXT NOT NULL, config_hash TEXT NOT NULL, "
        f"summary TEXT NOT NULL, body {t.blob} NOT NULL, hash TEXT NOT NULL)",
        "CREATE INDEX drift_runs_by_snapshot ON drift_runs (snapshot_id, created_at)",
    ]
    if dialect == "postgresql":
        statements.append(
            "CREATE TRIGGER drift_runs_append_only BEFORE UPDATE OR DELETE ON drift_runs "
            "FOR EACH ROW EXECUTE FUNCTION scopelens_refuse_change()"
        )
    else:
        statements += [
            f"CREATE TRIGGER drift_runs_no_{action.lower()} BEFORE {action} ON drift_runs "
            "BEGIN SELECT RAISE(ABORT, 'scopelens: drift_runs is append-only'); END"
            for action in ("UPDATE", "DELETE")
        ]
    return statements


def _postings_by_term(dialect: str) -> list[str]:
    """``index_postings`` keyed by (term, run_id) alone: one B-tree per row instead of three.

    Recall looks postings up by term (and run), so the (term, run_id) key serves it without
    the separate term index, and a run's postings, inserted in term order, append to it. On
    SQLite the table is ``WITHOUT ROWID`` (no rowid B-tree either); PostgreSQL has no such
    option and gets a plain primary key. Postings are derived data: the rows are copied over.
    """
    t = types_for(dialect)
    without_rowid = "" if dialect == "postgresql" else " WITHOUT ROWID"
    statements = [
        f"CREATE TABLE index_postings_new (run_id {t.int64} NOT NULL, term TEXT NOT NULL, "
        f"chunk_ids {t.blob} NOT NULL, tfs {t.blob} NOT NULL, PRIMARY KEY (term, run_id)){without_rowid}",
        "INSERT INTO index_postings_new (run_id, term, chunk_ids, tfs) "
        "SELECT run_id, term, chunk_ids, tfs FROM index_postings ORDER BY term, run_id",
        "DROP TABLE index_postings",  # its term index goes with it
        "ALTER TABLE index_postings_new RENAME TO index_postings",
    ]
    if dialect == "postgresql":
        statements.append("ALTER TABLE index_postings RENAME CONSTRAINT index_postings_new_pkey TO index_postings_pkey")
    return statements


def _session_sort_indexes(dialect: str) -> list[str]:
    """One index per sessions-list sort, keyed like the list pages (value, then id).

    The inspector's first screen reads one page of sessions in a sort order; without these
    the database sorts every session to return the first page, a cost that grows with the
    store. With them a page is an index walk of ``limit`` entries, whatever the store's size.
    """
    return [
        "CREATE INDEX sessions_by_start ON sessions (created_at, id)",
        "CREATE INDEX sessions_by_project_id ON sessions (project, id)",
        "CREATE INDEX session_heads_by_turns ON session_heads (last_turn, session_id)",
        "CREATE INDEX session_heads_by_snapshots ON session_heads (snapshot_count, session_id)",
    ]


_REPLACED_ROW: dict[str, str] = {
    "sessions": "id = NEW.id",
    "events": "(session_id = NEW.session_id AND seq = NEW.seq) OR store_seq = NEW.store_seq",
    "snapshots": "id = NEW.id",
    "snapshot_rows": "snapshot_id = NEW.snapshot_id AND ordinal = NEW.ordinal",
    # Storing the same bytes again is how put_blob dedupes (ON CONFLICT DO NOTHING); only a
    # row that would replace different bytes under the same address is refused.
    "blobs": "sha256 = NEW.sha256 AND (size IS NOT NEW.size OR data IS NOT NEW.data)",
    "drift_runs": "id = NEW.id",
}
"""For each append-only table, the rows an INSERT would conflict with (its keys)."""


def _no_replace(dialect: str) -> list[str]:
    """Close the holes the first triggers left.

    SQLite: ``INSERT OR REPLACE`` (and ``REPLACE INTO``, and upserts' REPLACE conflict
    resolution) deletes the conflicting row *without firing DELETE triggers*, so it could
    rewrite any append-only row. A BEFORE INSERT trigger that refuses an insert whose keys are
    taken closes it: the conflict check runs after BEFORE triggers. PostgreSQL: ``drift_runs``
    had no TRUNCATE trigger (``ON CONFLICT DO UPDATE`` fires UPDATE triggers, so it is covered).
    """
    if dialect == "postgresql":
        return [
            "CREATE TRIGGER drift_runs_no_truncate BEFORE TRUNCATE ON drift_runs "
            "FOR EACH STATEMENT EXECUTE FUNCTION scopelens_refuse_change()"
        ]
    return [
        f"CREATE TRIGGER {table}_no_replace BEFORE INSERT ON {table} "
        f"WHEN EXISTS (SELECT 1 FROM {table} WHERE {taken}) "
        f"BEGIN SELECT RAISE(ABORT, 'scopelens: {table} is append-only'); END"
        for table, taken in _REPLACED_ROW.items()
    ]


def _index_versions(dialect: str) -> list[str]:
    """Index versions numbered per (project, branch): ``alpha@main#1`` is alpha's first index of
    main whatever else the store holds, so a scenario pins the same version alone and in a
    shared store.

    Runs written before this keep their ids as their versions: those ids are what their
    snapshots pinned (``alpha@main#4``), so an old pin still names its run and drift compares
    it with today's version as before. A later run numbers after the highest version of its
    project and branch (``core/index/indexer.py``); the unique index backs the write lock.
    """
    t = types_for(dialect)
    return [
        f"ALTER TABLE index_runs ADD COLUMN version {t.int64} NOT NULL DEFAULT 0",
        "UPDATE index_runs SET version = id",
        "CREATE UNIQUE INDEX index_runs_version ON index_runs (project, branch, version)",
    ]


def _memory_versions(dialect: str) -> list[str]:
    """Memories become an append-only version log (``core/store/memory_log.py``): ``memories``
    keeps each memory's current state and the number of its last version; ``memory_versions``
    keeps every state it had, chained, so ``as_of`` sees a past status or text and ``verify``
    covers governance. The backfill gives each existing memory one ``migrated`` version."""
    t = types_for(dialect)
    statements = [
        "ALTER TABLE memories ADD COLUMN version INTEGER NOT NULL DEFAULT 0",
        "CREATE TABLE memory_versions (memory_id TEXT NOT NULL, version INTEGER NOT NULL, project TEXT NOT NULL, "
        "status TEXT NOT NULL, change TEXT NOT NULL, recorded_at TEXT NOT NULL, "
        f"body {t.blob} NOT NULL, content_hash TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL, "
        "PRIMARY KEY (memory_id, version))",
        "CREATE INDEX memory_versions_by_project ON memory_versions (project, memory_id, version)",
    ]
    if dialect == "postgresql":
        return [
            *statements,
            "CREATE TRIGGER memory_versions_append_only BEFORE UPDATE OR DELETE ON memory_versions "
            "FOR EACH ROW EXECUTE FUNCTION scopelens_refuse_change()",
            "CREATE TRIGGER memory_versions_no_truncate BEFORE TRUNCATE ON memory_versions "
            "FOR EACH STATEMENT EXECUTE FUNCTION scopelens_refuse_change()",
        ]
    return [
        *statements,
        *(
            f"CREATE TRIGGER memory_versions_no_{action.lower()} BEFORE {action} ON memory_versions "
            "BEGIN SELECT RAISE(ABORT, 'scopelens: memory_versions is append-only'); END"
            for action in ("UPDATE", "DELETE")
        ),
        "CREATE TRIGGER memory_versions_no_replace BEFORE INSERT ON memory_versions "
        "WHEN EXISTS (SELECT 1 FROM memory_versions WHERE memory_id = NEW.memory_id AND version = NEW.version) "
        "BEGIN SELECT RAISE(ABORT, 'scopelens: memory_versions is append-only'); END",
    ]


def _drift_checks(dialect: str) -> list[str]:
    """Confirmations of drift runs (``core/store/drift_checks.py``): a re-run that found what the
    last recorded run of its snapshot found appends one row here (which run, when it was
    checked) instead of a whole new run. Append-only from the start, like ``drift_runs`` after
    0008: no UPDATE or DELETE, no TRUNCATE on PostgreSQL, no REPLACE on SQLite."""
    statements = [
        "CREATE TABLE drift_checks (id TEXT PRIMARY KEY, run_id TEXT NOT NULL, snapshot_id TEXT NOT NULL, "
        "checked_at TEXT NOT NULL, hash TEXT NOT NULL)",
        "CREATE INDEX drift_checks_by_snapshot ON drift_checks (snapshot_id, run_id, checked_at)",
    ]
    if dialect == "postgresql":
        return [
            *statements,
            "CREATE TRIGGER drift_checks_append_only BEFORE UPDATE OR DELETE ON drift_checks "
            "FOR EACH ROW EXECUTE FUNCTION scopelens_refuse_change()",
            "CREATE TRIGGER drift_checks_no_truncate BEFORE TRUNCATE ON drift_checks "
            "FOR EACH STATEMENT EXECUTE FUNCTION scopelens_refuse_change()",
        ]
    return [
        *statements,
        *(
            f"CREATE TRIGGER drift_checks_no_{action.lower()} BEFORE {action} ON drift_checks "
            "BEGIN SELECT RAISE(ABORT, 'scopelens: drift_checks is append-only'); END"
            for action in ("UPDATE", "DELETE")
        ),
        "CREATE TRIGGER drift_checks_no_replace BEFORE INSERT ON drift_checks "
        "WHEN EXISTS (SELECT 1 FROM drift_checks WHERE id = NEW.id) "
        "BEGIN SELECT RAISE(ABORT, 'scopelens: drift_checks is append-only'); END",
    ]


def _index_segments(dialect: str) -> list[str]:
    """An index run's postings in several segments, so a run streams: each batch of files is
    written with its chunks and the postings of those chunks (one segment), and memory stays
    bounded whatever the size of the workspace (``core/index/indexer.py``).

    A segment belongs to one run and covers a contiguous range of its chunk ids; a posting row
    belongs to a segment (chunk ids as offsets from the segment's first chunk). Postings are
    keyed by (segment_id, term), so a segment's rows, written in term order, are appended to
    the end of the key's B-tree instead of spread through it; recall seeks each (segment, term)
    pair it needs, as before. Every run written before this becomes one segment with the
    run's id, and its posting rows are copied over under that id. On PostgreSQL the segments'
    id sequence is moved past the ids copied in.
    """
    t = types_for(dialect)
    identity = "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY" if dialect == "postgresql" else "INTEGER PRIMARY KEY"
    without_rowid = "" if dialect == "postgresql" else " WITHOUT ROWID"
    statements = [
        f"CREATE TABLE index_segments (id {identity}, run_id {t.int64} NOT NULL, "
        f"chunk_lo {t.int64} NOT NULL, chunk_hi {t.int64} NOT NULL)",
        "CREATE INDEX index_segments_by_run ON index_segments (run_id, id)",
        "INSERT INTO index_segments (id, run_id, chunk_lo, chunk_hi) SELECT id, id, chunk_lo, chunk_hi FROM index_runs",
        f"CREATE TABLE index_postings_new (segment_id {t.int64} NOT NULL, term TEXT NOT NULL, "
        f"chunk_ids {t.blob} NOT NULL, tfs {t.blob} NOT NULL, PRIMARY KEY (segment_id, term)){without_rowid}",
        "INSERT INTO index_postings_new (segment_id, term, chunk_ids, tfs) "
        "SELECT run_id, term, chunk_ids, tfs FROM index_postings ORDER BY run_id, term",
        "DROP TABLE index_postings",
        "ALTER TABLE index_postings_new RENAME TO index_postings",
    ]
    if dialect == "postgresql":
        statements += [
            "ALTER TABLE index_postings RENAME CONSTRAINT index_postings_new_pkey TO index_postings_pkey",
            "SELECT setval(pg_get_serial_sequence('index_segments', 'id'), "
            "coalesce((SELECT max(id) FROM index_segments), 0) + 1, false)",
        ]
    return statements


def _document_stats(dialect: str) -> list[str]:
    """Each document version's file modification time, as the walk saw it before reading the
    file: a re-index skips reading and hashing a file whose size and time equal its live
    version's (``core/index/indexer.py``). NULL where the time could not be trusted (the file
    was modified within ``RACY_NS`` of the scan) and for versions written before this."""
    return [f"ALTER TABLE index_documents ADD COLUMN mtime_ns {types_for(dialect).int64}"]


def _imports(dialect: str) -> list[str]:
    """Which agent session files were imported into which session (``core/store/imports.py``):
    one row per import of a file's content, keyed by its SHA-256, so importing the same bytes
    again is a no-op and a file that grew appends to its session. Bookkeeping, not audit
    record: the session's events and snapshots are the record, and verify checks those."""
    t = types_for(dialect)
    return [
        "CREATE TABLE imports (sha256 TEXT PRIMARY KEY, session_id TEXT NOT NULL, format TEXT NOT NULL, "
        f"agent_session TEXT NOT NULL, source_name TEXT NOT NULL, size {t.int64} NOT NULL, "
        "items INTEGER NOT NULL, calls INTEGER NOT NULL, digest TEXT NOT NULL, imported_at TEXT NOT NULL)",
        "CREATE INDEX imports_by_agent_session ON imports (format, agent_session, size)",
    ]


@dataclass(frozen=True)
class Migration:
    """One schema step: its name, the statements it runs for a dialect, and an optional data
    step run after them in the same transaction (for rows SQL alone cannot derive: hashes)."""

    name: str
    statements: Callable[[str], Sequence[str]]
    backfill: Callable[[Session], None] | None = None


MIGRATIONS: tuple[Migration, ...] = (
    Migration("0001_audit_core", lambda d: _audit_core(types_for(d))),
    Migration("0002_append_only_triggers", _append_only_triggers),
    Migration("0003_workspace_index", lambda d: _workspace_index(types_for(d))),
    Migration("0004_memories", lambda d: _memories(types_for(d))),
    Migration("0005_drift_runs", _drift_runs),
    Migration("0006_postings_by_term", _postings_by_term),
    Migration("0007_session_sort_indexes", _session_sort_indexes),
    Migration("0008_no_replace", _no_replace),
    Migration("0009_index_versions", _index_versions),
    Migration("0010_memory_versions", _memory_versions, backfill_versions),
    Migration("0011_drift_checks", _drift_checks),
    Migration("0012_index_segments", _index_segments),
    Migration("0013_document_stats", _document_stats),
    Migration("0014_imports", _imports),
)
"""Every migration, in order. Append only; never edit or reorder a released one."""

MIGRATIONS_TABLE_DDL = (
    "CREATE TABLE IF NOT EXISTS scopelens_migrations (ordinal INTEGER PRIMARY KEY, "
    "name TEXT NOT NULL UNIQUE, applied_at TEXT NOT NULL)"
)


def schema_version() -> int:
    """The schema version this code writes: the number of migrations it knows."""
    return len(MIGRATIONS)
