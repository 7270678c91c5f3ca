"""The command palette: every action of the current screen (and the app), titled ``noun: verb``."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from scopelens.inspector.actions import Action, actions_for


class ActionCommands(Provider):
    """Commands derived from the actions registry for the screen in front."""

    def _actions(self) -> list[Action]:
        scope = getattr(self.screen, "SCOPE", "app")
        return actions_for(scope)

    async def _run(self, action: Action) -> None:
        target = self.app if action.scope == "app" else self.screen
        await target.run_action(action.action.removeprefix("app."))

    async def discover(self) -> Hits:
        for action in self._actions():
            yield DiscoveryHit(action.title, partial(self._run, action), help=action.tooltip)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for action in self._actions():
            score = matcher.match(action.title)
            if score > 0:
                yield Hit(score, matcher.highlight(action.title), partial(self._run, action), help=action.tooltip)
