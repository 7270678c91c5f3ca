"""SWE-agent trajectories read into the neutral model: the real GPT-4 runs of the session
fixtures (0.x text actions on pydicom; 1.x function calling on SWE-agent's test repo)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scopelens.core.errors import InvalidInputError, UnreadableFileError
from scopelens.core.importers.detect import read_session_file, read_sessions
from scopelens.core.importers.model import Mention
from scopelens.core.importers.swe_agent import parse_swe_agent

SHARED = Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "swe-agent"
PYDICOM = SHARED / "pydicom__pydicom-1458.traj"
FUNCTION_CALLING = SHARED / "6e44b9__sweagenttestrepo-1c2844.function_calling.traj"
GOLD = "pydicom/pixel_data_handlers/numpy_handler.py"


def test_the_pydicom_run_shows_when_the_gold_file_was_seen() -> None:
    session = read_session_file(PYDICOM)
    assert (session.format, session.agent, session.cwd) == ("swe-agent", "SWE-agent 0.x", "/pydicom__pydicom")
    assert session.title == "Pixel Representation attribute should be optional for pixel data handler"
    assert len(session.calls) == 12 and [c.number for c in session.calls] == list(range(1, 13))
    kinds = [item.kind for item in session.items[:3]]
    assert kinds == ["instruction", "instruction", "task"]  # system prompt, demonstration, the issue
    assert session.items[1].tool == "demonstration"
    # the agent opened numpy_handler.py at line 293: a window of lines 273-372, seen by call 6
    call, item = session.first_seen(GOLD)
    assert (call.number, item.tool, item.line_start, item.line_end, item.ref) == (6, "open", 273, 372, "history[12]")
    assert "293:" in item.text
    # named before that: find_file listed it (call 5 saw the list), and a traceback frame earlier?
    mentioned_call, mentioned = session.first_mentioned(GOLD)
    assert mentioned_call.number <= 5 and mentioned.kind in ("search", "command-output")
    search = next(i for i in session.items if i.kind == "search")
    assert search.tool == "find_file" and Mention(GOLD) in search.mentions
    assert Mention("pydicom/overlays/numpy_handler.py") in search.mentions
    # every call sees everything before it (no compaction in SWE-agent)
    assert all(c.visible_from == 0 for c in session.calls)
    assert session.calls[4].tool_calls == ("open pydicom/pixel_data_handlers/numpy_handler.py 293",)
    assert any("exact model input" in note for note in session.not_recorded)


def test_a_function_calling_run_reads_tool_calls_and_tool_messages() -> None:
    session = read_session_file(FUNCTION_CALLING)
    assert (session.agent, session.model, session.cwd) == ("SWE-agent 1.x", "gpt-4o", "/SWE-agent__test-repo")
    assert [c.tool_calls[0].split()[0] for c in session.calls] == ["find_file", "open", "edit", "bash"]
    call, item = session.first_seen("tests/missing_colon.py")
    assert (call.number, item.tool, item.line_start, item.line_end) == (3, "open", 1, 10)
    assert session.first_mentioned("tests/missing_colon.py")[0].number == 2  # the find_file hit


def test_a_directory_of_trajectories(tmp_path: Path) -> None:
    for source in (PYDICOM, FUNCTION_CALLING):
        (tmp_path / source.name).write_bytes(source.read_bytes())
    (tmp_path / "notes.txt").write_text("not a session")
    (tmp_path / "pydicom__pydicom-1458.instance.json").write_bytes((SHARED / "pydicom__pydicom-1458.instance.json").read_bytes())
    found = read_sessions(tmp_path)
    assert [s.session_id for s in found.sessions] == [
        "6e44b9__sweagenttestrepo-1c2844.function_calling", "pydicom__pydicom-1458",
    ]
    assert len(found.skipped) == 1 and "instance.json: a JSON document of no known session format" in found.skipped[0]


def test_a_truncated_trajectory_names_the_file_and_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.traj"
    text = PYDICOM.read_text()
    broken.write_text(text[: len(text) // 2])
    with pytest.raises(UnreadableFileError, match=r"broken\.traj:\d+: not valid JSON .*nothing was imported"):
        read_session_file(broken)


def test_a_message_without_a_role_names_its_entry() -> None:
    data = json.loads(PYDICOM.read_text())
    del data["history"][3]["role"]
    with pytest.raises(InvalidInputError, match=r"x\.traj: history\[3\] is not a message with a role"):
        parse_swe_agent(data, name="x.traj")
    with pytest.raises(InvalidInputError, match="not a SWE-agent trajectory"):
        parse_swe_agent({"history": []}, name="x.traj")


def _with_queries(data: dict, *, elide_from_step: int | None = None) -> dict:  # type: ignore[type-arg]
    """The trajectory as SWE-agent >= 1.1 writes it: each step's ``query``, the messages sent
    for its call (the history before its assistant message); from ``elide_from_step`` on, the
    first observation elided as the ``last_n_observations`` processor does."""
    history = data["history"]
    assistants = [i for i, m in enumerate(history) if m["role"] == "assistant"]
    # the last step (its submit) has no assistant message in this history: it saw all of it
    ends = (assistants + [len(history)] * len(data["trajectory"]))[: len(data["trajectory"])]
    first_observation = next(i for i, m in enumerate(history) if m["role"] == "tool")
    steps = []
    for k, (step, at) in enumerate(zip(data["trajectory"], ends, strict=True)):
        query = [dict(m) for m in history[:at]]
        if elide_from_step is not None and k >= elide_from_step and first_observation < at:
            query[first_observation]["content"] = "Old environment output: (12 lines omitted)"
        steps.append({**step, "query": query})
    return {**data, "trajectory": steps}


def test_query_is_the_exact_input_of_each_call_and_shows_an_elided_observation():
    data = json.loads(FUNCTION_CALLING.read_text(encoding="utf-8"))
    exact = parse_swe_agent(_with_queries(data), name="fc.traj")
    rebuilt = parse_swe_agent(data, name="fc.traj")
    assert not any("exact model input" in note for note in exact.not_recorded)
    assert any("exact model input" in note for note in rebuilt.not_recorded)
    # without a processor's change, the query is the history: the same context, call by call
    # (and one call more: the last step, whose reply the history does not hold)
    assert len(exact.calls) == len(data["trajectory"]) == len(rebuilt.calls) + 1
    assert [[i.text for i in exact.visible(c)] for c in exact.calls[: len(rebuilt.calls)]] == [
        [i.text for i in rebuilt.visible(c)] for c in rebuilt.calls]
    elided = parse_swe_agent(_with_queries(data, elide_from_step=2), name="fc.traj")
    third = elided.calls[2]
    texts = [i.text for i in elided.visible(third)]
    assert "Old environment output: (12 lines omitted)" in texts
    assert third.replaced is not None and third.replaced[1] == third.visible_from  # the whole input sent again
    assert all(i.ref.startswith("trajectory[2].query[") for i in elided.visible(third))
    assert "Old environment output: (12 lines omitted)" not in [i.text for i in elided.visible(elided.calls[1])]
