"""The first screen: every recorded session, filterable and sortable, with verify status."""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static

from core.readmodel import Page, SessionView, VerifyStatus
from inspector.actions import bindings_for
from inspector.widgets.text_input import TextInput

SORTS = ("started", "project", "turns", "snapshots")
PAGE_SIZE = 200


class SessionsScreen(Screen[None]):
    """Sessions: project, branch, start, turns, retrievals and a ✓/✗ verify mark."""

    SCOPE = "sessions"
    CSS_PATH = "sessions.tcss"
    BINDINGS = bindings_for("sessions")

    class PageLoaded(Message):
        def __init__(self, page: Page[SessionView], append: bool) -> None:
            super().__init__()
            self.page = page
            self.append = append

    class VerifyChecked(Message):
        def __init__(self, session_id: str, status: VerifyStatus) -> None:
            super().__init__()
            self.session_id = session_id
            self.status = status

    def __init__(self) -> None:
        super().__init__()
        self.sort = "started"
        self.descending = True
        self.filter_text = ""
        self.next_after: tuple[object, ...] | None = None
        self.loaded: list[SessionView] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield TextInput(placeholder="filter by id, project, branch or title", id="filter")
        yield DataTable(id="sessions", cursor_type="row", zebra_stripes=True)
        yield Static("", id="sessions-status", classes="status-line", markup=False)
        yield Static("", id="sessions-empty", classes="empty-state")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_column("✓", key="verify", width=1)
        table.add_column("session", key="id")
        table.add_column("project", key="project")
        table.add_column("branch", key="branch")
        table.add_column("started (UTC)", key="started")
        table.add_column("turns", key="turns")
        table.add_column("retrievals", key="snapshots")
        table.add_column("title", key="title")
        table.focus()
        self.reload()

    # ------------------------------------------------------------------ loading

    def reload(self) -> None:
        self.next_after = None
        self.load_page(append=False)

    @work(thread=True, exclusive=True, group="sessions-page")
    def load_page(self, append: bool) -> None:
        page = self.app.model.sessions(  # type: ignore[attr-defined]
            text=self.filter_text, sort=self.sort, descending=self.descending,  # type: ignore[arg-type]
            after=self.next_after if append else None, limit=PAGE_SIZE,
        )
        self.post_message(self.PageLoaded(page, append))

    @work(thread=True, exclusive=True, group="sessions-verify")
    def verify_visible(self, session_ids: list[str]) -> None:
        model = self.app.model  # type: ignore[attr-defined]
        for session_id in session_ids:
            self.post_message(self.VerifyChecked(session_id, model.verify_status(session_id)))

    @on(PageLoaded)
    def show_page(self, message: PageLoaded) -> None:
        table = self.query_one(DataTable)
        if not message.append:
            table.clear()
            self.loaded = []
        model = self.app.model  # type: ignore[attr-defined]
        for view in message.page.rows:
            status = model.verify_status(view.id, compute=False)
            table.add_row(
                _mark(status), view.id, view.project, view.branch or "-", view.started.strftime("%Y-%m-%d %H:%M"),
                str(view.turns), str(view.snapshots), view.title, key=view.id,
            )
        self.loaded += list(message.page.rows)
        self.next_after = message.page.next_after
        arrow = "↓" if self.descending else "↑"
        more = " · m: more" if self.next_after else ""
        self.query_one("#sessions-status", Static).update(
            f"{len(self.loaded)} of {message.page.total} sessions · sorted by {self.sort} {arrow}{more}"
        )
        empty = self.query_one("#sessions-empty", Static)
        if message.page.total == 0:
            empty.update(
                "No sessions match this filter. Clear it with /."
                if self.filter_text
                else "No sessions in this store yet. Record one with `scopelens record` or run `scopelens demo`."
            )
            empty.display = True
        else:
            empty.display = False
        self.verify_visible([v.id for v in message.page.rows])

    @on(VerifyChecked)
    def show_verify(self, message: VerifyChecked) -> None:
        table = self.query_one(DataTable)
        if message.session_id in table.rows:
            table.update_cell(message.session_id, "verify", _mark(message.status))
        if message.status.state == "problem":
            self.notify(f"{message.session_id}: {message.status.problems[0]}", severity="error", timeout=8)

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
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        return str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)

    def _open(self, session_id: str) -> None:
        from inspector.screens.timeline import TimelineScreen

        self.app.push_screen(TimelineScreen(session_id))

    def action_open_session(self) -> None:
        session_id = self.highlighted_id()
        if session_id:
            self._open(session_id)

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_cycle_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self.reload()

    def action_reverse_sort(self) -> None:
        self.descending = not self.descending
        self.reload()

    def action_load_more(self) -> None:
        if self.next_after is not None:
            self.load_page(append=True)

    def action_copy_id(self) -> None:
        session_id = self.highlighted_id()
        if session_id:
            self.app.copy_id(session_id)  # type: ignore[attr-defined]

    @on(DataTable.HeaderSelected, "#sessions")
    def header_clicked(self, event: DataTable.HeaderSelected) -> None:
        key = str(event.column_key.value)
        if key in SORTS:
            if key == self.sort:
                self.descending = not self.descending
            self.sort = key
            self.reload()


def _mark(status: VerifyStatus) -> str:
    return status.mark
