"""Keys act only on what is visible, `esc` in an input stays in it, and a narrow footer keeps
the way out (issue [5/9], items 2, 3 and 4)."""

from __future__ import annotations

from textual.widgets import Input, TabbedContent
from textual.widgets._footer import FooterKey

from scopelens.inspector.screens.sessions import SessionsScreen
from scopelens.inspector.screens.snapshot import SnapshotScreen
from tests.inspector.conftest import build_app, first_snapshot_of, open_screen, settle


def footer_keys(app) -> set[str]:  # type: ignore[no-untyped-def]
    return {key.key for key in app.screen.query(FooterKey)}


SHOWN_ON_TAB = {
    "evidence": (set(), {"j", "s", "m", "r", "slash"}),
    "citations": ({"j"}, {"s", "m", "r", "slash"}),
    "candidates": ({"s", "r", "slash"}, {"j"}),
    "scope": (set(), {"j", "s", "m", "r", "slash"}),
}


async def test_footer_shows_only_the_keys_of_the_visible_tab(sample_store):
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, SnapshotScreen(first_snapshot_of(sample_store)))
        for tab, (shown, hidden) in SHOWN_ON_TAB.items():
            await pilot.press(str(("scope", "plan", "funnel", "candidates", "evidence", "citations").index(tab) + 1))
            await settle(pilot)
            keys = footer_keys(app)
            assert shown <= keys, tab
            assert not hidden & keys, tab


async def test_keys_of_a_hidden_tab_do_nothing(sample_store):
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, SnapshotScreen(first_snapshot_of(sample_store), tab="evidence"))
        screen = app.screen
        assert isinstance(screen, SnapshotScreen)
        for key in ("s", "r", "m", "j"):
            await pilot.press(key)
            await settle(pilot)
        assert (screen.sort, screen.descending) == ("ordinal", False)
        assert screen.query_one(TabbedContent).active == "evidence"
        await pilot.press("4", "s")
        await settle(pilot)
        assert screen.sort != "ordinal"  # the same key does act where its table is shown


async def test_esc_in_the_candidate_filter_clears_then_leaves_it(sample_store):
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, SnapshotScreen(first_snapshot_of(sample_store), tab="candidates"))
        screen = app.screen
        await pilot.press("s", "slash")
        filter_input = screen.query_one("#candidate-filter", Input)
        assert filter_input.has_focus
        await pilot.press("t", "e", "s", "t")
        await settle(pilot)
        sort = screen.sort
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is screen and filter_input.value == "" and filter_input.has_focus
        await pilot.press("x", "escape", "escape")
        await settle(pilot)
        assert app.screen is screen
        assert not filter_input.has_focus and screen.query_one("#candidate-table").has_focus
        assert screen.query_one(TabbedContent).active == "candidates" and screen.sort == sort
        await pilot.press("escape")  # from the table, esc goes back as before
        await settle(pilot)
        assert app.screen is not screen


async def test_narrow_footer_keeps_back_and_quit(sample_store):
    app = build_app(sample_store)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, SessionsScreen)
        assert "escape" not in footer_keys(app)  # nothing to go back to from the first screen
        await open_screen(pilot, SnapshotScreen(first_snapshot_of(sample_store), tab="candidates"))
        visible = {key.key for key in app.screen.query(FooterKey) if key.region.right <= 80 and key.region.width}
        assert {"escape", "q"} <= visible


async def test_t_and_g_are_offered_only_where_they_act(sample_store):
    """t needs an item with trimmed lines, g a reply citing the highlighted item or citation."""
    from scopelens.inspector.widgets.fitted_table import FittedTable

    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, SnapshotScreen("snap-auth-role-mock-0001", tab="evidence"))
        items = app.screen.query_one("#item-table", FittedTable)
        assert items.cursor_key() == "rule#1"  # neither trimmed nor cited
        assert not {"t", "g"} & footer_keys(app)
        items.move_cursor(row=items.get_row_index("doc#1"))  # cited by turn 2's reply
        await settle(pilot)
        assert "g" in footer_keys(app) and "t" not in footer_keys(app)
        await open_screen(pilot, SnapshotScreen("snap-flags-budget-trim-0001", tab="evidence"))
        items = app.screen.query_one("#item-table", FittedTable)
        view = app.screen.view
        assert view is not None
        trimmed = next(item.citation_id for item in view.items if item.trim_ranges)
        items.move_cursor(row=items.get_row_index(trimmed))
        await settle(pilot)
        assert "t" in footer_keys(app)
