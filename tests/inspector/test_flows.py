"""Pilot flows: what a person does in the inspector, driven with run_test()."""

from __future__ import annotations

import io
import os
import sqlite3
from datetime import timedelta

from rich.console import Console
from textual.widgets import DataTable, Input, Static, TabbedContent

from scopelens.core.contracts import RetrievalBudget, RetrievalScope
from scopelens.inspector.screens.drift import DriftScreen
from scopelens.inspector.screens.sessions import SessionsScreen
from scopelens.inspector.screens.snapshot import SnapshotScreen
from scopelens.inspector.screens.timeline import TimelineScreen
from scopelens.inspector.screens.whynot import WhyNotScreen
from scopelens.inspector.widgets.fitted_table import FittedTable
from tests.inspector.conftest import build_app, drifted_snapshot_of, open_screen, settle
from tests.pipeline.test_seed_seven import FIX_TEST
from tests.support.workspaces import AUTH_FILES, Lab


async def test_open_session_walk_to_turn_3_open_snapshot_and_jump_from_citation(sample_store):
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        sessions = app.screen.query_one(FittedTable)
        while sessions.cursor_key() != "s-auth-role-mock-0001":
            await pilot.press("down")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, TimelineScreen)
        timeline = app.screen
        for _ in range(3):
            await pilot.press("n")
        assert timeline.rows[timeline.query_one(DataTable).cursor_row][0] == 3
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, SnapshotScreen)
        snapshot = app.screen
        assert snapshot.view is not None and snapshot.view.turn == 3
        await pilot.press("6")
        await settle(pilot)
        citations = snapshot.query_one("#citation-table", FittedTable)
        citations.focus()
        await pilot.press("down")
        target = citations.cursor_key()
        await pilot.press("j")
        await settle(pilot)
        assert snapshot.query_one(TabbedContent).active == "evidence"
        assert snapshot.query_one("#item-table", FittedTable).cursor_key() == target
        header = str(snapshot.query_one("#evidence-header", Static).render())
        assert target in header


async def test_compute_drift_after_a_workspace_change_and_see_the_diff(sample_store):
    snapshot_id = drifted_snapshot_of(sample_store)
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, DriftScreen(snapshot_id))
        await pilot.press("r")
        await settle(pilot)
        screen = app.screen
        assert screen.report is not None
        classes = [item.drift_class.value for item in screen.report.items]
        assert "content-changed" in classes
        table = screen.query_one("#drift-table", DataTable)
        table.move_cursor(row=classes.index("content-changed"))
        await pilot.press("enter")
        await settle(pilot)
        from rich.console import Console

        console = Console(width=120, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
        console.print(screen.query_one("#drift-diff", Static).content)
        diff = console.export_text()
        assert diff.startswith("---") and "\n+" in diff and "\n-" in diff
        runs = screen.query_one("#runs-table", DataTable)
        assert runs.row_count >= 1


async def test_why_not_on_an_out_of_scope_path_and_a_trimmed_away_line(tmp_path):
    lab = Lab(tmp_path)
    filler = "".join(f"Paragraph {n}: role guidance in general prose.\n" for n in range(50))
    doc = (
        "# Mock roles\n\nexpected role admin received undefined: see below.\n"
        + filler
        + "Never change the production default role.\n"
    )
    lab.index(lab.workspace("a", dict(AUTH_FILES, **{"docs/mock-roles.md": doc})), "alpha")
    lab.index(lab.workspace("b", {"docs/beta.md": "# Beta\n\nexpected role admin received undefined beta\n"}), "beta")
    observation = lab.retriever().retrieve(FIX_TEST, RetrievalScope(project="alpha", budget=RetrievalBudget(max_tokens=420)))
    lab.close()
    app = build_app(tmp_path / "lab.db")
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, WhyNotScreen(observation.snapshot_id))
        await pilot.press(*"docs/beta.md", "enter")
        await settle(pilot)
        answer = str(app.screen.query_one("#whynot-answer", Static).render())
        assert answer.startswith("stage: out-of-scope") and "other projects" in answer and "project beta" not in answer
        app.screen.query_one(Input).value = ""
        await pilot.click("#kind-text")
        app.screen.query_one(Input).focus()
        await pilot.press(*"Never change the production default role", "enter")
        await settle(pilot)
        answer = str(app.screen.query_one("#whynot-answer", Static).render())
        assert answer.startswith("stage: trimmed-away") and "trimmed: lines" in answer


async def test_a_tampered_store_shows_a_red_mark_and_the_problem(sample_store):
    with sqlite3.connect(sample_store) as conn:
        conn.execute("DROP TRIGGER events_no_update")
        body = conn.execute("SELECT body FROM events WHERE session_id='s-auth-role-mock-0001' AND seq=1").fetchone()[0]
        forged = bytes(body).replace(b'"text":"', b'"text":"(edited) ', 1)
        assert forged != bytes(body)
        conn.execute("UPDATE events SET body=? WHERE session_id='s-auth-role-mock-0001' AND seq=1", (forged,))
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, SessionsScreen)
        table = app.screen.query_one(DataTable)
        marks = {key.value: table.get_cell(key, "verify") for key in table.rows}
        assert marks["s-auth-role-mock-0001"].plain == "✗"
        problem = marks["s-auth-role-mock-0001"].style
        assert problem.bold and str(problem.color.get_truecolor().hex).upper() == app.theme_variables["legible-error"].upper()
        assert marks["s-billing-cents-time-0001"].plain == "✓"
        app.push_screen(TimelineScreen("s-auth-role-mock-0001"))
        await settle(pilot)
        status = str(app.screen.query_one("#timeline-status", Static).render())
        assert "verify problem" in status and "changed: event s-auth-role-mock-0001#" in status


async def test_filter_sort_and_empty_states(sample_store, tmp_path):
    app = build_app(sample_store)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"billing")
        await settle(pilot)
        table = app.screen.query_one(DataTable)
        assert [k.value for k in table.rows] == ["s-billing-cents-time-0001"]
        await pilot.press(*"-nothing-matches")
        await settle(pilot)
        assert table.row_count == 0
        assert "No sessions match" in str(app.screen.query_one("#sessions-empty", Static).render())
        app.screen.query_one(Input).value = ""
        await settle(pilot)
        table.focus()
        await pilot.press("s")
        await settle(pilot)
        assert app.screen.sort == "project"
        assert "sorted by project" in str(app.screen.query_one("#sessions-status", Static).render())


async def test_every_action_is_in_the_palette_and_bindings_have_ids_and_tooltips(sample_store):
    from scopelens.inspector.actions import ACTIONS

    assert all(a.id and a.tooltip and ": " in a.title for a in ACTIONS)
    assert len({a.id for a in ACTIONS}) == len(ACTIONS)
    app = build_app(sample_store)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+t")
        assert app.theme == "textual-light"
        await pilot.press("question_mark")
        await settle(pilot)
        help_table = app.screen.query_one(DataTable)
        await pilot.press("a")  # every screen's keys, not only the sessions screen's
        await settle(pilot)
        assert help_table.row_count == len(ACTIONS) + 1  # plus the built-in palette key


async def test_sessions_arrive_a_screenful_at_a_time_as_the_cursor_goes_down(tmp_path):
    """The first page is what the terminal shows; going down loads the rest by key, each
    session once, and a page fetched for an earlier filter is never shown."""
    from scopelens.core.store.store import Store
    from tests.support.factories import T0

    db = tmp_path / "many.db"
    with Store.open(str(db), create=True) as store:
        for n in range(100):
            store.create_session(project=f"p{n % 3}", title=f"session {n}", session_id=f"s{n:03d}",
                                 created_at=T0 + timedelta(minutes=n))
    app = build_app(db)
    async with app.run_test(size=(100, 24)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        table = screen.query_one(DataTable)
        assert table.row_count == 24
        assert "24 of 100 sessions" in str(screen.query_one("#sessions-status", Static).render())
        await pilot.press("down")
        await settle(pilot)
        assert table.row_count == 24  # not near the end yet
        for _ in range(4):  # the last row loaded is near the end: the next page comes
            await pilot.press("ctrl+end")
            await settle(pilot)
        keys = [k.value for k in table.rows]
        assert keys == [f"s{n:03d}" for n in range(99, -1, -1)]
        assert "100 of 100 sessions" in str(screen.query_one("#sessions-status", Static).render())

        stale = screen.PageLoaded(app.model.sessions(limit=5), append=True, generation=screen.paging.generation - 1)
        screen.post_message(stale)
        await settle(pilot)
        assert [k.value for k in table.rows] == keys
        # A page that repeats sessions already listed (a recorder moved them between pages):
        # each is listed once.
        again = screen.PageLoaded(app.model.sessions(limit=5), append=True, generation=screen.paging.generation)
        screen.post_message(again)
        await settle(pilot)
        assert [k.value for k in table.rows] == keys and len(screen.loaded) == 100


async def test_the_footer_rebuilds_its_keys_only_when_the_keys_change(sample_store):
    """Focus moves and screen switches signal a bindings change; the footer keeps its key
    widgets unless what it shows differs, and then it shows the new state."""
    from textual.widgets._footer import FooterKey

    from scopelens.inspector.widgets.footer import KeysFooter

    app = build_app(sample_store)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        screen = app.screen
        footer = screen.query_one(KeysFooter)
        before = list(footer.query(FooterKey))
        assert before and any(key.action == "load_more" for key in before)
        screen.refresh_bindings()  # a signal with nothing changed
        await settle(pilot)
        assert list(footer.query(FooterKey)) == before
        await pilot.press("slash")  # the filter takes letters: their keys leave the footer
        await settle(pilot)
        assert not any(key.action == "load_more" for key in footer.query(FooterKey))
        await pilot.press("enter")  # back to the table
        await settle(pilot)
        before = list(footer.query(FooterKey))
        assert any(key.action == "load_more" and not key.has_class("-disabled") for key in before)

        # None: shown, but disabled
        screen.check_action = lambda action, parameters: None if action == "load_more" else True  # type: ignore[method-assign]
        screen.refresh_bindings()
        await settle(pilot)
        after = list(footer.query(FooterKey))
        assert after != before
        assert [key.has_class("-disabled") for key in after if key.action == "load_more"] == [True]


async def test_candidates_from_an_earlier_filter_are_never_shown(sample_store):
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, SnapshotScreen("snap-auth-role-mock-0001", tab="candidates"))
        screen = app.screen
        assert isinstance(screen, SnapshotScreen)
        table = screen.query_one("#candidate-table", DataTable)
        everything = [key.value for key in table.rows]
        screen.query_one("#candidate-filter", Input).value = "src/"
        await settle(pilot)
        filtered = [key.value for key in table.rows]
        assert 0 < len(filtered) < len(everything)
        old_page = app.model.candidates("snap-auth-role-mock-0001", limit=200)
        screen.post_message(screen.CandidatesLoaded(old_page, False, screen.paging.generation - 1))
        await settle(pilot)
        assert [key.value for key in table.rows] == filtered


async def test_the_scope_tab_shows_the_task_the_retrieval_served(tmp_path):
    """`task_id` is the harness's name for the task: recorded with the scope and shown here."""
    lab = Lab(tmp_path)
    lab.index(lab.workspace("a", AUTH_FILES), "alpha")
    observation = lab.retriever().retrieve(FIX_TEST, RetrievalScope(project="alpha", task_id="WEB-142"))
    lab.close()
    app = build_app(tmp_path / "lab.db")
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, SnapshotScreen(observation.snapshot_id, tab="scope"))
        console = Console(width=160, record=True, file=io.StringIO())
        console.print(app.screen.query_one("#scope-text", Static).content)
        lines = console.export_text().splitlines()
        assert any(line.split() == ["task", "WEB-142"] for line in lines), lines
