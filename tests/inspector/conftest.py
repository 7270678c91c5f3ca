"""Inspector tests run over the sample sessions, recorded once per test session, deterministically."""

from __future__ import annotations

import asyncio
import inspect
import shutil
import sqlite3
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scopelens.core.clock import SequentialIds, SteppingClock
from scopelens.core.importers.store_import import import_paths
from scopelens.core.record.demo import DEMO_DB, STAMP, ensure_demo_store
from scopelens.core.record.recorder import RECORDER_KEY
from scopelens.core.store.store import Store
from scopelens.inspector.app import InspectorApp, make_app

SAMPLES = Path(__file__).resolve().parents[2] / "sample_sessions"
DRIFT_CLOCK_START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="session")
def demo_build(tmp_path_factory) -> Path:
    """The sample sessions recorded once, as `scopelens demo` records them: the directory that
    holds demo.db and its stamp demo.json (with the findings), never the user's data directory."""
    directory = tmp_path_factory.mktemp("demo-build")
    ensure_demo_store(directory=directory, samples=SAMPLES)
    return directory


@pytest.fixture(scope="session")
def sample_store_master(demo_build) -> Path:
    return demo_build / DEMO_DB


@pytest.fixture
def sample_store(sample_store_master, tmp_path) -> Path:
    """A private copy of the sample store (drift runs write to it), without the demo's stamp."""
    copy = tmp_path / "store" / "samples.db"
    copy.parent.mkdir()
    shutil.copy2(sample_store_master, copy)
    return copy


@pytest.fixture
def demo_store(demo_build, tmp_path) -> Path:
    """A private copy of the demo store with its stamp beside it, as `scopelens demo` leaves them."""
    directory = tmp_path / "demo"
    directory.mkdir()
    for name in (DEMO_DB, STAMP):
        shutil.copy2(demo_build / name, directory / name)
    return directory / DEMO_DB


def drifted_snapshot_of(db: Path) -> str:
    """The auth session's last snapshot (turn 4): it showed ``tests/auth/fixtures.ts``, which
    the session then fixed and re-indexed, so drift finds that item content-changed."""
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT id FROM snapshots WHERE session_id = 's-auth-role-mock-0001' ORDER BY turn DESC, id DESC LIMIT 1"
        ).fetchone()[0]


def first_snapshot_of(db: Path, session_id: str = "s-auth-role-mock-0001") -> str:
    """The id of a session's first snapshot (earliest turn, then id) in a sample store copy."""
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT id FROM snapshots WHERE session_id = ? ORDER BY turn, id LIMIT 1", (session_id,)
        ).fetchone()[0]


def build_app(db: Path, theme: str = "textual-dark", keymap_path: Path | None = None) -> InspectorApp:
    """The production app, deterministic; no keymap unless a test gives one (never the user's)."""
    return make_app(
        str(db),
        cursor_blink=False,
        theme=theme,
        clock=SteppingClock(DRIFT_CLOCK_START, timedelta(seconds=1)),
        ids=SequentialIds("ui"),
        keymap_path=keymap_path,
    )


async def settle(pilot) -> None:  # type: ignore[no-untyped-def]
    """Wait until workers, the messages they post and the work those schedule after a refresh
    have all run: two quiet passes in a row (never sleep)."""
    quiet = 0
    for _ in range(50):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        busy = any(not worker.is_finished for worker in pilot.app.workers) or any(
            getattr(screen, "verify_pending", False) for screen in pilot.app.screen_stack
        )
        quiet = 0 if busy else quiet + 1
        if quiet == 2:
            return


async def open_screen(pilot, screen) -> None:  # type: ignore[no-untyped-def]
    """Let the app start, push ``screen`` over it and let that screen load."""
    await settle(pilot)
    pilot.app.push_screen(screen)
    await settle(pilot)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):  # type: ignore[no-untyped-def]
    """Run ``async def`` tests with asyncio.run (no async plugin needed for Pilot flows)."""
    if inspect.iscoroutinefunction(pyfuncitem.obj):
        names = pyfuncitem._fixtureinfo.argnames
        asyncio.run(pyfuncitem.obj(**{name: pyfuncitem.funcargs[name] for name in names}))
        return True
    return None


IMPORTED_SESSION = "s-imported-0001"
PYDICOM_TRAJECTORY = Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "swe-agent" / "pydicom__pydicom-1458.traj"


@pytest.fixture
def imported_store(tmp_path) -> Path:
    """The real pydicom SWE-agent run imported, deterministically (ids, clock, redaction key)."""
    db = tmp_path / "imported" / "imported.db"
    clock = SteppingClock(datetime(2026, 5, 1, 9, 0, tzinfo=UTC))
    with Store.open(str(db), create=True, clock=clock, ids=SequentialIds("imported"),
                    redaction_key=RECORDER_KEY) as store:
        outcome = import_paths(store, [PYDICOM_TRAJECTORY], project="pydicom").outcomes[0]
    assert outcome.session_id == IMPORTED_SESSION
    return db


@pytest.fixture
def counterfactual_store(tmp_path, request) -> Path:
    """The pydicom run imported over a checkout holding what it read, indexed, with a
    counterfactual retrieval at each call; deterministic (ids, clock, key, a fixed checkout path)."""
    from scopelens.core.importers.counterfactual import run_counterfactuals
    from scopelens.core.importers.instance import read_instance
    from scopelens.core.index.indexer import index_workspace
    from tests.support.pydicom_checkout import INSTANCE, write_checkout

    # the same path on every run (it is in the store), one per test (xdist runs tests side by side)
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)
    fixed = Path(tempfile.gettempdir()) / "scopelens-snapshot-fixtures" / "counterfactual" / name
    shutil.rmtree(fixed, ignore_errors=True)
    root = write_checkout(fixed)
    db = tmp_path / "counterfactual" / "counterfactual.db"
    clock = SteppingClock(datetime(2026, 5, 1, 9, 0, tzinfo=UTC))
    with Store.open(str(db), create=True, clock=clock, ids=SequentialIds("imported"),
                    redaction_key=RECORDER_KEY) as store:
        index_workspace(store, root, project="pydicom", clock=clock, workers=1)
        [outcome] = import_paths(store, [PYDICOM_TRAJECTORY], project="pydicom", workspace=root).outcomes
        run_counterfactuals(store, outcome.session_id, instance=read_instance(INSTANCE))
    return db
