"""The server's record of a workspace sees every change the index would read, and no other."""

from __future__ import annotations

import os
import time
from pathlib import Path

from scopelens.core.clients.stat_cache import WorkspaceStats
from tests.support.workspaces import write


def aged(root: Path) -> None:
    hour_ago = time.time_ns() - 3600 * 10**9
    for path in [root, *root.rglob("*")]:
        os.utime(path, ns=(hour_ago, hour_ago))


def recorded(tmp_path: Path) -> tuple[Path, WorkspaceStats]:
    root = tmp_path / "ws"
    write(root, {"src/a.py": "A = 1\n", "src/empty/.keep": "", "docs/b.md": "# b\n", ".gitignore": "build/\n",
                 "build/out.py": "X = 1\n"})
    aged(root)
    seen = WorkspaceStats.record(root, max_bytes=1_000_000)
    assert seen is not None and seen.unchanged()
    return root, seen


def test_an_edit_an_addition_a_removal_and_an_ignore_change_are_seen(tmp_path: Path) -> None:
    changes = [
        lambda root: (root / "src" / "a.py").write_text("A = 22\n"),
        lambda root: (root / "src" / "empty" / "new.py").write_text("B = 1\n"),
        lambda root: (root / "docs" / "b.md").unlink(),
        lambda root: (root / ".gitignore").write_text("build/\nsrc/\n"),
        lambda root: (root / "new_dir").mkdir(),
    ]
    for n, change in enumerate(changes):
        root, seen = recorded(tmp_path / str(n))
        change(root)
        assert not seen.unchanged(), n


def test_ignored_files_are_not_watched_and_fresh_times_are_not_trusted(tmp_path: Path) -> None:
    root, seen = recorded(tmp_path)
    (root / "build" / "out.py").write_text("X = 2 changed\n")  # ignored: the index never reads it
    assert seen.unchanged()
    (root / "src" / "a.py").write_text("A = 3\n")  # just written: its time may not move on the next write
    assert WorkspaceStats.record(root, max_bytes=1_000_000) is None
