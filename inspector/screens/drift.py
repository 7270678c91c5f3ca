"""Drift: the frozen snapshot against today's search, side by side and classified."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Header, ProgressBar, Static

from scopelens.core.clock import when, when_stored
from scopelens.core.readmodel import DriftItem, DriftOutcome, DriftReport, DriftRunSummary
from scopelens.core.vocab import DRIFT_CLASS_MEANINGS, DriftClass
from scopelens.inspector.actions import bindings_for
from scopelens.inspector.screens.base import InspectorScreen, shows_problems
from scopelens.inspector.theme import rich_style
from scopelens.inspector.widgets.diff import highlighted_diff
from scopelens.inspector.widgets.fitted_table import Column, FittedTable
from scopelens.inspector.widgets.footer import KeysFooter

CLASS_MARK = {
    DriftClass.UNCHANGED: "=",
    DriftClass.MOVED: "↕",
    DriftClass.SHIFTED: "~",
    DriftClass.CONTENT_CHANGED: "Δ",
    DriftClass.RELABELLED: "#",
    DriftClass.ADDED: "+",
    DriftClass.REMOVED: "−",
}
CLASS_STYLE = {
    DriftClass.UNCHANGED: "",
    DriftClass.MOVED: "$legible-primary",
    DriftClass.SHIFTED: "$legible-primary",
    DriftClass.CONTENT_CHANGED: "bold $legible-warning",
    DriftClass.RELABELLED: "bold $legible-secondary",
    DriftClass.ADDED: "bold $legible-success",
    DriftClass.REMOVED: "bold $legible-error",
}
"""Theme variables that reach WCAG AA on either theme (inspector/theme.py), not Rich's named
colours, whose shade is the terminal's palette."""
ITEM_COLUMNS = (
    Column("mark", "", 1),
    Column("class", "class", 15, min_width=9),
    Column("frozen", "frozen", 6),
    Column("today", "today", 5),
    Column("source_ref", "source_ref", 34, min_width=24, flex=1),
    Column("note", "note", 24, min_width=20, drop=1),
)
RUN_COLUMNS = (
    Column("run", "run", 18, min_width=12),
    Column("at", "at (UTC)", 20),
    Column("checked", "last checked (UTC)", 20, short="checked", drop=2),
    Column("checks", "checks", 6, drop=3),
    Column("index", "index", 18, min_width=12, drop=1),
    Column("summary", "summary", 40, min_width=20, flex=1),
)
SESSION_COLUMNS = (
    Column("turn", "turn", 4),
    Column("snapshot", "snapshot", 28, min_width=20),
    Column("versions", "index then → now", 36, min_width=16, flex=1, drop=1),
    Column("summary", "summary", 40, min_width=20, flex=2),
)


class DiffPane(VerticalScroll, can_focus=True):
    """The highlighted item's diff: it takes focus to scroll, and fills the screen when narrow."""

    ALLOW_MAXIMIZE = True


class DriftScreen(InspectorScreen):
    """Run drift in a worker; list past runs; an item whose text changed opens its diff."""

    SCOPE = "drift"
    PROBLEM_TARGET = "drift-status"
    CSS_PATH = "drift.tcss"
    BINDINGS = bindings_for("drift")
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]  # noqa: RUF012 - Textual declares it per instance
    """Below 120 columns the diff goes under the items instead of beside them."""

    class Computed(Message):
        def __init__(self, outcome: DriftOutcome) -> None:
            super().__init__()
            self.outcome = outcome

    class RunsLoaded(Message):
        def __init__(self, runs: tuple[DriftRunSummary, ...], latest: DriftReport | None) -> None:
            super().__init__()
            self.runs = runs
            self.latest = latest

    class RunOpened(Message):
        def __init__(self, report: DriftReport) -> None:
            super().__init__()
            self.report = report

    def __init__(self, snapshot_id: str, *, run: bool = False) -> None:
        """``run``: compare with today's index as soon as the screen opens (the ``d`` key);
        otherwise show the latest recorded run until ``r`` is pressed."""
        super().__init__()
        self.snapshot_id = snapshot_id
        self.run_on_open = run
        self.report: DriftReport | None = None
        self.running = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"drift of snapshot {self.snapshot_id}", id="drift-title", markup=False)
        yield ProgressBar(total=None, show_eta=False, id="drift-progress")
        with Horizontal(id="drift-body"):
            yield FittedTable(ITEM_COLUMNS, id="drift-table", cursor_type="row")
            with DiffPane(id="drift-diff-pane"):
                yield Static("", id="drift-diff", markup=False)
        yield Static("Past runs:", id="runs-label")
        yield FittedTable(RUN_COLUMNS, id="runs-table", cursor_type="row")
        yield Static("", id="drift-status", classes="status-line", markup=False)
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#drift-progress").display = False
        self.query_one("#drift-table", DataTable).focus()
        self.app.theme_changed_signal.subscribe(self, self.theme_changed)
        self.load_runs()
        if self.run_on_open:
            self.action_compute()

    def theme_changed(self, _theme: object) -> None:
        """Class colours are resolved into the cells: draw them again in the new theme's."""
        if self.report is not None:
            table = self.query_one("#drift-table", DataTable)
            row = table.cursor_row
            self._fill_items(self.report)
            if table.row_count:
                table.move_cursor(row=min(row, table.row_count - 1), animate=False)
            self._show_diff()  # its colours too are resolved for one theme

    @work(thread=True, exclusive=True, exit_on_error=False, group="drift-runs")
    def load_runs(self) -> None:
        model = self.host.model
        runs = model.drift_runs(self.snapshot_id)
        latest = model.drift_run(runs[-1].id) if runs else None
        self.post_message(self.RunsLoaded(runs, latest))

    @on(RunsLoaded)
    @shows_problems
    def show_runs(self, message: RunsLoaded) -> None:
        table = self.query_one("#runs-table", DataTable)
        table.clear()
        for run in reversed(message.runs):
            table.add_row(run.id, when_stored(run.created_at),
                          when_stored(run.last_checked_at) if run.last_checked_at else "-",
                          str(run.checks), run.index_version, run.summary, key=run.id)
        if self.running:
            return  # the run under way will show its own result
        if message.latest is not None and self.report is None:
            self.show_report(message.latest, note="latest recorded run")
        elif message.latest is None:
            self.query_one("#drift-status", Static).update("No drift run yet. Press r to compare with today's index.")

    def action_compute(self) -> None:
        if self.running:
            self.notify("Drift is already running for this snapshot.", timeout=3)
            return
        self.running = True
        self.query_one("#drift-progress").display = True
        self.query_one("#drift-status", Static).update("re-running the recorded plan against today's index…")
        self.compute()

    @work(thread=True, exclusive=True, exit_on_error=False, group="drift")
    def compute(self) -> None:
        self.post_message(self.Computed(self.host.model.compute_drift(self.snapshot_id)))

    @on(Computed)
    @shows_problems
    def computed(self, message: Computed) -> None:
        self.running = False
        self.query_one("#drift-progress").display = False
        self.show_report(message.outcome.report, note=recorded_note(message.outcome))
        self.load_runs()

    def show_report(self, report: DriftReport, note: str) -> None:
        self.report = report
        changes = [n for n, flag in (("engine", report.engine_changed), ("config", report.config_changed),
                                     ("index", report.index_changed)) if flag]
        self.query_one("#drift-title", Static).update(
            f"drift of snapshot {self.snapshot_id}: index {report.index_version_then} → {report.index_version_now} · "
            f"changed: {', '.join(changes) or 'nothing'}"
        )
        table = self.query_one("#drift-table", DataTable)
        self._fill_items(report)
        self.query_one("#drift-status", Static).update(f"{report.id} ({note}) · {report.summary()}")
        # Land on the first item that drifted: that is what a person opened this screen for.
        first_change = next((i for i, item in enumerate(report.items) if item.drift_class != DriftClass.UNCHANGED), 0)
        if table.row_count:
            table.move_cursor(row=first_change, animate=False)
        self._show_diff()

    def _fill_items(self, report: DriftReport) -> None:
        table = self.query_one("#drift-table", DataTable)
        table.clear()
        places = report.spans_places()
        styles = {cls: rich_style(self.app, spec) for cls, spec in CLASS_STYLE.items()}
        for index, item in enumerate(report.items):
            style = styles[item.drift_class]
            table.add_row(Text(CLASS_MARK[item.drift_class], style=style), Text(item.drift_class.value, style=style),
                          f"#{item.frozen_rank}" if item.frozen_rank else "-",
                          f"#{item.today_rank}" if item.today_rank else "-", qualified_ref(item, places), item_note(item),
                          key=str(index))

    @on(DataTable.RowHighlighted, "#drift-table")
    def highlighted(self) -> None:
        self._show_diff()

    @on(DataTable.RowSelected, "#drift-table")
    def selected(self) -> None:
        self.action_show_diff()

    @on(DataTable.RowSelected, "#runs-table")
    def run_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.open_run(str(event.row_key.value))

    @work(thread=True, exclusive=True, exit_on_error=False, group="drift-run")
    def open_run(self, run_id: str) -> None:
        self.post_message(self.RunOpened(self.host.model.drift_run(run_id)))

    @on(RunOpened)
    @shows_problems
    def run_opened(self, message: RunOpened) -> None:
        self.show_report(message.report, note=f"recorded at {when(message.report.created_at)}")
        self.query_one("#drift-table", DataTable).focus()

    def _show_diff(self) -> None:
        diff = self.query_one("#drift-diff", Static)
        if self.report is None or not self.report.items:
            diff.update("")
            return
        row = self.query_one("#drift-table", DataTable).cursor_row
        item = self.report.items[min(row, len(self.report.items) - 1)]
        if item.diff:  # set exactly when the visible text differs
            diff.update(highlighted_diff(item.diff, item.path, self.app.get_css_variables(),
                                         self.app.current_theme.dark))
        else:
            ref = qualified_ref(item, self.report.spans_places())
            meaning = DRIFT_CLASS_MEANINGS[item.drift_class].replace("`", "")
            diff.update(f"{item.drift_class.value}: {ref}\n{item_note(item)}\n\n{meaning}")

    def action_show_diff(self) -> None:
        """Give the diff focus so its keys scroll it; when it sits under a narrow table, let it
        fill the screen (esc gives the table back)."""
        self._show_diff()
        pane = self.query_one(DiffPane)
        pane.focus()
        if self.has_class("-narrow"):
            self.maximize(pane, container=False)


class SessionDriftScreen(InspectorScreen):
    """Drift per snapshot of a whole session, computed in a worker with progress."""

    SCOPE = "drift"
    PROBLEM_TARGET = "drift-status"
    CSS_PATH = "drift.tcss"
    BINDINGS = bindings_for("drift")

    class Progressed(Message):
        def __init__(self, done: int, total: int, report: DriftReport, turn: int) -> None:
            super().__init__()
            self.done = done
            self.total = total
            self.report = report
            self.turn = turn

    def __init__(self, session_id: str, *, run: bool = False) -> None:
        super().__init__()
        self.session_id = session_id
        self.run_on_open = run
        self.running = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"drift of every snapshot in session {self.session_id}", id="drift-title")
        yield ProgressBar(total=None, show_eta=False, id="drift-progress")
        yield FittedTable(SESSION_COLUMNS, id="session-drift-table", cursor_type="row")
        yield Static("Press r to run drift for every snapshot of this session.", id="drift-status", classes="status-line")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#drift-progress").display = False
        self.query_one(DataTable).focus()
        if self.run_on_open:
            self.action_compute()

    def action_compute(self) -> None:
        if self.running:
            self.notify("Drift is already running for this session.", timeout=3)
            return
        self.running = True
        self.query_one(DataTable).clear()
        self.query_one("#drift-progress").display = True
        self.query_one("#drift-status", Static).update("comparing each snapshot with today's index…")
        self.compute()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def compute(self) -> None:
        model = self.host.model
        snapshots = model.snapshot_turns(self.session_id)
        for done, (snapshot_id, turn) in enumerate(snapshots, start=1):
            report = model.compute_drift(snapshot_id).report
            self.post_message(self.Progressed(done, len(snapshots), report, turn))

    @on(Progressed)
    @shows_problems
    def progressed(self, message: Progressed) -> None:
        bar = self.query_one("#drift-progress", ProgressBar)
        bar.update(total=message.total, progress=message.done)
        report = message.report
        self.query_one(DataTable).add_row(str(message.turn), report.snapshot_id,
                                          f"{report.index_version_then} → {report.index_version_now}",
                                          report.summary(), key=report.snapshot_id)
        self.query_one("#drift-status", Static).update(f"{message.done} of {message.total} snapshots compared")
        if message.done == message.total:
            bar.display = False
            self.running = False

    @on(DataTable.RowSelected, "#session-drift-table")
    def open_snapshot_drift(self, event: DataTable.RowSelected) -> None:
        self.app.push_screen(DriftScreen(str(event.row_key.value)))

    def action_show_diff(self) -> None:
        snapshot_id = self.query_one(FittedTable).cursor_key()
        if snapshot_id is not None:
            self.app.push_screen(DriftScreen(snapshot_id))


def recorded_note(outcome: DriftOutcome) -> str:
    """What a run of drift recorded, as the status line says it after the run's id (for a
    confirmation, the id of the run it found again)."""
    if outcome.recorded == "confirmed" and outcome.checked_at is not None:
        return f"confirmed: checked at {when(outcome.checked_at)}, unchanged"
    return "recorded" if outcome.recorded == "new run" else "not recorded (read-only store)"


def item_note(item: DriftItem) -> str:
    """What differs besides the class: ranges, rank, labels, a file changed elsewhere, or the
    stage a removed item now meets."""
    text = item.reason or ""
    return f"now {item.stage_today.value}: {text}" if item.stage_today else text


def qualified_ref(item: DriftItem, places: bool) -> str:
    """The item's source_ref, after its branch and root when the report spans several."""
    place = item.place() if places else None
    return f"{place}:{item.source_ref}" if place else item.source_ref
