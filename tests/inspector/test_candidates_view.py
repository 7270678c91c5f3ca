"""Candidates: stage colours from one palette, sort arrows, reverse, the reason's width, probe
rows named, and a funnel stage that filters them (issue [5/9], item 11)."""

from __future__ import annotations

from textual.widgets import Input, TabbedContent

from scopelens.core.vocab import Stage
from scopelens.inspector.screens.snapshot import SnapshotScreen
from scopelens.inspector.theme import STAGE_STYLE, rich_style
from scopelens.inspector.widgets.fitted_table import FittedTable
from scopelens.inspector.widgets.funnel import Funnel
from tests.inspector.conftest import build_app, open_screen, settle

SNAPSHOT = "snap-auth-role-mock-0001"


def header(table: FittedTable, key: str) -> str:
    return next(str(c.label) for c in table.columns.values() if c.key.value == key)


async def test_candidates_table_colours_sorts_and_names_probe_rows(sample_store):
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, SnapshotScreen(SNAPSHOT, tab="candidates"))
        screen = app.screen
        assert isinstance(screen, SnapshotScreen)
        table = screen.query_one("#candidate-table", FittedTable)
        assert header(table, "ordinal") == "#↑"
        for row_key in table.rows:
            row = screen.candidate_rows[str(row_key.value)]
            cell = table.get_cell(row_key, "stage")
            assert cell.style == rich_style(app, STAGE_STYLE[row.stage]), row.stage
        assert table.shown_widths["reason"] > table.shown_widths["source_ref"]
        probe = next(key for key, row in screen.candidate_rows.items() if row.from_probe)
        table.move_cursor(row=table.get_row_index(probe))
        await settle(pilot)
        assert "scope probe" in str(screen.query_one("#candidate-detail").render())
        await pilot.press("s")  # final, highest first
        await settle(pilot)
        assert header(table, "final") == "final↓" and header(table, "ordinal") == "#"
        finals = [screen.candidate_rows[str(k.value)].scores.get("final") or -1 for k in table.rows]
        assert finals == sorted(finals, reverse=True)
        await pilot.press("r")
        await settle(pilot)
        assert header(table, "final") == "final↑"
        assert [screen.candidate_rows[str(k.value)].scores.get("final") or -1 for k in table.rows] == sorted(finals)


async def test_a_funnel_stage_filters_the_candidates(sample_store):
    app = build_app(sample_store)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, SnapshotScreen(SNAPSHOT, tab="funnel"))
        screen = app.screen
        funnel = screen.query_one(Funnel)
        assert funnel.has_focus
        target = next(i for i in range(funnel.option_count) if funnel.get_option_at_index(i).id == "step:memory-status")
        funnel.highlighted = target
        await pilot.press("enter")
        await settle(pilot)
        assert screen.query_one(TabbedContent).active == "candidates"
        assert screen.query_one("#candidate-filter", Input).value == "stage:memory-status"
        assert screen.candidate_rows and {r.stage for r in screen.candidate_rows.values()} == {Stage.MEMORY_STATUS}
        await pilot.press("3")
        await settle(pilot)
        funnel.highlighted = 0  # "recalled": every candidate again
        await pilot.press("enter")
        await settle(pilot)
        assert screen.query_one("#candidate-filter", Input).value == ""
        assert len({r.stage for r in screen.candidate_rows.values()}) > 1


async def test_plan_shows_each_sub_querys_hits_text_and_own_terms(sample_store):
    """Item 15: per sub-query, what it recalled (from the snapshot) and its own strongest terms."""
    from scopelens.core.readmodel import ReadModel
    from scopelens.inspector.screens.snapshot import own_terms

    model = ReadModel(str(sample_store))
    try:
        view = model.snapshot(SNAPSHOT)
        rows = model.candidates(SNAPSHOT, limit=1000).rows
    finally:
        model.close()
    recalled = [r for r in rows if not r.from_probe]
    for query in view.plan.sub_queries:
        assert view.sub_query_hits[query.id] == sum(1 for r in recalled if r.source in query.sources)
    assert sum(view.sub_query_hits.values()) == len(recalled)  # the sample's sub-queries share no source
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, SnapshotScreen(SNAPSHOT, tab="plan"))
        table = app.screen.query_one("#plan-table", FittedTable)
        first = view.plan.sub_queries[0]
        assert str(table.get_cell(first.id, "hits")) == str(view.sub_query_hits[first.id])
        detail = str(app.screen.query_one("#plan-detail").render())
        assert first.query_text[:20] in detail and "recalled from its sources" in detail
    shared = first.model_copy(update={"id": "other"})
    assert own_terms(first, [first, shared]) == sorted(first.terms, key=lambda t: (-t.weight, True, t.term))
