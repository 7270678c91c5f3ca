"""User keymaps (issue [5/9], item 16): keymap.toml moves keys; footer, help and palette follow;
a bad file is named in one notification and never stops the app."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.command import CommandList
from textual.widgets import DataTable
from textual.widgets._footer import FooterKey

from scopelens.inspector.keymap import default_keymap_path, load_keymap
from scopelens.inspector.screens.help import HelpScreen
from scopelens.inspector.screens.sessions import SessionsScreen
from scopelens.inspector.screens.timeline import TimelineScreen
from tests.inspector.conftest import build_app, settle


def keymap_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "keymap.toml"
    path.write_text(text, encoding="utf-8")
    return path


def footer_keys(app) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {key.key: key.description for key in app.screen.query(FooterKey)}


async def test_a_remapped_key_runs_the_action_and_footer_help_and_palette_show_it(sample_store, tmp_path):
    keymap = keymap_file(tmp_path, '"sessions.sort" = "o"\nsessions.open = "O"\n')
    app = build_app(sample_store, keymap_path=keymap)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        assert not app._notifications
        shown = footer_keys(app)
        assert shown.get("o") == "Sort" and shown.get("O") == "Open"
        assert "s" not in shown and "enter" not in shown  # the moved keys are not shown as well
        await pilot.press("s")
        await settle(pilot)
        assert screen.sort == "started"  # s no longer sorts
        await pilot.press("o")
        await settle(pilot)
        assert screen.sort != "started"

        await pilot.press("question_mark")
        await settle(pilot)
        table = app.screen.query_one(DataTable)
        keys = {table.get_row_at(i)[2].plain: table.get_row_at(i)[1].plain for i in range(table.row_count)}
        assert keys["sessions: sort"] == "o" and keys["session: open"] == "O"
        await pilot.press("escape")
        await settle(pilot)

        await pilot.press("ctrl+p")
        await settle(pilot)
        hits = app.screen.query_one(CommandList)
        prompts = [str(hits.get_option_at_index(i).prompt) for i in range(hits.option_count)]
        assert "sessions: sort\nSort by the next column  (o)" in prompts
        await pilot.press("escape")
        await settle(pilot)

        await pilot.press("O")
        await settle(pilot)
        assert isinstance(app.screen, TimelineScreen)


async def test_a_keymap_that_is_not_toml_is_named_once_and_the_default_keys_work(sample_store, tmp_path):
    keymap = keymap_file(tmp_path, '"sessions.sort" = o\n')
    app = build_app(sample_store, keymap_path=keymap)
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        await settle(pilot)
        notes = list(app._notifications)
        assert len(notes) == 1
        assert str(keymap) in notes[0].message and "not valid TOML" in notes[0].message
        assert notes[0].severity == "error"
        await pilot.press("s")
        await settle(pilot)
        assert app.screen.sort != "started"  # type: ignore[attr-defined]
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)


async def test_unknown_ids_and_values_that_are_not_keys_are_named_and_the_rest_applies(sample_store, tmp_path):
    keymap = keymap_file(tmp_path, '"sessions.sort" = "o"\n"sessions.srot" = "x"\n"sessions.reverse" = 3\n')
    app = build_app(sample_store, keymap_path=keymap)
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        await settle(pilot)
        notes = list(app._notifications)
        assert len(notes) == 1 and notes[0].severity == "warning"
        assert "unknown binding ids ignored: sessions.srot" in notes[0].message
        assert 'sessions.reverse needs a key like "D" or "ctrl+d", not a number' in notes[0].message
        shown = footer_keys(app)
        assert shown.get("o") == "Sort" and shown.get("r") == "Reverse"


@pytest.mark.parametrize(
    ("text", "keymap", "problem"),
    [
        ('"snapshot.drift" = "D"', {"snapshot.drift": "D"}, None),
        ("snapshot.drift = 'D'", {"snapshot.drift": "D"}, None),  # unquoted: a TOML table, same id
        ('[snapshot]\ndrift = "!"', {"snapshot.drift": "exclamation_mark"}, None),
        ('"timeline.next" = " n , J "', {"timeline.next": "n,J"}, None),
        ('"snapshot.drift" = ""', {}, "snapshot.drift needs a key"),
        ('"snapshot.drift" = ["D"]', {}, "not a list"),
        ('"snapshot.whynot" = "d"', {"snapshot.whynot": "d"},
         "d is the key of snapshot.drift and snapshot.whynot on the snapshot screen"),
        ('"app.quit" = "?"', {"app.quit": "question_mark"}, "? is the key of app.help and app.quit everywhere"),
        ("= 1", {}, "is not valid TOML"),
    ],
)
def test_load_keymap(tmp_path, text, keymap, problem):
    loaded = load_keymap(keymap_file(tmp_path, text))
    assert loaded.keymap == keymap
    if problem is None:
        assert loaded.problems == ()
    else:
        assert len(loaded.problems) == 1 and problem in loaded.problems[0]


def test_no_path_or_no_file_is_no_keymap_and_no_problem(tmp_path):
    assert load_keymap(None).problems == load_keymap(tmp_path / "absent.toml").problems == ()
    unreadable = load_keymap(tmp_path)  # a directory
    assert unreadable.fatal and "cannot read" in unreadable.problems[0]


def test_the_default_path_follows_xdg_config_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert default_keymap_path() == tmp_path / "cfg" / "scopelens" / "keymap.toml"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_keymap_path() == tmp_path / "home" / ".config" / "scopelens" / "keymap.toml"


def test_scopelens_inspect_passes_the_default_keymap_path(monkeypatch, sample_store, tmp_path):
    import scopelens.inspector.app as inspector_app
    from scopelens.core.commands.inspect_commands import open_inspector

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    made: list[Path | None] = []

    class NotRun:
        def run(self) -> None:
            pass

    monkeypatch.setattr(inspector_app, "make_app", lambda url, **kwargs: made.append(kwargs["keymap_path"]) or NotRun())
    assert open_inspector(str(sample_store)) == 0
    assert made == [tmp_path / "cfg" / "scopelens" / "keymap.toml"]
