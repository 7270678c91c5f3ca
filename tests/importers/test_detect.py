"""The format of a session file is told from its content; a wrong or unknown one is said in
one line naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scopelens.core.errors import InvalidInputError, UnreadableFileError
from scopelens.core.importers.detect import detect_format, read_session_file, read_sessions

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sessions"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("codex/synthetic_rollout.jsonl", "codex"),
        ("codex/synthetic_legacy_rollout.jsonl", "codex"),
        ("openhands/basic.json", "openhands"),
        ("claude-code/synthetic_read_grep_compact.jsonl", "claude-code"),
    ],
)
def test_each_fixture_is_told_from_its_content(path: str, expected: str) -> None:
    assert detect_format((FIXTURES / path).read_text(), path) == expected
    assert read_session_file(FIXTURES / path).format == expected


def test_unknown_content_and_formats(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": "world"}))
    with pytest.raises(InvalidInputError, match="no known session format"):
        read_sessions(other)
    lines = tmp_path / "other.jsonl"
    lines.write_text('{"a": 1}\n{"b": 2}\n')
    with pytest.raises(InvalidInputError, match="JSON lines of no known session format"):
        read_sessions(lines)
    with pytest.raises(InvalidInputError, match="unknown format 'aider'"):
        read_sessions(lines, format="aider")
    with pytest.raises(InvalidInputError, match=r"other\.jsonl: no claude-code conversation in this file"):
        read_sessions(lines, format="claude-code")
    with pytest.raises(InvalidInputError, match="not a SWE-agent trajectory"):
        read_sessions(FIXTURES / "openhands" / "basic.json", format="swe-agent")


def test_a_broken_session_file_fails_a_directory_read(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text((FIXTURES / "codex" / "synthetic_rollout.jsonl").read_text())
    (tmp_path / "b.jsonl").write_text((FIXTURES / "codex" / "synthetic_rollout.jsonl").read_text()[:-40])
    with pytest.raises(UnreadableFileError, match=r"b\.jsonl:\d+: not valid JSON"):
        read_sessions(tmp_path)
