"""Drift from the walk: `d` runs it, the diff is reachable at 80×24, past runs open (issue
[5/9], items 5 and 9)."""

from __future__ import annotations

from datetime import timedelta

from textual.widgets import DataTable

from scopelens.core.clock import SequentialIds, SteppingClock
from scopelens.core.readmodel import ReadModel
from scopelens.core.vocab import DriftClass
from scopelens.inspector.screens.drift import DiffPane, DriftScreen, SessionDriftScreen
from scopelens.inspector.screens.snapshot import SnapshotScreen
from scopelens.inspector.screens.timeline import TimelineScreen
from tests.inspector.conftest import DRIFT_CLOCK_START, build_app, drifted_snapshot_of, first_snapshot_of, open_screen, settle

SESSION = "s-auth-role-mock-0001"


def recorded_runs(db) -> int:  # type: ignore[no-untyped-def]
    model = ReadModel(str(db))
    try:
        return sum(len(model.drift_runs(i)) for i in model.snapshot_ids(SESSION))
    finally:
        model.close()


async def test_d_runs_drift_and_shows_the_result_at_80x24(sample_store):
    app = build_app(sample_store)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, SnapshotScreen(drifted_snapshot_of(sample_store)))
        assert recorded_runs(sample_store) == 0
        await pilot.press("d")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DriftScreen)
        assert screen.report is not None and recorded_runs(sample_store) == 1
        await pilot.press("r")  # the same result again: a confirmation, not a second run
        await settle(pilot)
        assert recorded_runs(sample_store) == 1
        assert "unchanged" in str(screen.query_one("#drift-status").render())
        table = screen.query_one("#drift-table", DataTable)
        frozen = [item.frozen_rank for item in screen.report.items if item.frozen_rank]
        assert frozen == sorted(frozen)  # rows keep the frozen order
        changed = screen.report.items[table.cursor_row]
        assert changed.drift_class == DriftClass.CONTENT_CHANGED
        # enter gives the diff focus and the whole screen; it scrolls; esc gives the table back
        await pilot.press("enter")
        await settle(pilot)
        pane = screen.query_one(DiffPane)
        assert pane.has_focus and screen.maximized is pane
        assert pane.region.height > 12
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is screen and screen.maximized is None


async def test_a_past_run_opens_on_enter(sample_store):
    snapshot_id = first_snapshot_of(sample_store)
    later = ReadModel(str(sample_store), clock=SteppingClock(DRIFT_CLOCK_START + timedelta(days=30)), ids=SequentialIds("later"))
    try:
        first_run = later.compute_drift(snapshot_id).report.id  # a run dated after the app's clock
    finally:
        later.close()
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, DriftScreen(snapshot_id, run=True))
        screen = app.screen
        assert isinstance(screen, DriftScreen) and screen.report is not None
        assert screen.report.id != first_run  # a new run: the last one is dated after it
        runs = screen.query_one("#runs-table", DataTable)
        runs.focus()
        runs.move_cursor(row=runs.get_row_index(first_run))
        await pilot.press("enter")
        await settle(pilot)
        assert screen.report.id == first_run
        assert "recorded at" in str(screen.query_one("#drift-status").render())


async def test_d_on_the_timeline_runs_session_drift_with_turns(sample_store):
    app = build_app(sample_store)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, TimelineScreen(SESSION))
        await pilot.press("d")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SessionDriftScreen)
        table = screen.query_one(DataTable)
        assert [str(table.get_row_at(i)[0]) for i in range(table.row_count)] == ["2", "3", "4"]
        assert recorded_runs(sample_store) == 3
