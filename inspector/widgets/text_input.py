"""An Input that follows the app's cursor-blink setting (tests turn blinking off)."""

from __future__ import annotations

from textual.widgets import Input


class TextInput(Input):
    def on_mount(self) -> None:
        self.cursor_blink = getattr(self.app, "cursor_blink", True)
