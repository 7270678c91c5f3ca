"""The why-not form ([5/9] item 13): it detects what was typed instead of making a person choose
(a symbol typed in the default path mode used to answer not-recalled for a cited item), starts
from the row highlighted on the snapshot screen, lists every match in its stage's colour, and
each match opens its row; an empty question says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Static, TabbedContent
from textual.widgets._footer import FooterKey

from scopelens.core.vocab import Stage
from scopelens.inspector.app import InspectorApp
from scopelens.inspector.screens.snapshot import SnapshotScreen
from scopelens.inspector.screens.whynot import WhyNotScreen
from scopelens.inspector.widgets.fitted_table import FittedTable
from tests.inspector.conftest import build_app, open_screen, settle

SNAPSHOT = "snap-auth-role-mock-0002"
"""Its reply cites code#1, src/auth/session.ts:1-33, which defines createUserMock."""
SYMBOL = "createUserMock"


def shown(app: InspectorApp, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


async def ask(pilot: Pilot[None], value: str) -> None:
    """Put ``value`` in the form's field (replacing what it holds) and press enter."""
    field = pilot.app.screen.query_one("#whynot-input", Input)
    field.value = value
    field.focus()
    await pilot.press("enter")
    await settle(pilot)


async def test_a_symbol_is_detected_and_answered_as_a_symbol(sample_store: Path) -> None:
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, WhyNotScreen(SNAPSHOT))
        await ask(pilot, SYMBOL)
        assert shown(app, "#whynot-answer").startswith("stage: cited"), shown(app, "#whynot-answer")
        assert "detected: symbol" in shown(app, "#whynot-detected")
        for value, kind in (("src/auth/session.ts:1-33", "source_ref"), ("src/auth", "path"),
                            ("default role for mocks", "text")):
            app.screen.query_one("#whynot-input", Input).value = value
            await settle(pilot)
            assert f"detected: {kind}" in shown(app, "#whynot-detected"), value
        # The detected kind can be overridden: asked as a path, the symbol is found in no file name.
        app.screen.query_one("#whynot-input", Input).value = SYMBOL
        await pilot.click("#kind-path")
        await settle(pilot)
        assert "asked as: path" in shown(app, "#whynot-detected")
        assert shown(app, "#whynot-answer").startswith("stage: not-recalled")


@pytest.mark.parametrize(("tab", "table", "row"), [
    ("candidates", "#candidate-table", 9),
    ("evidence", "#item-table", 2),
    ("citations", "#citation-table", 4),
])
async def test_the_form_starts_from_the_highlighted_row(sample_store: Path, tab: str, table: str, row: int) -> None:
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, SnapshotScreen(SNAPSHOT, tab=tab))
        snapshot = app.screen
        assert isinstance(snapshot, SnapshotScreen) and snapshot.view is not None
        rows = snapshot.query_one(table, FittedTable)
        rows.move_cursor(row=row)
        key = rows.cursor_key()
        expected = (snapshot.candidate_rows[str(key)].source_ref if tab == "candidates"
                    else next(i.source_ref for i in snapshot.view.items if i.citation_id == key))
        await pilot.press("w")
        await settle(pilot)
        assert isinstance(app.screen, WhyNotScreen)
        assert app.screen.query_one("#whynot-input", Input).value == expected
        assert "detected: source_ref" in shown(app, "#whynot-detected")


async def test_every_match_is_a_line_in_its_stages_colour(sample_store: Path) -> None:
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, WhyNotScreen(SNAPSHOT))
        await ask(pilot, SYMBOL)
        expected = app.model.why_not(SNAPSHOT, "symbol", SYMBOL).matches
        assert len(expected) >= 3 and len({m.stage for m in expected}) >= 2
        table = app.screen.query_one("#whynot-matches", FittedTable)
        assert table.row_count == len(expected)
        colours = {}
        for index, match in enumerate(expected):
            values = table.row_values(str(index))
            assert str(values["source_ref"]).startswith(match.source_ref) and values["stage"].plain == match.stage.value
            colours[match.stage] = values["stage"].style.color
        assert all(colour is not None for colour in colours.values())
        assert colours[Stage.CITED] != colours[Stage.MEMORY_STATUS]
        assert f"{len(expected)} matches" in shown(app, "#whynot-matches-label")
        # enter asks in the field and opens a row from the matches: the footer says which.
        footer = {key.key: key.description for key in app.screen.query(FooterKey)}
        assert footer.get("enter") != "Open row"
        table.focus()
        await settle(pilot)
        footer = {key.key: key.description for key in app.screen.query(FooterKey)}
        assert footer.get("enter") == "Open row"


async def open_match(pilot: Pilot[None], stage: Stage) -> None:
    """Highlight the first match at ``stage`` and press enter on it."""
    screen = pilot.app.screen
    assert isinstance(screen, WhyNotScreen) and screen.answer is not None
    table = screen.query_one("#whynot-matches", FittedTable)
    table.focus()
    table.move_cursor(row=next(i for i, m in enumerate(screen.answer.matches) if m.stage == stage))
    await pilot.press("enter")
    await settle(pilot)


async def test_a_match_opens_its_row_on_the_snapshot_screen(sample_store: Path) -> None:
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, SnapshotScreen(SNAPSHOT, tab="candidates"))
        snapshot = app.screen
        assert isinstance(snapshot, SnapshotScreen)
        model = app.model.why_not(SNAPSHOT, "symbol", SYMBOL)
        rejected = next(m for m in model.matches if m.stage == Stage.MEMORY_STATUS)
        cited = next(m for m in model.matches if m.stage == Stage.CITED)

        await pilot.press("w")
        await settle(pilot)
        await ask(pilot, SYMBOL)
        await open_match(pilot, Stage.MEMORY_STATUS)
        assert app.screen is snapshot and snapshot.query_one(TabbedContent).active == "candidates"
        assert snapshot.query_one("#candidate-table", FittedTable).cursor_key() == str(rejected.ordinal)

        await pilot.press("w")
        await settle(pilot)
        await ask(pilot, SYMBOL)
        await open_match(pilot, Stage.CITED)
        assert app.screen is snapshot and snapshot.query_one(TabbedContent).active == "evidence"
        assert snapshot.query_one("#item-table", FittedTable).cursor_key() == cited.citation_id

        # A row the candidates filter hides: the filter becomes the row's source_ref.
        snapshot.query_one("#candidate-filter", Input).value = "src/"
        await settle(pilot)
        assert str(rejected.ordinal) not in snapshot.candidate_rows
        await pilot.press("w")
        await settle(pilot)
        await ask(pilot, SYMBOL)
        await open_match(pilot, Stage.MEMORY_STATUS)
        assert app.screen is snapshot and snapshot.query_one(TabbedContent).active == "candidates"
        assert snapshot.query_one("#candidate-filter", Input).value == rejected.source_ref
        assert snapshot.query_one("#candidate-table", FittedTable).cursor_key() == str(rejected.ordinal)


async def test_a_match_opens_a_snapshot_screen_when_the_form_was_opened_alone(sample_store: Path) -> None:
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, WhyNotScreen(SNAPSHOT))
        await ask(pilot, SYMBOL)
        rejected = next(m for m in app.model.why_not(SNAPSHOT, "symbol", SYMBOL).matches
                        if m.stage == Stage.MEMORY_STATUS)
        await open_match(pilot, Stage.MEMORY_STATUS)
        snapshot = app.screen
        assert isinstance(snapshot, SnapshotScreen) and snapshot.snapshot_id == SNAPSHOT
        assert snapshot.query_one("#candidate-table", FittedTable).cursor_key() == str(rejected.ordinal)


async def test_an_empty_question_says_so(sample_store: Path) -> None:
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, WhyNotScreen(SNAPSHOT))
        await ask(pilot, "   ")
        assert shown(app, "#whynot-answer").startswith("Nothing to ask")
