"""Findings: what went wrong in the recorded sessions (which turn, and how), each leading to it."""

from __future__ import annotations

from collections import Counter
from pathlib import PurePath

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.message import Message
from textual.widgets import DataTable, Header, Static

from scopelens.core.readmodel import FindingsView, FindingView
from scopelens.core.vocab import Outcome
from scopelens.inspector.actions import ACTIONS, bindings_for, effective_key, key_label
from scopelens.inspector.screens.base import InspectorScreen, shows_problems
from scopelens.inspector.theme import rich_style
from scopelens.inspector.widgets.fitted_table import Column, FittedTable
from scopelens.inspector.widgets.footer import KeysFooter

OUTCOME_STYLE: dict[Outcome, str] = {
    Outcome.OCCURRED: "bold $legible-error",
    Outcome.PREVENTED: "$legible-success",
    Outcome.DETECTED: "$legible-warning",
}
"""Reached the model (red), withheld by the engine (green), exposed by the record (yellow):
theme variables that reach WCAG AA in both themes (inspector/theme.py)."""
COLUMNS = (
    Column("outcome", "outcome", 9),
    Column("kind", "kind", 26, min_width=18),
    Column("session", "session", 27, drop=1),
    Column("turn", "turn", 4),
    Column("where", "source_ref [cite]", 36, min_width=16, flex=1, short="where"),
    Column("explanation", "explanation", 40, min_width=30, flex=2, drop=2),
)
"""Narrow terminals hide the explanation, then the session (whose ids are not cut); the lines
under the table show the highlighted finding in full."""
LEADS_TO = {
    "citation": "the reply's citation on the snapshot's Citations tab",
    "item": "the item on the snapshot's Evidence tab",
    "candidate": "its row on the snapshot's Candidates tab",
}
OPEN, TURN = (next(a for a in ACTIONS if a.id == name) for name in ("findings.open", "findings.turn"))
WHERE_FINDINGS_COME_FROM = (
    "Findings come from recording session scripts: `scopelens demo` records the sample sessions into its "
    "own store and keeps what went wrong in each turn in demo.json beside demo.db, where this screen "
    "reads them; `scopelens record SCRIPT` prints them."
)


class FindingsScreen(InspectorScreen):
    """Every finding recorded with this store's sessions, turn by turn, in its outcome's colour.

    ==========  ==========================================================================
    key         does
    ==========  ==========================================================================
    ``enter``   open what the finding is about: a citation, an item, a withheld row, or the event
    ``t``       open the finding's turn in its session's timeline
    ==========  ==========================================================================
    """

    SCOPE = "findings"
    PROBLEM_TARGET = "findings-status"
    CSS_PATH = "findings.tcss"
    BINDINGS = bindings_for("findings")

    class Loaded(Message):
        def __init__(self, view: FindingsView) -> None:
            super().__init__()
            self.view = view

    def __init__(self) -> None:
        super().__init__()
        self.view: FindingsView | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("findings: which turn went wrong, and how", id="findings-title", markup=False)
        yield FittedTable(COLUMNS, id="findings", cursor_type="row", zebra_stripes=True)
        yield Static("", id="finding-detail", classes="detail-line", markup=False)
        yield Static("", id="findings-empty", classes="empty-state", markup=False)
        yield Static("loading…", id="findings-status", classes="status-line", markup=False)
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#findings-empty").display = False
        self.query_one(DataTable).focus()
        self.app.theme_changed_signal.subscribe(self, self.theme_changed)
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def load(self) -> None:
        self.post_message(self.Loaded(self.host.model.findings()))

    @on(Loaded)
    @shows_problems
    def show(self, message: Loaded) -> None:
        view = self.view = message.view
        self._fill(view.findings)
        status = self.query_one("#findings-status", Static)
        empty = self.query_one("#findings-empty", Static)
        title = self.query_one("#findings-title", Static)
        if view.stamp is not None:
            title.update(f"findings: which turn went wrong, and how · from {PurePath(view.stamp).name} beside this store")
        if view.findings:
            outcomes = Counter(v.finding.outcome for v in view.findings)
            counts = ", ".join(f"{outcomes[o]} {o.value}" for o in Outcome if outcomes[o])
            sessions = len({v.finding.session_id for v in view.findings})
            status.update(f"{_count(len(view.findings))} in {sessions} session{'s' * (sessions != 1)}: {counts}")
        else:
            status.update("no findings")
            empty.update(f"✗ {view.problem}\n\n{WHERE_FINDINGS_COME_FROM}" if view.problem else
                         f"No findings are recorded for this store.\n\n{WHERE_FINDINGS_COME_FROM}")
            empty.set_class(view.problem is not None, "bad-mark")
        for widget in (self.query_one(DataTable), self.query_one("#finding-detail")):
            widget.display = bool(view.findings)
        empty.display = not view.findings
        self._show_detail()
        self.refresh_bindings()

    def _fill(self, findings: tuple[FindingView, ...]) -> None:
        table = self.query_one(FittedTable)
        table.clear()
        styles = {outcome: rich_style(self.app, spec) for outcome, spec in OUTCOME_STYLE.items()}
        for index, view in enumerate(findings):
            finding = view.finding
            table.add_row(Text(finding.outcome.value, style=styles[finding.outcome]), finding.kind.value,
                          finding.session_id, str(finding.turn), _where(view), finding.explanation, key=str(index))

    def theme_changed(self, _theme: object) -> None:
        """Outcome colours are resolved into the cells: draw them again in the new theme's."""
        if self.view is not None:
            table = self.query_one(FittedTable)
            row = table.cursor_row
            self._fill(self.view.findings)
            if table.row_count:
                table.move_cursor(row=min(row, table.row_count - 1), animate=False)

    def highlighted(self) -> FindingView | None:
        key = self.query_one(FittedTable).cursor_key()
        if self.view is None or key is None:
            return None
        return self.view.findings[int(key)]

    def _show_detail(self) -> None:
        """The highlighted finding in full, and where enter leads, whatever the width."""
        view = self.highlighted()
        detail = self.query_one("#finding-detail", Static)
        if view is None:
            detail.update("")
            return
        finding = view.finding
        where = " · ".join(part for part in (finding.snapshot_id, _where(view)) if part and part != "-")
        head = f"{finding.outcome.value} · {finding.kind.value} · {finding.session_id} turn {finding.turn}"
        keymap = self.host.keymap
        enter, turn = (key_label(effective_key(action, keymap)) for action in (OPEN, TURN))
        detail.update(f"{head}{' · ' + where if where else ''}\n{finding.explanation}\n"
                      f"{enter}: {_leads_to(view)} · {turn}: the turn in the timeline")

    @on(DataTable.RowHighlighted, "#findings")
    def finding_highlighted(self) -> None:
        self._show_detail()

    # ------------------------------------------------------------------ opening

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """enter and t are offered only when there is a finding to open."""
        if action in ("open_finding", "open_turn"):
            return self.is_mounted and self.highlighted() is not None
        return True

    @on(DataTable.RowSelected, "#findings")
    def finding_selected(self) -> None:
        self.action_open_finding()

    def action_open_finding(self) -> None:
        """Where the finding is seen best: the snapshot's citation, item or withheld row, else
        the event in the timeline (FindingView.opens says which)."""
        view = self.highlighted()
        if view is None:
            return
        finding = view.finding
        from scopelens.inspector.screens.snapshot import SnapshotScreen

        if view.opens == "citation" and finding.snapshot_id and finding.citation_id and view.reply_ref:
            self.app.push_screen(SnapshotScreen(finding.snapshot_id, tab="citations",
                                                citation=(view.reply_ref, finding.citation_id)))
        elif view.opens == "item" and finding.snapshot_id and finding.citation_id:
            self.app.push_screen(SnapshotScreen(finding.snapshot_id, tab="evidence", item=finding.citation_id))
        elif view.opens == "candidate" and finding.snapshot_id and finding.source_ref:
            self.app.push_screen(SnapshotScreen(finding.snapshot_id, tab="candidates", candidates=finding.source_ref))
        else:
            self.action_open_turn()

    def action_open_turn(self) -> None:
        view = self.highlighted()
        if view is None:
            return
        if view.seq is None:
            self.notify(f"Turn {view.finding.turn} of {view.finding.session_id} is not in this store.",
                        severity="warning", timeout=4)
            return
        from scopelens.inspector.screens.timeline import TimelineScreen

        self.app.push_screen(TimelineScreen(view.finding.session_id, seq=view.seq))


def _where(view: FindingView) -> str:
    """The source_ref and citation a finding names (``-``: neither)."""
    finding = view.finding
    cite = f"[{finding.citation_id}]" if finding.citation_id else ""
    return " ".join(part for part in (finding.source_ref, cite) if part) or "-"


def _leads_to(view: FindingView) -> str:
    if view.opens in LEADS_TO:
        return LEADS_TO[view.opens]
    if view.reply_ref is not None:
        return "the reply in the timeline"
    return "the snapshot's event in the timeline" if view.finding.snapshot_id else "the turn in the timeline"


def _count(number: int) -> str:
    return f"{number} finding{'s' * (number != 1)}"
