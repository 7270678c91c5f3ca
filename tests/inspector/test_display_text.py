"""The inspector shows times and cut text as the CLI does ([3/9], CLI a new user can find their
way in): a time is ``when()`` (ISO-8601 UTC with ``Z``) under a header that says UTC; a hash
prefix, a long preview or a long list ends in "…" or says how many more."""

from __future__ import annotations

import re

from textual.widgets import Static

from scopelens.core.store.store import Store
from scopelens.core.vocab import EventType
from scopelens.inspector.screens import timeline
from scopelens.inspector.screens.drift import DriftScreen
from scopelens.inspector.screens.sessions import SessionsScreen
from scopelens.inspector.screens.snapshot import SnapshotScreen
from scopelens.inspector.screens.timeline import TimelineScreen
from scopelens.inspector.widgets.fitted_table import FittedTable
from tests.inspector.conftest import build_app, first_snapshot_of, open_screen, settle

WHEN = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


async def test_sessions_show_when_they_started_in_utc(sample_store):
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, SessionsScreen)
        table = app.screen.query_one(FittedTable)
        started = next(s for s in table.specs if s.key == "started")
        assert "(UTC)" in started.label
        row = table.row_values("s-auth-role-mock-0001")
        assert WHEN.fullmatch(str(row["started"])), row["started"]


async def test_timeline_detail_says_when_and_cuts_a_long_output_with_an_ellipsis(tmp_path):
    db = tmp_path / "long.db"
    output = "\n".join(f"line {n}: " + "x" * 40 for n in range(40))  # well past what the pane shows
    with Store.open(str(db), create=True) as store:
        session = store.create_session(project="p", session_id="s-long", title="a long tool output")
        store.append_event(session.id, EventType.TOOL_FINISHED, {"call_id": "c1", "tool": "pytest",
                                                                   "output_preview": output})
    app = build_app(db)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, TimelineScreen("s-long"))
        screen = app.screen
        screen.query_one(FittedTable).move_cursor(row=1)
        await settle(pilot)
        detail = str(screen.query_one("#event-detail", Static).render())
        assert re.search(rf"^at {WHEN.pattern}$", detail, re.MULTILINE), detail[:200]
        shown = detail.split("output:\n", 1)[1]
        assert shown.endswith("…") and len(shown) <= timeline.OUTPUT_CHARS and "\nline 1: " in shown


async def test_snapshot_title_says_when_and_shortens_its_hash_with_an_ellipsis(sample_store):
    snapshot_id = first_snapshot_of(sample_store)
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, SnapshotScreen(snapshot_id))
        title = str(app.screen.query_one("#snapshot-title", Static).render())
        assert re.search(rf"· {WHEN.pattern} · hash [0-9a-f]{{12}}…$", title), title


async def test_drift_runs_say_when_in_utc(sample_store):
    snapshot_id = first_snapshot_of(sample_store)
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, DriftScreen(snapshot_id))
        await pilot.press("r")
        await settle(pilot)
        runs = app.screen.query_one("#runs-table", FittedTable)
        at = next(s for s in runs.specs if s.key == "at")
        assert "(UTC)" in at.label
        assert runs.row_count >= 1
        shown = [str(cell) for cell in runs.get_row_at(0)]
        assert WHEN.fullmatch(shown[list(runs.shown_widths).index("at")]), shown
