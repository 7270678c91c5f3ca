"""OpenHands V0 trajectories read into the neutral model: three real runs from OpenHands'
tests (MIT) and a synthetic one written from the documented events (system prompt, recall
of repository instructions, a file read, two tool calls of one response, condensation)."""

from __future__ import annotations

from pathlib import Path

from scopelens.core.importers.detect import read_session_file
from scopelens.core.importers.model import Mention

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "openhands"


def test_real_runs() -> None:
    basic = read_session_file(FIXTURES / "basic.json")
    assert basic.title.startswith("Please create a simple 2048 game")
    assert [c.tool_calls for c in basic.calls] == [("str_replace_editor /workspace/game_2048.py",), ("finish",)]
    assert basic.items[2].kind == "tool-output" and basic.items[2].mentions == (Mention("game_2048.py"),)
    renamed = read_session_file(FIXTURES / "wrong_initial_state.json")
    assert renamed.first_mentioned("2048.py")[0].number == 4  # the listing after the mv
    gui = read_session_file(FIXTURES / "basic_gui_mode.json")
    assert len(gui.calls) == 5 and gui.unknown == {}  # environment state changes are not context


def test_recall_read_and_condensation() -> None:
    session = read_session_file(FIXTURES / "synthetic_recall_condensation.json")
    assert [item.kind for item in session.items[:3]] == ["instruction", "task", "instruction"]
    assert "Run tests with pytest -q." in session.items[2].text and session.items[2].tool == "recall"
    first = session.calls[0]
    assert first.tool_calls == (
        "str_replace_editor /workspace/src/auth/session.py", "execute_bash grep -rn require_role src",
    )
    read = session.items[4]
    assert (read.kind, read.path, read.line_start, read.line_end) == ("file-read", "src/auth/session.py", 10, 12)
    # the condenser ran before the next model call: that call saw the summary, not the lines
    after = session.calls[1]
    assert after.replaced == (0, 6) and [item.kind for item in session.visible(after)] == ["summary"]
    assert session.first_seen("src/auth/session.py") is None
