"""Migrations are named, ordered, recorded, and produce exactly the columns the code expects."""

from __future__ import annotations

from sqlalchemy import inspect, text

from scopelens.core.store.migrations import MIGRATIONS
from scopelens.core.store.store import Store
from scopelens.core.store.tables import STORE_TABLES

EXPECTED_COLUMNS: dict[str, list[str]] = {
    "scopelens_meta": ["key", "value"],
    "scopelens_migrations": ["ordinal", "name", "applied_at"],
    "store_head": ["id", "store_seq", "head_hash"],
    "blobs": ["sha256", "size", "data"],
    "sessions": ["id", "project", "branch", "workspace_root", "title", "agent", "created_at"],
    "session_heads": ["session_id", "head_seq", "head_hash", "last_turn", "snapshot_count", "updated_at"],
    "events": ["session_id", "seq", "store_seq", "turn", "type", "created_at", "body", "hash"],
    "snapshots": ["id", "session_id", "turn", "created_at", "body", "hash"],
    "snapshot_rows": [
        "snapshot_id", "ordinal", "candidate_id", "source", "source_ref", "path", "line_start", "line_end",
        "stage", "reason", "from_probe", "rank", "citation_id", "semantic", "lexical", "anchor", "authority",
        "recency", "scope", "actionability", "diversity", "final",
    ],
    "index_runs": [
        "id", "project", "branch", "root", "started_at", "finished_at", "git_commit", "git_dirty",
        "added", "changed", "removed", "unchanged", "chunk_lo", "chunk_hi", "version",
    ],
    "index_documents": [
        "id", "run_id", "project", "branch", "root", "path", "source", "language", "content_hash", "size",
        "valid_from", "valid_to", "redactions", "mtime_ns",
    ],
    "index_chunks": [
        "id", "run_id", "document_id", "ordinal", "path", "start_line", "end_line", "kind", "symbol",
        "token_count", "text",
    ],
    "index_segments": ["id", "run_id", "chunk_lo", "chunk_hi"],
    "index_postings": ["segment_id", "term", "chunk_ids", "tfs"],
    "memories": ["id", "project", "status", "body", "content_hash", "updated_at", "version"],
    "memory_versions": [
        "memory_id", "version", "project", "status", "change", "recorded_at", "body", "content_hash", "prev_hash", "hash",
    ],
    "drift_runs": [
        "id", "snapshot_id", "created_at", "index_version", "engine_version", "config_hash", "summary", "body", "hash",
    ],
    "drift_checks": ["id", "run_id", "snapshot_id", "checked_at", "hash"],
    "imports": [
        "sha256", "session_id", "format", "agent_session", "source_name", "size", "items", "calls", "digest", "imported_at",
    ],
}


def test_exact_columns_on_a_migrated_store(store_url):
    with Store.open(store_url, create=True) as store, store.engine.connect() as conn:
        inspector = inspect(conn)
        actual = {
            table: [column["name"] for column in inspector.get_columns(table)]
            for table in inspector.get_table_names()
        }
    assert {t: c for t, c in actual.items() if t in EXPECTED_COLUMNS} == EXPECTED_COLUMNS
    assert set(actual) == set(EXPECTED_COLUMNS)


def test_sqlmodel_tables_match_the_migrated_columns():
    declared = {model.__tablename__: [c.name for c in model.__table__.columns] for model in STORE_TABLES}
    assert declared == EXPECTED_COLUMNS


def test_migrations_are_recorded_in_order_and_reopening_is_a_no_op(store_url):
    with Store.open(store_url, create=True):
        pass
    with Store.open(store_url) as store, store.engine.connect() as conn:
        rows = conn.execute(text("SELECT ordinal, name FROM scopelens_migrations ORDER BY ordinal")).all()
        version = conn.execute(text("SELECT value FROM scopelens_meta WHERE key='schema_version'")).scalar()
    assert [(o, n) for o, n in rows] == [(i, m.name) for i, m in enumerate(MIGRATIONS, start=1)]
    assert version == str(len(MIGRATIONS))
    assert [m.name for m in MIGRATIONS] == sorted(m.name for m in MIGRATIONS)


def test_postings_keep_their_rows_when_rekeyed_by_term(store_url, monkeypatch):
    """0006 rebuilds index_postings keyed by (term, run_id): rows written before it survive
    (and 0012 names the run the rows' segment)."""
    import scopelens.core.store.store as store_module

    names = [m.name for m in MIGRATIONS]
    before = names.index("0006_postings_by_term")
    monkeypatch.setattr(store_module, "MIGRATIONS", MIGRATIONS[:before])
    rows = [(1, "beta", b"\x01\x00\x00\x00", b"\x02\x00"), (1, "alpha", b"\x00\x00\x00\x00", b"\x01\x00")]
    with Store.open(store_url, create=True) as store, store.engine.begin() as conn:
        for run_id, term, ids, tfs in rows:
            conn.execute(
                text("INSERT INTO index_postings (run_id, term, chunk_ids, tfs) VALUES (:r, :t, :i, :f)"),
                {"r": run_id, "t": term, "i": ids, "f": tfs},
            )
    monkeypatch.setattr(store_module, "MIGRATIONS", MIGRATIONS)
    with Store.open(store_url) as store, store.engine.connect() as conn:
        stored = conn.execute(text("SELECT segment_id, term, chunk_ids, tfs FROM index_postings ORDER BY term")).all()
        inspector = inspect(conn)
        key = inspector.get_pk_constraint("index_postings")["constrained_columns"]
        indexes = inspector.get_indexes("index_postings")
    assert [(r, t, bytes(i), bytes(f)) for r, t, i, f in stored] == sorted(rows, key=lambda row: row[1])
    assert key == ["segment_id", "term"] and indexes == []


def test_index_runs_written_before_versions_keep_their_ids_as_versions(store_url, monkeypatch, tmp_path):
    """0009 numbers index versions per (project, branch). Runs written before it keep their ids
    as their versions (what old snapshots pin); a later run numbers after its project and branch's
    highest, and a new project and branch starts at 1."""
    import scopelens.core.store.store as store_module
    from scopelens.core.index.indexer import index_workspace

    before = [m.name for m in MIGRATIONS].index("0009_index_versions")
    monkeypatch.setattr(store_module, "MIGRATIONS", MIGRATIONS[:before])
    columns = "project, branch, root, started_at, finished_at, added, changed, removed, unchanged, chunk_lo, chunk_hi"
    with Store.open(store_url, create=True) as store, store.engine.begin() as conn:
        for project in ("alpha", "beta", "alpha"):
            conn.execute(
                text(f"INSERT INTO index_runs ({columns}) VALUES (:p, 'main', '/r', 0, 0, 0, 0, 0, 0, 1, 1)"), {"p": project}
            )
    monkeypatch.setattr(store_module, "MIGRATIONS", MIGRATIONS)
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.py").write_text("A = 1\n", encoding="utf-8")
    with Store.open(store_url) as store:
        with store.engine.connect() as conn:
            kept = conn.execute(text("SELECT id, project, version FROM index_runs ORDER BY id")).all()
        assert [tuple(row) for row in kept] == [(1, "alpha", 1), (2, "beta", 2), (3, "alpha", 3)]
        assert index_workspace(store, root, project="alpha", branch="main").index_version == "alpha@main#4"
        assert index_workspace(store, root, project="beta", branch="main").index_version == "beta@main#3"
        assert index_workspace(store, root, project="alpha", branch="dev").index_version == "alpha@dev#1"
