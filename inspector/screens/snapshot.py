"""One retrieval's audit snapshot: Scope, Plan, Funnel, Candidates, Evidence, Citations, Request."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import ClassVar

from rich.table import Table as RichTable
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import DataTable, Header, Input, Static, TabbedContent, TabPane, Tabs

from scopelens.core.clock import when
from scopelens.core.contracts import SubQuery, WeightedTerm
from scopelens.core.readmodel import CANDIDATE_SORTS, SCORE_SORTS, CandidateRow, ItemView, Page, SnapshotView
from scopelens.core.textsafety import listing, short
from scopelens.core.vocab import Stage
from scopelens.inspector.actions import bindings_for
from scopelens.inspector.screens.base import InspectorScreen, shows_problems
from scopelens.inspector.screens.paging import KeyPaging
from scopelens.inspector.theme import STAGE_STYLE, rich_style
from scopelens.inspector.widgets.evidence import EvidenceText
from scopelens.inspector.widgets.fitted_table import Column, FittedTable
from scopelens.inspector.widgets.footer import KeysFooter
from scopelens.inspector.widgets.funnel import Funnel
from scopelens.inspector.widgets.request import RequestView
from scopelens.inspector.widgets.text_input import TextInput

SCORE_NAMES = {"lexical": "lex", "authority": "auth", "actionability": "action", "diversity": "div"}
OK_STYLE = "$legible-success"
BAD_STYLE = "bold $legible-error"
"""The ✓/✗ marks of items and citations, in the theme's legible colours (theme.py)."""
TABS = ("scope", "plan", "funnel", "candidates", "evidence", "citations", "request")
CANDIDATE_PAGE = 200
TAB_ACTIONS: dict[str, str | tuple[str, ...]] = {
    "jump": "citations",
    "load_more": "candidates",
    "cycle_sort": "candidates",
    "reverse_sort": "candidates",
    "focus_filter": "candidates",
    "toggle_trimmed": "evidence",
    "go_to_reply": ("evidence", "citations"),
}
"""Actions that act on one tab's table: offered (and in the footer) only while it is shown."""
PLAN_COLUMNS = (
    Column("id", "sub-query", 18, min_width=14),
    Column("intent", "intent", 13, drop=4),
    Column("sources", "sources", 30, min_width=14, flex=1),
    Column("top_k", "top k", 5),
    Column("hits", "hits", 5),
    Column("min_authority", "min authority", 13, min_width=9, short="min auth", drop=1),
    Column("terms", "strongest terms", 40, min_width=16, flex=2, drop=3),
)
CANDIDATE_COLUMNS = (
    Column("ordinal", "#", 4),
    Column("stage", "stage", 13),
    Column("source_ref", "source_ref", 36, min_width=18, flex=1),
    Column("final", "final", 6),
    Column("lexical", "lex", 5, drop=2),
    Column("anchor", "anchor", 7, drop=4),
    Column("authority", "auth", 5, drop=3),
    Column("recency", "recency", 8, drop=4),
    Column("reason", "reason", 40, min_width=20, flex=3),
)
"""Narrow terminals hide score columns; the line under the table shows the whole breakdown. The
reason takes most of the spare width; the sorted column's header carries ↑ or ↓."""
STAGE_FILTER = re.compile(r"(?:^|\s)stage:(\S+)")
"""``stage:below-cutoff`` in the candidate filter keeps that stage (a funnel line sets it)."""
ITEM_COLUMNS = (
    Column("cite", "cite", 10, min_width=8),
    Column("source_ref", "source_ref", 34, min_width=12, flex=1),
    Column("ok", "✓", 1),
    Column("trim", "trim", 4),
)
CITATION_COLUMNS = (
    Column("citation", "citation", 10),
    Column("ok", "ok", 2),
    Column("item", "item", 5),
    Column("source_ref", "source_ref", 40, min_width=16, flex=2),
    Column("cited_by", "cited by", 24, min_width=12, flex=1),
)


def own_terms(query: SubQuery, queries: Sequence[SubQuery]) -> list[WeightedTerm]:
    """A sub-query's terms, strongest first; among equal weights, the ones no other sub-query
    has (what makes this sub-query its own) before the shared ones."""
    others = [{t.term for t in q.terms} for q in queries if q.id != query.id]
    return sorted(query.terms, key=lambda t: (-t.weight, any(t.term in o for o in others), t.term))


class SnapshotScreen(InspectorScreen):
    """Everything one snapshot recorded, with hashes re-derived on display."""

    SCOPE = "snapshot"
    PROBLEM_TARGET = "snapshot-title"
    PROBLEM_TARGETS: ClassVar[dict[str, str]] = {"candidates": "candidate-status"}
    CSS_PATH = "snapshot.tcss"
    BINDINGS = bindings_for("snapshot")
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]  # noqa: RUF012 - Textual declares it per instance
    """Below 120 columns the evidence text goes under the items instead of beside them."""

    class Loaded(Message):
        def __init__(self, view: SnapshotView, session_snapshots: tuple[str, ...]) -> None:
            super().__init__()
            self.view = view
            self.session_snapshots = session_snapshots

    class TrimmedLoaded(Message):
        def __init__(self, citation_id: str, texts: tuple[str | None, ...]) -> None:
            super().__init__()
            self.citation_id = citation_id
            self.texts = texts

    class CandidatesLoaded(Message):
        def __init__(self, page: Page[CandidateRow], append: bool, generation: int) -> None:
            super().__init__()
            self.page = page
            self.append = append
            self.generation = generation

    def __init__(
        self, snapshot_id: str, tab: str = "evidence", *, citation: tuple[str, str] | None = None,
        item: str | None = None, candidates: str = "",
    ) -> None:
        """``citation``: (reply ref, cited id) to put the Citations cursor on once loaded;
        ``item``: the citation id of the item to put the Evidence cursor on once loaded;
        ``candidates``: the candidates filter to open with (a source_ref: its rows)."""
        super().__init__()
        self.snapshot_id = snapshot_id
        self.initial_tab = tab
        self.focus_citation = citation
        self.focus_item = item
        self.view: SnapshotView | None = None
        self.session_snapshots: tuple[str, ...] = ()
        """Every snapshot of this one's session, in turn order (n/p walk them)."""
        self.sort = "ordinal"
        self.descending = False
        self.candidate_rows: dict[str, CandidateRow] = {}
        self.filter_text = candidates
        self.stage_filter: Stage | None = None
        self.paging: KeyPaging = KeyPaging()
        self.evidence_pending = False
        """The highlighted item changed while Evidence was hidden: draw it when Evidence is shown."""
        self.show_trimmed = False
        self.trimmed: dict[str, tuple[str | None, ...]] = {}
        """Citation id -> the text of each of its trim ranges, read when first shown."""

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"snapshot {self.snapshot_id}", id="snapshot-title", markup=False)
        with TabbedContent(initial=self.initial_tab, id="tabs"):
            with TabPane("1 Scope", id="scope"):
                yield VerticalScroll(Static("", id="scope-text", markup=False))
            with TabPane("2 Plan", id="plan"):
                yield FittedTable(PLAN_COLUMNS, id="plan-table", cursor_type="row")
                yield Static("", id="plan-detail", classes="detail-line", markup=False)
            with TabPane("3 Funnel", id="funnel"):
                yield Funnel(id="funnel-chart")
                yield Static("", id="budget-line", markup=False)
            with TabPane("4 Candidates", id="candidates"):
                yield TextInput(value=self.filter_text, placeholder="filter by source_ref or reason", id="candidate-filter")
                yield FittedTable(CANDIDATE_COLUMNS, id="candidate-table", cursor_type="row", zebra_stripes=True)
                yield Static("", id="candidate-detail", classes="detail-line", markup=False)
                yield Static("", id="candidate-status", classes="status-line", markup=False)
            with TabPane("5 Evidence", id="evidence"), Horizontal(id="evidence-pane"):
                yield FittedTable(ITEM_COLUMNS, id="item-table", cursor_type="row")
                with Vertical(id="evidence-side"):
                    yield EvidenceText(id="evidence-text")
            with TabPane("6 Citations", id="citations"):
                yield FittedTable(CITATION_COLUMNS, id="citation-table", cursor_type="row")
                yield Static("", id="citation-note", classes="status-line", markup=False)
            with TabPane("7 Request", id="request"):
                yield RequestView(id="request-view")
        yield KeysFooter()

    def on_mount(self) -> None:
        # The candidate page does not need the snapshot view: both load at once.
        self.load()
        self.reload_candidates()
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)

    def _theme_changed(self, _theme: object) -> None:
        """Code and stage colours follow the theme (resolved into cells, so drawn again)."""
        if self.view is not None:
            rows = {name: self.query_one(name, DataTable).cursor_row for name in ("#item-table", "#citation-table")}
            self._show_items(self.view)
            self._show_citations(self.view)
            for name, row in rows.items():
                self.query_one(name, DataTable).move_cursor(row=row, animate=False)
            self._show_item(self._current_item())
            self.query_one(Funnel).show(self.view.funnel)
        self.reload_candidates()

    # ------------------------------------------------------------------ loading

    @work(thread=True, exclusive=True, exit_on_error=False, group="snapshot")
    def load(self) -> None:
        model = self.host.model
        view = model.snapshot(self.snapshot_id)
        self.post_message(self.Loaded(view, model.snapshot_ids(view.session_id)))

    def reload_candidates(self) -> None:
        self.load_candidates(self.filter_text, self.stage_filter, self.sort, self.descending, None,
                             self.paging.restart())

    @work(thread=True, exclusive=True, exit_on_error=False, group="candidates")
    def load_candidates(
        self, text: str, stage: Stage | None, sort: str, descending: bool, after: tuple[object, ...] | None,
        generation: int,
    ) -> None:
        """Fetch off the UI thread; what to fetch is fixed when asked, not when the thread runs."""
        page = self.host.model.candidates(
            self.snapshot_id, stage=stage, text=text, sort=sort, descending=descending, after=after, limit=CANDIDATE_PAGE,
        )
        self.post_message(self.CandidatesLoaded(page, after is not None, generation))

    @on(Loaded)
    @shows_problems
    def show(self, message: Loaded) -> None:
        view = self.view = message.view
        self.session_snapshots = message.session_snapshots
        ok = view.block_ok and view.rows_ok and all(i.hash_ok for i in view.items)
        title = self.query_one("#snapshot-title", Static)
        place = (f" ({self.session_snapshots.index(view.id) + 1} of {len(self.session_snapshots)})"
                 if view.id in self.session_snapshots and len(self.session_snapshots) > 1 else "")
        title.update(
            f"{'✓' if ok else '✗'} {view.kind_label}{view.id}{place} · session {view.session_id} · turn {view.turn} · "
            f"{when(view.created_at)} · hash {short(view.content_hash)}"
        )
        title.set_class(not ok, "bad-mark")
        if not view.rows_ok:
            self.notify("The candidate rows of this snapshot disagree with its document: the store was altered. "
                        "Run `scopelens verify`.", severity="error", timeout=10)
        self._show_scope(view)
        self._show_plan(view)
        self.query_one(Funnel).show(view.funnel)
        missing = f" · missing evidence: {', '.join(view.missing_evidence)}" if view.missing_evidence else ""
        self.query_one("#budget-line", Static).update(f"budget: {view.budget_line}{missing}")
        self._show_items(view)
        self._show_citations(view)
        self._show_request()
        self.refresh_bindings()  # the keys that depend on the highlighted row

    def _show_request(self) -> None:
        """The Request tab, drawn when it is shown (its block can be long)."""
        if self.view is not None and self.query_one(TabbedContent).active == "request":
            self.query_one(RequestView).show(self.view)

    def _show_scope(self, view: SnapshotView) -> None:
        scope, pins = view.scope, view.pins
        tb, ep, budget = scope.time_boundary, scope.evidence_policy, scope.budget

        def moment(value: datetime | None) -> str:
            return when(value) if value is not None else "-"

        fields = [
            # The pins first: at 80×24 they are above the fold.
            ("pins", f"engine {pins.engine_version} · index {pins.index_version} · git {short(pins.git_commit)}"
                     + (" (dirty)" if pins.git_dirty else "")),
            ("", f"config {short(pins.config_hash, 16)} · policy {short(pins.policy_hash, 16)}"),
            ("project", scope.project),
            ("branch", scope.branch or "-"),
            ("workspace", scope.workspace_root or "-"),
            ("task", scope.task_id or "-"),
            ("purpose", scope.purpose.value),
            ("user", f"{scope.user_id} (roles: {', '.join(scope.permission_context.roles) or '-'}; "
                     f"grants: {', '.join(scope.permission_context.grants) or '-'})"),
            ("sources", ", ".join(s.value for s in scope.allowed_sources)),
            ("denied", ", ".join(s.value for s in scope.denied_sources) or "-"),
            ("path prefixes", ", ".join(scope.path_prefixes) or "(whole workspace)"),
            ("time boundary", f"as_of {moment(tb.as_of) if tb.as_of else 'the snapshot time'} · include_after "
                              f"{moment(tb.include_after)} · exclude_after {moment(tb.exclude_after)} · stale memory "
                              f"{'allowed' if tb.allow_stale_memory else 'refused'}"),
            ("evidence", f"citations {'required' if ep.require_citation else 'optional'} · accepted: "
                         f"{', '.join(a.value for a in ep.accepted_authority)} · max unverified {ep.max_unverified_items}"),
            ("budget", f"{budget.max_tokens} tokens · {budget.max_items} items · per source: "
                       + (", ".join(f"{k.value} {v}" for k, v in budget.per_source.items()) or "-")),
        ]
        # A grid keeps wrapped values under their column instead of under the labels.
        grid = RichTable.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(overflow="fold")
        for label, value in fields:
            grid.add_row(Text(label), Text(value))
        self.query_one("#scope-text", Static).update(grid)

    def _show_plan(self, view: SnapshotView) -> None:
        table = self.query_one("#plan-table", DataTable)
        table.clear()
        for query in view.plan.sub_queries:
            strongest = [f"{t.term}×{t.weight:g}" for t in own_terms(query, view.plan.sub_queries)]
            table.add_row(query.id, query.intent.value, ", ".join(s.value for s in query.sources), str(query.top_k),
                          str(view.sub_query_hits.get(query.id, 0)), query.min_authority.value, listing(strongest, 6),
                          key=query.id)
        self._show_sub_query()

    def _show_sub_query(self) -> None:
        """The highlighted sub-query in full: its text, hits and every term with its weight."""
        key = self.query_one("#plan-table", FittedTable).cursor_key()
        detail = self.query_one("#plan-detail", Static)
        if self.view is None or key is None:
            detail.update("")
            return
        query = next(q for q in self.view.plan.sub_queries if q.id == key)
        terms = ", ".join(f"{t.term}×{t.weight:g}" for t in own_terms(query, self.view.plan.sub_queries))
        hits = self.view.sub_query_hits.get(query.id, 0)
        detail.update(f"{query.id} ({query.intent.value}) · {', '.join(s.value for s in query.sources)} · "
                      f"{hits} recalled from its sources\n\"{query.query_text}\" · terms: {terms}")

    @on(DataTable.RowHighlighted, "#plan-table")
    def sub_query_highlighted(self) -> None:
        self._show_sub_query()

    def _marks(self) -> tuple[Text, Text]:
        return Text("✓", style=rich_style(self.app, OK_STYLE)), Text("✗", style=rich_style(self.app, BAD_STYLE))

    def _show_items(self, view: SnapshotView) -> None:
        table = self.query_one("#item-table", DataTable)
        table.clear()
        OK, BAD = self._marks()
        for item in view.items:
            table.add_row(item.citation_id, item.source_ref, OK if item.hash_ok else BAD,
                          str(len(item.trim_ranges)) if item.trim_ranges else "-", key=item.citation_id)
        focused = next((i for i in view.items if i.citation_id == self.focus_item), None)
        if focused is not None:
            table.move_cursor(row=table.get_row_index(focused.citation_id), animate=False)
        self._show_item(focused or (view.items[0] if view.items else None))

    def _show_item(self, item: ItemView | None) -> None:
        """Draw the item's evidence, or, while Evidence is hidden, keep it for when it is shown:
        highlighting code is the slowest part of opening a snapshot, and most opens land on
        another tab."""
        if self.query_one(TabbedContent).active != "evidence":
            self.evidence_pending = True
            return
        self.evidence_pending = False
        revealed = None
        if item is not None and item.trim_ranges and self.show_trimmed:
            revealed = self.trimmed.get(item.citation_id)
            if revealed is None:
                self.load_trimmed(item.citation_id)
        self.query_one(EvidenceText).show(item, revealed)

    def _current_item(self, table: str = "#item-table") -> ItemView | None:
        """The item highlighted on Evidence (or, given ``#citation-table``, on Citations: none
        for a citation the block never showed)."""
        key = self.query_one(table, FittedTable).cursor_key()
        return next((i for i in self.view.items if i.citation_id == key), None) if self.view else None

    @work(thread=True, exclusive=True, exit_on_error=False, group="trimmed")
    def load_trimmed(self, citation_id: str) -> None:
        self.post_message(self.TrimmedLoaded(citation_id, self.host.model.trimmed_texts(self.snapshot_id, citation_id)))

    @on(TrimmedLoaded)
    @shows_problems
    def trimmed_loaded(self, message: TrimmedLoaded) -> None:
        self.trimmed[message.citation_id] = message.texts
        item = self._current_item()
        if item is not None and item.citation_id == message.citation_id:
            self._show_item(item)

    def action_toggle_trimmed(self) -> None:
        """Show or hide the lines the budget trimmed (never seen by the model) in the evidence."""
        self.show_trimmed = not self.show_trimmed
        item = self._current_item()
        if item is not None and not item.trim_ranges:
            self.notify("Nothing was trimmed from this item.", timeout=3)
        self._show_item(item)

    def _show_citations(self, view: SnapshotView) -> None:
        table = self.query_one("#citation-table", DataTable)
        table.clear()
        known = {i.citation_id: i for i in view.items}
        OK, BAD = self._marks()
        for item in view.items:
            table.add_row(item.citation_id, OK, f"#{item.rank}", item.source_ref,
                          ", ".join(item.cited_by) or "not cited", key=item.citation_id)
        # A reply may cite the same missing id twice: one row for it.
        dangling = list(dict.fromkeys((ref, cid) for ref, ids in view.response_citations for cid in ids if cid not in known))
        for ref, citation_id in dangling:
            table.add_row(citation_id, BAD, "-", "(not in this snapshot)", ref, key=f"dangling:{ref}:{citation_id}")
        note = f"{len(view.items)} citations in the block"
        note += f" · {len(dangling)} cited but not shown ✗" if dangling else ""
        note += " · j: jump to the item · g: go to the citing reply"
        self.query_one("#citation-note", Static).update(note)
        if self.focus_citation is not None:
            ref, citation_id = self.focus_citation
            key = citation_id if citation_id in known else f"dangling:{ref}:{citation_id}"
            table.move_cursor(row=table.get_row_index(key), animate=False)

    @on(CandidatesLoaded)
    @shows_problems
    def show_candidates(self, message: CandidatesLoaded) -> None:
        if not self.paging.arrived(message.generation, message.page.next_after):
            return
        table = self.query_one("#candidate-table", FittedTable)
        stage_styles = {stage: rich_style(self.app, spec) for stage, spec in STAGE_STYLE.items()}
        if not message.append:
            table.clear()
            self.candidate_rows = {}
            table.mark_header(self.sort, "↓" if self.descending else "↑")
        for row in message.page.rows:
            if str(row.ordinal) in self.candidate_rows:
                continue  # already shown (a page boundary that moved)
            self.candidate_rows[str(row.ordinal)] = row
            scores = row.scores

            def fmt(name: str, scores: dict[str, float | None] = scores) -> str:
                value = scores.get(name)
                return "-" if value is None else f"{value:.2f}"

            source = row.source_ref + (" (probe)" if row.from_probe else "")
            table.add_row(str(row.number), Text(row.stage.value, style=stage_styles[row.stage]), source, fmt("final"),
                          fmt("lexical"), fmt("anchor"), fmt("authority"), fmt("recency"), row.reason, key=str(row.ordinal))
        more = " · m: more" if self.paging.next_after else ""
        arrow = "↓" if self.descending else "↑"
        stage = f" · stage {self.stage_filter.value} (esc in the filter clears it)" if self.stage_filter else ""
        self.query_one("#candidate-status", Static).update(
            f"{len(self.candidate_rows)} of {message.page.total} candidates{stage} · sorted by {self.sort} {arrow}{more}"
        )
        self._show_candidate()
        self.refresh_bindings()

    def _show_candidate(self) -> None:
        """The highlighted candidate in full: reason and every score, whatever the width."""
        key = self.query_one("#candidate-table", FittedTable).cursor_key()
        detail = self.query_one("#candidate-detail", Static)
        if key is None:
            detail.update("No candidate matches this filter." if self.filter_text else "")
            return
        row = self.candidate_rows[key]
        scores = " · ".join(
            f"{SCORE_NAMES.get(name, name)} {row.scores[name]:.2f}"
            for name in ("final", *(n for n in row.scores if n != "final")) if row.scores.get(name) is not None
        )
        probe = " · recorded by the scope probe: withheld by the scope, never recalled" if row.from_probe else ""
        detail.update(f"#{row.number} {row.source_ref} · {row.stage.value}: {row.reason}{probe}\n{scores or 'not scored'}")

    # ------------------------------------------------------------------ interaction

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A key acts only on what is visible: the tab's own actions exist only on that tab."""
        tabs = TAB_ACTIONS.get(action)
        if tabs is None:
            return True
        if action == "load_more" and self.paging.next_after is None:
            return False  # every candidate is shown: m would do nothing
        try:
            active = self.query_one(TabbedContent).active
        except NoMatches:  # not composed yet
            return False
        if active not in ((tabs,) if isinstance(tabs, str) else tabs):
            return False
        if action == "toggle_trimmed":  # t only where something was trimmed
            item = self._current_item()
            return item is not None and bool(item.trim_ranges)
        if action == "go_to_reply":  # g only where a reply cites the highlighted row
            return bool(self._citing_replies(active))
        return True

    def _citing_replies(self, tab: str) -> tuple[str, ...]:
        """The replies citing the highlighted item (Evidence) or citation (Citations)."""
        if tab == "citations":
            key = self.query_one("#citation-table", FittedTable).cursor_key()
            if key is not None and key.startswith("dangling:"):
                return (key.split(":")[1],)
        item = self._current_item("#citation-table" if tab == "citations" else "#item-table")
        return item.cited_by if item is not None else ()

    @on(TabbedContent.TabActivated)
    def tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """Keys act on the tab a person is looking at: focus its table, else its scrolling text,
        else the tab strip (focus left on the hidden pane's widget would pull its tab back)."""
        pane = event.pane
        lists = pane.query("DataTable, OptionList") if pane is not None else None
        scrolls = pane.query(VerticalScroll) if pane is not None else None
        if lists:
            lists.first().focus()
        elif scrolls:
            scrolls.first().focus()  # arrows and page keys scroll it at once, no Tab needed
        else:
            event.tabbed_content.query_one(Tabs).focus()
        self.refresh_bindings()
        if event.pane is not None and event.pane.id == "evidence" and self.evidence_pending:
            self._show_item(self._current_item())
        elif event.pane is not None and event.pane.id == "request":
            self._show_request()

    @on(DataTable.RowHighlighted, "#item-table")
    def item_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.view is not None and event.row_key.value is not None:
            self._show_item(next((i for i in self.view.items if i.citation_id == event.row_key.value), None))
        self.refresh_bindings()  # t and g depend on the highlighted item

    @on(DataTable.RowHighlighted, "#citation-table")
    def citation_highlighted(self) -> None:
        self.refresh_bindings()  # g depends on the highlighted citation

    @on(DataTable.RowHighlighted, "#candidate-table")
    def candidate_highlighted(self) -> None:
        self._show_candidate()

    @on(DataTable.HeaderSelected, "#candidate-table")
    def candidate_header(self, event: DataTable.HeaderSelected) -> None:
        key = str(event.column_key.value)
        if key not in CANDIDATE_SORTS:
            self.notify(f"Candidates cannot be sorted by {key}; filter by it instead.", timeout=3)
            return
        self._sort_candidates(key, not self.descending if key == self.sort else key in SCORE_SORTS)

    @on(Input.Changed, "#candidate-filter")
    def candidate_filter(self, event: Input.Changed) -> None:
        value = event.value
        match = STAGE_FILTER.search(value)
        stage = next((s for s in Stage if match and s.value == match.group(1)), None)
        self.stage_filter = stage
        self.filter_text = (STAGE_FILTER.sub(" ", value) if stage else value).strip()
        self.reload_candidates()

    @on(Funnel.StageSelected)
    def funnel_stage(self, event: Funnel.StageSelected) -> None:
        """A funnel line filters the candidates to its stage (the first line, to all of them)."""
        self.query_one("#candidate-filter", Input).value = f"stage:{event.stage.value}" if event.stage else ""
        self.action_show_tab("candidates")

    @on(DataTable.RowSelected, "#citation-table")
    def citation_selected(self) -> None:
        self.action_jump()

    def action_show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_jump(self) -> None:
        """From a citation (Citations tab) to its item (Evidence tab)."""
        key = self.query_one("#citation-table", FittedTable).cursor_key()
        if key is None:
            return
        if key.startswith("dangling:"):
            self.notify("That citation was not shown to the model in this snapshot.", severity="warning")
            return
        self.jump_to(key)

    def action_go_to_reply(self) -> None:
        """To the reply citing the highlighted item (Evidence) or citation (Citations), in the
        timeline: the one below this screen when it shows this session, else a new one."""
        refs = self._citing_replies(self.query_one(TabbedContent).active)
        if not refs:
            self.notify("No reply cites this item.", timeout=3)
            return
        session_id, _, seq = refs[0].rpartition("#")
        from scopelens.inspector.screens.timeline import TimelineScreen

        below = self.app.screen_stack[-2] if len(self.app.screen_stack) > 2 else None
        if isinstance(below, TimelineScreen) and below.session_id == session_id:
            below.move_to_event(int(seq))
            self.app.pop_screen()
        else:
            self.app.push_screen(TimelineScreen(session_id, seq=int(seq)))

    def jump_to(self, citation_id: str) -> None:
        self.action_show_tab("evidence")
        items = self.query_one("#item-table", DataTable)
        index = items.get_row_index(citation_id)
        items.move_cursor(row=index)
        items.focus()

    def action_load_more(self) -> None:
        request = self.paging.next_page()
        if request is not None:
            after, generation = request
            self.load_candidates(self.filter_text, self.stage_filter, self.sort, self.descending, after, generation)

    def action_focus_filter(self) -> None:
        self.query_one("#candidate-filter", Input).focus()

    def action_reverse_sort(self) -> None:
        self._sort_candidates(self.sort, not self.descending)

    def action_cycle_sort(self) -> None:
        key = CANDIDATE_SORTS[(CANDIDATE_SORTS.index(self.sort) + 1) % len(CANDIDATE_SORTS)]
        self._sort_candidates(key, key in SCORE_SORTS)

    def _sort_candidates(self, key: str, descending: bool) -> None:
        """Sort by ``key``; callers start scores highest first, the other keys ascending."""
        self.sort, self.descending = key, descending
        self.reload_candidates()

    def action_step_snapshot(self, step: int) -> None:
        """The session's next or previous snapshot, on the tab shown now (it replaces this screen,
        so esc still goes back to where this one was opened from)."""
        if self.snapshot_id not in self.session_snapshots:
            return
        index = self.session_snapshots.index(self.snapshot_id) + step
        if not 0 <= index < len(self.session_snapshots):
            self.notify(f"This is the session's {'last' if step > 0 else 'first'} snapshot.", timeout=3)
            return
        tab = self.query_one(TabbedContent).active or self.initial_tab
        self.app.switch_screen(SnapshotScreen(self.session_snapshots[index], tab=tab))

    def action_drift(self) -> None:
        from scopelens.inspector.screens.drift import DriftScreen

        self.app.push_screen(DriftScreen(self.snapshot_id, run=True))

    def action_why_not(self) -> None:
        """Ask why-not, starting from the highlighted row: a candidate's source_ref on
        Candidates, the item's on Evidence and Citations."""
        from scopelens.inspector.screens.whynot import WhyNotScreen

        tab = self.query_one(TabbedContent).active
        prefill = ""
        if tab == "candidates":
            key = self.query_one("#candidate-table", FittedTable).cursor_key()
            row = self.candidate_rows.get(key) if key is not None else None
            prefill = row.source_ref if row is not None else ""
        elif tab in ("evidence", "citations"):
            item = self._current_item("#item-table" if tab == "evidence" else "#citation-table")
            prefill = item.source_ref if item is not None else ""
        self.app.push_screen(WhyNotScreen(self.snapshot_id, prefill=prefill))

    def action_copy_id(self) -> None:
        self.host.copy_id(self.snapshot_id)
