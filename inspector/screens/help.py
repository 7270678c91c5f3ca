"""The keys of the screen help was opened from, or every key, derived from the actions registry.

Keys are shown as the user's keymap makes them, so help never names a key that no longer does
what it says.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Header, Static

from scopelens.inspector.actions import ACTIONS, Action, actions_for, bindings_for, effective_key, key_label
from scopelens.inspector.screens.base import InspectorScreen
from scopelens.inspector.widgets.fitted_table import Column, FittedTable
from scopelens.inspector.widgets.footer import KeysFooter

COLUMNS = (
    Column("where", "where", 9),
    Column("key", "key", 6),
    Column("command", "command", 26, min_width=20),
    Column("does", "what it does", 50, min_width=20, flex=1),
    Column("id", "id (keymap)", 24, drop=1),
)
"""The id column is for keymap.toml; it gives way first on a narrow terminal."""
TOGGLE = next(a for a in ACTIONS if a.id == "help.everything")


class HelpScreen(InspectorScreen):
    """Keys of one screen and the app-wide ones; ``a`` (by default) switches to every screen's keys.

    ``scope`` is the ``SCOPE`` of the screen help was opened from (``None``: every key).
    """

    SCOPE = "help"
    CSS_PATH = "help.tcss"
    BINDINGS = bindings_for("help")

    def __init__(self, scope: str | None = None) -> None:
        super().__init__()
        self.for_scope = scope
        self.everything = scope is None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="help-intro", markup=False)
        yield FittedTable(COLUMNS, id="help-table", cursor_type="row", zebra_stripes=True)
        yield KeysFooter()

    def on_mount(self) -> None:
        self._fill()
        self.query_one(FittedTable).focus()

    def action_toggle_everything(self) -> None:
        if self.for_scope is not None:
            self.everything = not self.everything
            self._fill()

    def shown_actions(self) -> list[Action]:
        """This screen's actions then the app's, or every action in registry order."""
        if self.everything or self.for_scope is None:
            return list(ACTIONS)
        return actions_for(self.for_scope)

    def _fill(self) -> None:
        keymap = self.host.keymap
        toggle = key_label(effective_key(TOGGLE, keymap))
        if self.for_scope is None:
            intro = "Every screen's keys · ctrl+p: every command in the palette"
        elif self.everything:
            intro = f"Every screen's keys · {toggle}: only {self.for_scope} and app-wide · ctrl+p: palette"
        else:
            intro = f"Keys on {self.for_scope} and app-wide · {toggle}: every screen's keys · ctrl+p: palette"
        self.query_one("#help-intro", Static).update(intro)
        table = self.query_one(FittedTable)
        table.clear()
        for action in self.shown_actions():
            table.add_row(action.scope, key_label(effective_key(action, keymap)), action.title, action.tooltip, action.id)
        table.add_row("app", "ctrl+p", "palette: open", "Search every command", "")
        table.move_cursor(row=0)
