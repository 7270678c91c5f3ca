"""A damaged or tampered store shows its problem where the data would be, never a traceback.

Each case alters the sample store the way an attacker with database access, or a broken disk,
could (append-only triggers dropped first). The inspector is then walked from the sessions list
through the timeline to the snapshot's tabs; the app must keep running and say what is wrong.
"""

from __future__ import annotations

import sqlite3

import pytest
from textual.widgets import DataTable, Static

from scopelens.inspector.screens.snapshot import SnapshotScreen
from scopelens.inspector.screens.timeline import TimelineScreen
from tests.inspector.conftest import build_app, open_screen, settle

SESSION = "s-auth-role-mock-0001"
SNAPSHOT = "snap-auth-role-mock-0001"
CANNOT_READ = "cannot read this from the store"

CASES = {
    "snapshot body not JSON": (
        ["DROP TRIGGER snapshots_no_update", f"UPDATE snapshots SET body = X'00FF00' WHERE id = '{SNAPSHOT}'"],
        ("snapshot-title", "AuditSnapshot document: Invalid JSON"),
    ),
    "snapshot body of another shape": (
        ["DROP TRIGGER snapshots_no_update",
         f"UPDATE snapshots SET body = CAST('{{\"a\": 1}}' AS BLOB) WHERE id = '{SNAPSHOT}'"],
        ("snapshot-title", "AuditSnapshot id: Field required"),
    ),
    "event body not JSON": (
        ["DROP TRIGGER events_no_update", f"UPDATE events SET body = X'7B7B' WHERE session_id = '{SESSION}' AND seq = 1"],
        ("timeline-status", "Event document: Invalid JSON"),
    ),
    "session head deleted": (
        [f"DELETE FROM session_heads WHERE session_id = '{SESSION}'"],
        ("timeline-status", f"no session '{SESSION}'"),
    ),
    "snapshot deleted": (
        ["DROP TRIGGER snapshots_no_delete", f"DELETE FROM snapshots WHERE id = '{SNAPSHOT}'"],
        ("snapshot-title", f"no snapshot '{SNAPSHOT}'"),
    ),
    "candidate stage not a stage": (
        ["DROP TRIGGER snapshot_rows_no_update", f"UPDATE snapshot_rows SET stage = 'bogus' WHERE snapshot_id = '{SNAPSHOT}'"],
        ("candidate-status", "'bogus' is not a valid Stage"),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_a_damaged_store_is_reported_on_screen_and_the_app_keeps_running(sample_store, case):
    statements, (target, detail) = CASES[case]
    with sqlite3.connect(sample_store) as conn:
        for statement in statements:
            conn.execute(statement)
    app = build_app(sample_store)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await open_screen(pilot, TimelineScreen(SESSION))
        if target != "timeline-status":
            app.push_screen(SnapshotScreen(SNAPSHOT, tab="candidates"))
            await settle(pilot)
        shown = app.screen.query_one(f"#{target}", Static)
        text = str(shown.render())
        assert CANNOT_READ in text and detail in text and "scopelens verify" in text
        assert shown.has_class("bad-mark")
        assert any(CANNOT_READ in n.message and n.severity == "error" for n in app._notifications)
        await pilot.press("escape")
        await settle(pilot)
        assert app.is_running and app.return_code is None  # still usable: back to where we came from


async def test_a_session_whose_start_is_not_a_timestamp_is_listed_as_unreadable(sample_store):
    with sqlite3.connect(sample_store) as conn:
        conn.execute("DROP TRIGGER sessions_no_update")
        conn.execute(f"UPDATE sessions SET created_at = 'not a date' WHERE id = '{SESSION}'")
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(DataTable)
        assert table.row_count == 4
        assert table.get_cell(SESSION, "started").plain == "unreadable"
        assert table.get_cell("s-billing-cents-time-0001", "started").plain.startswith("20")


async def test_a_session_that_cannot_be_verified_gets_a_red_mark_not_a_stuck_one(sample_store, monkeypatch):
    from scopelens.core.readmodel import ReadModel

    original = ReadModel.verify_status

    def failing(self, session_id, *, compute=True):  # type: ignore[no-untyped-def]
        if compute and session_id == SESSION:
            raise ValueError("a body that cannot be read")
        return original(self, session_id, compute=compute)

    monkeypatch.setattr(ReadModel, "verify_status", failing)
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await settle(pilot)
        table = app.screen.query_one(DataTable)
        assert table.get_cell(SESSION, "verify").plain == "✗"
        assert table.get_cell("s-billing-cents-time-0001", "verify").plain == "✓"
        assert not app.screen.verify_pending
        assert any("a body that cannot be read" in n.message for n in app._notifications)


async def test_a_reply_citing_the_same_missing_id_twice_lists_it_once(sample_store):
    """No tampering: a model.response appended through the API may repeat a citation id."""
    from scopelens.core.store.store import Store
    from scopelens.core.vocab import EventType

    with Store.open(str(sample_store)) as store:
        store.append_event(SESSION, EventType.MODEL_RESPONSE, {"text": "see [zz9] and [zz9]", "cited_ids": ["zz9", "zz9"]},
                           turn=2)
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, SnapshotScreen(SNAPSHOT, tab="citations"))
        table = app.screen.query_one("#citation-table", DataTable)
        dangling = [key.value for key in table.rows if str(key.value).startswith("dangling:")]
        assert len([key for key in dangling if str(key).endswith(":zz9")]) == 1
        assert f"{len(dangling)} cited but not shown" in str(app.screen.query_one("#citation-note", Static).render())


async def test_a_snapshot_document_with_a_repeated_citation_id_is_reported_not_fatal(sample_store):
    """A tampered body whose items repeat a citation id: the tables cannot key it twice."""
    import json

    with sqlite3.connect(sample_store) as conn:
        body = json.loads(conn.execute("SELECT body FROM snapshots WHERE id = ?", (SNAPSHOT,)).fetchone()[0])
        body["selected"][1]["citation_id"] = body["selected"][0]["citation_id"]
        conn.execute("DROP TRIGGER snapshots_no_update")
        conn.execute("UPDATE snapshots SET body = ? WHERE id = ?", (json.dumps(body).encode(), SNAPSHOT))
    app = build_app(sample_store)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await open_screen(pilot, SnapshotScreen(SNAPSHOT, tab="evidence"))
        assert app.is_running and isinstance(app.screen, SnapshotScreen)
        title = str(app.screen.query_one("#snapshot-title", Static).render())
        assert CANNOT_READ in title or "✗" in title
