"""Snapshot tests of every screen and tab, at 80x24 and 160x48, over the sample sessions."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import pytest

from inspector.screens.drift import DriftScreen
from inspector.screens.help import HelpScreen
from inspector.screens.snapshot import SnapshotScreen
from inspector.screens.timeline import TimelineScreen
from inspector.screens.whynot import WhyNotScreen
from tests.inspector.conftest import build_app, settle

SIZES = [(80, 24), (160, 48)]
SESSION = "s-auth-role-mock-0001"
SNAPSHOT = "snap-auth-role-mock-0002"


def first_snapshot_of(db) -> str:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT id FROM snapshots WHERE session_id = ? ORDER BY turn, id LIMIT 1", (SESSION,)).fetchone()[0]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_sessions_screen(snap_compare, sample_store, size):
    """Sessions list with verify marks, sorted by start time."""

    async def run_before(pilot):
        await settle(pilot)

    assert snap_compare(build_app(sample_store), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_timeline_screen(snap_compare, sample_store, size):
    """The auth session's events, turn by turn, with the detail pane."""

    async def run_before(pilot):
        await settle(pilot)
        pilot.app.push_screen(TimelineScreen(SESSION))
        await settle(pilot)
        await pilot.press("n", "n")
        await settle(pilot)

    assert snap_compare(build_app(sample_store), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("tab", ["scope", "plan", "funnel", "candidates", "evidence", "citations"])
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_tabs(snap_compare, sample_store, size, tab):
    """Each tab of the snapshot screen for the auth story's scoped retrieval."""
    snapshot_id = first_snapshot_of(sample_store)

    async def run_before(pilot):
        await settle(pilot)
        pilot.app.push_screen(SnapshotScreen(snapshot_id, tab=tab))
        await settle(pilot)

    assert snap_compare(build_app(sample_store), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_drift_screen(snap_compare, sample_store, size):
    """Drift of the first auth snapshot after the staged fixture fix: content-changed with a diff."""
    snapshot_id = first_snapshot_of(sample_store)

    async def run_before(pilot):
        await settle(pilot)
        pilot.app.push_screen(DriftScreen(snapshot_id))
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)

    assert snap_compare(build_app(sample_store), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_why_not_screen(snap_compare, sample_store, size):
    """Why-not answering for a path that was never recalled."""
    snapshot_id = first_snapshot_of(sample_store)

    async def run_before(pilot):
        await settle(pilot)
        pilot.app.push_screen(WhyNotScreen(snapshot_id))
        await settle(pilot)
        await pilot.press(*"README.md", "enter")
        await settle(pilot)

    assert snap_compare(build_app(sample_store), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_help_screen(snap_compare, sample_store, size):
    """Every key and command, from the actions registry."""

    async def run_before(pilot):
        await settle(pilot)
        pilot.app.push_screen(HelpScreen())
        await settle(pilot)

    assert snap_compare(build_app(sample_store), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_error_screen(snap_compare, size):
    """A foreign database: a clear message and what to do next, not a traceback."""
    directory = Path(tempfile.gettempdir()) / "scopelens-snapshot-fixtures"  # fixed: the path is on screen
    directory.mkdir(exist_ok=True)
    db = directory / "foreign.db"
    db.unlink(missing_ok=True)
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER)")

    async def run_before(pilot):
        await settle(pilot)

    assert snap_compare(build_app(db), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_light_theme_sessions(snap_compare, sample_store, size):
    """The sessions screen in the light theme."""

    async def run_before(pilot):
        await settle(pilot)

    assert snap_compare(build_app(sample_store, theme="textual-light"), terminal_size=size, run_before=run_before)
