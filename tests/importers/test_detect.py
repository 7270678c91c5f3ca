"""The format of a session file is told from its content; unknown and not-yet-imported
formats are said so in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scopelens.core.errors import InvalidInputError
from scopelens.core.importers.detect import detect_format, read_sessions


def test_codex_and_openhands_are_recognised_not_imported(tmp_path: Path) -> None:
    codex = tmp_path / "rollout.jsonl"
    codex.write_text(json.dumps({"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {}}) + "\n")
    assert detect_format(codex.read_text(), "r") == "codex"
    with pytest.raises(InvalidInputError, match=r"rollout\.jsonl: codex sessions are recognised but not imported"):
        read_sessions(codex)
    openhands = tmp_path / "trajectory.json"
    openhands.write_text(json.dumps([{"id": 0, "action": "message", "message": "hi"}]))
    assert detect_format(openhands.read_text(), "t") == "openhands"


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
