"""An Input that follows the app's cursor-blink setting (tests turn blinking off) and whose
``esc`` stays inside it: the first clears the text, the next gives focus back to the table
below, so leaving a filter never leaves the screen (and its tab, filter and sort)."""

from __future__ import annotations

from textual.widgets import DataTable, Input

from scopelens.inspector.actions import bindings_for


class TextInput(Input):
    BINDINGS = bindings_for("input")

    def on_mount(self) -> None:
        self.cursor_blink = getattr(self.app, "cursor_blink", True)

    def action_leave(self) -> None:
        if self.value:
            self.value = ""
            return
        tables = self.parent.query(DataTable) if self.parent is not None else None
        if tables:
            tables.first().focus()
        else:
            self.screen.focus_next()
