"""Evidence at 80 columns: stacked, the trim column kept, wrapped text beside its gutter,
trimmed lines on demand, code highlighted by language (issue [5/9], items 10 and 12)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table as RichTable
from textual.widgets import Static

from scopelens.core.readmodel import ReadModel
from scopelens.inspector.screens.snapshot import SnapshotScreen
from scopelens.inspector.widgets.evidence import NOT_SEEN
from scopelens.inspector.widgets.fitted_table import FittedTable
from scopelens.inspector.widgets.syntax import highlighted_lines
from tests.inspector.conftest import build_app, open_screen, settle

TRIMMED = "snap-flags-budget-trim-0001"


def body_text(screen, width: int = 76) -> str:  # type: ignore[no-untyped-def]
    grid = screen.query_one("#evidence-body", Static).content
    assert isinstance(grid, RichTable)
    console = Console(width=width, record=True)
    console.print(grid)
    return console.export_text()


async def test_evidence_stacks_at_80_columns_and_reveals_trimmed_lines(sample_store):
    model = ReadModel(str(sample_store))
    try:
        item = next(i for i in model.snapshot(TRIMMED).items if i.trim_ranges)
        hidden = model.trimmed_texts(TRIMMED, item.citation_id)[0]
    finally:
        model.close()
    assert hidden
    app = build_app(sample_store)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, SnapshotScreen(TRIMMED))
        screen = app.screen
        table = screen.query_one("#item-table", FittedTable)
        side = screen.query_one("#evidence-side")
        assert table.region.bottom <= side.region.y and side.region.width >= 76  # stacked
        assert "trim" in [str(c.label) for c in table.columns.values()]
        table.move_cursor(row=table.get_row_index(item.citation_id))
        await settle(pilot)
        before = body_text(screen)
        assert NOT_SEEN not in before and hidden.split("\n")[0][:30] not in before
        await pilot.press("t")
        await settle(pilot)
        shown = body_text(screen, width=200)
        assert f"{item.trim_ranges[0].start_line} {NOT_SEEN}" in shown
        assert hidden.split("\n")[0][:30] in shown
        assert "never seen by the model" in str(screen.query_one("#evidence-header", Static).content)
        await pilot.press("t")
        await settle(pilot)
        assert NOT_SEEN not in body_text(screen, width=200)


async def test_wrapped_lines_continue_beside_the_gutter(sample_store):
    app = build_app(sample_store)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, SnapshotScreen("snap-auth-role-mock-0001"))
        lines = body_text(app.screen, width=40).splitlines()
        gutter = lines[0].index("│") + 2
        continued = [line for line in lines if line.strip() and "│" not in line[:gutter]]
        assert continued, "some line of the rule must wrap at 40 columns"
        assert all(line[:gutter].strip() == "" for line in continued)


def test_code_is_highlighted_by_its_language_and_plain_text_is_not():
    code = 'def f(x):\n    return "x"  # done'
    python = highlighted_lines(code, "src/a.py", dark=True)
    assert len(python) == 2 and python[0].spans and python[1].spans
    assert [line.plain for line in python] == code.split("\n")
    assert not any(line.spans for line in highlighted_lines(code, "notes.unknownext", dark=True))
    go = highlighted_lines('package flags\n\nfunc A() string { return "a" }', "flags/flags.go", dark=False)
    assert go[0].spans and go[2].spans


def test_diffs_are_highlighted_by_language_on_tinted_lines():
    """Item 12: a diff's code is highlighted by its file's language; added and removed lines
    keep their marker colour on a tinted background."""
    from rich.console import Console
    from textual.app import App

    from scopelens.inspector.theme import legible_variables
    from scopelens.inspector.widgets.diff import highlighted_diff

    app = App()
    app.theme = "textual-dark"
    variables = app.get_css_variables()
    variables |= legible_variables(variables)  # what InspectorApp adds to every theme
    diff = ("--- a.py:1-2@old\n+++ a.py:1-2@new\n@@ -1,2 +1,2 @@\n def f(x):\n-    return 1\n+    return \"two\"\n")
    console = Console(width=60, color_system="truecolor", file=open("/dev/null", "w"))  # noqa: SIM115
    lines = console.render_lines(highlighted_diff(diff, "a.py", variables, dark=True), pad=False)
    by_text = {"".join(s.text for s in line).rstrip(): line for line in lines}
    added, removed, context = by_text['+    return "two"'], by_text["-    return 1"], by_text[" def f(x):"]
    assert len({s.style.color for s in added if s.text.strip() and s.style}) >= 3  # marker, keyword, string
    assert {s.style.bgcolor for s in added if s.text.strip()} != {s.style.bgcolor for s in removed if s.text.strip()}
    assert all(s.style is None or s.style.bgcolor is None for s in context if s.text.strip())
    plain = highlighted_diff(diff, "notes.unknownext", variables, dark=True)
    assert plain is not None  # an unknown language still draws (markers and tints only)
