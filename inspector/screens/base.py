"""What every inspector screen shares: a store problem met while loading is shown, never raised.

A tampered or damaged store can hold a snapshot body that is not JSON, a row whose stage is no
stage, a session without its head. Reading one raises inside a worker; Textual's default is to
exit the app with a traceback. Here the screen shows the problem on one line, in red, where its
data would have been, and as a notification, and the rest of the inspector keeps working.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol, TypeVar, cast

from pydantic import ValidationError
from textual.binding import ActiveBinding, NoBinding
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from scopelens.core.errors import ScopelensError
from scopelens.core.readmodel import ReadModel
from scopelens.inspector.screens.paging import KeyPaging


def problem_line(error: BaseException) -> str:
    """One line a person can act on, for an error met while reading the store."""
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "document"
        detail = f"{error.title} {where}: {first['msg']}"
    elif isinstance(error, ScopelensError):
        detail = str(error)
    else:
        detail = f"{type(error).__name__}: {error}"
    detail = detail.strip().splitlines()[0] if detail.strip() else type(error).__name__
    return f"cannot read this from the store: {detail} · run `scopelens verify` on it"


FOOTER_FIRST = ("escape", "q")
"""Keys the footer shows before the screen's own, so that a narrow terminal never cuts them."""

Handler = TypeVar("Handler", bound=Callable[..., Any])


def shows_problems(handler: Handler) -> Handler:
    """For a handler that draws what a worker read: an error while drawing (a duplicate id in
    a tampered document, say) becomes the screen's problem line instead of ending the app."""

    @functools.wraps(handler)
    def guarded(self: InspectorScreen, *args: Any, **kwargs: Any) -> Any:
        try:
            return handler(self, *args, **kwargs)
        except Exception as error:  # noqa: BLE001 - any failure is shown on screen, never a traceback
            self.show_problem(error)
            return None

    return cast(Handler, guarded)  # functools.wraps keeps the handler's signature


class InspectorHost(Protocol):
    """What screens use of the app: its read model, the clipboard and the user's keymap."""

    model: ReadModel

    @property
    def keymap(self) -> Mapping[str, str]: ...

    def copy_id(self, value: str) -> None: ...


class InspectorScreen(Screen[None]):
    """A screen whose loading workers report store problems instead of crashing the app."""

    @property
    def host(self) -> InspectorHost:
        """The app, typed as what screens need of it (every screen runs in InspectorApp)."""
        return cast(InspectorHost, self.app)

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        """Textual's, except that where a focused widget's hidden binding takes a key the screen
        shows a binding for (a table's own ``enter``), the footer shows the screen's: pressing the
        key does what the screen says (the table's selection opens the row)."""
        bindings = dict(super().active_bindings)
        own_bindings = self._bindings
        if self.host.keymap:  # a key the user moved elsewhere is no longer the screen's
            own_bindings = own_bindings.copy()
            own_bindings.apply_keymap(self.host.keymap)
        for key, active in bindings.items():
            if active.binding.show:
                continue
            try:
                own = next(b for b in own_bindings.get_bindings_for_key(key) if b.show)
            except (NoBinding, StopIteration):
                continue
            state = self.app._check_action_state(own.action, self)  # the check Screen.active_bindings makes
            if state is not False:
                bindings[key] = ActiveBinding(self, own, bool(state), own.tooltip)
        # The footer cuts what does not fit at the right: the way out goes first.
        first = [key for key in FOOTER_FIRST if key in bindings]
        return {key: bindings[key] for key in [*first, *(k for k in bindings if k not in first)]}

    PROBLEM_TARGET: ClassVar[str | None] = None
    """Id of the Static that shows a problem in place of the data (None: notification only)."""
    PROBLEM_TARGETS: ClassVar[dict[str, str]] = {}
    """Worker group -> the Static for problems of that worker, where it is not PROBLEM_TARGET."""

    paging: KeyPaging | None = None
    """The list this screen pages by key, if any: a problem frees it to ask for a page again."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            self.show_problem(event.worker.error, self.PROBLEM_TARGETS.get(event.worker.group, self.PROBLEM_TARGET))

    def show_problem(self, error: BaseException, target_id: str | None = None) -> None:
        if self.paging is not None:
            self.paging.loading_more = False  # a failed page may be asked for again
        line = problem_line(error)
        target_id = target_id or self.PROBLEM_TARGET
        if target_id is not None:
            try:
                target = self.query_one(f"#{target_id}", Static)
            except NoMatches:
                pass
            else:
                target.update(f"✗ {line}")
                target.add_class("bad-mark")
        self.notify(line, severity="error", timeout=10)
