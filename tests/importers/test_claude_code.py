"""Claude Code transcripts read into the neutral model: the synthetic transcript written from
the documented record shapes (grouped assistant lines, Grep, Read with a line range, a rewound
fork, a sidechain, compaction, an injected reminder, a traceback), and two public fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from scopelens.core.errors import UnreadableFileError
from scopelens.core.importers.detect import detect_format, read_session_file
from scopelens.core.importers.model import Mention

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "claude-code"
SYNTHETIC = FIXTURES / "synthetic_read_grep_compact.jsonl"
SHARED_SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "claude-code" / "sample_session.jsonl"


def test_what_each_call_saw_in_the_synthetic_transcript() -> None:
    session = read_session_file(SYNTHETIC)
    assert (session.format, session.session_id, session.cwd) == (
        "claude-code", "5f1c0000-0000-4000-8000-00000000c0de", "/home/dev/app",
    )
    assert (session.title, session.agent, session.model) == (
        "Fix the admin role check", "Claude Code 2.0.46", "claude-sonnet-4-5",
    )
    assert session.unknown == {"file-history-snapshot": 1}
    assert "the system prompt" in session.not_recorded
    # two assistant lines of one response (msg_1) are one call; the rewound reply and the
    # sidechain are not in the conversation
    assert [c.tool_calls for c in session.calls] == [
        ("Grep /home/dev/app",), ("Read /home/dev/app/src/auth/session.ts",), (),
        ("Bash python -m pytest tests/test_role.py",), (),
    ]
    assert session.calls[0].response == "Let me search for the role check."
    assert all("rewound" not in item.text and "sidechain" not in item.text for item in session.items)
    grep = session.items[2]
    assert grep.kind == "search" and grep.mentions == (Mention("src/auth/session.ts"), Mention("src/auth/role.ts"))
    call, read = session.first_seen("src/auth/session.ts")
    assert (call.number, read.tool, read.line_start, read.line_end) == (3, "Read", 10, 14)
    # named first by the prompt itself ("Look at src/auth/session.ts"), then by the Grep list
    named_at, named_by = session.first_mentioned("src/auth/session.ts")
    assert (named_at.number, named_by.kind) == (1, "task")


def test_compaction_replaces_what_came_before() -> None:
    session = read_session_file(SYNTHETIC)
    after = session.calls[3]
    visible = session.visible(after)
    assert [item.kind for item in visible] == ["summary", "instruction"]
    assert after.replaced == (0, 5)  # the prompt, two answers, the Grep list and the Read
    assert all(item.path != "src/auth/session.ts" for item in visible)
    last = session.calls[4]
    assert last.replaced is None and session.visible(last)[-1].mentions == (Mention("src/auth/role.py", 12),)


def test_the_shared_sample_and_a_public_fixture() -> None:
    sample = read_session_file(SHARED_SAMPLE)
    assert (sample.cwd, sample.title, len(sample.calls)) == ("/project", "Test session for JSONL parsing", 3)
    assert [item.kind for item in sample.items] == [
        "task", "model-output", "tool-output", "command-output", "task", "model-output",
    ]
    public = read_session_file(FIXTURES / "representative_messages.jsonl")
    assert (public.model, len(public.calls)) == ("claude-3-sonnet-20240229", 5)
    assert detect_format(SYNTHETIC.read_text(), "x") == "claude-code"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"type":"user","uuid":"a","message":{"role":"user","content":"hi"}}\n{"type": "assistant", "uuid":',
         r"t\.jsonl:2: not valid JSON"),
        ('{"type":"user","uuid":"a","message":{"role":"user","content":"hi"}}\n[1, 2]\n',
         r"t\.jsonl:2: a line is not a JSON object"),
        ("", r"t\.jsonl: the file is empty"),
    ],
)
def test_bad_lines_name_the_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(content)
    with pytest.raises(UnreadableFileError, match=message):
        read_session_file(path)
