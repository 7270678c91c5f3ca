"""Exactly what the model saw of one item: trim markers and redactions marked, hash re-derived.

Code is highlighted by its file's language (Rich's Syntax, through Pygments); lines wrap
beside their line-number gutter. Lines the budget trimmed can be shown on demand, from the
index, in a style and gutter that say the model never saw them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from rich.style import Style
from rich.table import Table as RichTable
from rich.text import Text
from textual.app import ComposeResult
from textual.color import Color
from textual.containers import VerticalScroll
from textual.markup import escape
from textual.widgets import Static

from scopelens.core.readmodel import ItemView
from scopelens.core.textsafety import short
from scopelens.inspector.theme import legible
from scopelens.inspector.widgets.syntax import highlighted_lines, legible_on

TAB_WIDTH = 4
TRIM_MARKER = re.compile(r"\[… lines? (\d+)(?:-(\d+))? trimmed …\]")
"""The line the trimmer puts where it cut (core.pipeline.trim.marker)."""
NOT_SEEN = "✂"
"""Gutter mark of a revealed trimmed line: it is shown here, but the model never saw it."""


def original_line_numbers(lines: list[str], span: str) -> list[str] | None:
    """The original line number of each visible line ('⋮' for a trim marker), or None when
    the visible lines do not account for exactly the item's ``span`` ("a-b"), as with a
    summary-only extract: then no number would be honest."""
    first, _, last = span.partition("-")
    if not (first.isdigit() and last.isdigit()):
        return None
    numbers: list[str] = []
    current = int(first)
    for line in lines:
        marker = TRIM_MARKER.fullmatch(line)
        if marker:
            cut_from, cut_to = int(marker.group(1)), int(marker.group(2) or marker.group(1))
            if cut_from != current:
                return None
            numbers.append("⋮")
            current = cut_to + 1
        else:
            numbers.append(str(current))
            current += 1
    return numbers if current - 1 == int(last) else None


class EvidenceText(VerticalScroll):
    """The visible text of an item, with its provenance and a ✓/✗ recomputed hash."""

    def compose(self) -> ComposeResult:
        yield Static("", id="evidence-header")
        yield Static("", id="evidence-body")

    def show(self, item: ItemView | None, revealed: tuple[str | None, ...] | None = None) -> None:
        """Show ``item``; ``revealed`` holds the text of each trim range to show (None: hidden)."""
        header = self.query_one("#evidence-header", Static)
        body = self.query_one("#evidence-body", Static)
        if item is None:
            header.update("Nothing was selected in this snapshot: see the Candidates and Funnel tabs for why.")
            body.update("")
            body.border_title = None
            return
        mark = "[$legible-success]✓[/]" if item.hash_ok else "[$legible-error]✗ hash mismatch[/]"
        header_lines = [
            f"[b]{escape(item.citation_id)} [/b]· {escape(item.source_ref)} · {item.evidence_kind} · trust {item.trust} · "
            f"authority {item.authority}",
            f"why: {escape(item.selected_reason)}" + (f" · {escape(item.label)}" if item.label else ""),
            f"visible text hash {short(item.visible_text_hash, 16)} {mark}",
            f"scores: final {item.scores.final:.3f} · lexical {item.scores.lexical:.2f} · anchor {item.scores.anchor:.2f}"
            f" · authority {item.scores.authority:.2f} · recency {item.scores.recency:.2f} · scope {item.scores.scope:.2f}"
            f" · action {item.scores.actionability:.2f} · diversity {item.scores.diversity:.2f}",
        ]
        if item.trim_ranges:
            ranges = ", ".join(f"lines {r.start_line}-{r.end_line} (chars {r.start_char}-{r.end_char})" for r in item.trim_ranges)
            hint = "shown below, never seen by the model" if revealed is not None else "t shows them"
            header_lines.append(f"[$legible-warning]trimmed: {ranges}[/] · {hint}")
        if item.redaction_count:
            header_lines.append(f"[$legible-warning]{item.redaction_count} secret(s) redacted at ingest[/]")
        cited = ", ".join(item.cited_by) + " (g goes to it)" if item.cited_by else "no reply cited it"
        header_lines.append(f"cited by: {escape(cited)}")
        header.update("\n".join(header_lines))
        body.update(self._body(item, revealed))
        body.border_title = "what the model saw" + (f" · lines {item.lines}" if item.lines else "")

    def _body(self, item: ItemView, revealed: tuple[str | None, ...] | None) -> RichTable:
        """A grid of gutter and text, so that a wrapped line continues beside its number."""
        colours = self.app.get_css_variables()
        background = Color.parse(colours["background"])

        def solid(name: str) -> str:
            """A theme colour as Rich needs it: translucent ones blended over the background."""
            return (background + Color.parse(colours[name])).hex

        warning = Style(color=solid("legible-warning"))
        muted = Style(color=legible(Color.parse(solid("foreground-muted")), [background]).rich_color)
        not_seen = muted + Style(italic=True)
        lines = item.visible_text.split("\n")
        numbers = original_line_numbers(lines, item.lines)
        shown_lines = [legible_on(line, background) for line in highlighted_lines(
            item.visible_text.expandtabs(TAB_WIDTH), item.path, self.app.current_theme.dark)]
        grid = RichTable.grid(padding=(0, 1))
        if numbers:
            grid.add_column(justify="right", no_wrap=True, style=muted)
        grid.add_column(overflow="fold")
        trims = iter(revealed or ())

        def row(gutter: Text, text: Text) -> None:
            if numbers:
                grid.add_row(gutter, text)
            else:
                grid.add_row(text)

        for index, line in enumerate(lines):
            gutter = Text(f"{numbers[index]} │") if numbers else Text("")
            marker = TRIM_MARKER.fullmatch(line)
            if marker:
                row(gutter, Text(line, style=warning))
                if revealed is not None:
                    text = next(trims, None)
                    self._revealed(row, text, int(marker.group(1)), not_seen, warning)
            elif "[REDACTED:" in line:
                row(gutter, Text(line.expandtabs(TAB_WIDTH), style=warning + Style(italic=True)))
            else:
                row(gutter, shown_lines[index])  # plain Text: never read as markup
        return grid

    @staticmethod
    def _revealed(row: Callable[[Text, Text], None], text: str | None, first_line: int, style: Style,
                  warning: Style) -> None:
        if text is None:
            row(Text(NOT_SEEN), Text("(the index no longer holds these lines as they were)", style=warning))
            return
        for offset, line in enumerate(text.rstrip("\n").split("\n")):
            row(Text(f"{first_line + offset} {NOT_SEEN}"), Text(line.expandtabs(TAB_WIDTH), style=style))
