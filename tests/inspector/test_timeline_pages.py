"""A long imported session's timeline reads a page of turns at a time: n past the last turn
shown reads the next page, m reads it outright, and the status says how much is shown."""

from __future__ import annotations

import json

from textual.widgets import DataTable, Static

from scopelens.core.importers.store_import import import_paths
from scopelens.core.store.store import Store
from scopelens.inspector.screens.timeline import PAGE_TURNS, TimelineScreen
from tests.inspector.conftest import build_app, open_screen, settle


def _long_codex_session(path, calls: int) -> None:  # type: ignore[no-untyped-def]
    lines = [{"timestamp": "2026-03-01T10:00:00Z", "type": "session_meta",
              "payload": {"id": "long", "cwd": "/home/dev/app", "base_instructions": {"text": "You are Codex."}}},
             {"timestamp": "2026-03-01T10:00:00Z", "type": "response_item",
              "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the bug."}]}}]
    for n in range(calls):
        lines.append({"timestamp": "2026-03-01T10:00:01Z", "type": "response_item",
                      "payload": {"type": "function_call", "name": "shell", "call_id": f"c{n}",
                                  "arguments": json.dumps({"command": ["bash", "-lc", f"echo step {n}"]})}})
        lines.append({"timestamp": "2026-03-01T10:00:02Z", "type": "response_item",
                      "payload": {"type": "function_call_output", "call_id": f"c{n}", "output": f"step {n}"}})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


async def test_a_long_session_is_read_a_page_of_turns_at_a_time(tmp_path):
    source = tmp_path / "rollout-long.jsonl"
    _long_codex_session(source, PAGE_TURNS + 30)
    db = tmp_path / "s.db"
    with Store.open(str(db), create=True) as store:
        [outcome] = import_paths(store, [source], project="app").outcomes
    assert outcome.calls > PAGE_TURNS
    app = build_app(db)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, TimelineScreen(outcome.session_id))
        screen = app.screen
        assert isinstance(screen, TimelineScreen)
        assert max(t for t, _ in screen.rows) == PAGE_TURNS - 1
        status = str(screen.query_one("#timeline-status", Static).render())
        assert status.startswith(f"turns 0-{PAGE_TURNS - 1} of {outcome.calls}") and "(m: more)" in status
        table = screen.query_one(DataTable)
        table.move_cursor(row=len(screen.rows) - 1)
        await pilot.press("n")  # past the last turn shown: the next page is read, and the cursor steps into it
        await settle(pilot)
        assert screen.rows[table.cursor_row][0] == PAGE_TURNS
        assert max(t for t, _ in screen.rows) == outcome.calls
        status = str(screen.query_one("#timeline-status", Static).render())
        assert status.startswith(f"{outcome.calls} turns")
        assert not screen.check_action("load_more", ())
        turns = [t for t, _ in screen.rows]
        assert turns == sorted(turns)
