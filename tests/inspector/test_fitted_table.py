"""Column fitting: pure width arithmetic, and no screen that scrolls sideways at 80 or 160 columns."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.segment import Segment
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable, Static

from scopelens.inspector.screens.drift import DriftScreen, SessionDriftScreen
from scopelens.inspector.screens.help import HelpScreen
from scopelens.inspector.screens.snapshot import SnapshotScreen
from scopelens.inspector.screens.timeline import TimelineScreen
from scopelens.inspector.widgets.fitted_table import Column, FittedTable, fit_widths
from tests.inspector.conftest import build_app, first_snapshot_of, open_screen, settle
from tests.inspector.test_snapshots import SESSION

COLUMNS = (
    Column("id", "id", 20),
    Column("name", "name", 16, min_width=8),
    Column("note", "note", 30, min_width=10, flex=1, drop=2),
    Column("extra", "extra", 10, drop=1),
)


def test_room_left_goes_to_the_flexible_column():
    assert fit_widths(COLUMNS, 200, 2) == {"id": 20, "name": 16, "note": 200 - 8 - 46, "extra": 10}


def test_flexible_columns_shrink_before_the_others_and_droppable_ones_go_highest_first():
    assert fit_widths(COLUMNS, 80, 2) == {"id": 20, "name": 16, "note": 26, "extra": 10}
    # 20 + 8 + 10 + 10 + 8 padding = 56 does not fit in 50: "note" (drop 2) goes before "extra".
    assert fit_widths(COLUMNS, 50, 2) == {"id": 20, "name": 14, "extra": 10}
    assert fit_widths(COLUMNS, 10, 2) == {"id": 20, "name": 8}


column_lists = st.lists(
    st.builds(
        lambda i, width, shrink, flex, drop: Column(f"c{i}", "x", width, min_width=width - shrink, flex=flex, drop=drop),
        st.integers(0, 1000), st.integers(1, 40), st.integers(0, 40), st.integers(0, 2), st.integers(0, 3),
    ).map(lambda c: c if c.min_width is not None and c.min_width >= 0 else Column(c.key, c.label, c.width)),
    min_size=1, max_size=8, unique_by=lambda c: c.key,
)


@given(column_lists, st.integers(0, 300))
def test_fitted_widths_fit_unless_the_fixed_columns_alone_do_not(columns, available):
    widths = fit_widths(columns, available, 2)
    assert set(widths) >= {c.key for c in columns if not c.drop}
    assert all(widths[c.key] >= c.narrowest for c in columns if c.key in widths)
    fixed_minimum = sum(c.narrowest + 2 for c in columns if not c.drop)
    if fixed_minimum <= available:
        assert sum(w + 2 for w in widths.values()) <= available


SCREENS = {
    "sessions": lambda db: None,
    "timeline": lambda db: TimelineScreen(SESSION),
    "snapshot": lambda db: SnapshotScreen(first_snapshot_of(db)),
    "drift": lambda db: DriftScreen(first_snapshot_of(db)),
    "session-drift": lambda db: SessionDriftScreen(SESSION),
    "help": lambda db: HelpScreen(),
}


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("name", sorted(SCREENS))
async def test_no_table_scrolls_sideways(sample_store, name, size):
    app = build_app(sample_store)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        screen = SCREENS[name](sample_store)
        if screen is not None:
            app.push_screen(screen)
            await settle(pilot)
        if name in ("drift", "session-drift"):
            await pilot.press("r")
            await settle(pilot)
        tabs = ("plan", "candidates", "evidence", "citations") if name == "snapshot" else (None,)
        for tab in tabs:
            if tab:
                app.screen.action_show_tab(tab)  # type: ignore[attr-defined]
                await settle(pilot)
            for table in app.screen.query(DataTable):
                if table.display and table.size.width:
                    assert table.max_scroll_x == 0, (name, tab, table.id, table.virtual_size.width, table.size.width)


async def test_sessions_at_80_columns_show_title_and_branch_below_the_table(sample_store):
    app = build_app(sample_store)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(DataTable)
        assert "title" not in table.shown_widths and "branch" not in table.shown_widths  # type: ignore[attr-defined]
        await pilot.press("down")
        await settle(pilot)
        detail = str(app.screen.query_one("#session-detail", Static).render())
        highlighted = table.row_values(table.cursor_key())  # type: ignore[attr-defined]
        assert highlighted["title"] in detail and f"@ {highlighted['branch']}" in detail


async def test_clicking_a_candidate_header_sorts_by_it_and_again_reverses(sample_store):
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, SnapshotScreen(first_snapshot_of(sample_store), tab="candidates"))
        table = app.screen.query_one("#candidate-table", DataTable)
        x = 0
        for key, width in table.shown_widths.items():  # type: ignore[attr-defined]
            if key == "final":
                break
            x += width + 2
        finals = lambda: [  # noqa: E731
            float(v["final"]) for v in map(table.row_values, (str(k.value) for k in table.rows))  # type: ignore[attr-defined]
            if v["final"] != "-"
        ]
        await pilot.click("#candidate-table", offset=(x + 1, 0))
        await settle(pilot)
        status = str(app.screen.query_one("#candidate-status", Static).render())
        assert "sorted by final ↓" in status
        assert finals() == sorted(finals(), reverse=True) and len(set(finals())) > 1
        await pilot.click("#candidate-table", offset=(x + 1, 0))
        await settle(pilot)
        assert "sorted by final ↑" in str(app.screen.query_one("#candidate-status", Static).render())
        assert finals() == sorted(finals())


TRICKY_CELLS = (
    "", "x", "日本語のテキストは幅が二つ", "trailing   ", "  leading", "a" * 40, "[b]not markup[/b]",
    "e\u0301 combining", "🙂 wide 🙂", "tab\there", "two\nlines", Text("✗", style="bold red"),
    Text.assemble("plain ", ("bold", "bold"), " tail"), 3.14159, Text("right", justify="right"),
)


@pytest.mark.parametrize("theme", ["textual-dark", "textual-light"])
async def test_the_fast_cell_path_draws_exactly_what_datatable_draws(theme):
    """FittedTable draws one-line cells without Rich's layout; every line must come out as
    DataTable's own path draws it: same text, same styles, same mouse metadata."""
    columns = (Column("a", "a", 1), Column("b", "bee", 12), Column("c", "see", 8, min_width=4, flex=1),
               Column("d", "dee", 6))

    class TableApp(App[None]):
        def compose(self) -> ComposeResult:
            yield FittedTable(columns, cursor_type="row", zebra_stripes=True)

    def draw(table: FittedTable) -> list[list[Segment]]:
        table._cell_render_cache.clear()
        table._row_render_cache.clear()
        table._line_cache.clear()
        return [list(Segment.simplify(list(table.render_line(y)))) for y in range(table.size.height)]

    app = TableApp()
    app.theme = theme
    async with app.run_test(size=(60, 40)) as pilot:
        table = app.query_one(FittedTable)
        cells = TRICKY_CELLS
        for n in range(len(cells) * 3):
            table.add_row(cells[n % len(cells)], cells[(n + 1) % len(cells)], cells[(n * 5) % len(cells)], n, key=str(n))
        for cursor in (0, 7):
            table.move_cursor(row=cursor)
            await pilot.pause()
            fallbacks: list[int] = []
            datatable_render_cell = DataTable._render_cell

            def counting(self, row_index, *args, _seen=fallbacks, _render=datatable_render_cell, **kwargs):  # type: ignore[no-untyped-def]
                if row_index >= 0:
                    _seen.append(row_index)
                return _render(self, row_index, *args, **kwargs)

            try:
                DataTable._render_cell = counting  # type: ignore[method-assign]
                fast = draw(table)
            finally:
                DataTable._render_cell = datatable_render_cell  # type: ignore[method-assign]
            visible_rows = table.size.height - 1
            awkward = sum(
                1
                for key in list(table.rows)[:visible_rows]
                for value in table.get_row(key)
                if isinstance(value, Text) and ("\n" in value.plain or "\t" in value.plain or value.justify == "right")
            )
            assert awkward and len(fallbacks) == awkward  # every other body cell took the fast path
            original = FittedTable._render_cell
            try:
                FittedTable._render_cell = DataTable._render_cell  # type: ignore[method-assign]
                slow = draw(table)
            finally:
                FittedTable._render_cell = original  # type: ignore[method-assign]
            assert fast == slow
            assert any("日本語" in segment.text for line in fast for segment in line)



async def test_a_fitted_table_shows_no_horizontal_scrollbar_even_before_its_columns_fit(sample_store):
    """Columns wider than the table for a moment (before they are fitted to a new width) must not
    bring a horizontal scrollbar: a scroll to the cursor made in that moment lost a row to it,
    and the observed screen then stayed a row further down (its snapshot differed under load)."""
    app = build_app(sample_store)
    async with app.run_test(size=(56, 24)) as pilot:  # narrower than the columns' preferred widths
        await open_screen(pilot, TimelineScreen(SESSION))
        table = app.screen.query_one(FittedTable)
        table._lay_out({column.key: column.width for column in table.specs})  # the preferred widths
        table._update_dimensions([])
        table.refresh(layout=True)
        await pilot.pause()
        assert table.virtual_size.width > table.size.width
        assert not table.show_horizontal_scrollbar
        assert table.scrollable_content_region.height == table.size.height
