"""Help and the palette (issue [5/9], item 17): help opens on the keys of the screen it came
from and the app-wide ones, `a` shows every screen's; the palette lists each command once,
with its key."""

from __future__ import annotations

from textual.command import CommandList
from textual.widgets import DataTable

from scopelens.inspector.actions import ACTIONS
from scopelens.inspector.screens.help import HelpScreen
from scopelens.inspector.screens.timeline import TimelineScreen
from tests.inspector.conftest import build_app, open_screen, settle

SESSION = "s-auth-role-mock-0001"


def help_rows(app) -> list[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    """(where, key, command) of each row of the help table."""
    table = app.screen.query_one(DataTable)
    return [tuple(cell.plain for cell in table.get_row_at(i)[:3]) for i in range(table.row_count)]


async def test_help_lists_this_screens_keys_then_the_apps_and_a_lists_everything(sample_store):
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, TimelineScreen(SESSION))
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        rows = help_rows(app)
        timeline = [a.title for a in ACTIONS if a.scope == "timeline"]
        everywhere = [a.title for a in ACTIONS if a.scope == "app"]
        assert [command for _, _, command in rows] == [*timeline, *everywhere, "palette: open"]
        assert ("timeline", "n", "turn: next") in rows

        await pilot.press("a")
        await settle(pilot)
        assert [command for _, _, command in help_rows(app)] == [*(a.title for a in ACTIONS), "palette: open"]
        await pilot.press("a")
        await settle(pilot)
        assert help_rows(app) == rows

        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, TimelineScreen)


async def test_the_palette_has_one_quit_theme_and_help_and_every_hit_shows_its_key(sample_store):
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p")
        await settle(pilot)
        hits = app.screen.query_one(CommandList)
        prompts = [str(hits.get_option_at_index(i).prompt) for i in range(hits.option_count)]
        titles = [prompt.split("\n")[0] for prompt in prompts]
        assert len(titles) == len(set(titles))
        for theirs in ("Quit", "Theme", "Keys"):  # Textual's own, second copies of ours
            assert theirs not in titles
        assert {"inspector: quit", "theme: toggle", "help: show", "screen: save screenshot"} <= set(titles)
        assert "session: open\nOpen the highlighted session's timeline  (enter)" in prompts
        assert "help: show\nEvery key and command  (?)" in prompts
        ours = [p for p in prompts if p.split("\n")[0] in {a.title for a in ACTIONS}]
        assert ours and all(p.endswith(")") for p in ours)
