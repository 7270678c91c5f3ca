"""The scopelens inspector: walk recorded sessions, snapshots, drift and why-not.

Build it with :func:`make_app`; tests build it the same way over the sample sessions.
The app reads only through :class:`scopelens.core.readmodel.ReadModel` and never writes to the store,
except when the user explicitly runs drift (which records the run).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from textual.app import App, SystemCommand
from textual.screen import Screen

from scopelens.core.clock import Clock, IdSource
from scopelens.core.errors import ScopelensError
from scopelens.core.readmodel import ReadModel, store_label
from scopelens.inspector.actions import bindings_for
from scopelens.inspector.commands import ActionCommands
from scopelens.inspector.keymap import load_keymap
from scopelens.inspector.screens.error import StoreErrorScreen
from scopelens.inspector.screens.help import HelpScreen
from scopelens.inspector.screens.sessions import SessionsScreen
from scopelens.inspector.theme import legible_variables

SYSTEM_COMMANDS_KEPT = {
    "Maximize": "widget: maximize",
    "Minimize": "widget: minimize",
    "Screenshot": "screen: save screenshot",
}
"""Textual's own palette commands that ours do not cover, titled ``noun: verb`` like ours.
The rest (Quit, Theme, Keys) would be second copies of ``inspector: quit``, ``theme: toggle``
and ``help: show``; a command Textual adds later stays out until it is named here."""


class InspectorApp(App[None]):
    """Inspector over one audit store."""

    CSS_PATH = "app.tcss"
    TITLE = "scopelens inspector"
    COMMANDS = App.COMMANDS | {ActionCommands}
    BINDINGS = bindings_for("app")

    def __init__(
        self,
        store_url: str,
        *,
        cursor_blink: bool = True,
        theme: str = "textual-dark",
        clock: Clock | None = None,
        ids: IdSource | None = None,
        keymap_path: Path | None = None,
    ) -> None:
        super().__init__()
        self.store_url = store_url
        self._loaded_keymap = load_keymap(keymap_path)
        self.clock = clock
        self.ids = ids
        self.cursor_blink = cursor_blink
        self._initial_theme = theme
        self.read_model: ReadModel | None = None
        self.open_error: str | None = None

    def on_mount(self) -> None:
        self.theme = self._initial_theme
        if self.keymap:
            self.set_keymap(self.keymap)
        if self._loaded_keymap.problems:
            self.notify("\n".join(self._loaded_keymap.problems), title="keymap",
                        severity="error" if self._loaded_keymap.fatal else "warning", timeout=15)
        self.sub_title = store_label(self.store_url)
        try:
            self.read_model = ReadModel(self.store_url, clock=self.clock, ids=self.ids)
        except ScopelensError as exc:
            self.open_error = str(exc)
            self.push_screen(StoreErrorScreen(str(exc)))
            return
        self.push_screen(SessionsScreen())

    def get_css_variables(self) -> dict[str, str]:
        """The theme's variables and, derived from them, the ``$legible-*`` colours (inspector/theme.py)."""
        variables = super().get_css_variables()
        variables.update(legible_variables(variables))
        self.theme_variables = variables
        return variables

    def on_unmount(self) -> None:
        if self.read_model is not None:
            self.read_model.close()

    @property
    def model(self) -> ReadModel:
        assert self.read_model is not None
        return self.read_model

    @property
    def keymap(self) -> Mapping[str, str]:
        """The user's key overrides that were valid (binding id -> keys), as given to set_keymap."""
        return self._loaded_keymap.keymap

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's palette commands, less those that repeat ours (see SYSTEM_COMMANDS_KEPT)."""
        for command in super().get_system_commands(screen):
            if command.title in SYSTEM_COMMANDS_KEPT:
                yield command._replace(title=SYSTEM_COMMANDS_KEPT[command.title])

    def action_open_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(getattr(self.screen, "SCOPE", None)))

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme == "textual-dark" else "textual-dark"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Back is offered (and shown) only where there is a screen to go back to."""
        if action == "back":
            return len(self.screen_stack) > 2
        return True

    async def action_back(self) -> None:
        if len(self.screen_stack) > 2:
            await self.pop_screen()

    def copy_id(self, value: str) -> None:
        self.copy_to_clipboard(value)
        self.notify(f"copied {value}", timeout=2)


def make_app(
    store_url: str,
    *,
    cursor_blink: bool = True,
    theme: str = "textual-dark",
    clock: Clock | None = None,
    ids: IdSource | None = None,
    keymap_path: Path | None = None,
) -> InspectorApp:
    """The inspector over ``store_url`` (a path or a SQLAlchemy URL).

    Tests pass ``cursor_blink=False`` and a fixed ``clock``/``ids`` for deterministic output.
    ``keymap_path`` is the user's ``keymap.toml`` (the CLI passes
    :func:`~scopelens.inspector.keymap.default_keymap_path`); ``None`` keeps the default keys,
    so a test never reads a user's configuration.
    """
    return InspectorApp(store_url, cursor_blink=cursor_blink, theme=theme, clock=clock, ids=ids,
                        keymap_path=keymap_path)
