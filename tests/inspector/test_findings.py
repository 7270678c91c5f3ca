"""The demo's findings inside the inspector, each leading to its turn ([5/9] item 15, onboarding).

`scopelens demo` keeps the findings of each scenario in its stamp (demo.json beside demo.db);
the read model reads them back for the store the stamp names (by store head), and the
Findings screen lists them and opens what each is about.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, Static, TabbedContent

from scopelens.core.readmodel import FindingView, ReadModel
from scopelens.core.record.demo import STAMP
from scopelens.core.vocab import FindingKind, Outcome, Stage
from scopelens.inspector.screens.findings import FindingsScreen
from scopelens.inspector.screens.sessions import SessionsScreen
from scopelens.inspector.screens.snapshot import SnapshotScreen
from scopelens.inspector.screens.timeline import TimelineScreen
from scopelens.inspector.widgets.fitted_table import FittedTable
from tests.inspector.conftest import build_app, settle

AUTH = "s-auth-role-mock-0001"
BILLING = "s-billing-cents-time-0001"


def stamped_findings(db: Path) -> list[dict[str, object]]:
    stamp = json.loads((db.parent / STAMP).read_text(encoding="utf-8"))
    return [finding for scenario in stamp["scenarios"] for finding in scenario["findings"]]


def findings_of(db: Path):  # type: ignore[no-untyped-def]
    model = ReadModel(str(db))
    try:
        return model.findings()
    finally:
        model.close()


def one(views: tuple[FindingView, ...], kind: FindingKind, outcome: Outcome, session: str = AUTH,
        **where: object) -> FindingView:
    found = [v for v in views if v.finding.kind == kind and v.finding.outcome == outcome
             and v.finding.session_id == session and all(getattr(v.finding, k) == w for k, w in where.items())]
    assert len(found) == 1, found
    return found[0]


# --------------------------------------------------------------------------- the read model


def test_the_read_model_reads_the_demo_stamps_findings_and_where_each_leads(demo_store):
    view = findings_of(demo_store)
    assert view.problem is None and view.stamp == str(demo_store.parent / STAMP)
    stamped = stamped_findings(demo_store)
    assert len(view.findings) == len(stamped) > 20
    assert sorted(json.dumps(v.finding.model_dump(mode="json"), sort_keys=True) for v in view.findings) == sorted(
        json.dumps(f, sort_keys=True) for f in stamped
    )
    # Session by session as recorded, turn by turn within each.
    sessions = [v.finding.session_id for v in view.findings]
    assert sessions == sorted(sessions, key=sessions.index)
    for session in set(sessions):
        turns = [v.finding.turn for v in view.findings if v.finding.session_id == session]
        assert turns == sorted(turns)
    findings = view.findings

    cited = one(findings, FindingKind.CITATION_DISTORTION, Outcome.OCCURRED, citation_id="rule#2")
    assert (cited.opens, cited.seq, cited.reply_ref) == ("citation", 6, f"{AUTH}#6")  # the reply citing it
    by_path = one(findings, FindingKind.CITATION_DISTORTION, Outcome.OCCURRED, BILLING)
    assert (by_path.opens, by_path.seq) == ("event", 9)  # cited by path: the reply itself
    shown = one(findings, FindingKind.SIMILARITY_POLLUTION, Outcome.OCCURRED, source_ref="src/admin/rbac.ts:10-12")
    assert (shown.opens, shown.seq) == ("item", 4)  # the snapshot event of turn 2
    withheld = one(findings, FindingKind.CANDIDATE_MEMORY_POLLUTION, Outcome.PREVENTED)
    assert (withheld.opens, withheld.seq) == ("candidate", 4)
    withheld_doc = one(findings, FindingKind.SIMILARITY_POLLUTION, Outcome.PREVENTED,
                       source_ref="docs/admin/permissions.md:1-8")
    assert withheld_doc.finding.stage == Stage.OUT_OF_SCOPE  # outside turn 3's path prefixes: the probe's row
    assert (withheld_doc.opens, withheld_doc.seq) == ("candidate", 7)
    never_searched = one(findings, FindingKind.SIMILARITY_POLLUTION, Outcome.PREVENTED, source_ref="src/admin/rbac.ts:10-12")
    assert never_searched.finding.stage == Stage.OUT_OF_SCOPE and "never searched" in never_searched.finding.explanation
    assert (never_searched.opens, never_searched.seq) == ("event", 7)  # no row: the snapshot's event


def test_a_store_without_a_stamp_has_no_findings_and_no_problem(sample_store):
    view = findings_of(sample_store)
    assert (view.findings, view.stamp, view.problem) == ((), None, None)


BAD_STAMPS = {
    "not json": "{ not json",
    "not utf-8": b"\xff\xfe{}",
    "a list": "[]",
    "another kind": json.dumps({"kind": "something-else"}),
    "no scenarios": None,  # the real stamp without its scenarios
    "a finding that is no finding": None,  # a finding of an unknown kind
}


def break_stamp(db: Path, case: str) -> None:
    path = db.parent / STAMP
    content = BAD_STAMPS[case]
    if content is not None:
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        return
    stamp = json.loads(path.read_text(encoding="utf-8"))
    if case == "no scenarios":
        del stamp["scenarios"]
    else:
        stamp["scenarios"][0]["findings"][0]["kind"] = "no-such-kind"
    path.write_text(json.dumps(stamp), encoding="utf-8")


@pytest.mark.parametrize("case", sorted(BAD_STAMPS))
def test_a_malformed_stamp_gives_no_findings_and_one_line_saying_so(demo_store, case):
    break_stamp(demo_store, case)
    view = findings_of(demo_store)
    assert view.findings == () and view.stamp is not None
    assert view.problem is not None and "\n" not in view.problem and view.problem.startswith(f"{STAMP} beside this store")


def test_a_stamp_written_for_another_store_head_is_not_believed(demo_store):
    """The stamp names the store head it was built with: a store that moved on gets none, and is told why."""
    path = demo_store.parent / STAMP
    stamp = json.loads(path.read_text(encoding="utf-8"))
    stamp["store_head"] = "0" * 64
    path.write_text(json.dumps(stamp), encoding="utf-8")
    view = findings_of(demo_store)
    assert view.findings == ()
    assert view.problem is not None and "written for store head 000000000000…" in view.problem


# --------------------------------------------------------------------------- the screen


def status(app, widget_id: str) -> str:  # type: ignore[no-untyped-def]
    return str(app.screen.query_one(f"#{widget_id}", Static).render())


async def open_findings(pilot) -> FindingsScreen:  # type: ignore[no-untyped-def]
    await settle(pilot)
    assert isinstance(pilot.app.screen, SessionsScreen)
    await pilot.press("f")
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, FindingsScreen)
    return screen


async def test_the_sessions_screen_counts_the_findings_and_f_lists_every_one(demo_store):
    app = build_app(demo_store)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        count = len(stamped_findings(demo_store))
        assert status(app, "sessions-status").endswith(f" · {count} findings: f lists them")
        screen = await open_findings(pilot)
        table = screen.query_one(FittedTable)
        assert table.row_count == count and table.has_focus
        assert status(app, "findings-status").startswith(f"{count} findings in 4 sessions: ")
        first = table.row_values("0")
        assert (first["outcome"].plain, first["kind"], first["session"], first["turn"]) == (
            "occurred", "similarity-pollution", AUTH, "2")
        assert str(first["outcome"].style.color.get_truecolor().hex).upper() == app.theme_variables["legible-error"].upper()
        detail = status(app, "finding-detail")
        assert "selected on word overlap alone" in detail and "enter: the item on the snapshot's Evidence tab" in detail
        assert not screen.query_one("#findings-empty").display


async def highlight(pilot, screen: FindingsScreen, view: FindingView) -> None:  # type: ignore[no-untyped-def]
    assert screen.view is not None
    table = screen.query_one(FittedTable)
    table.move_cursor(row=screen.view.findings.index(view))
    await settle(pilot)


async def test_enter_opens_what_each_finding_is_about_and_t_its_turn(demo_store):
    """A citation on Citations, a shown item on Evidence, a withheld row on Candidates, else the event."""
    app = build_app(demo_store)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await open_findings(pilot)
        assert screen.view is not None
        findings = screen.view.findings

        async def enter_on(view: FindingView):  # type: ignore[no-untyped-def]
            await highlight(pilot, screen, view)
            await pilot.press("enter")
            await settle(pilot)
            return app.screen

        # The reply cited [rule#2], which the model was never shown: its ✗ row on Citations.
        opened = await enter_on(one(findings, FindingKind.CITATION_DISTORTION, Outcome.OCCURRED))
        assert isinstance(opened, SnapshotScreen) and opened.snapshot_id == "snap-auth-role-mock-0001"
        assert opened.query_one(TabbedContent).active == "citations"
        assert opened.query_one("#citation-table", FittedTable).cursor_key() == f"dangling:{AUTH}#6:rule#2"
        await pilot.press("escape")
        await settle(pilot)

        # An item selected on word overlap alone: that item on Evidence.
        opened = await enter_on(one(findings, FindingKind.SIMILARITY_POLLUTION, Outcome.OCCURRED, citation_id="doc#1"))
        assert isinstance(opened, SnapshotScreen) and opened.query_one(TabbedContent).active == "evidence"
        assert opened.query_one("#item-table", FittedTable).cursor_key() == "doc#1"
        await pilot.press("escape")
        await settle(pilot)

        # A memory the engine withheld: its row on Candidates, filtered to it.
        opened = await enter_on(one(findings, FindingKind.CANDIDATE_MEMORY_POLLUTION, Outcome.PREVENTED))
        assert isinstance(opened, SnapshotScreen) and opened.query_one(TabbedContent).active == "candidates"
        assert opened.query_one("#candidate-filter", Input).value == "memory:mem-auth-default-guess"
        rows = opened.candidate_rows
        assert [r.source_ref for r in rows.values()] == ["memory:mem-auth-default-guess"]
        key = opened.query_one("#candidate-table", FittedTable).cursor_key()
        assert key is not None and rows[key].stage.value == "memory-status"
        await pilot.press("escape")
        await settle(pilot)

        # A citation by path the block never had: the reply, in the timeline.
        opened = await enter_on(one(findings, FindingKind.CITATION_DISTORTION, Outcome.OCCURRED, BILLING))
        assert isinstance(opened, TimelineScreen) and opened.session_id == BILLING
        assert opened.rows[opened.query_one(DataTable).cursor_row] == (3, 9)
        await pilot.press("escape")
        await settle(pilot)

        # t: any finding's turn in the timeline, on the event it is about.
        await highlight(pilot, screen, one(findings, FindingKind.SIMILARITY_POLLUTION, Outcome.PREVENTED,
                                           source_ref="src/admin/rbac.ts:10-12"))
        await pilot.press("t")
        await settle(pilot)
        opened = app.screen
        assert isinstance(opened, TimelineScreen) and opened.session_id == AUTH
        assert opened.rows[opened.query_one(DataTable).cursor_row] == (3, 7)


async def test_a_store_without_findings_says_where_they_come_from(sample_store):
    app = build_app(sample_store)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "finding" not in status(app, "sessions-status")
        screen = await open_findings(pilot)
        empty = status(app, "findings-empty")
        assert screen.query_one("#findings-empty").display and not screen.query_one(FittedTable).display
        assert empty.startswith("No findings are recorded for this store.") and "`scopelens demo`" in empty
        assert status(app, "findings-status") == "no findings"
        await pilot.press("enter", "t")  # nothing to open: nothing happens
        await settle(pilot)
        assert app.screen is screen


@pytest.mark.parametrize("case", ["not json", "a finding that is no finding"])
async def test_a_malformed_stamp_is_said_on_the_screen_and_nothing_crashes(demo_store, case):
    break_stamp(demo_store, case)
    app = build_app(demo_store)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "finding" not in status(app, "sessions-status")
        screen = await open_findings(pilot)
        empty = status(app, "findings-empty")
        assert empty.startswith(f"✗ {STAMP} beside this store") and "`scopelens demo`" in empty
        assert screen.query_one("#findings-empty").has_class("bad-mark")
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, SessionsScreen) and app.is_running
