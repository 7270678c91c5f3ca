"""The drift screen after a re-run that found what the last run found: it shows that run, and
says it was confirmed (checked at T, unchanged) rather than recorded again."""

from __future__ import annotations

from textual.widgets import Static

from scopelens.inspector.screens.drift import DriftScreen
from tests.inspector.conftest import build_app, first_snapshot_of, open_screen, settle


async def test_a_second_run_with_nothing_changed_says_confirmed(sample_store):
    app = build_app(sample_store)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(pilot, DriftScreen(first_snapshot_of(sample_store)))
        await pilot.press("r")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DriftScreen) and screen.report is not None
        first = screen.report.id
        assert f"{first} (recorded)" in str(screen.query_one("#drift-status", Static).render())
        await pilot.press("r")
        await settle(pilot)
        status = str(screen.query_one("#drift-status", Static).render())
        assert screen.report.id == first
        assert status.startswith(f"{first} (confirmed: checked at ") and ", unchanged)" in status
