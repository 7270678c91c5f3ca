"""Colours that carry meaning reach WCAG AA (4.5:1) on the background they are drawn on, in the
dark and the light theme ([5/9] item 18): drift classes in the drift table, diff lines, and
why-not's stages (its answer and its matches).

Each ratio is computed here from the theme's variables (``App.get_css_variables()``) and the
live widgets' backgrounds, independently of how inspector/theme.py derives its colours.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.color import Color
from textual.markup import parse_style
from textual.widget import Widget

from scopelens.core.vocab import Stage
from scopelens.inspector.screens.drift import CLASS_STYLE, DriftScreen
from scopelens.inspector.screens.snapshot import BAD_STYLE, OK_STYLE, SnapshotScreen
from scopelens.inspector.screens.whynot import WhyNotScreen
from scopelens.inspector.theme import STAGE_STYLE
from scopelens.inspector.widgets.fitted_table import FittedTable
from tests.inspector.conftest import build_app, drifted_snapshot_of, first_snapshot_of, open_screen, settle

THEMES = ("textual-dark", "textual-light")
TEXT_STYLES = {"bold", "italic", "underline", "dim", "reverse", "strike", "b", "i", "u", "d", "r", "s", "not"}
AA = 4.5


def luminance(colour: Color) -> float:
    """WCAG 2 relative luminance."""

    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(colour.r) + 0.7152 * channel(colour.g) + 0.0722 * channel(colour.b)


def contrast(first: Color, second: Color) -> float:
    high, low = sorted((luminance(first), luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def drawn_colour(spec: str, variables: dict[str, str], background: Color, default: Color) -> Color | None:
    """The colour ``spec`` draws text in over ``background``: its own (a theme variable), or
    the widget's when it names none; an ``auto`` colour picked as Textual picks it; alpha blended.
    None for a named colour, whose shade is the terminal's palette: no theme says what it is."""
    colours = [word for word in spec.split() if word not in TEXT_STYLES and not word.endswith("%")]
    if not all(word.startswith("$") for word in colours):
        return None
    colour = parse_style(spec, variables).foreground or default
    if colour.auto:
        colour = background.get_contrast_text(colour.a)
    return background + colour


def check(widget: Widget, specs: dict[str, str], variables: dict[str, str], theme: str) -> list[str]:
    """Every spec whose colour falls short of AA on the widget's background, with its ratio."""
    _base, background = widget.background_colors
    default = background + widget.colors[3]
    short = []
    where = f"{theme} #{widget.id}{':focus' if widget.has_focus else ''}"
    for name, spec in specs.items():
        colour = drawn_colour(spec, variables, background, default)
        if colour is None:
            short.append(f"{where} {name} {spec!r}: a named colour (the terminal's palette): use a theme variable")
        elif (ratio := contrast(colour, background)) < AA:
            short.append(f"{where} {name} {spec!r}: {ratio:.2f}")
    return short


@pytest.mark.parametrize("theme", THEMES)
async def test_drift_class_and_diff_colours_reach_aa(sample_store: Path, theme: str) -> None:
    app = build_app(sample_store, theme=theme)
    async with app.run_test(size=(120, 30)) as pilot:
        await open_screen(pilot, DriftScreen(drifted_snapshot_of(sample_store), run=True))
        variables = app.get_css_variables()
        screen = app.screen
        table, diff = screen.query_one("#drift-table"), screen.query_one("#drift-diff")
        classes = {cls.value: spec for cls, spec in CLASS_STYLE.items()}
        assert table.has_focus
        short = check(table, classes, variables, theme)
        screen.set_focus(None)
        await pilot.pause()
        short += check(table, classes, variables, theme) + drawn_short(diff, theme)
        assert not short, "\n".join(short)


def drawn_short(widget: Widget, theme: str) -> list[str]:
    """Every run of text the widget draws whose colour falls short of AA on the background it is
    drawn on (its own, or the widget's): the whole highlighted diff, syntax tokens included."""
    from rich.console import Console
    from textual.widgets import Static

    assert isinstance(widget, Static)
    _base, ground = widget.background_colors
    console = Console(width=100, color_system="truecolor", file=open("/dev/null", "w"))  # noqa: SIM115
    short = []
    drawn = 0
    for segment in console.render(widget.content):
        if not segment.text.strip() or segment.style is None or segment.style.color is None:
            continue
        colour = Color.from_rich_color(segment.style.color)
        back = Color.from_rich_color(segment.style.bgcolor) if segment.style.bgcolor else ground
        drawn += 1
        if (ratio := contrast(colour, back)) < AA:
            short.append(f"{theme} #{widget.id} {segment.text!r}: {ratio:.2f}")
    assert drawn > 5, "the diff draws coloured text"
    return short


@pytest.mark.parametrize("theme", THEMES)
async def test_why_not_stage_colours_reach_aa(sample_store: Path, theme: str) -> None:
    app = build_app(sample_store, theme=theme)
    async with app.run_test(size=(120, 30)) as pilot:
        await open_screen(pilot, WhyNotScreen("snap-auth-role-mock-0002", prefill="createUserMock"))
        await pilot.press("enter")
        await settle(pilot)
        variables = app.get_css_variables()
        stages = {stage.value: spec for stage, spec in STAGE_STYLE.items()}
        screen = app.screen
        answer, matches = screen.query_one("#whynot-answer"), screen.query_one("#whynot-matches")
        assert matches.display
        short = check(answer, stages, variables, theme) + check(matches, stages, variables, theme)
        matches.focus()
        await pilot.pause()
        short += check(matches, stages, variables, theme)
        assert not short, "\n".join(short)
        # Rich cells hold resolved colours: a theme switch draws them in the new theme's.
        assert isinstance(screen, WhyNotScreen) and screen.answer is not None
        cited = next(i for i, m in enumerate(screen.answer.matches) if m.stage == Stage.CITED)
        await pilot.press("ctrl+t")
        await settle(pilot)
        assert app.theme != theme
        colour = screen.query_one("#whynot-matches", FittedTable).row_values(str(cited))["stage"].style.color
        assert str(colour.get_truecolor().hex).upper() == app.theme_variables["legible-success"].upper()


async def test_drift_cells_are_drawn_again_in_the_new_theme(sample_store: Path) -> None:
    """Rich cells hold resolved colours: switching the theme draws them in the new theme's."""
    from textual.widgets import DataTable

    app = build_app(sample_store)
    async with app.run_test(size=(120, 30)) as pilot:
        await open_screen(pilot, DriftScreen(drifted_snapshot_of(sample_store)))
        await pilot.press("r")
        await settle(pilot)
        table = app.screen.query_one("#drift-table", DataTable)
        row = table.cursor_row

        def cell_colour() -> str:
            cell = table.get_row_at(row)[1]
            assert cell.plain == "content-changed" and cell.style.color is not None
            return str(cell.style.color.get_truecolor().hex).upper()

        assert cell_colour() == app.theme_variables["legible-warning"].upper()
        dark = cell_colour()
        await pilot.press("ctrl+t")
        await settle(pilot)
        assert app.theme == "textual-light" and table.cursor_row == row
        assert cell_colour() == app.theme_variables["legible-warning"].upper() != dark


@pytest.mark.parametrize("theme", THEMES)
async def test_candidate_stages_and_item_marks_reach_aa(sample_store: Path, theme: str) -> None:
    """The stage palette on the candidates table and the ✓/✗ marks of items and citations."""
    app = build_app(sample_store, theme=theme)
    async with app.run_test(size=(120, 30)) as pilot:
        await open_screen(pilot, SnapshotScreen(first_snapshot_of(sample_store), tab="candidates"))
        variables = app.get_css_variables()
        screen = app.screen
        stages = {stage.value: spec for stage, spec in STAGE_STYLE.items()}
        marks = {"ok": OK_STYLE, "bad": BAD_STYLE}
        short = check(screen.query_one("#candidate-table"), stages, variables, theme)
        await pilot.press("5")
        await settle(pilot)
        short += check(screen.query_one("#item-table"), marks, variables, theme)
        items = screen.query_one("#item-table", FittedTable)
        items.move_cursor(row=items.get_row_index("code#2"))  # TypeScript: highlighted tokens
        await settle(pilot)
        short += drawn_short(screen.query_one("#evidence-body"), theme)
        screen.set_focus(None)
        await pilot.pause()
        short += check(screen.query_one("#item-table"), marks, variables, theme)
        assert not short, "\n".join(short)


@pytest.mark.parametrize("theme", THEMES)
async def test_finding_outcome_colours_reach_aa(demo_store: Path, theme: str) -> None:
    from scopelens.inspector.screens.findings import OUTCOME_STYLE, FindingsScreen

    app = build_app(demo_store, theme=theme)
    async with app.run_test(size=(120, 30)) as pilot:
        await open_screen(pilot, FindingsScreen())
        variables = app.get_css_variables()
        outcomes = {outcome.value: spec for outcome, spec in OUTCOME_STYLE.items()}
        table = app.screen.query_one("#findings")
        assert table.has_focus
        short = check(table, outcomes, variables, theme)
        app.screen.set_focus(None)
        await pilot.pause()
        short += check(table, outcomes, variables, theme)
        assert not short, "\n".join(short)
