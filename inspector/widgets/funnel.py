"""A funnel drawn from a snapshot's counts per pipeline stage (theme colours only)."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

BAR = "█"
BAR_WIDTH = 30


class Funnel(Static):
    """One bar per stage: recalled, each rejection stage, selected."""

    def show(self, rows: tuple[tuple[str, int], ...]) -> None:
        widest = max((count for _, count in rows), default=0) or 1
        parts: list[str | tuple[str, str]] = []
        for stage, count in rows:
            width = max(1, round(BAR_WIDTH * count / widest)) if count else 0
            colour = "$success" if stage == "selected" else ("$primary" if stage == "recalled" else "$error")
            parts.append(f"{stage:>13} {count:>5}  ")
            parts.append((BAR * width, colour) if count else ("·", "dim"))
            parts.append("\n")
        self.update(Content.assemble(*parts[:-1]))
