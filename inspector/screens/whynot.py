"""Why not? Type a path, symbol or text; get the stage where it dropped out, with evidence."""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.message import Message
from textual.widgets import Header, Input, RadioButton, RadioSet, Static

from scopelens.core.errors import ScopelensError
from scopelens.core.readmodel import QUERY_KINDS, QueryKind, WhyNotAnswer
from scopelens.core.textsafety import listing
from scopelens.inspector.actions import bindings_for
from scopelens.inspector.screens.base import InspectorScreen, shows_problems
from scopelens.inspector.widgets.footer import KeysFooter
from scopelens.inspector.widgets.text_input import TextInput


class WhyNotScreen(InspectorScreen):
    """One question at a time against one snapshot."""

    SCOPE = "whynot"
    PROBLEM_TARGET = "whynot-answer"
    CSS_PATH = "whynot.tcss"
    BINDINGS = bindings_for("whynot")

    class Answered(Message):
        def __init__(self, answer: WhyNotAnswer | None, error: str | None) -> None:
            super().__init__()
            self.answer = answer
            self.error = error

    def __init__(self, snapshot_id: str) -> None:
        super().__init__()
        self.snapshot_id = snapshot_id

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"why was it not shown? · snapshot {self.snapshot_id}", id="whynot-title")
        with RadioSet(id="whynot-kind"):
            yield RadioButton("path", value=True, id="kind-path")
            yield RadioButton("symbol", id="kind-symbol")
            yield RadioButton("text", id="kind-text")
        yield TextInput(placeholder="e.g. src/auth/session.ts, createUserMock, or a line of text", id="whynot-input")
        yield Static(
            "Type what you expected the model to see, then press enter.", id="whynot-answer", classes="empty-state", markup=False
        )
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def kind(self) -> QueryKind:
        pressed = self.query_one(RadioSet).pressed_button
        name = str(pressed.id).removeprefix("kind-") if pressed else "path"
        return next((kind for kind in QUERY_KINDS if kind == name), "path")

    @on(Input.Submitted, "#whynot-input")
    def submitted(self) -> None:
        self.action_ask()

    def action_ask(self) -> None:
        value = self.query_one(Input).value.strip()
        if value:
            self.ask(self.kind(), value)

    @work(thread=True, exclusive=True, exit_on_error=False)
    def ask(self, kind: QueryKind, value: str) -> None:
        try:
            answer = self.host.model.why_not(self.snapshot_id, kind, value)
        except ScopelensError as exc:
            self.post_message(self.Answered(None, str(exc)))
            return
        self.post_message(self.Answered(answer, None))

    @on(Answered)
    @shows_problems
    def show(self, message: Answered) -> None:
        target = self.query_one("#whynot-answer", Static)
        target.remove_class("empty-state")
        if message.error or message.answer is None:
            target.update(f"✗ {message.error}")
            return
        answer = message.answer
        lines = [f"stage: {answer.stage.value}", "", answer.summary]
        if answer.rejection is not None:
            r = answer.rejection
            lines += ["", f"rejection row: {r.source_ref} · {r.stage.value} · {r.reason}"
                      + (" · recorded by the scope probe" if r.from_probe else "")]
        if answer.trim_range is not None:
            t = answer.trim_range
            lines += ["", f"trimmed: lines {t.start_line}-{t.end_line} (chars {t.start_char}-{t.end_char})"]
        if answer.sub_queries:
            lines += ["", "sub-queries that ran:"] + [f"  {q.id} · {q.intent} · top {q.top_k}" for q in answer.sub_queries]
        if answer.missing_terms:
            lines += ["", f"its best chunk {answer.best_chunk} lacks: {listing(answer.missing_terms, 12)}"]
        target.update("\n".join(lines))
