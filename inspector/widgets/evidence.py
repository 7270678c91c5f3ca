"""Exactly what the model saw of one item: trim markers and redactions marked, hash re-derived."""

from __future__ import annotations

import re

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.markup import escape
from textual.widgets import Static

from scopelens.core.readmodel import ItemView
from scopelens.core.textsafety import short

TAB_WIDTH = 4
TRIM_MARKER = re.compile(r"\[… lines? (\d+)(?:-(\d+))? trimmed …\]")
"""The line the trimmer puts where it cut (core.pipeline.trim.marker)."""


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

    def show(self, item: ItemView | None) -> None:
        header = self.query_one("#evidence-header", Static)
        body = self.query_one("#evidence-body", Static)
        if item is None:
            header.update("Nothing was selected in this snapshot: see the Candidates and Funnel tabs for why.")
            body.update("")
            body.border_title = None
            return
        mark = "[$success]✓[/]" if item.hash_ok else "[$error]✗ hash mismatch[/]"
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
            header_lines.append(f"[$warning]trimmed: {ranges}[/]")
        if item.redaction_count:
            header_lines.append(f"[$warning]{item.redaction_count} secret(s) redacted at ingest[/]")
        header_lines.append("cited by: " + (", ".join(item.cited_by) or "no reply cited it"))
        header.update("\n".join(header_lines))
        lines = item.visible_text.split("\n")
        numbers = original_line_numbers(lines, item.lines)
        width = max((len(n) for n in numbers if n), default=0) if numbers else 0
        parts: list[str | tuple[str, str]] = []
        for index, line in enumerate(lines):
            if numbers:
                parts.append((f"{numbers[index]:>{width}} │ ", "$text-muted"))
            shown = line.expandtabs(TAB_WIDTH)  # a tab would render as nothing in a cell grid
            if TRIM_MARKER.fullmatch(line):
                parts.append((shown, "$warning"))
            elif "[REDACTED:" in line:
                parts.append((shown, "$warning italic"))
            else:
                parts.append(shown)  # plain Content: never read as markup
            parts.append("\n")
        body.update(Content.assemble(*parts[:-1]))
        body.border_title = "what the model saw" + (f" · lines {item.lines}" if item.lines else "")
