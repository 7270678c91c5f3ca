"""A session, turn by turn: every event, with the snapshot and citation facts it carries."""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import DataTable, Header, Static

from scopelens.core.clock import when
from scopelens.core.readmodel import EventView, SessionView, TurnView, VerifyStatus, turn_count
from scopelens.core.textsafety import clip, listing, short
from scopelens.core.vocab import EventType
from scopelens.inspector.actions import bindings_for
from scopelens.inspector.screens.base import InspectorScreen, shows_problems
from scopelens.inspector.widgets.fitted_table import Column, FittedTable
from scopelens.inspector.widgets.footer import KeysFooter

ICONS = {
    EventType.SESSION_STARTED: "●",
    EventType.USER_MESSAGE: "»",
    EventType.MODEL_REQUEST: "→",
    EventType.MODEL_RESPONSE: "←",
    EventType.TOOL_STARTED: "⚙",
    EventType.TOOL_FINISHED: "⚙",
    EventType.RETRIEVAL_SNAPSHOT_CREATED: "▣",
}
COLUMNS = (
    Column("turn", "turn", 4),
    Column("seq", "#", 4),
    Column("type", "event", 28, min_width=16),
    Column("summary", "summary", 40, min_width=12, flex=1),
)
OUTPUT_CHARS = 600
"""Characters of a tool's output preview the detail pane shows; more ends in "…"."""


class TimelineScreen(InspectorScreen):
    """Events grouped by turn; n/p jump between turns; enter opens a snapshot."""

    SCOPE = "timeline"
    PROBLEM_TARGET = "timeline-status"
    CSS_PATH = "timeline.tcss"
    BINDINGS = bindings_for("timeline")
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]  # noqa: RUF012 - Textual declares it per instance
    """Below 120 columns the event detail goes under the table instead of beside it."""

    class Loaded(Message):
        def __init__(self, session: SessionView, turns: tuple[TurnView, ...], status: VerifyStatus) -> None:
            super().__init__()
            self.session = session
            self.turns = turns
            self.status = status

    def __init__(self, session_id: str) -> None:
        super().__init__()
        self.session_id = session_id
        self.turns: tuple[TurnView, ...] = ()
        self.rows: list[tuple[int, int]] = []  # (turn, seq) per table row

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"session {self.session_id}", id="timeline-title", markup=False)
        with Horizontal(id="timeline-body"):
            yield FittedTable(COLUMNS, id="events", cursor_type="row")
            yield Static("", id="event-detail", markup=False)
        yield Static("loading…", id="timeline-status", classes="status-line", markup=False)
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def load(self) -> None:
        model = self.host.model
        self.post_message(self.Loaded(model.session(self.session_id), model.timeline(self.session_id),
                                      model.verify_status(self.session_id)))

    @on(Loaded)
    @shows_problems
    def show(self, message: Loaded) -> None:
        self.turns = message.turns
        session = message.session
        mark = message.status.mark
        self.query_one("#timeline-title", Static).update(
            f"{mark} session {session.id} · project {session.project} · branch {session.branch or '-'} · {session.title}"
        )
        if message.status.state == "problem":
            self.query_one("#timeline-title", Static).add_class("bad-mark")
        table = self.query_one(DataTable)
        table.clear()
        self.rows = []
        for turn in self.turns:
            for event in turn.events:
                table.add_row(str(turn.turn), str(event.seq), f"{ICONS[event.type]} {event.type.value}",
                              event.summary, key=f"{event.seq}")
                self.rows.append((turn.turn, event.seq))
        problems = listing(message.status.problems, 2, "; ")
        self.query_one("#timeline-status", Static).update(
            f"{turn_count(t.turn for t in self.turns)} turns · {len(self.rows)} events · verify {message.status.state}"
            + (f": {problems}" if problems else "")
        )
        self._show_detail()

    def _event_at_cursor(self) -> EventView | None:
        table = self.query_one(DataTable)
        if not self.rows:
            return None
        _turn_number, seq = self.rows[min(table.cursor_row, len(self.rows) - 1)]
        for turn in self.turns:
            for event in turn.events:
                if event.seq == seq:
                    return event
        return None

    @on(DataTable.RowHighlighted, "#events")
    def highlighted(self) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        event = self._event_at_cursor()
        detail = self.query_one("#event-detail", Static)
        if event is None:
            detail.update("This session has no events.")
            return
        lines = [f"{event.type.value}  #{event.seq}  turn {event.turn}", f"at {when(event.at)}", ""]
        if event.text:
            lines += [event.text, ""]
        if event.snapshot_ids:
            lines.append("snapshots: " + ", ".join(event.snapshot_ids) + "  (enter opens)")
        if event.context_hash:
            lines.append(f"context hash: {short(event.context_hash, 16)}")
        if event.cited_ids:
            lines.append("cites: " + ", ".join(event.cited_ids))
        if event.tool_output:
            lines += ["output:", clip(event.tool_output, OUTPUT_CHARS, one_line=False)]
        detail.update("\n".join(lines))

    def _move_turn(self, step: int) -> None:
        if not self.rows:
            return
        table = self.query_one(DataTable)
        current_turn = self.rows[table.cursor_row][0]
        turns = sorted({t for t, _ in self.rows})
        index = turns.index(current_turn) + step
        if 0 <= index < len(turns):
            target = next(i for i, (t, _) in enumerate(self.rows) if t == turns[index])
            table.move_cursor(row=target)

    def action_next_turn(self) -> None:
        self._move_turn(1)

    def action_prev_turn(self) -> None:
        self._move_turn(-1)

    @on(DataTable.RowSelected, "#events")
    def selected(self) -> None:
        self.action_open_snapshot()

    def action_open_snapshot(self) -> None:
        event = self._event_at_cursor()
        if event is None:
            return
        snapshot_ids = event.snapshot_ids or next(
            (t.snapshot_ids for t in self.turns if t.turn == event.turn and t.snapshot_ids), ()
        )
        if not snapshot_ids:
            self.notify("No snapshot in this turn.", timeout=3)
            return
        from scopelens.inspector.screens.snapshot import SnapshotScreen

        self.app.push_screen(SnapshotScreen(snapshot_ids[0]))

    def action_session_drift(self) -> None:
        from scopelens.inspector.screens.drift import SessionDriftScreen

        self.app.push_screen(SessionDriftScreen(self.session_id, run=True))

    def action_copy_id(self) -> None:
        self.host.copy_id(self.session_id)
