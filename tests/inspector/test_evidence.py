"""The Evidence tab numbers visible lines by their original line, and only when that is honest."""

from __future__ import annotations

from textual.widgets import DataTable

from scopelens.core.pipeline.trim import marker
from scopelens.inspector.screens.snapshot import SnapshotScreen
from scopelens.inspector.widgets.evidence import original_line_numbers
from tests.inspector.conftest import build_app, first_snapshot_of, open_screen, settle


def test_lines_are_numbered_from_the_start_of_the_span():
    assert original_line_numbers(["a", "b", "c"], "10-12") == ["10", "11", "12"]


def test_a_trim_marker_skips_the_lines_it_stands_for():
    lines = ["a", "b", marker(3, 9), "j"]
    assert original_line_numbers(lines, "1-10") == ["1", "2", "⋮", "10"]
    assert original_line_numbers(["a", marker(2, 2), "c"], "1-3") == ["1", "⋮", "3"]


def test_no_numbers_when_the_lines_do_not_add_up():
    assert original_line_numbers(["summary of the file"], "1-40") is None  # a summary-only extract
    assert original_line_numbers(["a", marker(5, 9)], "1-9") is None  # the marker does not follow on
    assert original_line_numbers(["a"], "") is None  # not a line-addressed source


async def test_a_trimmed_item_shows_original_numbers_and_the_marker(sample_store):
    snapshot_id = first_snapshot_of(sample_store, "s-flags-budget-trim-0001")
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, SnapshotScreen(snapshot_id, tab="evidence"))
        items = app.screen.query_one("#item-table", DataTable)
        assert app.focused is items  # the active tab's table takes the keys
        trimmed = next(k.value for k in items.rows if items.row_values(k.value)["trim"] != "-")  # type: ignore[attr-defined]
        while items.cursor_key() != trimmed:  # type: ignore[attr-defined]
            await pilot.press("down")
        await settle(pilot)
        body = app.screen.query_one("#evidence-body")
        rendered = ["".join(s.text for s in body.render_line(y)) for y in range(body.size.height)]
        marker_lines = [line for line in rendered if "trimmed …]" in line]
        assert marker_lines and marker_lines[0].lstrip().startswith("⋮ │ [… line")
        assert rendered[0].lstrip().startswith("1 │ ")
