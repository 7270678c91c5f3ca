"""One definition of a turn ([3/9] item 8): the sessions list, the timeline footer, the CLI
and replay say the same number for every sample session."""

from __future__ import annotations

import json

from textual.widgets import DataTable, Static

from scopelens.core.audit.replay import replay_session
from scopelens.core.cli import main
from scopelens.core.contracts import turn_count
from scopelens.core.store.store import Store
from scopelens.inspector.screens.sessions import SessionsScreen
from scopelens.inspector.screens.timeline import TimelineScreen
from tests.inspector.conftest import build_app, open_screen, settle


def test_turn_count_is_the_last_turn_number_and_turn_zero_is_setup():
    assert turn_count([0, 0, 1, 1, 2, 3]) == 3
    assert turn_count([0]) == 0
    assert turn_count([]) == 0


async def test_every_screen_and_command_counts_the_same_turns(sample_store, capsys):
    with Store.open(str(sample_store), read_only=True) as store:
        expected = {
            s.header.id: turn_count(e.turn for e in store.events(s.header.id)) for s in store.list_sessions()
        }
        replayed = {sid: {t.turn for t in replay_session(store, sid).turns} for sid in expected}
    assert all(n > 0 for n in expected.values())
    assert main(["sessions", "--db", str(sample_store), "--json"]) == 0
    listed = {s["id"]: s["turns"] for s in json.loads(capsys.readouterr().out)["sessions"]}
    assert listed == expected
    for sid, turns in replayed.items():
        assert max(turns, default=0) <= expected[sid]
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, SessionsScreen)
        table = app.screen.query_one(DataTable)
        for sid, n in expected.items():
            assert str(table.get_cell(sid, "turns")) == str(n)
            app.push_screen(TimelineScreen(sid))
            await settle(pilot)
            status = str(app.screen.query_one("#timeline-status", Static).render())
            assert status.startswith(f"{n} turns ·"), status
            app.pop_screen()
            await settle(pilot)


async def test_candidate_rows_are_numbered_from_one(sample_store):
    from scopelens.inspector.screens.snapshot import SnapshotScreen
    from tests.inspector.conftest import first_snapshot_of

    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, SnapshotScreen(first_snapshot_of(sample_store)))
        await pilot.press("4")
        await settle(pilot)
        table = app.screen.query_one("#candidate-table", DataTable)
        first_key = next(iter(table.rows))
        assert str(table.get_row(first_key)[0]) == "1"
