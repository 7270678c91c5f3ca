"""An imported session in the inspector: from the timeline to a call's observed context, call
to call, and the highlighted item's text."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from scopelens.core.importers.counterfactual import run_counterfactuals
from scopelens.core.importers.instance import read_instance
from scopelens.core.importers.store_import import import_paths
from scopelens.core.index.indexer import index_workspace
from scopelens.core.store.store import Store
from scopelens.inspector.screens.observed import ObservedScreen
from scopelens.inspector.screens.snapshot import SnapshotScreen
from scopelens.inspector.screens.timeline import TimelineScreen
from tests.inspector.conftest import IMPORTED_SESSION, build_app, settle
from tests.support.pydicom_checkout import INSTANCE, PYDICOM, write_checkout

GOLD = "pydicom/pixel_data_handlers/numpy_handler.py"


async def test_walk_an_imported_session_from_its_timeline_into_what_each_call_saw(imported_store):
    app = build_app(imported_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("enter")  # the only session
        await settle(pilot)
        timeline = app.screen
        assert isinstance(timeline, TimelineScreen)
        for _ in range(6):  # from the session's setup (turn 0) to the sixth call
            await pilot.press("n")
        assert timeline.rows[timeline.query_one(DataTable).cursor_row][0] == 6
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ObservedScreen) and screen.view is not None
        assert screen.view.turn == 6 and len(screen.view.items) == 13
        # the cursor starts on the first item new at this call; the gold file's read is the last
        highlighted = screen.highlighted()
        assert highlighted is not None and highlighted.new and highlighted.first_seen == 6
        await pilot.press("down")
        gold = screen.highlighted()
        assert gold is not None and gold.source_ref == f"{GOLD}:273-372" and gold.tool == "open"
        detail = str(screen.query_one("#observed-detail", Static).render())
        assert "file-read via open" in detail and "required_elements = [" in detail
        await pilot.press("n")
        await settle(pilot)
        assert screen.view.turn == 7 and sum(i.new for i in screen.view.items) == 2
        await pilot.press("p", "p")
        await settle(pilot)
        assert screen.view.turn == 5
        status = str(screen.query_one("#observed-status", Static).render())
        assert status.startswith("call 5 of 12") and "not a retrieval" in status


async def test_the_first_call_cannot_step_back(imported_store):
    app = build_app(imported_store)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        first = app.model.observed_snapshot_at(IMPORTED_SESSION, 1)
        app.push_screen(ObservedScreen(first))
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ObservedScreen)
        assert not screen.check_action("step_call", (-1,)) and screen.check_action("step_call", (1,))


async def test_the_counterfactual_of_a_turn_is_shown_beside_it_and_opens(tmp_path):
    root = write_checkout(tmp_path)
    db = tmp_path / "s.db"
    with Store.open(str(db), create=True) as store:
        index_workspace(store, root, project="pydicom")
        [outcome] = import_paths(store, [PYDICOM], project="pydicom", workspace=root).outcomes
        run_counterfactuals(store, outcome.session_id, instance=read_instance(INSTANCE))
    app = build_app(db)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        app.push_screen(ObservedScreen(app.model.observed_snapshot_at(outcome.session_id, 4)))
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ObservedScreen) and screen.view is not None
        line = str(screen.query_one("#observed-counterfactual", Static).render())
        assert line.startswith(f"scoped retrieval at this turn ({screen.view.counterfactual_id}, never shown")
        assert "[code#1] pydicom/pixel_data_handlers/numpy_handler.py" in line
        await pilot.press("r")
        await settle(pilot)
        assert isinstance(app.screen, SnapshotScreen) and app.screen.snapshot_id == screen.view.counterfactual_id
        title = str(app.screen.query_one("#snapshot-title", Static).render())
        assert "counterfactual snapshot (never shown to the session's model)" in title


async def test_without_a_counterfactual_there_is_no_line_and_no_key(imported_store):
    app = build_app(imported_store)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.push_screen(ObservedScreen(app.model.observed_snapshot_at(IMPORTED_SESSION, 2)))
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ObservedScreen)
        assert not screen.query_one("#observed-counterfactual", Static).display
        assert not screen.check_action("open_counterfactual", ())
