"""The drift screen names every class and says what differs besides it: a line range that
shifted, a file changed outside an item's lines, a relabelling, and which root an item is in."""

from __future__ import annotations

from datetime import timedelta

from textual.widgets import DataTable, Static

from scopelens.core.index.sources import SourceClassifier
from scopelens.inspector.screens.drift import DriftScreen
from tests.audit.test_drift_classes import BULK_EDIT, INSERTED_ABOVE_TOTAL, INTENT, PRICING, edited
from tests.inspector.conftest import build_app, open_screen, settle
from tests.support.workspaces import Lab, write

# The doc names two of the anchored symbols, so it is selected beside the code it explains.
DOC = "# Discounts\n\nGold customers get a discount_rate of ten percent, applied to a price by apply_discount.\n"


async def test_shifted_relabelled_and_changed_elsewhere_are_shown(tmp_path):
    lab = Lab(tmp_path)
    root = lab.workspace("a", {"src/pricing.py": PRICING, "docs/discounts.md": DOC})
    lab.index(root, "shop")
    frozen = lab.retriever().retrieve(INTENT, project="shop")
    assert "docs/discounts.md:1-3" in {i.source_ref for i in frozen.snapshot.selected}
    write(root, {"src/pricing.py": edited(INSERTED_ABOVE_TOTAL, BULK_EDIT)})
    lab.clock.advance(timedelta(days=1))
    lab.index(root, "shop", classifier=SourceClassifier().with_globs(["docs/discounts.md"]))
    lab.close()
    app = build_app(tmp_path / "lab.db")
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, DriftScreen(frozen.snapshot_id))
        await pilot.press("r")
        await settle(pilot)
        screen = app.screen
        assert screen.report is not None
        table = screen.query_one("#drift-table", DataTable)
        rows = {str(table.get_row_at(i)[4]): [str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)}
        shifted = rows["src/pricing.py:23-26"]
        assert shifted[:2] == ["~", "shifted"]
        assert "lines 19-22 -> 23-26" in shifted[5] and "file changed outside these lines" in shifted[5]
        assert rows["src/pricing.py:14-16"][1] == "content-changed"
        assert rows["src/pricing.py:9-11"][1] in ("unchanged", "moved")
        assert "file changed outside these lines" in rows["src/pricing.py:9-11"][5]
        relabelled = rows["docs/discounts.md:1-3"]
        assert relabelled[:2] == ["#", "relabelled"] and "doc#1 -> rule#1" in relabelled[5]
        table.move_cursor(row=list(rows).index("src/pricing.py:23-26"))
        await settle(pilot)
        pane = str(screen.query_one("#drift-diff", Static).render())
        assert "the same text at another line range" in pane
