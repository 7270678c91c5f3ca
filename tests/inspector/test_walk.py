"""The walk through a session from inside a snapshot (issue [5/9], the walk)."""

from __future__ import annotations

from textual.widgets import Static, TabbedContent

from scopelens.inspector.screens.snapshot import SnapshotScreen
from scopelens.inspector.screens.timeline import TimelineScreen
from tests.inspector.conftest import build_app, open_screen, settle

SESSION = "s-auth-role-mock-0001"


async def test_n_and_p_walk_the_sessions_snapshots_on_the_same_tab(sample_store):
    """Item 6: n/p open the next/previous snapshot and keep the tab; esc still goes back."""
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, TimelineScreen(SESSION))
        await pilot.press("n", "n", "enter")
        await settle(pilot)
        first = app.screen
        assert isinstance(first, SnapshotScreen)
        await pilot.press("4")
        await settle(pilot)
        seen = [first.snapshot_id]
        for _ in range(2):
            await pilot.press("n")
            await settle(pilot)
            assert isinstance(app.screen, SnapshotScreen)
            seen.append(app.screen.snapshot_id)
            assert app.screen.query_one(TabbedContent).active == "candidates"
        assert seen == ["snap-auth-role-mock-0001", "snap-auth-role-mock-0002", "snap-auth-role-mock-0003"]
        assert "(3 of 3)" in str(app.screen.query_one("#snapshot-title").render())
        await pilot.press("n")  # past the last: stays, says so
        await settle(pilot)
        assert app.screen.snapshot_id == seen[-1]
        await pilot.press("p")
        await settle(pilot)
        assert app.screen.snapshot_id == seen[1]
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, TimelineScreen)


async def test_request_tab_shows_the_question_sub_queries_and_the_exact_block(sample_store):
    """Item 7: the question, anchors, each sub-query's text and purpose, and the block as stored."""
    from rich.console import Console

    from scopelens.core.readmodel import ReadModel

    model = ReadModel(str(sample_store))
    try:
        view = model.snapshot("snap-auth-role-mock-0001")
    finally:
        model.close()
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, SnapshotScreen(view.id))
        await pilot.press("7")
        await settle(pilot)
        screen = app.screen
        assert screen.query_one(TabbedContent).active == "request"
        console = Console(width=150, record=True)
        for part in ("#request-intent", "#request-queries"):
            console.print(screen.query_one(part, Static).content)
        shown = console.export_text()
        assert view.intent.question[:60] in " ".join(shown.split())
        for query in view.plan.sub_queries:
            assert query.id in shown and query.intent.value in shown
            assert query.query_text.split()[0] in shown
        block = screen.query_one("#request-block", Static)
        assert block.content == view.block and view.block.count("\n") > 2
        assert "✓ hash matches" in str(block.border_title)
