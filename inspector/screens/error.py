"""Shown instead of the sessions list when the store cannot be opened."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Header, Static

from scopelens.inspector.actions import bindings_for
from scopelens.inspector.screens.base import InspectorScreen
from scopelens.inspector.widgets.footer import KeysFooter


class StoreErrorScreen(InspectorScreen):
    """A clear message (not a traceback) for a missing, foreign, newer or broken store."""

    SCOPE = "error"
    CSS_PATH = "error.tcss"
    BINDINGS = bindings_for("error")

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"✗ Cannot open this store\n\n{self.message}", id="error-message", markup=False)
        yield Static(
            "Next: check the --db path or URL, run `scopelens demo` for the sample store, "
            "or `scopelens migrate` for an older store.",
            classes="empty-state",
        )
        yield KeysFooter()
