"""Codex rollouts read into the neutral model: the synthetic rollout written from the
documented line shapes (session_meta with the system prompt, developer and AGENTS.md
messages, grouped output items, rg hits, a sed -n range read, apply_patch, compaction with
replacement history, an unknown 2026 line type), and an old unwrapped rollout."""

from __future__ import annotations

from pathlib import Path

from scopelens.core.importers.detect import read_session_file
from scopelens.core.importers.model import Mention

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "codex"


def test_what_each_call_saw_in_the_synthetic_rollout() -> None:
    session = read_session_file(FIXTURES / "synthetic_rollout.jsonl")
    assert (session.session_id, session.cwd, session.agent, session.model) == (
        "019c8a4d-0000-7000-8000-00000000c0de", "/home/dev/app", "Codex CLI 0.104.0", "gpt-5.3-codex",
    )
    assert session.title == "The admin check fails for mocked users; fix requireRole."
    assert session.unknown == {"world_state": 1}  # event_msg lines repeat items: read once, not counted
    kinds = [item.kind for item in session.items[:5]]
    assert kinds == ["instruction", "instruction", "instruction", "instruction", "task"]
    assert session.items[0].tool == "base_instructions"  # the system prompt is recorded by Codex
    # reasoning, commentary and the function call of one sampling request are one call
    assert session.calls[0].tool_calls == ("exec_command rg -n requireRole src",)
    assert session.calls[0].response == "Searching for requireRole."
    search = session.items[6]
    assert search.kind == "search"
    assert search.mentions == (Mention("src/auth/session.ts", 10), Mention("src/auth/role.ts", 3))
    call, read = session.first_seen("src/auth/session.ts")
    assert (call.number, read.line_start, read.line_end) == (3, 10, 14)  # sed -n '10,14p'
    patch = session.items[8]
    assert patch.tool == "apply_patch" and patch.mentions == (Mention("src/test/mocks.ts"),)


def test_compaction_keeps_the_summary_and_the_replacement_history() -> None:
    session = read_session_file(FIXTURES / "synthetic_rollout.jsonl")
    after = session.calls[3]
    assert after.replaced == (0, 9)
    assert [item.kind for item in session.visible(after)] == ["summary", "task"]
    assert session.first_mentioned("tests/test_role.py")[0].number == 5  # the traceback after the compaction


def test_an_old_unwrapped_rollout() -> None:
    session = read_session_file(FIXTURES / "synthetic_legacy_rollout.jsonl")
    assert (session.session_id, session.title, len(session.calls)) == (
        "0a1b2c3d-0000-4000-8000-000000000001", "List the modules.", 2,
    )
    assert session.items[0].text == "You are Codex (legacy)."
    assert session.items[2].text == "auth\ncore\n"  # the JSON-wrapped output of older builds, unwrapped
