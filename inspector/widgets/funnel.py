"""A funnel drawn from a snapshot's counts per pipeline stage (theme colours only)."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from scopelens.core.readmodel import FunnelView

BAR = "█"
BAR_WIDTH = 30


class Funnel(Static):
    """One bar per step (recalled, each stage that dropped some, selected), which add up; then,
    apart, what the scope probe found withheld by the scope (never recalled)."""

    def show(self, funnel: FunnelView) -> None:
        rows = [*funnel.steps, *funnel.withheld]
        widest = max((count for _, count in rows), default=0) or 1
        parts: list[str | tuple[str, str]] = []

        def bar(label: str, count: int, colour: str) -> None:
            width = max(1, round(BAR_WIDTH * count / widest)) if count else 0
            parts.append(f"{label:>13} {count:>5}  ")
            parts.append((BAR * width, colour) if count else ("·", "dim"))
            parts.append("\n")

        for stage, count in funnel.steps:
            bar(stage, count, "$success" if stage == "selected" else ("$primary" if stage == "recalled" else "$error"))
        if funnel.withheld:
            parts.append(("\nwithheld by the scope (the probe; never recalled, not counted above)\n", "dim"))
            for stage, count in funnel.withheld:
                bar(stage, count, "$warning")
        self.update(Content.assemble(*parts[:-1]))
