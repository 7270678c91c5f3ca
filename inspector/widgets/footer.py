"""A Footer that rebuilds its keys only when the keys it shows change."""

from __future__ import annotations

from typing import Any

from textual.widgets import Footer


class KeysFooter(Footer):
    """Textual's Footer, minus the rebuilds that change nothing.

    Footer rebuilds every key widget (and applies CSS to each) on every bindings signal, which
    fires on every focus change and screen switch. Opening a snapshot sent six of them, 30-140 ms
    each, most of the time it took to open. This one rebuilds only when the bindings it would
    show (key, action, description, enabled, tooltip) differ from the ones on screen.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._shown: tuple[object, ...] | None = None

    def _showing(self) -> tuple[object, ...]:
        """What ``Footer.compose`` would draw: shown bindings and the command palette key."""
        palette = self.app.COMMAND_PALETTE_BINDING
        return (
            tuple(
                (key, binding.action, binding.description, binding.group, enabled, tooltip)
                for key, (_node, binding, enabled, tooltip) in self.screen.active_bindings.items()
                if binding.show or key == palette
            ),
            self.show_command_palette,
            self.combine_groups,
        )

    async def recompose(self) -> None:
        if not self.is_attached:  # its screen is gone: nothing to show (as Footer itself does)
            return
        showing = self._showing()
        if showing == self._shown and self.children:
            return
        self._shown = showing
        await super().recompose()
