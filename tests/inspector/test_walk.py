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


async def test_citations_both_ways(sample_store):
    """Item 8: a reply's cites are marked ✓/✗ in the timeline and j jumps to them; g on a cited
    item goes back to the citing reply."""
    from textual.widgets import DataTable

    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, TimelineScreen(SESSION))
        timeline = app.screen
        assert isinstance(timeline, TimelineScreen)
        timeline.move_to_event(6)  # turn 2's reply: cites doc#1 (shown) and rule#2 (never shown)
        await settle(pilot)
        detail = str(timeline.query_one("#event-detail", Static).content)
        assert "doc#1 ✓" in detail and "rule#2 ✗" in detail
        await pilot.press("j")
        await settle(pilot)
        snapshot = app.screen
        assert isinstance(snapshot, SnapshotScreen) and snapshot.snapshot_id == "snap-auth-role-mock-0001"
        assert snapshot.query_one(TabbedContent).active == "citations"
        citations = snapshot.query_one("#citation-table", DataTable)
        assert citations.coordinate_to_cell_key(citations.cursor_coordinate).row_key.value == "doc#1"
        await pilot.press("5")  # Evidence: doc#1 is cited by that reply; g goes back to it
        await settle(pilot)
        items = snapshot.query_one("#item-table", DataTable)
        items.move_cursor(row=items.get_row_index("doc#1"))
        await pilot.press("g")
        await settle(pilot)
        assert app.screen is timeline
        assert timeline.rows[timeline.query_one(DataTable).cursor_row][1] == 6
        timeline.move_to_event(5)  # a request cites nothing: j is not offered
        await settle(pilot)
        assert "j" not in {key for key, b in app.screen.active_bindings.items() if b.binding.show}


async def test_timeline_detail_shows_the_call_and_checks_the_context_hash(sample_store):
    """Item 14: the full tool call with its exit code, and the request's context hash ✓."""
    app = build_app(sample_store)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, TimelineScreen(SESSION))
        timeline = app.screen
        assert isinstance(timeline, TimelineScreen)
        timeline.move_to_event(3)
        await settle(pilot)
        detail = str(timeline.query_one("#event-detail", Static).content)
        assert "call: pnpm test tests/auth/session.test.ts  → exit 1" in detail
        timeline.move_to_event(5)
        await settle(pilot)
        assert "✓ matches its blocks" in str(timeline.query_one("#event-detail", Static).content)


async def test_scope_tab_scrolls_without_tab_and_shows_pins_first(sample_store):
    """Item 14: the Scope text has focus (arrows scroll it) and its first line is the pins."""
    from textual.containers import VerticalScroll

    app = build_app(sample_store)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, SnapshotScreen("snap-auth-role-mock-0001", tab="plan"))
        await pilot.press("1")
        await settle(pilot)
        assert isinstance(app.focused, VerticalScroll)
        assert app.focused.query_one("#scope-text") is not None
        scope_text = app.screen.query_one("#scope-text", Static)
        assert scope_text.region.y <= 6  # right under the title and the tab strip
        first_line = next(iter(scope_text.render_lines(scope_text.region.reset_offset)[:1]))
        assert "pins" in first_line.text and "engine" in first_line.text
