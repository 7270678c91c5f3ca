"""Every key and command, derived from the actions registry.

Keys are shown as the user's keymap makes them, so help never names a key that no longer does
what it says.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import DataTable, Header, Static

from scopelens.inspector.actions import ACTIONS, bindings_for, effective_key, key_label
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


class HelpScreen(InspectorScreen):
    """Keys per screen, with their command palette titles (ctrl+p opens the palette)."""

    SCOPE = "help"
    CSS_PATH = "help.tcss"
    BINDINGS = bindings_for("help")

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("Keys and commands. Every command is also in the palette (ctrl+p).", id="help-intro")
        yield FittedTable(COLUMNS, id="help-table", cursor_type="row", zebra_stripes=True)
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for action in ACTIONS:
            table.add_row(action.scope, key_label(effective_key(action, self.host.keymap)), action.title, action.tooltip,
                          action.id)
        table.add_row("app", "ctrl+p", "palette: open", "Search every command", "")
        table.focus()
