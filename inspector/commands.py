"""The command palette: every action of the current screen (and the app), titled ``noun: verb``,
each with its key (as the user's keymap makes it) after what it does."""

from __future__ import annotations

from functools import partial
from typing import cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from scopelens.inspector.actions import Action, actions_for, effective_key, key_label
from scopelens.inspector.screens.base import InspectorHost


class ActionCommands(Provider):
    """Commands derived from the actions registry for the screen in front."""

    def _actions(self) -> list[Action]:
        scope = getattr(self.screen, "SCOPE", "app")
        return [a for a in actions_for(scope) if a.scope != "input"]  # a field's key, not a command

    def _help(self, action: Action) -> str:
        """``Compare this snapshot with today's index  (d)``: the palette teaches the key."""
        keymap = cast(InspectorHost, self.app).keymap
        return f"{action.tooltip}  ({key_label(effective_key(action, keymap))})"

    async def _run(self, action: Action) -> None:
        target = self.app if action.scope == "app" else self.screen
        await target.run_action(action.action.removeprefix("app."))

    async def discover(self) -> Hits:
        for action in self._actions():
            yield DiscoveryHit(action.title, partial(self._run, action), help=self._help(action))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for action in self._actions():
            score = matcher.match(action.title)
            if score > 0:
                yield Hit(score, matcher.highlight(action.title), partial(self._run, action), help=self._help(action))
