"""stdout holds the result only: no stray blank first line from a progress bar (`index`,
`drift --session`); progress goes to stderr, and only for a terminal. (Every other command:
tests/cli/test_display_text.py.)"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

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


def _run_with_stderr_on_a_terminal(argv: list[str], cwd: Path) -> tuple[int, str, str]:
    """Run the CLI in a subprocess whose stderr is a pseudo-terminal (so progress bars are
    drawn) and whose stdout is a pipe, as in `scopelens index . > out.txt` at a prompt."""
    controller, terminal = pty.openpty()
    drawn = bytearray()

    def drain() -> None:
        with contextlib.suppress(OSError):  # EIO once the child closes the terminal
            while chunk := os.read(controller, 4096):
                drawn.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100"}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "scopelens.core.cli", *argv], cwd=cwd, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=terminal, timeout=120, check=False,
        )
    finally:
        os.close(terminal)
        reader.join(timeout=10)
        os.close(controller)
    return done.returncode, done.stdout.decode(), drawn.decode(errors="replace")


def test_with_progress_drawn_on_the_terminal_stdout_still_starts_with_the_result(tmp_path):
    workspace = tmp_path / "ws"
    write(workspace, AUTH_FILES)
    db = ["--db", str(tmp_path / "s.db")]
    code, out, drawn = _run_with_stderr_on_a_terminal(["index", str(workspace), "--project", "alpha", "--branch", "main", *db],
                                                      tmp_path)
    assert code == 0 and "indexing" in drawn  # the bar was drawn, on stderr
    assert out.splitlines()[0].startswith("alpha@main"), repr(out[:80])
    intent = tmp_path / "intent.json"
    intent.write_text('{"purpose": "answer-question", "question": "expected role admin received undefined"}')
    assert main(["retrieve", "--project", "alpha", "--intent", str(intent), "--json", *db]) == 0
    code, out, drawn = _run_with_stderr_on_a_terminal(["sessions", "--json", *db], tmp_path)
    (session,) = [s["id"] for s in json.loads(out)["sessions"]]
    code, out, drawn = _run_with_stderr_on_a_terminal(["drift", "--session", session, *db], tmp_path)
    assert code == 0 and "drift" in drawn
    assert out.splitlines()[0].startswith("drift "), repr(out[:80])
