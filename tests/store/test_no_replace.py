"""Append-only tables cannot be rewritten through the side doors the first triggers left open.

SQLite's REPLACE conflict resolution deletes the conflicting row without firing DELETE
triggers; PostgreSQL's drift_runs had no TRUNCATE trigger. Drift confirmations (drift_checks,
migration 0011) have every one of these triggers from the start.
"""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from scopelens.core.store.engine import normalise_url
from scopelens.core.store.store import Store
from scopelens.core.store.verify import verify_store
from scopelens.core.vocab import EventType
from tests.support.factories import (
    DRIFT_CHECK_INSERT,
    DRIFT_RUN_INSERT,
    FACTORY_POLICY,
    made_drift_check,
    made_drift_run,
    make_snapshot,
)

APPEND_ONLY = ("sessions", "events", "snapshots", "snapshot_rows", "blobs", "drift_runs", "drift_checks")


def write_one_of_each(url: str) -> str:
    """A store with one row in every append-only table (a drift run and its confirmation inserted by hand)."""
    with Store.open(url, create=True) as store:
        session = store.create_session(project="p", session_id="s-r")
        store.append_event(session.id, EventType.USER_MESSAGE, {"text": "hello"})
        snapshot, block = make_snapshot("snap-r", session.id)
        store.write_snapshot(snapshot, block, blobs=[FACTORY_POLICY])
    engine = create_engine(normalise_url(url))
    with engine.begin() as conn:
        run = made_drift_run("d-1", "snap-r", "s-r")
        conn.execute(text(DRIFT_RUN_INSERT), run)
        conn.execute(text(DRIFT_CHECK_INSERT), made_drift_check("dc-1", run))
    engine.dispose()
    return url


@pytest.fixture
def written(store_url: str) -> str:
    return write_one_of_each(store_url)


# Each statement would replace one existing row with different content.
SQLITE_REPLACEMENTS = {
    "sessions": "INSERT OR REPLACE INTO sessions SELECT id, project, branch, workspace_root, 'forged', agent, "
    "created_at FROM sessions WHERE id = 's-r'",
    "events": "INSERT OR REPLACE INTO events SELECT session_id, seq, store_seq, turn, type, created_at, "
    "CAST('{}' AS BLOB), hash FROM events WHERE seq = 1",
    "events by store_seq": "REPLACE INTO events SELECT 'other', 0, store_seq, turn, type, created_at, body, hash "
    "FROM events WHERE seq = 1",
    "snapshots": "REPLACE INTO snapshots SELECT id, session_id, 99, created_at, body, hash FROM snapshots",
    "snapshot_rows": "INSERT OR REPLACE INTO snapshot_rows SELECT snapshot_id, ordinal, candidate_id, source, "
    "source_ref, path, line_start, line_end, stage, 'forged', from_probe, rank, citation_id, semantic, lexical, "
    "anchor, authority, recency, scope, actionability, diversity, final FROM snapshot_rows WHERE ordinal = 0",
    "blobs": "INSERT OR REPLACE INTO blobs SELECT sha256, 1, CAST('x' AS BLOB) FROM blobs",
    "drift_runs": "INSERT OR REPLACE INTO drift_runs SELECT id, snapshot_id, created_at, index_version, "
    "engine_version, config_hash, 'forged', body, hash FROM drift_runs",
    "drift_checks": "INSERT OR REPLACE INTO drift_checks SELECT id, run_id, snapshot_id, "
    "'2031-01-01T00:00:00.000000Z', hash FROM drift_checks",
}


def _counts(conn) -> dict[str, object]:
    return {
        table: conn.execute(text(f"SELECT count(*), group_concat(hex(rowid)) FROM {table}")).one()
        for table in APPEND_ONLY
    }


@pytest.mark.parametrize("what", list(SQLITE_REPLACEMENTS))
def test_insert_or_replace_cannot_rewrite_an_append_only_row(tmp_path, what):
    url = write_one_of_each(f"sqlite:///{tmp_path / 'store.db'}")
    engine = create_engine(normalise_url(url))
    try:
        with engine.connect() as conn:
            before = _counts(conn)
        with pytest.raises(Exception, match="append-only"), engine.begin() as conn:
            conn.execute(text(SQLITE_REPLACEMENTS[what]))
        with engine.connect() as conn:
            assert _counts(conn) == before
            assert conn.execute(text("SELECT count(*) FROM sessions WHERE title = 'forged'")).scalar() == 0
    finally:
        engine.dispose()
    with Store.open(url, read_only=True) as store:
        assert verify_store(store).clean


def test_storing_the_same_blob_twice_is_still_allowed(tmp_path):
    with Store.open(f"sqlite:///{tmp_path / 'store.db'}", create=True) as store:
        first = store.put_blob(b"same bytes")
        assert store.put_blob(b"same bytes") == first


@pytest.mark.parametrize(
    ("table", "column"), [("drift_runs", "summary"), ("drift_checks", "checked_at")]
)
def test_drift_runs_and_checks_cannot_be_truncated_deleted_or_updated(written, table, column):
    engine = create_engine(normalise_url(written))
    truncate = f"TRUNCATE {table}" if engine.dialect.name == "postgresql" else f"DELETE FROM {table}"
    try:
        with engine.connect() as conn:
            before = conn.execute(text(f"SELECT * FROM {table}")).all()
        for statement in (truncate, f"DELETE FROM {table}", f"UPDATE {table} SET {column} = 'x'"):
            with pytest.raises(Exception, match="append-only"), engine.begin() as conn:
                conn.execute(text(statement))
        with engine.connect() as conn:
            assert conn.execute(text(f"SELECT * FROM {table}")).all() == before
    finally:
        engine.dispose()
    with Store.open(written, read_only=True) as store:
        assert verify_store(store).clean
