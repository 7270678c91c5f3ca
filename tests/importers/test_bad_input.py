"""Bad session files, fuzzed: whatever is done to a real or synthetic fixture (cut short,
a byte changed, a value of the wrong type put anywhere in its JSON), reading it either works
or fails with one ``ScopelensError`` naming the file; never another exception."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scopelens.core.errors import ScopelensError
from scopelens.core.importers.detect import read_session_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sessions"
SHARED = Path(__file__).resolve().parents[1] / "fixtures" / "sessions"
FILES = [
    SHARED / "swe-agent" / "6e44b9__sweagenttestrepo-1c2844.function_calling.traj",
    SHARED / "claude-code" / "sample_session.jsonl",
    FIXTURES / "claude-code" / "synthetic_read_grep_compact.jsonl",
    FIXTURES / "codex" / "synthetic_rollout.jsonl",
    FIXTURES / "codex" / "synthetic_legacy_rollout.jsonl",
    FIXTURES / "openhands" / "synthetic_recall_condensation.json",
]
ODD_VALUES = st.sampled_from([None, 0, -1, 3.5, True, "", "x", [], [None], {}, {"type": "text"}, [{"type": 7}]])


def _read_or_fail_cleanly(path: Path) -> None:
    try:
        read_session_file(path)
    except ScopelensError as error:
        message = str(error)
        assert str(path) in message and "\n" not in message, message


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value (keys of objects, indexes of lists)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += _paths(inner, (*prefix, index))
    return found


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: (_replaced(v, rest, new) if k == head else v) for k, v in value.items()}
    return [(_replaced(v, rest, new) if i == head else v) for i, v in enumerate(value)]


@pytest.mark.parametrize("source", FILES, ids=lambda p: p.name)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_value_of_the_wrong_type_anywhere(tmp_path: Path, source: Path, data: st.DataObject) -> None:
    text = source.read_text(encoding="utf-8")
    target = tmp_path / source.name
    if source.suffix == ".jsonl":
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]
        number = data.draw(st.integers(0, len(lines) - 1))
        place = data.draw(st.sampled_from(_paths(lines[number])))
        lines[number] = _replaced(lines[number], place, data.draw(ODD_VALUES))
        target.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    else:
        document = json.loads(text)
        place = data.draw(st.sampled_from(_paths(document)))
        target.write_text(json.dumps(_replaced(document, place, data.draw(ODD_VALUES))), encoding="utf-8")
    _read_or_fail_cleanly(target)


@pytest.mark.parametrize("source", FILES, ids=lambda p: p.name)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_cut_short_or_a_byte_changed(tmp_path: Path, source: Path, data: st.DataObject) -> None:
    raw = source.read_bytes()
    cut = data.draw(st.integers(0, len(raw)))
    changed = bytearray(raw[:cut])
    if changed and data.draw(st.booleans()):
        changed[data.draw(st.integers(0, len(changed) - 1))] = data.draw(st.integers(0, 255))
    target = tmp_path / source.name
    target.write_bytes(bytes(changed))
    _read_or_fail_cleanly(target)
