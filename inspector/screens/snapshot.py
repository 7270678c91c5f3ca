"""One retrieval's audit snapshot: Scope, Plan, Funnel, Candidates, Evidence, Citations."""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static, TabbedContent, TabPane

from core.readmodel import CANDIDATE_SORTS, CandidateRow, ItemView, Page, SnapshotView
from inspector.actions import bindings_for
from inspector.widgets.text_input import TextInput
from inspector.widgets.evidence import EvidenceText
from inspector.widgets.funnel import Funnel

TABS = ("scope", "plan", "funnel", "candidates", "evidence", "citations")
CANDIDATE_PAGE = 200


class SnapshotScreen(Screen[None]):
    """Everything one snapshot recorded, with hashes re-derived on display."""

    SCOPE = "snapshot"
    CSS_PATH = "snapshot.tcss"
    BINDINGS = bindings_for("snapshot")

    class Loaded(Message):
        def __init__(self, view: SnapshotView) -> None:
            super().__init__()
            self.view = view

    class CandidatesLoaded(Message):
        def __init__(self, page: Page[CandidateRow], append: bool) -> None:
            super().__init__()
            self.page = page
            self.append = append

    def __init__(self, snapshot_id: str, tab: str = "evidence") -> None:
        super().__init__()
        self.snapshot_id = snapshot_id
        self.initial_tab = tab
        self.view: SnapshotView | None = None
        self.sort = "ordinal"
        self.filter_text = ""
        self.next_after: tuple[object, ...] | None = None
        self.candidate_count = 0

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"snapshot {self.snapshot_id}", id="snapshot-title", markup=False)
        with TabbedContent(initial=self.initial_tab, id="tabs"):
            with TabPane("1 Scope", id="scope"):
                yield VerticalScroll(Static("", id="scope-text", markup=False))
            with TabPane("2 Plan", id="plan"):
                yield DataTable(id="plan-table", cursor_type="row")
            with TabPane("3 Funnel", id="funnel"):
                yield Funnel(id="funnel-chart")
                yield Static("", id="budget-line", markup=False)
            with TabPane("4 Candidates", id="candidates"):
                yield TextInput(placeholder="filter by source_ref or reason", id="candidate-filter")
                yield DataTable(id="candidate-table", cursor_type="row", zebra_stripes=True)
                yield Static("", id="candidate-status", classes="status-line", markup=False)
            with TabPane("5 Evidence", id="evidence"):
                with Horizontal():
                    yield DataTable(id="item-table", cursor_type="row")
                    with Vertical(id="evidence-side"):
                        yield EvidenceText(id="evidence-text")
            with TabPane("6 Citations", id="citations"):
                yield DataTable(id="citation-table", cursor_type="row")
                yield Static("", id="citation-note", classes="status-line", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        plan = self.query_one("#plan-table", DataTable)
        for label, width in (("sub-query", 18), ("intent", 13), ("sources", 38), ("top k", 5), ("min authority", 13),
                             ("strongest terms", 60)):
            plan.add_column(label, width=width)
        candidates = self.query_one("#candidate-table", DataTable)
        for key, label, width in (("ordinal", "#", 3), ("stage", "stage", 13), ("source_ref", "source_ref", 44),
                                  ("final", "final", 5), ("lexical", "lex", 5), ("anchor", "anchor", 6),
                                  ("authority", "auth", 5), ("recency", "recency", 7), ("reason", "reason", 60)):
            candidates.add_column(label, key=key, width=width)
        # Fixed widths: auto widths in a tab pane depend on when rows arrive relative to layout.
        items = self.query_one("#item-table", DataTable)
        for label, width in (("cite", 10), ("source_ref", 34), ("✓", 1), ("trim", 4)):
            items.add_column(label, width=width)
        citations = self.query_one("#citation-table", DataTable)
        for label, width in (("citation", 10), ("item", 5), ("source_ref", 40), ("cited by", 30), ("ok", 2)):
            citations.add_column(label, width=width)
        self.load()

    # ------------------------------------------------------------------ loading

    @work(thread=True, exclusive=True, group="snapshot")
    def load(self) -> None:
        self.post_message(self.Loaded(self.app.model.snapshot(self.snapshot_id)))  # type: ignore[attr-defined]

    @work(thread=True, exclusive=True, group="candidates")
    def load_candidates(self, append: bool) -> None:
        page = self.app.model.candidates(  # type: ignore[attr-defined]
            self.snapshot_id, text=self.filter_text, sort=self.sort, descending=self.sort != "ordinal"
            and self.sort not in ("stage", "source_ref"), after=self.next_after if append else None, limit=CANDIDATE_PAGE,
        )
        self.post_message(self.CandidatesLoaded(page, append))

    @on(Loaded)
    def show(self, message: Loaded) -> None:
        view = self.view = message.view
        ok = view.block_ok and all(i.hash_ok for i in view.items)
        title = self.query_one("#snapshot-title", Static)
        title.update(
            f"{'✓' if ok else '✗'} snapshot {view.id} · session {view.session_id} · turn {view.turn} · "
            f"{view.created_at.strftime('%Y-%m-%d %H:%M:%S')} UTC · hash {view.content_hash[:12]}"
        )
        title.set_class(not ok, "bad-mark")
        self._show_scope(view)
        self._show_plan(view)
        self.query_one(Funnel).show(view.funnel)
        missing = f" · missing evidence: {', '.join(view.missing_evidence)}" if view.missing_evidence else ""
        self.query_one("#budget-line", Static).update(f"budget: {view.budget_line}{missing}")
        self._show_items(view)
        self._show_citations(view)
        self.load_candidates(append=False)

    def _show_scope(self, view: SnapshotView) -> None:
        scope, pins = view.scope, view.pins
        tb, ep, budget = scope.time_boundary, scope.evidence_policy, scope.budget

        def when(value: object) -> str:
            return value.isoformat().replace("+00:00", "Z") if value is not None else "-"  # type: ignore[attr-defined]

        lines = [
            f"project        {scope.project}",
            f"branch         {scope.branch or '-'}",
            f"workspace      {scope.workspace_root or '-'}",
            f"purpose        {scope.purpose.value}",
            f"user           {scope.user_id} (roles: {', '.join(scope.permission_context.roles) or '-'}; "
            f"grants: {', '.join(scope.permission_context.grants) or '-'})",
            f"sources        {', '.join(s.value for s in scope.allowed_sources)}",
            f"denied         {', '.join(s.value for s in scope.denied_sources) or '-'}",
            f"path prefixes  {', '.join(scope.path_prefixes) or '(whole workspace)'}",
            f"time boundary  as_of {when(tb.as_of) if tb.as_of else 'the snapshot time'} · include_after "
            f"{when(tb.include_after)} · exclude_after {when(tb.exclude_after)} · stale memory "
            f"{'allowed' if tb.allow_stale_memory else 'refused'}",
            f"evidence       citations {'required' if ep.require_citation else 'optional'} · accepted: "
            f"{', '.join(a.value for a in ep.accepted_authority)} · max unverified {ep.max_unverified_items}",
            f"budget         {budget.max_tokens} tokens · {budget.max_items} items · per source: "
            + (", ".join(f"{k.value} {v}" for k, v in budget.per_source.items()) or "-"),
            "",
            f"engine         {pins.engine_version}",
            f"config hash    {pins.config_hash[:16]}",
            f"policy hash    {pins.policy_hash[:16]}",
            f"index version  {pins.index_version}",
            f"git            {pins.git_commit[:12] if pins.git_commit else '-'}"
            + (" (dirty)" if pins.git_dirty else ""),
        ]
        self.query_one("#scope-text", Static).update("\n".join(lines))

    def _show_plan(self, view: SnapshotView) -> None:
        table = self.query_one("#plan-table", DataTable)
        table.clear()
        for query in view.plan.sub_queries:
            strongest = sorted(query.terms, key=lambda t: (-t.weight, t.term))[:6]
            table.add_row(query.id, query.intent.value, ", ".join(s.value for s in query.sources), str(query.top_k),
                          query.min_authority.value, ", ".join(f"{t.term}×{t.weight:g}" for t in strongest))

    def _show_items(self, view: SnapshotView) -> None:
        table = self.query_one("#item-table", DataTable)
        table.clear()
        for item in view.items:
            table.add_row(item.citation_id, item.source_ref, "✓" if item.hash_ok else "✗",
                          str(len(item.trim_ranges)) if item.trim_ranges else "-", key=item.citation_id)
        self._show_item(view.items[0] if view.items else None)

    def _show_item(self, item: ItemView | None) -> None:
        self.query_one(EvidenceText).show(item)

    def _show_citations(self, view: SnapshotView) -> None:
        table = self.query_one("#citation-table", DataTable)
        table.clear()
        known = {i.citation_id: i for i in view.items}
        for item in view.items:
            table.add_row(item.citation_id, f"#{item.rank}", item.source_ref, ", ".join(item.cited_by) or "not cited",
                          "✓", key=item.citation_id)
        dangling = [(ref, cid) for ref, ids in view.response_citations for cid in ids if cid not in known]
        for ref, citation_id in dangling:
            table.add_row(citation_id, "-", "(not in this snapshot)", ref, "✗", key=f"dangling:{ref}:{citation_id}")
        note = f"{len(view.items)} citations in the block"
        note += f" · {len(dangling)} cited but not shown ✗" if dangling else ""
        note += " · j: jump to the item"
        self.query_one("#citation-note", Static).update(note)

    @on(CandidatesLoaded)
    def show_candidates(self, message: CandidatesLoaded) -> None:
        table = self.query_one("#candidate-table", DataTable)
        if not message.append:
            table.clear()
            self.candidate_count = 0
        for row in message.page.rows:
            scores = row.scores

            def fmt(name: str) -> str:
                value = scores.get(name)
                return "-" if value is None else f"{value:.2f}"

            source = row.source_ref + (" (probe)" if row.from_probe else "")
            table.add_row(str(row.ordinal), row.stage.value, source, fmt("final"), fmt("lexical"), fmt("anchor"),
                          fmt("authority"), fmt("recency"), row.reason, key=str(row.ordinal))
        self.candidate_count += len(message.page.rows)
        self.next_after = message.page.next_after
        more = " · m: more" if self.next_after else ""
        self.query_one("#candidate-status", Static).update(
            f"{self.candidate_count} of {message.page.total} candidates · sorted by {self.sort}{more}"
        )

    # ------------------------------------------------------------------ interaction

    @on(DataTable.RowHighlighted, "#item-table")
    def item_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.view is not None and event.row_key.value is not None:
            self._show_item(next((i for i in self.view.items if i.citation_id == event.row_key.value), None))

    @on(Input.Changed, "#candidate-filter")
    def candidate_filter(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()
        self.next_after = None
        self.load_candidates(append=False)

    @on(DataTable.RowSelected, "#citation-table")
    def citation_selected(self) -> None:
        self.action_jump()

    def action_show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_jump(self) -> None:
        """From a citation (Citations tab) to its item (Evidence tab)."""
        table = self.query_one("#citation-table", DataTable)
        if table.row_count == 0:
            return
        key = str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
        if key.startswith("dangling:"):
            self.notify("That citation was not shown to the model in this snapshot.", severity="warning")
            return
        self.jump_to(key)

    def jump_to(self, citation_id: str) -> None:
        self.action_show_tab("evidence")
        items = self.query_one("#item-table", DataTable)
        index = items.get_row_index(citation_id)
        items.move_cursor(row=index)
        items.focus()

    def action_load_more(self) -> None:
        if self.next_after is not None:
            self.load_candidates(append=True)

    def action_cycle_sort(self) -> None:
        self.sort = CANDIDATE_SORTS[(CANDIDATE_SORTS.index(self.sort) + 1) % len(CANDIDATE_SORTS)]
        self.next_after = None
        self.load_candidates(append=False)

    def action_drift(self) -> None:
        from inspector.screens.drift import DriftScreen

        self.app.push_screen(DriftScreen(self.snapshot_id))

    def action_why_not(self) -> None:
        from inspector.screens.whynot import WhyNotScreen

        self.app.push_screen(WhyNotScreen(self.snapshot_id))

    def action_copy_id(self) -> None:
        self.app.copy_id(self.snapshot_id)  # type: ignore[attr-defined]
