"""A funnel drawn from a snapshot's counts per pipeline stage: one selectable line per stage.

Selecting a line (enter or a click) posts :class:`Funnel.StageSelected`; the snapshot screen
filters its candidates to that stage. Colours come from the one stage palette (theme.py).
"""

from __future__ import annotations

from textual.content import Content
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from scopelens.core.readmodel import FunnelView
from scopelens.core.vocab import Stage
from scopelens.inspector.theme import STAGE_STYLE

BAR = "█"
BAR_WIDTH = 30
ALL = "recalled"
"""The funnel's first step: every recalled candidate (selecting it clears a stage filter)."""


class Funnel(OptionList):
    """One line per step (recalled, each stage that dropped some, selected), which add up; then,
    apart, what the scope probe found withheld by the scope (never recalled)."""

    class StageSelected(Message):
        """A funnel line was chosen: ``stage`` None means every recalled candidate."""

        def __init__(self, stage: Stage | None, from_probe: bool) -> None:
            super().__init__()
            self.stage = stage
            self.from_probe = from_probe

    def show(self, funnel: FunnelView) -> None:
        rows = [*funnel.steps, *funnel.withheld]
        widest = max((count for _, count in rows), default=0) or 1

        def line(label: str, count: int, style: str) -> Content:
            width = max(1, round(BAR_WIDTH * count / widest)) if count else 0
            return Content.assemble(f"{label:>13} {count:>5}  ", (BAR * width, style) if count else ("·", "dim"))

        options: list[Option | None] = []
        for stage, count in funnel.steps:
            style = "$legible-primary" if stage == ALL else STAGE_STYLE.get(Stage(stage), "$legible-error")
            options.append(Option(line(stage, count, style), id=f"step:{stage}"))
        if funnel.withheld:
            options.append(None)
            options.append(Option(Content.styled("withheld by the scope (the probe; never recalled, not counted above)",
                                                 "dim"), id="withheld-title", disabled=True))
            for stage, count in funnel.withheld:
                options.append(Option(line(stage, count, "$legible-warning"), id=f"probe:{stage}"))
        self.clear_options()
        self.add_options(options)
        if self.option_count:
            self.highlighted = 0

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        kind, _, name = str(event.option.id).partition(":")
        self.post_message(self.StageSelected(None if name == ALL else Stage(name), kind == "probe"))
