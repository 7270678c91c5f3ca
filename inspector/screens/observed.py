"""What one model call of an imported agent session had in its context: every item, with the
tool it came through and the call that first had it; the highlighted item's text beside."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import DataTable, Header, Static

from scopelens.core.clock import when
from scopelens.core.readmodel import ObservedCallView, SeenItemView
from scopelens.core.textsafety import listing, short
from scopelens.inspector.actions import bindings_for
from scopelens.inspector.screens.base import InspectorScreen, shows_problems
from scopelens.inspector.theme import rich_style
from scopelens.inspector.widgets.fitted_table import Column, FittedTable
from scopelens.inspector.widgets.footer import KeysFooter

COLUMNS = (
    Column("pos", "#", 4),
    Column("cite", "cite", 11, min_width=8),
    Column("kind", "kind", 14, min_width=9),
    Column("tool", "tool", 10, min_width=6, drop=2),
    Column("source_ref", "source_ref", 40, min_width=16, flex=1),
    Column("seen", "since", 6),
)
"""One line per item the call had in context; "since" is the turn that first had it."""
NEW_STYLE = "bold $legible-success"
"""Items new at this call (the rest came from earlier calls)."""


class ObservedScreen(InspectorScreen):
    """An observed snapshot: the call's whole context, new items marked; n/p step call to call.

    ==========  ==========================================================================
    key         does
    ==========  ==========================================================================
    ``n``/``p`` the session's next or previous call
    ``r``       the counterfactual retrieval of this turn (``import --retrieve``), when there is one
    ``c``       copy the snapshot id
    ==========  ==========================================================================
    """

    SCOPE = "observed"
    PROBLEM_TARGET = "observed-status"
    CSS_PATH = "observed.tcss"
    BINDINGS = bindings_for("observed")
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]  # noqa: RUF012 - Textual declares it per instance

    class Loaded(Message):
        def __init__(self, view: ObservedCallView) -> None:
            super().__init__()
            self.view = view

    def __init__(self, snapshot_id: str) -> None:
        super().__init__()
        self.snapshot_id = snapshot_id
        self.view: ObservedCallView | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"observed snapshot {self.snapshot_id}", id="observed-title", markup=False)
        yield Static("", id="observed-call", markup=False)
        yield Static("", id="observed-counterfactual", markup=False)
        with Horizontal(id="observed-body"):
            yield FittedTable(COLUMNS, id="observed-items", cursor_type="row")
            yield Static("", id="observed-detail", markup=False)
        yield Static("loading…", id="observed-status", classes="status-line", markup=False)
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._fill())
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def load(self) -> None:
        self.post_message(self.Loaded(self.host.model.observed_call(self.snapshot_id)))

    @on(Loaded)
    @shows_problems
    def show(self, message: Loaded) -> None:
        view = self.view = message.view
        self.query_one("#observed-title", Static).update(
            f"{'✓' if view.block_ok else '✗'} observed · call {view.turn} of the {view.format} session "
            f"{view.source_file} · session {view.session_id} · {when(view.created_at)}"
        )
        new = sum(item.new for item in view.items)
        lines = [f"saw {len(view.items)} items (positions {view.visible_from + 1}-{view.visible_to}): "
                 f"{len(view.items) - new} from earlier calls, {new} new at this call"]
        if view.replaced is not None:
            lines.append(f"a compaction before this call replaced positions {view.replaced[0] + 1}-{view.replaced[1]}")
        if view.tool_calls:
            lines.append(f"then called: {listing(view.tool_calls, 3, '; ')}")
        if view.not_recorded:
            lines.append(f"not in the {view.format} log: {listing(view.not_recorded, 2, '; ')}")
        self.query_one("#observed-call", Static).update("\n".join(lines))
        counterfactual = self.query_one("#observed-counterfactual", Static)
        counterfactual.display = view.counterfactual_id is not None
        if view.counterfactual_id is not None:
            shown = " · ".join(f"[{cite}] {ref}" for cite, ref in view.counterfactual_items) or "nothing in scope"
            counterfactual.update(f"scoped retrieval at this turn ({view.counterfactual_id}, never shown to this model; "
                                  f"r opens it): {shown}")
        self._fill()
        table = self.query_one(FittedTable)
        first_new = next((n for n, item in enumerate(view.items) if item.new), None)
        if first_new is not None:
            table.move_cursor(row=first_new, animate=False)
        at = view.turns.index(view.turn) + 1 if view.turn in view.turns else 0
        self.query_one("#observed-status", Static).update(
            f"call {at} of {len(view.turns)} · hash {short(view.content_hash)} · what the agent's log says it saw, "
            "not a retrieval"
        )
        self._show_detail()
        self.refresh_bindings()

    def _fill(self) -> None:
        if self.view is None:
            return
        table = self.query_one(FittedTable)
        row = table.cursor_row
        table.clear()
        style = rich_style(self.app, NEW_STYLE)
        for item in self.view.items:
            since = Text("new", style=style) if item.new else Text(str(item.first_seen))
            # within one session file, its name before every reference says nothing: where in it does
            where = item.source_ref.removeprefix(f"{self.view.source_file}#")
            table.add_row(str(item.position + 1), item.citation_id, item.kind, item.tool or "-", where, since,
                          key=str(item.position))
        if table.row_count:
            table.move_cursor(row=min(row, table.row_count - 1), animate=False)

    def highlighted(self) -> SeenItemView | None:
        key = self.query_one(FittedTable).cursor_key()
        if self.view is None or key is None:
            return None
        return next((item for item in self.view.items if str(item.position) == key), None)

    @on(DataTable.RowHighlighted, "#observed-items")
    def item_highlighted(self) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        item = self.highlighted()
        detail = self.query_one("#observed-detail", Static)
        if item is None:
            detail.update("")
            return
        where = f"{item.source_ref}" + (f" · lines {item.lines}" if item.lines else "")
        head = [f"{'✓' if item.hash_ok else '✗ hash differs ·'} [{item.citation_id}] {where}",
                f"{item.kind}{' via ' + item.tool if item.tool else ''} · {item.ref} · "
                + ("new at this call" if item.new else f"in context since call {item.first_seen}")]
        if item.mentions:
            head.append(f"names: {listing(item.mentions, 6, ', ')}")
        if item.redaction_count:
            head.append(f"{item.redaction_count} secret(s) redacted on import")
        detail.update("\n".join(head) + "\n\n" + item.visible_text)

    # ------------------------------------------------------------------ stepping

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "open_counterfactual":
            return self.view is not None and self.view.counterfactual_id is not None
        if action == "step_call" and self.view is not None:
            index = self.view.turns.index(self.view.turn) + int(str(parameters[0]))
            return 0 <= index < len(self.view.turns) or None
        return True

    def action_step_call(self, step: int) -> None:
        if self.view is None:
            return
        index = self.view.turns.index(self.view.turn) + step
        if not 0 <= index < len(self.view.turns):
            return
        self.snapshot_id = self.host.model.observed_snapshot_at(self.view.session_id, self.view.turns[index])
        self.query_one("#observed-status", Static).update("loading…")
        self.load()

    def action_open_counterfactual(self) -> None:
        """The counterfactual retrieval of this turn, on the snapshot screen (a retrieval in every part)."""
        if self.view is None or self.view.counterfactual_id is None:
            return
        from scopelens.inspector.screens.snapshot import SnapshotScreen

        self.app.push_screen(SnapshotScreen(self.view.counterfactual_id, tab="evidence"))

    def action_copy_id(self) -> None:
        self.host.copy_id(self.snapshot_id)
