"""Opening a store in the inspector writes nothing: no file in its directory is created or
changed (-journal, -wal and -shm included). Run as ``nobody`` when we are root, because root
ignores file modes: a store the reader cannot write is the real test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

READER = textwrap.dedent(
    """
    import asyncio, sys
    from scopelens.core.readmodel import ReadModel
    from scopelens.inspector.app import make_app
    from scopelens.inspector.screens.snapshot import SnapshotScreen
    from scopelens.inspector.screens.timeline import TimelineScreen

    db = sys.argv[1]
    model = ReadModel(db)
    page = model.sessions()
    session = page.rows[0].id
    model.verify_status(session)
    model.timeline(session)
    snapshot_id = model.snapshot_ids(session)[0]
    model.snapshot(snapshot_id)
    model.candidates(snapshot_id, sort="final", descending=True)
    model.why_not(snapshot_id, "path", "README.md")
    model.drift_runs(snapshot_id)
    model.close()

    async def walk():
        app = make_app(db, cursor_blink=False)
        async with app.run_test(size=(120, 40)) as pilot:
            for screen in (None, TimelineScreen(session), SnapshotScreen(snapshot_id, tab="candidates")):
                if screen is not None:
                    app.push_screen(screen)
                for _ in range(3):
                    await app.workers.wait_for_complete()
                    await pilot.pause()
            assert app.open_error is None, app.open_error

    asyncio.run(walk())
    print("read-only walk ok")
    """
)


def _listing(directory: Path) -> dict[str, tuple[int, int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_mode) for p in sorted(directory.iterdir())}


def _as_nobody(paths: list[Path]) -> bool:
    return all(
        subprocess.run(["runuser", "-u", "nobody", "--", "test", "-r", str(p)], capture_output=True).returncode == 0
        for p in paths
    )


def _code_root(tmp_path: Path) -> Path:
    """A readable copy of the checkout laid out as installed: ``scopelens/core``, ``scopelens/inspector``."""
    code = tmp_path / "code"
    for package in ("core", "inspector"):
        shutil.copytree(REPO / package, code / "scopelens" / package, ignore=shutil.ignore_patterns("__pycache__"))
    for path in [code, *code.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return code


def _reader_command(tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """The interpreter and PYTHONPATH a reader runs with (as nobody when we are root)."""
    site = Path(sysconfig.get_paths()["purelib"])
    code_root = _code_root(tmp_path)
    if os.geteuid() != 0:
        return [sys.executable], {"PYTHONPATH": f"{code_root}{os.pathsep}{site}"}
    python = shutil.which("python3", path="/usr/bin:/usr/local/bin") or sys.executable
    version = subprocess.run([python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
    if version.stdout.strip() != str(tuple(sys.version_info[:2])):
        python = sys.executable
    packages = site
    if not _as_nobody([site, Path(python)]):
        # The venv is private to root: give nobody a readable copy.
        packages = tmp_path / "site"
        shutil.copytree(site, packages)
        for path in [tmp_path, *packages.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
    return ["runuser", "-u", "nobody", "--", python], {"PYTHONPATH": f"{code_root}{os.pathsep}{packages}"}


@pytest.fixture
def open_dir():
    """A directory other users can traverse (pytest's own temp root is private to its user)."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="scopelens-ro-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_inspector_opens_a_store_without_writing_anything(sample_store, open_dir):
    tmp_path = open_dir
    store_dir = tmp_path / "readonly"
    store_dir.mkdir()
    db = store_dir / "samples.db"
    shutil.copy2(sample_store, db)
    store_dir.chmod(0o755)
    db.chmod(0o644)
    tmp_path.chmod(0o755)
    script = tmp_path / "reader.py"
    script.write_text(READER)
    script.chmod(0o644)
    before = _listing(store_dir)
    command, env = _reader_command(tmp_path)
    environment = {**os.environ, **env, "HOME": str(tmp_path), "TEXTUAL": ""}
    result = subprocess.run([*command, str(script), str(db)], capture_output=True, text=True, env=environment,
                            cwd=tmp_path, timeout=240)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "read-only walk ok" in result.stdout
    assert _listing(store_dir) == before


def test_the_reader_really_cannot_write_there(open_dir):
    """Guards the test above: as the reader, writing into the store's directory fails."""
    tmp_path = open_dir
    if os.geteuid() != 0:
        pytest.skip("the unprivileged-user guard needs root to switch to nobody")
    store_dir = tmp_path / "readonly"
    store_dir.mkdir()
    store_dir.chmod(0o755)
    tmp_path.chmod(0o755)
    attempt = subprocess.run(["runuser", "-u", "nobody", "--", "touch", str(store_dir / "x-journal")], capture_output=True)
    assert attempt.returncode != 0
