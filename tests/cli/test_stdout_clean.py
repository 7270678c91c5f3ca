"""stdout holds the result only: no stray blank first line from a progress bar (`index`,
`drift --session`); progress goes to stderr, and only for a terminal."""

from __future__ import annotations

from scopelens.core.cli import main
from tests.support.workspaces import AUTH_FILES, write


def test_index_and_session_drift_start_with_their_result(tmp_path, capsys):
    workspace = tmp_path / "ws"
    write(workspace, AUTH_FILES)
    db = ["--db", str(tmp_path / "s.db")]
    assert main(["index", str(workspace), "--project", "alpha", "--branch", "main", *db]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("alpha@main"), repr(out[:80])
    intent = tmp_path / "intent.json"
    intent.write_text('{"purpose": "answer-question", "question": "expected role admin received undefined"}')
    assert main(["retrieve", "--project", "alpha", "--intent", str(intent), "--session", "s-1", *db]) == 2  # unknown session
    capsys.readouterr()
    assert main(["retrieve", "--project", "alpha", "--intent", str(intent), *db]) == 0
    session = capsys.readouterr().err.split("-- session ")[1].split()[0]
    assert main(["drift", "--session", session, *db]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("drift "), repr(out[:80])
