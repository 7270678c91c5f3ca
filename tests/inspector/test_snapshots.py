"""Snapshot tests of every screen and tab, at 80x24 and 160x48, over the sample sessions."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import pytest

from scopelens.inspector.screens.drift import DriftScreen, SessionDriftScreen
from scopelens.inspector.screens.findings import FindingsScreen
from scopelens.inspector.screens.help import HelpScreen
from scopelens.inspector.screens.observed import ObservedScreen
from scopelens.inspector.screens.snapshot import SnapshotScreen
from scopelens.inspector.screens.timeline import TimelineScreen
from scopelens.inspector.screens.whynot import WhyNotScreen
from tests.inspector.conftest import build_app, drifted_snapshot_of, first_snapshot_of, settle

SIZES = [(80, 24), (160, 48)]
SESSION = "s-auth-role-mock-0001"
SNAPSHOT = "snap-auth-role-mock-0002"


def opening(make_screen=None, *keys: str):
    """A run_before that settles, pushes the screen ``make_screen()`` makes, presses ``keys``."""

    async def run_before(pilot):
        await settle(pilot)
        if make_screen is not None:
            pilot.app.push_screen(make_screen())
            await settle(pilot)
        if keys:
            await pilot.press(*keys)
            await settle(pilot)

    return run_before


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_sessions_screen(snap_compare, sample_store, size):
    """Sessions list with verify marks, sorted by start time; the highlighted one in full below."""
    assert snap_compare(build_app(sample_store), terminal_size=size, run_before=opening())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_timeline_screen(snap_compare, sample_store, size):
    """The auth session's events, turn by turn, with the detail pane (under the table when narrow)."""
    assert snap_compare(build_app(sample_store), terminal_size=size,
                        run_before=opening(lambda: TimelineScreen(SESSION), "n", "n"))


@pytest.mark.parametrize("tab", ["scope", "plan", "funnel", "candidates", "evidence", "citations", "request"])
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_tabs(snap_compare, sample_store, size, tab):
    """Each tab of the snapshot screen for the auth story's scoped retrieval."""
    snapshot_id = first_snapshot_of(sample_store)
    assert snap_compare(build_app(sample_store), terminal_size=size,
                        run_before=opening(lambda: SnapshotScreen(snapshot_id, tab=tab)))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_drift_screen(snap_compare, sample_store, size):
    """Drift of the auth snapshot that showed the fixture, after the staged fixture fix: the
    cursor lands on the content-changed item and its diff is shown."""
    snapshot_id = drifted_snapshot_of(sample_store)
    assert snap_compare(build_app(sample_store), terminal_size=size,
                        run_before=opening(lambda: DriftScreen(snapshot_id), "r"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_session_drift_screen(snap_compare, sample_store, size):
    """Drift of every snapshot of the auth session, one row per snapshot."""
    assert snap_compare(build_app(sample_store), terminal_size=size,
                        run_before=opening(lambda: SessionDriftScreen(SESSION), "r"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_why_not_screen(snap_compare, sample_store, size):
    """Why-not for a symbol the reply cited: detected as a symbol, every matching row in its stage's colour."""
    assert snap_compare(build_app(sample_store), terminal_size=size,
                        run_before=opening(lambda: WhyNotScreen(SNAPSHOT, prefill="createUserMock"), "enter"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_help_screen(snap_compare, sample_store, size):
    """Help opened from the sessions screen: its keys, then the app-wide ones, from the registry."""
    assert snap_compare(build_app(sample_store), terminal_size=size, run_before=opening(None, "question_mark"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_help_screen_everything(snap_compare, sample_store, size):
    """Help after `a`: every screen's keys (the keymap id column shows when there is room)."""
    assert snap_compare(build_app(sample_store), terminal_size=size, run_before=opening(None, "question_mark", "a"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_error_screen(snap_compare, size):
    """A foreign database: a clear message and what to do next, not a traceback."""
    directory = Path(tempfile.gettempdir()) / "scopelens-snapshot-fixtures"  # fixed: the path is on screen
    directory.mkdir(exist_ok=True)
    db = directory / "foreign.db"
    db.unlink(missing_ok=True)
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER)")
    assert snap_compare(build_app(db), terminal_size=size, run_before=opening())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_light_theme_sessions(snap_compare, sample_store, size):
    """The sessions screen in the light theme."""
    assert snap_compare(build_app(sample_store, theme="textual-light"), terminal_size=size, run_before=opening())


LIGHT_SCREENS = {
    "timeline": lambda db: TimelineScreen(SESSION),
    "candidates": lambda db: SnapshotScreen(first_snapshot_of(db), tab="candidates"),
    "evidence": lambda db: SnapshotScreen(first_snapshot_of(db), tab="evidence"),
    "citations": lambda db: SnapshotScreen(first_snapshot_of(db), tab="citations"),
    "drift": lambda db: DriftScreen(drifted_snapshot_of(db)),
    "help": lambda db: HelpScreen("sessions"),
    "whynot": lambda db: WhyNotScreen(SNAPSHOT, prefill="createUserMock"),
}
LIGHT_KEYS = {"drift": ("r",), "whynot": ("enter",)}


@pytest.mark.parametrize("screen", sorted(LIGHT_SCREENS))
def test_light_theme_screens(snap_compare, sample_store, screen):
    """The other screens in the light theme (marks, diff colours and detail lines must stay legible)."""
    keys = LIGHT_KEYS.get(screen, ())
    assert snap_compare(build_app(sample_store, theme="textual-light"), terminal_size=(100, 30),
                        run_before=opening(lambda: LIGHT_SCREENS[screen](sample_store), *keys))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_findings_screen(snap_compare, demo_store, size):
    """The demo's findings, turn by turn in their outcome's colour; the first in full below, with where enter leads."""
    assert snap_compare(build_app(demo_store), terminal_size=size, run_before=opening(FindingsScreen))


def test_findings_screen_without_findings(snap_compare, sample_store):
    """A store with no demo stamp: the Findings screen says where findings come from."""
    assert snap_compare(build_app(sample_store), terminal_size=(80, 24), run_before=opening(FindingsScreen))


def test_light_theme_findings(snap_compare, demo_store):
    """The findings in the light theme (outcome colours must stay legible)."""
    assert snap_compare(build_app(demo_store, theme="textual-light"), terminal_size=(100, 30),
                        run_before=opening(FindingsScreen))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_observed_screen(snap_compare, imported_store, size):
    """The real pydicom SWE-agent run, imported: call 6's whole context, the gold file's read
    (new at this call) highlighted with its text beside (under it when narrow)."""
    assert snap_compare(build_app(imported_store), terminal_size=size,
                        run_before=opening(lambda: ObservedScreen("obs-imported-0006"), "down"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_observed_screen_with_its_counterfactual(snap_compare, counterfactual_store, size):
    """Call 4 of the pydicom run (the traceback seen, the gold file not yet read), with the
    counterfactual retrieval of its turn on its own line: the gold file first."""
    assert snap_compare(build_app(counterfactual_store), terminal_size=size,
                        run_before=opening(lambda: ObservedScreen("obs-imported-0004")))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_counterfactual_snapshot_screen(snap_compare, counterfactual_store, size):
    """That counterfactual, opened with r: a retrieval in every part, titled as never shown."""
    assert snap_compare(build_app(counterfactual_store), terminal_size=size,
                        run_before=opening(lambda: ObservedScreen("obs-imported-0004"), "r"))
