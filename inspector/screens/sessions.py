"""The first screen: every recorded session, filterable and sortable, with verify status."""

from __future__ import annotations

from rich.style import Style as RichStyle
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.message import Message
from textual.widgets import DataTable, Header, Input, Static

from scopelens.core.clock import when
from scopelens.core.readmodel import SESSION_SORTS, FindingsView, Page, SessionSort, SessionView, VerifyStatus
from scopelens.inspector.actions import ACTIONS, bindings_for, effective_key, key_label
from scopelens.inspector.screens.base import InspectorScreen, problem_line, shows_problems
from scopelens.inspector.screens.paging import KeyPaging
from scopelens.inspector.theme import rich_style
from scopelens.inspector.widgets.fitted_table import Column, FittedTable
from scopelens.inspector.widgets.footer import KeysFooter
from scopelens.inspector.widgets.text_input import TextInput

PAGE_SIZE = 60
"""Rows per further page, loaded by key when the cursor nears the end or on m."""
NEAR_END = 3
"""Rows from the end of what is loaded at which the next page is fetched."""
VERIFY_BATCH = 20
COLUMNS = (
    Column("verify", "✓", 1),
    Column("id", "session", 27),
    Column("project", "project", 16, min_width=8),
    Column("branch", "branch", 10, min_width=6, drop=2),
    Column("started", "started (UTC)", 20),
    Column("turns", "turns", 5),
    Column("snapshots", "snapshots", 9, min_width=5, short="snap."),
    Column("title", "title", 40, min_width=16, flex=1, drop=3),
)
"""Narrow terminals hide title, then branch; the line under the table shows both."""
FINDINGS = next(a for a in ACTIONS if a.id == "sessions.findings")


class SessionsScreen(InspectorScreen):
    """Sessions: project, branch, start, turns, snapshots (retrieved, observed or counterfactual) and a ✓/✗ verify mark."""

    SCOPE = "sessions"
    PROBLEM_TARGET = "sessions-status"
    CSS_PATH = "sessions.tcss"
    BINDINGS = bindings_for("sessions")

    class PageLoaded(Message):
        def __init__(self, page: Page[SessionView], append: bool, generation: int) -> None:
            super().__init__()
            self.page = page
            self.append = append
            self.generation = generation

    class VerifyChecked(Message):
        def __init__(self, statuses: dict[str, VerifyStatus]) -> None:
            super().__init__()
            self.statuses = statuses

    class FindingsCounted(Message):
        def __init__(self, view: FindingsView) -> None:
            super().__init__()
            self.view = view

    def __init__(self) -> None:
        super().__init__()
        self.sort: SessionSort = "started"
        self.descending = True
        self.filter_text = ""
        self.paging: KeyPaging = KeyPaging()
        self.loaded: list[SessionView] = []
        self.verifying: set[str] = set()
        """Sessions handed to a verify worker whose result has not arrived yet."""
        self.verify_scheduled = False
        self.findings_hint = ""
        """What the status line says of the store's findings ("" when it has none)."""
        self.page_status = ""

    def compose(self) -> ComposeResult:
        yield Header()
        yield TextInput(placeholder="filter by id, project, branch or title", id="filter")
        yield FittedTable(COLUMNS, id="sessions", cursor_type="row", zebra_stripes=True)
        yield Static("", id="session-detail", classes="detail-line", markup=False)
        yield Static("", id="sessions-status", classes="status-line", markup=False)
        yield Static("", id="sessions-empty", classes="empty-state")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        # The first page is one bounded index walk (a few ms on a million-row store):
        # run it here so the first frame already shows sessions. Later pages and filters use
        # the worker, so typing never waits on the database.
        try:
            first = self._fetch_page(after=None)
        except Exception as error:  # noqa: BLE001 - a damaged store: say so on this screen, keep the app
            self.show_problem(error)
            return
        self._show(first, append=False, generation=self.paging.generation)
        self.call_after_refresh(self.count_findings)  # after the first paint: a thread started now competes with it

    # ------------------------------------------------------------------ loading

    def reload(self) -> None:
        self.load_page(append=False, after=None, generation=self.paging.restart())

    @work(thread=True, exclusive=True, exit_on_error=False, group="sessions-page")
    def load_page(self, append: bool, after: tuple[object, ...] | None, generation: int) -> None:
        """Fetch off the UI thread; what to fetch is fixed when asked, not when the thread runs."""
        self.post_message(self.PageLoaded(self._fetch_page(after), append, generation))

    def _fetch_page(self, after: tuple[object, ...] | None) -> Page[SessionView]:
        # A first page is what the terminal can show, no more: first paint costs the same
        # whatever the store holds, and the rest arrives by key as the cursor goes down.
        limit = PAGE_SIZE if after is not None else max(self.app.size.height, NEAR_END + 1)
        return self.host.model.sessions(
            text=self.filter_text, sort=self.sort, descending=self.descending,
            after=after, limit=limit,
        )

    @work(thread=True, exit_on_error=False, group="sessions-verify")
    def verify_sessions(self, session_ids: list[str]) -> None:
        """Hash-check sessions off the UI thread; results arrive in batches, not per row."""
        model = self.host.model
        batch: dict[str, VerifyStatus] = {}
        for session_id in session_ids:
            try:
                batch[session_id] = model.verify_status(session_id)
            except Exception as error:  # noqa: BLE001 - unreadable, not just altered: still a red mark, not a stuck "…"
                batch[session_id] = VerifyStatus("problem", (problem_line(error),))
            if len(batch) == VERIFY_BATCH:
                self.post_message(self.VerifyChecked(batch))
                batch = {}
        if batch:
            self.post_message(self.VerifyChecked(batch))

    @work(thread=True, exit_on_error=False, group="sessions-findings")
    def count_findings(self) -> None:
        """Read the store's findings off the UI thread, after the first paint: the status line says how many."""
        try:
            view = self.host.model.findings()
        except Exception:  # noqa: BLE001 - only a hint here: the Findings screen shows what went wrong
            return
        self.post_message(self.FindingsCounted(view))

    @on(FindingsCounted)
    def findings_counted(self, message: FindingsCounted) -> None:
        count = len(message.view.findings)
        key = key_label(effective_key(FINDINGS, self.host.keymap))
        self.findings_hint = f"{count} finding{'s' * (count != 1)}: {key} lists them" if count else ""
        self._show_status()

    def _show_status(self) -> None:
        hint = f" · {self.findings_hint}" if self.findings_hint else ""
        self.query_one("#sessions-status", Static).update(self.page_status + hint)

    @property
    def verify_pending(self) -> bool:
        """True while verification of the visible rows is scheduled or running (tests wait on it)."""
        return self.verify_scheduled or bool(self.verifying)

    def verify_on_screen(self) -> None:
        """Verify only the rows a person can see (more as they scroll or load more)."""
        self.verify_scheduled = False
        table = self.query_one(DataTable)
        first = table.scroll_offset.y
        visible = [view.id for view in self.loaded[first : first + max(table.size.height, 1) + 5]]
        model = self.host.model
        pending = [i for i in visible if i not in self.verifying and model.verify_status(i, compute=False).state == "pending"]
        if pending:
            self.verifying.update(pending)
            self.verify_sessions(pending)

    @on(PageLoaded)
    @shows_problems
    def show_page(self, message: PageLoaded) -> None:
        self._show(message.page, message.append, message.generation)

    def _show(self, page: Page[SessionView], append: bool, generation: int) -> None:
        if not self.paging.arrived(generation, page.next_after):
            return
        table = self.query_one(DataTable)
        if not append:
            table.clear()
            self.loaded = []
        model = self.host.model
        shown = {view.id for view in self.loaded}
        problem = rich_style(self.app, PROBLEM)
        for view in page.rows:
            if view.id in shown:
                continue  # listed on an earlier page: a recorder moved it while we paged
            status = model.verify_status(view.id, compute=False)
            table.add_row(
                _mark(status, problem), view.id, view.project, view.branch or "-", _started(view, problem),
                str(view.turns), str(view.snapshots), view.title, key=view.id,
            )
        self.loaded += [view for view in page.rows if view.id not in shown]
        arrow = "↓" if self.descending else "↑"
        more = " · m: more" if self.paging.next_after else ""
        self.page_status = f"{len(self.loaded)} of {page.total} sessions · sorted by {self.sort} {arrow}{more}"
        self._show_status()
        empty = self.query_one("#sessions-empty", Static)
        if page.total == 0:
            empty.update(
                "No sessions match this filter. Clear it with /."
                if self.filter_text
                else "No sessions in this store yet. Record one with `scopelens record` or run `scopelens demo`."
            )
            empty.display = True
        else:
            empty.display = False
        self.show_detail()
        self.verify_scheduled = True
        self.call_after_refresh(self.verify_on_screen)

    def show_detail(self) -> None:
        """The highlighted session in full: columns a narrow terminal hides are here too."""
        session_id = self.highlighted_id()
        view = next((v for v in self.loaded if v.id == session_id), None)
        self.query_one("#session-detail", Static).update(
            f"{view.id} · {view.project} @ {view.branch or '-'} · {view.title}" if view else ""
        )

    @on(VerifyChecked)
    @shows_problems
    def show_verify(self, message: VerifyChecked) -> None:
        table = self.query_one(DataTable)
        for session_id, status in message.statuses.items():
            self.verifying.discard(session_id)
            if session_id in table.rows:
                table.update_cell(session_id, "verify", _mark(status, rich_style(self.app, PROBLEM)))
            if status.state == "problem":
                self.notify(f"{session_id}: {status.problems[0]}", severity="error", timeout=8)

    @on(DataTable.RowHighlighted, "#sessions")
    def row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_detail()
        self.verify_on_screen()
        if event.cursor_row >= len(self.loaded) - NEAR_END:
            self.action_load_more()

    # ------------------------------------------------------------------ actions

    @on(Input.Changed, "#filter")
    def filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()
        self.reload()

    @on(Input.Submitted, "#filter")
    def filter_done(self) -> None:
        self.query_one(DataTable).focus()

    @on(DataTable.RowSelected, "#sessions")
    def row_selected(self, event: DataTable.RowSelected) -> None:
        self._open(str(event.row_key.value))

    def highlighted_id(self) -> str | None:
        return self.query_one(FittedTable).cursor_key()

    def _open(self, session_id: str) -> None:
        from scopelens.inspector.screens.timeline import TimelineScreen

        self.app.push_screen(TimelineScreen(session_id))

    def action_open_session(self) -> None:
        session_id = self.highlighted_id()
        if session_id:
            self._open(session_id)

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_cycle_sort(self) -> None:
        self.sort = SESSION_SORTS[(SESSION_SORTS.index(self.sort) + 1) % len(SESSION_SORTS)]
        self.reload()

    def action_reverse_sort(self) -> None:
        self.descending = not self.descending
        self.reload()

    def action_load_more(self) -> None:
        request = self.paging.next_page()
        if request is not None:
            after, generation = request
            self.load_page(append=True, after=after, generation=generation)

    def action_open_findings(self) -> None:
        from scopelens.inspector.screens.findings import FindingsScreen

        self.app.push_screen(FindingsScreen())

    def action_copy_id(self) -> None:
        session_id = self.highlighted_id()
        if session_id:
            self.host.copy_id(session_id)

    @on(DataTable.HeaderSelected, "#sessions")
    def header_clicked(self, event: DataTable.HeaderSelected) -> None:
        key = str(event.column_key.value)
        sort = next((s for s in SESSION_SORTS if s == key), None)
        if sort is not None:
            if sort == self.sort:
                self.descending = not self.descending
            self.sort = sort
            self.reload()


PROBLEM = "bold $legible-error"
"""A verify problem or an unreadable value: the legible error colour of the theme (theme.py)."""


def _mark(status: VerifyStatus, problem: RichStyle) -> Text:
    return Text(status.mark, style=problem if status.state == "problem" else "")


def _started(view: SessionView, problem: RichStyle) -> Text:
    if view.started is None:
        return Text("unreadable", style=problem)
    return Text(when(view.started))
