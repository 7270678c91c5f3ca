"""The read model answers the same on SQLite and PostgreSQL: paging by key, sorting, filters,
snapshot views, candidates and verify status, over the four recorded sample sessions."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from scopelens.core.readmodel import CANDIDATE_SORTS, ReadModel
from scopelens.core.record.recorder import record_scripts

SAMPLES = Path(__file__).resolve().parents[2] / "sample_sessions"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def model(request, tmp_path_factory):
    """The samples recorded once per backend for this module (the tests only read)."""
    directory = tmp_path_factory.mktemp("readmodel")
    if request.param == "sqlite":
        url = f"sqlite:///{directory / 'samples.db'}"
    else:
        server = request.getfixturevalue("postgres_server")
        url = server.create_database(f"readmodel_{uuid.uuid4().hex[:12]}")
    (directory / "work").mkdir()
    record_scripts(sorted(SAMPLES.glob("*/script.json")), db=url, workdir=directory / "work")
    read_model = ReadModel(url)
    yield read_model
    read_model.close()


def walk(fetch, **kwargs) -> list:
    """Every row, one per page: key paging must neither skip nor repeat a row."""
    rows, after = [], None
    while True:
        page = fetch(after=after, limit=1, **kwargs)
        rows += page.rows
        if page.next_after is None:
            return rows
        after = page.next_after


@pytest.mark.parametrize("sort", ["started", "project", "turns", "snapshots"])
@pytest.mark.parametrize("descending", [True, False])
def test_sessions_page_by_key_without_gaps(model, sort, descending):
    whole = model.sessions(sort=sort, descending=descending, limit=100)
    assert whole.total == 4 and len(whole.rows) == 4
    assert [v.id for v in walk(model.sessions, sort=sort, descending=descending)] == [v.id for v in whole.rows]
    values = [{"started": v.started, "project": v.project, "turns": v.turns, "snapshots": v.snapshots}[sort]
              for v in whole.rows]
    assert values == sorted(values, reverse=descending)


def test_session_filter_matches_id_project_branch_and_title(model):
    assert [v.id for v in model.sessions(text="WEB-APP").rows] == ["s-auth-role-mock-0001"]
    assert {v.id for v in model.sessions(text="cents").rows} == {"s-billing-cents-time-0001"}
    assert model.sessions(text="no such thing").total == 0


def test_snapshot_views_candidates_and_verify(model):
    snapshot_ids = model.snapshot_ids("s-auth-role-mock-0001")
    assert len(snapshot_ids) == 3
    view = model.snapshot(snapshot_ids[0])
    assert view.block_ok and view.items and all(i.hash_ok for i in view.items)
    for sort in CANDIDATE_SORTS:
        whole = model.candidates(snapshot_ids[0], sort=sort, limit=1000)
        walked = walk(model.candidates, snapshot_id=snapshot_ids[0], sort=sort)
        assert [c.ordinal for c in walked] == [c.ordinal for c in whole.rows] and whole.total == len(whole.rows)
    selected = model.candidates(snapshot_ids[0], text="selected", limit=1000)
    assert all("selected" in (c.reason + c.source_ref).lower() for c in selected.rows)
    assert model.verify_status("s-auth-role-mock-0001").state == "ok"


def test_both_backends_give_the_same_views(tmp_path, postgres_url):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    sqlite_url = f"sqlite:///{tmp_path / 's.db'}"
    scripts = sorted(SAMPLES.glob("*/script.json"))
    record_scripts(scripts, db=sqlite_url, workdir=tmp_path / "a")
    record_scripts(scripts, db=postgres_url, workdir=tmp_path / "b")
    on_sqlite, on_postgres = ReadModel(sqlite_url), ReadModel(postgres_url)
    try:
        assert on_sqlite.sessions(sort="turns").rows == on_postgres.sessions(sort="turns").rows
        for session_id in ("s-auth-role-mock-0001", "s-flags-budget-trim-0001"):
            assert on_sqlite.timeline(session_id) == on_postgres.timeline(session_id)
            for snapshot_id in on_sqlite.snapshot_ids(session_id):
                assert on_sqlite.snapshot(snapshot_id) == on_postgres.snapshot(snapshot_id)
                assert (on_sqlite.candidates(snapshot_id, sort="final", descending=True).rows
                        == on_postgres.candidates(snapshot_id, sort="final", descending=True).rows)
    finally:
        on_sqlite.close()
        on_postgres.close()


SORT_INDEXES = {
    "started": "sessions_by_start",
    "project": "sessions_by_project_id",
    "turns": "session_heads_by_turns",
    "snapshots": "session_heads_by_snapshots",
}


@pytest.mark.parametrize("model", ["sqlite"], indirect=True)  # EXPLAIN QUERY PLAN is SQLite's
@pytest.mark.parametrize("sort", list(SORT_INDEXES))
@pytest.mark.parametrize("descending", [True, False])
def test_a_sessions_page_walks_an_index_instead_of_sorting_every_session(model, sort, descending):
    """First page and next page, in every sort: the plan walks the sort's index and sorts
    nothing (before 0007_session_sort_indexes every page sorted every session)."""
    from sqlalchemy import event

    statements: list[tuple[str, object]] = []

    def capture(conn, cursor, statement, parameters, context, executemany):
        if "ORDER BY" in statement:
            statements.append((statement, parameters))

    event.listen(model.store.engine, "before_cursor_execute", capture)
    try:
        first = model.sessions(sort=sort, descending=descending, limit=2)
        model.sessions(sort=sort, descending=descending, limit=2, after=first.next_after)
    finally:
        event.remove(model.store.engine, "before_cursor_execute", capture)
    assert len(statements) == 2
    raw = model.store.engine.raw_connection()
    try:
        for statement, parameters in statements:
            plan = [row[3] for row in raw.cursor().execute(f"EXPLAIN QUERY PLAN {statement}", parameters)]
            assert not any("TEMP B-TREE" in step for step in plan), plan
            assert f"USING INDEX {SORT_INDEXES[sort]}" in plan[0], plan
    finally:
        raw.close()
