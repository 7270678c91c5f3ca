"""Why not? Type a source_ref, path, symbol or text; get the stage where it dropped out, every
row that matches in its stage's colour, and from each match its row on the snapshot screen."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.content import Content
from textual.message import Message
from textual.widgets import DataTable, Header, Input, RadioButton, RadioSet, Static
from textual.worker import get_current_worker

from scopelens.core.errors import ScopelensError
from scopelens.core.readmodel import (
    QUERY_KINDS,
    InputKind,
    QueryKind,
    WhyNotAnswer,
    WhyNotMatch,
    detect_kind,
    query_kind,
)
from scopelens.core.textsafety import listing
from scopelens.core.vocab import Stage
from scopelens.inspector.actions import bindings_for
from scopelens.inspector.screens.base import InspectorScreen, shows_problems
from scopelens.inspector.screens.snapshot import SnapshotScreen
from scopelens.inspector.theme import STAGE_STYLE, rich_style
from scopelens.inspector.widgets.fitted_table import Column, FittedTable
from scopelens.inspector.widgets.footer import KeysFooter
from scopelens.inspector.widgets.text_input import TextInput

MATCH_COLUMNS = (
    Column("row", "#", 4),
    Column("stage", "stage", 13),
    Column("source_ref", "source_ref", 40, min_width=18, flex=2),
    Column("cite", "cite", 10, min_width=8, drop=1),
    Column("reason", "reason", 40, min_width=20, flex=1),
)
"""One line per match; the line under the table shows the highlighted one in full."""
REVEAL_TIMEOUT = 10.0
"""Seconds to wait for the snapshot screen to load the row a match opens."""


async def _once(condition: Callable[[], bool], timeout: float = REVEAL_TIMEOUT) -> bool:
    """Whether ``condition`` comes to hold while the snapshot screen's own workers load what it
    shows (checked each frame, never blocking the UI), within ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(1 / 60)
    return True


class WhyNotScreen(InspectorScreen):
    """One question at a time against one snapshot, its kind detected unless one is chosen.

    ==============  ==============================================================
    key             does
    ==============  ==============================================================
    ``enter``       in the field: ask; on a match: open its row on the snapshot
    ``tab``         from the field to the matches (``shift+tab``: to the kinds)
    ==============  ==============================================================
    """

    SCOPE = "whynot"
    PROBLEM_TARGET = "whynot-answer"
    CSS_PATH = "whynot.tcss"
    BINDINGS = bindings_for("whynot")

    class Answered(Message):
        def __init__(self, answer: WhyNotAnswer | None, error: str | None, asked_as: str) -> None:
            super().__init__()
            self.answer = answer
            self.error = error
            self.asked_as = asked_as

    def __init__(self, snapshot_id: str, prefill: str = "") -> None:
        """``prefill``: what the field starts with (the snapshot screen's highlighted row)."""
        super().__init__()
        self.snapshot_id = snapshot_id
        self.prefill = prefill
        self.answer: WhyNotAnswer | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"why was it not shown? · snapshot {self.snapshot_id}", id="whynot-title", markup=False)
        with RadioSet(id="whynot-kind"):
            yield RadioButton("detect", value=True, id="kind-detect")
            for kind in QUERY_KINDS:
                yield RadioButton(kind, id=f"kind-{kind}")
        yield TextInput(
            value=self.prefill, placeholder="e.g. src/auth/session.ts:1-33, src/auth, createUserMock, or a line of text",
            id="whynot-input",
        )
        yield Static("", id="whynot-detected", markup=False)
        start = ("Press enter to ask about it, or change it first." if self.prefill else
                 "Type what you expected the model to see, then press enter.")
        yield Static(start, id="whynot-answer", classes="empty-state", markup=False)
        yield Static("", id="whynot-matches-label", markup=False)
        yield FittedTable(MATCH_COLUMNS, id="whynot-matches", cursor_type="row")
        yield Static("", id="whynot-match-detail", classes="detail-line", markup=False)
        yield KeysFooter()

    def on_mount(self) -> None:
        self._show_matches(None)
        self._show_detected()
        self.query_one("#whynot-input", Input).focus()
        self.app.theme_changed_signal.subscribe(self, self.theme_changed)

    # ------------------------------------------------------------------ the question

    def chosen(self) -> QueryKind | None:
        """The kind chosen above the field; None: detect it."""
        pressed = self.query_one(RadioSet).pressed_button
        name = str(pressed.id).removeprefix("kind-") if pressed is not None else "detect"
        return next((kind for kind in QUERY_KINDS if kind == name), None)

    def value(self) -> str:
        return self.query_one("#whynot-input", Input).value.strip()

    def _show_detected(self) -> None:
        value, chosen = self.value(), self.chosen()
        detected: InputKind | None = detect_kind(value) if value else None
        line = self.query_one("#whynot-detected", Static)
        if chosen is not None:
            line.update(f"asked as: {chosen} (chosen" + (f"; detected: {detected})" if detected else ")"))
        elif detected is None:
            line.update("what you type is detected as a source_ref, a path, a symbol or text · shift+tab: choose")
        else:
            looked_up = " (looked up as a path)" if detected == "source_ref" else ""
            line.update(f"detected: {detected}{looked_up} · shift+tab: ask as another kind")

    @on(Input.Changed, "#whynot-input")
    def typed(self) -> None:
        self._show_detected()

    @on(RadioSet.Changed, "#whynot-kind")
    def kind_chosen(self) -> None:
        self._show_detected()
        if self.value():
            self.action_ask()

    @on(Input.Submitted, "#whynot-input")
    def submitted(self) -> None:
        self.action_ask()

    def action_ask(self) -> None:
        value = self.value()
        if not value:
            self.answer = None
            self._show_matches(None)
            target = self.query_one("#whynot-answer", Static)
            target.remove_class("bad-mark")
            target.add_class("empty-state")
            target.update("Nothing to ask: type a source_ref, a path, a symbol or some text, then press enter.")
            return
        chosen = self.chosen()
        detected = detect_kind(value)
        kind = chosen or query_kind(detected)
        self.ask(kind, value, chosen or detected)

    @work(thread=True, exclusive=True, exit_on_error=False)
    def ask(self, kind: QueryKind, value: str, asked_as: str) -> None:
        try:
            answer = self.host.model.why_not(self.snapshot_id, kind, value)
        except ScopelensError as exc:
            self.post_message(self.Answered(None, str(exc), asked_as))
            return
        if not get_current_worker().is_cancelled:  # a newer question replaced it while it ran
            self.post_message(self.Answered(answer, None, asked_as))

    # ------------------------------------------------------------------ the answer

    @on(Answered)
    @shows_problems
    def show(self, message: Answered) -> None:
        target = self.query_one("#whynot-answer", Static)
        target.remove_class("empty-state")
        target.set_class(message.error is not None or message.answer is None, "bad-mark")
        self.answer = message.answer
        self._show_matches(message.answer)
        if message.error or message.answer is None:
            target.update(f"✗ {message.error}")
            return
        target.update(answer_text(message.answer, message.asked_as))

    def _show_matches(self, answer: WhyNotAnswer | None) -> None:
        table = self.query_one("#whynot-matches", FittedTable)
        label = self.query_one("#whynot-matches-label", Static)
        matches = answer.matches if answer is not None else ()
        self._fill_matches(matches)
        for widget in (table, self.query_one("#whynot-match-detail")):
            widget.display = bool(matches)
        label.display = answer is not None
        if answer is not None:
            count = f"{len(matches)} match" + ("" if len(matches) == 1 else "es")
            label.update(f"{count} · tab, then enter: open its row on the snapshot screen" if matches else
                         "no row of the snapshot or chunk of its project's index matches")
        self._show_match()

    def _fill_matches(self, matches: tuple[WhyNotMatch, ...]) -> None:
        table = self.query_one("#whynot-matches", FittedTable)
        table.clear()
        styles = {stage: rich_style(self.app, spec) for stage, spec in STAGE_STYLE.items()}
        for index, match in enumerate(matches):
            source = match.source_ref + (" (probe)" if match.from_probe else "")
            table.add_row(f"#{match.ordinal + 1}" if match.ordinal is not None else "-",
                          Text(match.stage.value, style=styles[match.stage]), source, match.citation_id or "-",
                          match.reason, key=str(index))

    def theme_changed(self, _theme: object) -> None:
        """Stage colours are resolved into the cells: draw them again in the new theme's."""
        if self.answer is not None:
            table = self.query_one("#whynot-matches", FittedTable)
            row = table.cursor_row
            self._fill_matches(self.answer.matches)
            if table.row_count:
                table.move_cursor(row=min(row, table.row_count - 1), animate=False)

    def highlighted(self) -> WhyNotMatch | None:
        key = self.query_one("#whynot-matches", FittedTable).cursor_key()
        if self.answer is None or key is None:
            return None
        return self.answer.matches[int(key)]

    def _show_match(self) -> None:
        """The highlighted match in full, whatever the width."""
        match = self.highlighted()
        detail = self.query_one("#whynot-match-detail", Static)
        if match is None:
            detail.update("")
            return
        row = f"candidate #{match.ordinal + 1} · " if match.ordinal is not None else "no row records it · "
        cited = f" [{match.citation_id}]" if match.citation_id else ""
        probe = " (recorded by the scope probe)" if match.from_probe else ""
        detail.update(f"{row}{match.source_ref}{cited}{probe} · {match.stage.value}: {match.reason}")

    @on(DataTable.RowHighlighted, "#whynot-matches")
    def match_highlighted(self) -> None:
        self._show_match()

    # ------------------------------------------------------------------ opening a match's row

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "open_match":  # enter opens a match only from the matches (in the field it asks)
            return self.focused is self.query_one("#whynot-matches") and self.highlighted() is not None
        return True

    @on(DataTable.RowSelected, "#whynot-matches")
    def match_selected(self) -> None:
        self.action_open_match()

    def action_open_match(self) -> None:
        match = self.highlighted()
        if match is None:
            return
        if match.ordinal is None:
            where = ("outside the snapshot's scope" if match.stage == Stage.OUT_OF_SCOPE
                     else "no sub-query returned it")
            self.notify(f"No row of this snapshot records {match.source_ref}: {where}.", timeout=4)
            return
        self.app.run_worker(self._reveal(match), group="whynot-reveal", exclusive=True, exit_on_error=False)

    def _origin(self) -> SnapshotScreen | None:
        """The snapshot screen this form was opened from, when it is the one below."""
        stack = self.app.screen_stack
        below = stack[-2] if len(stack) >= 2 and stack[-1] is self else None
        return below if isinstance(below, SnapshotScreen) and below.snapshot_id == self.snapshot_id else None

    async def _reveal(self, match: WhyNotMatch) -> None:
        """Back to the snapshot screen (a new one when the form was opened alone) with the match's
        row highlighted: a shown item on Evidence, any other row on Candidates. A candidate the
        list has not loaded (a filter hides it, or it is on a later page) is found by filtering
        the candidates by its source_ref."""
        assert match.ordinal is not None
        app = self.app
        tab = "evidence" if match.citation_id else "candidates"
        key = str(match.ordinal)
        snapshot = self._origin()
        if snapshot is not None:
            await app.pop_screen()
            snapshot.action_show_tab(tab)
        else:
            snapshot = SnapshotScreen(self.snapshot_id, tab=tab)
            if tab == "candidates":
                snapshot.filter_text = match.source_ref  # its first page of candidates is then the row's
            await app.push_screen(snapshot)
        if tab == "evidence":
            citation = match.citation_id
            if await _once(lambda: snapshot.view is not None) and snapshot.view is not None and any(
                item.citation_id == citation for item in snapshot.view.items
            ):
                snapshot.jump_to(str(citation))
            return
        field = snapshot.query_one("#candidate-filter", Input)
        if snapshot.filter_text == match.source_ref and field.value != match.source_ref:
            with field.prevent(Input.Changed):  # the filter it opened with: show it, without reloading
                field.value = match.source_ref
        elif key not in snapshot.candidate_rows:
            field.value = match.source_ref  # the screen reloads its candidates for it
        if not await _once(lambda: key in snapshot.candidate_rows):
            app.notify(f"Candidate #{match.ordinal + 1} did not load.", severity="warning")
            return
        table = snapshot.query_one("#candidate-table", FittedTable)
        table.move_cursor(row=table.get_row_index(key))
        table.focus()


def answer_text(answer: WhyNotAnswer, asked_as: str) -> Content:
    """The answer: its stage in the stage's colour, the summary, then what explains it."""
    lines: list[Content] = [
        Content.assemble("stage: ", (answer.stage.value, STAGE_STYLE[answer.stage]), f" · asked as {asked_as}"),
        Content(answer.summary),
    ]
    if answer.trim_range is not None:
        t = answer.trim_range
        lines.append(Content(f"trimmed: lines {t.start_line}-{t.end_line} (chars {t.start_char}-{t.end_char})"))
    if answer.sub_queries:
        lines.append(Content("sub-queries that ran:"))
        for q in answer.sub_queries:
            rank = f" · its best chunk would rank {q.would_be_rank}" if q.would_be_rank else ""
            lines.append(Content(f"  {q.id} · {q.intent} · top {q.top_k}{rank}"))
    if answer.missing_terms:
        lines.append(Content(f"its best chunk {answer.best_chunk} lacks: {listing(answer.missing_terms, 12)}"))
    return Content("\n").join(lines)
