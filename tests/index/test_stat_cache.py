"""A re-index does not read a file whose size and modification time equal those its live
version was indexed with, and never trusts a time too close to the walk (a file written in the
same clock tick as the run could change again without its time changing)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from sqlmodel import col, select

from scopelens.core.index.indexer import RACY_NS, index_workspace
from scopelens.core.store.store import Store
from scopelens.core.store.tables import IndexDocumentRow
from tests.support.workspaces import write

FILES = {f"pkg/module_{n}.py": f"def handler_{n}(request):\n    return {n}\n" for n in range(5)}
HOUR_NS = 3600 * 1_000_000_000


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files read through ``Path.read_bytes`` (how the indexer reads)."""
    seen: list[str] = []
    real = Path.read_bytes

    def counting(self: Path) -> bytes:
        seen.append(self.name)
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", counting)
    return seen


def _age(root: Path, ns: int = HOUR_NS) -> None:
    """Make every file look modified ``ns`` ago."""
    for path in root.rglob("*.py"):
        moment = time.time_ns() - ns
        os.utime(path, ns=(moment, moment))


def _mtimes(store: Store) -> dict[str, int | None]:
    with store.read() as conn:
        rows = conn.execute(
            select(col(IndexDocumentRow.path), col(IndexDocumentRow.mtime_ns)).where(
                col(IndexDocumentRow.valid_to).is_(None)
            )
        ).all()
    return dict(rows)


def test_an_unchanged_workspace_is_not_read_again(tmp_path: Path, store_url: str, reads: list[str]) -> None:
    root = tmp_path / "ws"
    write(root, FILES)
    _age(root)
    with Store.open(store_url, create=True) as store:
        first = index_workspace(store, root, project="p", workers=0)
        assert len(first.added) == 5 and all(_mtimes(store).values())
        reads.clear()
        again = index_workspace(store, root, project="p", workers=0)
    assert again.nothing_changed and again.unchanged == 5
    assert reads == []


def test_a_time_close_to_the_walk_is_not_trusted(tmp_path: Path, store_url: str, reads: list[str]) -> None:
    """A file indexed right after it was written keeps no time; rewritten with the same size
    and the same time (as within one clock tick), the next run still reads it and sees the change."""
    root = tmp_path / "ws"
    write(root, FILES)
    target = root / "pkg" / "module_1.py"
    stat = target.stat()
    assert time.time_ns() - stat.st_mtime_ns < RACY_NS
    with Store.open(store_url, create=True) as store:
        index_workspace(store, root, project="p", workers=0)
        assert _mtimes(store)["pkg/module_1.py"] is None
        target.write_text(FILES["pkg/module_1.py"].replace("return 1", "return 7"), encoding="utf-8")
        os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert target.stat().st_size == stat.st_size
        report = index_workspace(store, root, project="p", workers=0)
    assert report.changed == ["pkg/module_1.py"]


def test_a_touched_file_is_read_once_then_trusted_again(tmp_path: Path, store_url: str, reads: list[str]) -> None:
    """Same bytes, newer time: read and found unchanged (no version), and its new time is
    recorded, so the run after does not read it."""
    root = tmp_path / "ws"
    write(root, FILES)
    _age(root, 2 * HOUR_NS)
    with Store.open(store_url, create=True) as store:
        index_workspace(store, root, project="p", workers=0)
        _age(root)  # touched an hour later; content unchanged
        reads.clear()
        touched = index_workspace(store, root, project="p", workers=0)
        assert touched.nothing_changed and sorted(reads) == sorted(Path(path).name for path in FILES)
        reads.clear()
        index_workspace(store, root, project="p", workers=0)
    assert reads == []


def test_versions_without_a_recorded_time_are_read_and_given_one(tmp_path: Path, store_url: str, reads: list[str]) -> None:
    """Versions indexed before times were recorded (or racy ones) have none: the next run reads
    their files once and records the time."""
    root = tmp_path / "ws"
    write(root, FILES)
    _age(root)
    with Store.open(store_url, create=True) as store:
        index_workspace(store, root, project="p", workers=0)
        with store.write() as conn:
            conn.execute(IndexDocumentRow.__table__.update().values(mtime_ns=None))  # type: ignore[attr-defined]
        reads.clear()
        index_workspace(store, root, project="p", workers=0)
        assert len(reads) == 5 and all(_mtimes(store).values())
        reads.clear()
        index_workspace(store, root, project="p", workers=0)
    assert reads == []


def test_rehash_sees_a_rewrite_that_kept_size_and_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The limit of trusting sizes and times, as git has it: a tree rewritten by a tool that
    keeps both (``tar -p``, ``rsync -t``) looks unchanged. ``scopelens index --rehash`` reads
    every file and finds the change."""
    import json

    from scopelens.core.cli import main

    root = tmp_path / "ws"
    write(root, FILES)
    _age(root)
    db = str(tmp_path / "s.db")
    argv = ["index", str(root), "--project", "p", "--db", db, "--json"]
    assert main(argv) == 0
    capsys.readouterr()
    target = root / "pkg" / "module_2.py"
    kept = target.stat()
    target.write_text(FILES["pkg/module_2.py"].replace("return 2", "return 9"), encoding="utf-8")
    os.utime(target, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["nothing_changed"]  # the documented limit
    assert main([*argv, "--rehash"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["changed"] == ["pkg/module_2.py"] and report["index_version"] == "p@-#2"
