"""Tab keys work from every tab (issue [5/9], item 1): a widget of the pane being left must
not keep the key or take focus back."""

from __future__ import annotations

from textual.widgets import TabbedContent

from scopelens.inspector.screens.snapshot import TABS, SnapshotScreen
from tests.inspector.conftest import build_app, first_snapshot_of, open_screen, settle


async def test_every_tab_key_works_from_every_tab(sample_store):
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, SnapshotScreen(first_snapshot_of(sample_store)))
        tabs = app.screen.query_one(TabbedContent)
        for start in TABS:
            for key, name in zip("1234567", TABS, strict=True):
                await pilot.press(str(TABS.index(start) + 1))
                await settle(pilot)
                assert tabs.active == start
                await pilot.press(key)
                await settle(pilot)
                assert tabs.active == name, f"{key} from {start}"


async def test_enter_is_in_the_footer_where_a_table_has_focus(sample_store):
    """[5/9] item 4: the table's own (hidden) enter binding no longer hides the screen's."""
    from textual.widgets._footer import FooterKey

    from scopelens.inspector.screens.sessions import SessionsScreen
    from scopelens.inspector.screens.timeline import TimelineScreen

    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, SessionsScreen)
        shown = {key.key for key in app.screen.query(FooterKey)}
        assert "enter" in shown
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, TimelineScreen)  # enter does what the footer says
        assert "enter" in {key.key for key in app.screen.query(FooterKey)}
