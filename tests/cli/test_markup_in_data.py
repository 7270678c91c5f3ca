"""Recorded text is printed as it is, never read as rich markup: a question with ``[/]`` in it
made `show` and `replay` fail with a MarkupError traceback, and ``[red]…[/red]`` in a message
would have restyled the output. Every command that prints stored text is run on such a session."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from scopelens.core.cli import main
from tests.support.workspaces import AUTH_FILES, write

QUESTION = "why does [/] the [red]admin[/red] role [bold]fail"


@pytest.fixture
def recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    root = tmp_path / "ws"
    write(root, AUTH_FILES)
    db = str(tmp_path / "store.db")
    assert main(["index", str(root), "--project", "[alpha]", "--db", db]) == 0
    intent = tmp_path / "intent.json"
    intent.write_text(json.dumps({"purpose": "fix-test", "question": QUESTION}), encoding="utf-8")
    assert main(["retrieve", "--project", "[alpha]", "--intent", str(intent), "--db", db]) == 0
    err = capsys.readouterr().err
    session = re.search(r"session (\S+) snapshot (\S+):", err)
    assert session, err
    return {"db": db, "session": session.group(1), "snapshot": session.group(2)}


@pytest.mark.parametrize(
    "argv",
    [
        ["show", "{session}"],
        ["show", "{snapshot}"],
        ["replay", "{session}"],
        ["sessions"],
        ["drift", "{snapshot}"],
        ["drift", "--list"],
        ["search", "admin role", "--project", "[alpha]"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_stored_text_with_markup_characters_prints_as_it_is(capsys, recorded, argv):
    code = main([part.format(**recorded) for part in argv] + ["--db", recorded["db"]])
    out, err = capsys.readouterr()
    assert code == 0, err
    if argv[0] in ("show", "replay") and "{session}" in argv:
        assert QUESTION in out, out[:400]
    if argv[0] == "sessions":
        assert "[alpha]" in out
