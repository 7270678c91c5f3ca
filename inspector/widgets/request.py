"""What was asked and what the model received: the intent, each sub-query, and the exact block.

The block is shown byte for byte as stored (nonce fences included), as plain text: it is
evidence, never markup, and its hash is re-derived on display (``block_ok``).
"""

from __future__ import annotations

from rich.table import Table as RichTable
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from scopelens.core.readmodel import SnapshotView


def _grid() -> RichTable:
    grid = RichTable.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    return grid


class RequestView(VerticalScroll):
    """The question, its anchors and sub-queries, then the assembled block the model received."""

    def compose(self) -> ComposeResult:
        yield Static("", id="request-intent")
        yield Static("", id="request-queries")
        yield Static("", id="request-block", markup=False)

    def show(self, view: SnapshotView) -> None:
        intent, anchors = view.intent, view.intent.anchors
        grid = _grid()
        rows: list[tuple[str, str]] = [
            ("question", intent.question or "(none)"),
            ("purpose", f"{intent.purpose.value} · asked by the {intent.origin}"),
            ("required", ", ".join(k.value for k in intent.required_evidence) or "-"),
            ("failing test", anchors.failing_test or "-"),
            ("error text", anchors.error_text or "-"),
            ("symbols", ", ".join(anchors.symbols) or "-"),
            ("current files", ", ".join(anchors.current_files) or "-"),
            ("traceback", anchors.traceback or "-"),
        ]
        for label, value in rows:
            grid.add_row(Text(label), Text(value))
        self.query_one("#request-intent", Static).update(grid)
        queries = _grid()
        for query in view.plan.sub_queries:
            queries.add_row(Text(query.id), Text(f"{query.intent.value} · top {query.top_k} · "
                                                 f"{', '.join(s.value for s in query.sources)}", style="dim"))
            queries.add_row(Text(""), Text(query.query_text or "(no text: terms only)"))
        target = self.query_one("#request-queries", Static)
        target.update(queries)
        target.border_title = f"sub-queries ({len(view.plan.sub_queries)}, merged by {view.plan.merge_policy.value})"
        block = self.query_one("#request-block", Static)
        block.update(view.block or "(no block was stored)")
        mark = "✓ hash matches" if view.block_ok else "✗ hash mismatch"
        block.border_title = f"the block the model received · {len(view.block)} chars · {mark}"
        block.set_class(not view.block_ok, "bad-block")
