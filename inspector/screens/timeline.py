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
from scopelens.core.vocab import EventType, SnapshotKind
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
LABELS = {
    EventType.SESSION_STARTED: "session",
    EventType.USER_MESSAGE: "user",
    EventType.MODEL_REQUEST: "request",
    EventType.MODEL_RESPONSE: "reply",
    EventType.TOOL_STARTED: "tool run",
    EventType.TOOL_FINISHED: "tool done",
    EventType.RETRIEVAL_SNAPSHOT_CREATED: "snapshot",
}
"""Short names for the event column; the detail pane gives the full event type."""
COLUMNS = (
    Column("turn", "turn", 4),
    Column("seq", "#", 4),
    Column("type", "event", 11),
    Column("summary", "summary", 40, min_width=12, flex=1),
)
OUTPUT_CHARS = 600
"""Characters of a tool's output preview the detail pane shows; more ends in "…"."""
PAGE_TURNS = 100
"""Turns read at a time: an imported session can have thousands (one per model call); the
next page is read when `n` passes the last turn shown, or on `m`."""


class TimelineScreen(InspectorScreen):
    """Events grouped by turn; n/p jump between turns; enter opens a snapshot."""

    SCOPE = "timeline"
    PROBLEM_TARGET = "timeline-status"
    CSS_PATH = "timeline.tcss"
    BINDINGS = bindings_for("timeline")
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]  # noqa: RUF012 - Textual declares it per instance
    """Below 120 columns the event detail goes under the table instead of beside it."""

    class Loaded(Message):
        def __init__(self, session: SessionView, turns: tuple[TurnView, ...], status: VerifyStatus, loaded_to: int) -> None:
            super().__init__()
            self.session = session
            self.turns = turns
            self.status = status
            self.loaded_to = loaded_to

    class MoreLoaded(Message):
        def __init__(self, turns: tuple[TurnView, ...], loaded_to: int, then_step: bool) -> None:
            super().__init__()
            self.turns = turns
            self.loaded_to = loaded_to
            self.then_step = then_step

    def __init__(self, session_id: str, *, seq: int | None = None) -> None:
        """``seq``: the event to put the cursor on once loaded (a reply a citation points to)."""
        super().__init__()
        self.session_id = session_id
        self.focus_seq = seq
        self.turns: tuple[TurnView, ...] = ()
        self.rows: list[tuple[int, int]] = []  # (turn, seq) per table row
        self.loaded_to = 0
        """Turns below this are shown; the session has ``last_turn`` (its last)."""
        self.last_turn = 0
        self.status: VerifyStatus | None = None

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
        session = model.session(self.session_id)
        upto = PAGE_TURNS
        if self.focus_seq is not None:  # opened on an event: show the turns up to it
            upto = max(upto, (model.turn_of_event(self.session_id, self.focus_seq) or 0) + 1)
        upto = min(upto, session.turns + 1)
        self.post_message(self.Loaded(session, model.timeline(self.session_id, turns=(0, upto)),
                                      model.verify_status(self.session_id), upto))

    @work(thread=True, exclusive=True, exit_on_error=False, group="more")
    def load_more(self, then_step: bool = False) -> None:
        upto = min(self.loaded_to + PAGE_TURNS, self.last_turn + 1)
        turns = self.host.model.timeline(self.session_id, turns=(self.loaded_to, upto))
        self.post_message(self.MoreLoaded(turns, upto, then_step))

    @on(MoreLoaded)
    @shows_problems
    def show_more(self, message: MoreLoaded) -> None:
        if message.loaded_to <= self.loaded_to:
            return
        self.turns = (*self.turns, *message.turns)
        self.loaded_to = message.loaded_to
        self._add_rows(message.turns)
        self._show_status()
        if message.then_step:
            self._move_turn(1)
        self.refresh_bindings()

    def _add_rows(self, turns: tuple[TurnView, ...]) -> None:
        table = self.query_one(DataTable)
        for turn in turns:
            for event in turn.events:
                table.add_row(str(turn.turn), str(event.seq), f"{ICONS[event.type]} {LABELS[event.type]}",
                              event.summary, key=f"{event.seq}")
                self.rows.append((turn.turn, event.seq))

    def _show_status(self) -> None:
        status = self.status
        if status is None:
            return
        problems = listing(status.problems, 2, "; ")
        shown = (f"{turn_count(t.turn for t in self.turns)} turns · {len(self.rows)} events" if self.loaded_to > self.last_turn
                 else f"turns 0-{self.loaded_to - 1} of {self.last_turn} · {len(self.rows)} events shown (m: more)")
        self.query_one("#timeline-status", Static).update(
            f"{shown} · verify {status.state}" + (f": {problems}" if problems else "")
        )

    @on(Loaded)
    @shows_problems
    def show(self, message: Loaded) -> None:
        self.turns = message.turns
        self.loaded_to = message.loaded_to
        self.status = message.status
        session = message.session
        self.last_turn = session.turns
        mark = message.status.mark
        self.query_one("#timeline-title", Static).update(
            f"{mark} session {session.id} · project {session.project} · branch {session.branch or '-'} · {session.title}"
        )
        if message.status.state == "problem":
            self.query_one("#timeline-title", Static).add_class("bad-mark")
        table = self.query_one(DataTable)
        table.clear()
        self.rows = []
        self._add_rows(self.turns)
        self._show_status()
        if self.focus_seq is not None:
            self.move_to_event(self.focus_seq)
        self._show_detail()

    def move_to_event(self, seq: int) -> None:
        """Put the cursor on event ``seq`` (a no-op for a seq this session does not have)."""
        self.focus_seq = seq
        index = next((i for i, (_turn, s) in enumerate(self.rows) if s == seq), None)
        if index is not None:
            self.query_one(DataTable).move_cursor(row=index, animate=False)

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
        self.refresh_bindings()

    def action_load_more(self) -> None:
        if self.loaded_to <= self.last_turn:
            self.load_more()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """j (to the cited items) is offered only on an event that cites something; m only
        while turns remain unread."""
        if action == "load_more":
            return self.is_mounted and self.loaded_to <= self.last_turn
        if action == "jump_to_citations":
            event = self._event_at_cursor() if self.is_mounted else None
            return event is not None and bool(event.cited_ids)
        return True

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
        if event.command:
            lines.append(f"call: {event.command}")
        if event.context_hash:
            mark = {True: "✓ matches its blocks", False: "✗ does not match its blocks", None: ""}[event.context_ok]
            lines.append(f"context hash: {short(event.context_hash, 16)} {mark}".rstrip())
        if event.cited_ids:
            marks = ", ".join(f"{c} {'✗' if c in event.unsupported_ids else '✓'}" for c in event.cited_ids)
            lines.append(f"cites: {marks}  (j jumps to them)")
            if event.unsupported_ids:
                lines.append(f"✗ not shown to the model in this turn: {', '.join(event.unsupported_ids)}")
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
        if index == len(turns) and self.loaded_to <= self.last_turn:
            self.load_more(then_step=True)  # past the last turn shown: read the next page, then step
            return
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
        if self.host.model.snapshot_kind(snapshot_ids[0]) == SnapshotKind.OBSERVED:
            from scopelens.inspector.screens.observed import ObservedScreen

            self.app.push_screen(ObservedScreen(snapshot_ids[0]))
            return
        from scopelens.inspector.screens.snapshot import SnapshotScreen

        self.app.push_screen(SnapshotScreen(snapshot_ids[0]))

    def action_jump_to_citations(self) -> None:
        """From a reply to the items it cites: the turn's snapshot, Citations tab, first cited id."""
        event = self._event_at_cursor()
        if event is None or not event.cited_ids:
            self.notify("This event cites nothing: pick a model response that cites items.", timeout=3)
            return
        snapshot_ids = next((t.snapshot_ids for t in self.turns if t.turn == event.turn and t.snapshot_ids), ())
        if not snapshot_ids:
            self.notify("No snapshot in this turn: every citation of this reply is unsupported.", severity="warning")
            return
        from scopelens.inspector.screens.snapshot import SnapshotScreen

        self.app.push_screen(SnapshotScreen(snapshot_ids[0], tab="citations",
                                            citation=(f"{self.session_id}#{event.seq}", event.cited_ids[0])))

    def action_session_drift(self) -> None:
        from scopelens.inspector.screens.drift import SessionDriftScreen

        self.app.push_screen(SessionDriftScreen(self.session_id, run=True))

    def action_copy_id(self) -> None:
        self.host.copy_id(self.session_id)
