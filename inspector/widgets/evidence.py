"""Exactly what the model saw of one item: trim markers and redactions marked, hash re-derived."""

from __future__ import annotations

from textual.content import Content
from textual.markup import escape
from textual.containers import VerticalScroll
from textual.widgets import Static

from core.hashing import text_hash
from core.readmodel import ItemView


class EvidenceText(VerticalScroll):
    """The visible text of an item, with its provenance and a ✓/✗ recomputed hash."""

    def compose(self):  # type: ignore[no-untyped-def]
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
        ok = text_hash(item.visible_text) == item.visible_text_hash
        mark = "[$success]✓[/]" if ok else "[$error]✗ hash mismatch[/]"
        lines = [
            f"[b]{escape(item.citation_id)} [/b]· {escape(item.source_ref)} · {item.evidence_kind} · trust {item.trust} · "
            f"authority {item.authority}",
            f"why: {escape(item.selected_reason)}" + (f" · {escape(item.label)}" if item.label else ""),
            f"visible text hash {item.visible_text_hash[:16]}… {mark}",
            f"scores: final {item.scores.final:.3f} · lexical {item.scores.lexical:.2f} · anchor {item.scores.anchor:.2f}"
            f" · authority {item.scores.authority:.2f} · recency {item.scores.recency:.2f} · scope {item.scores.scope:.2f}"
            f" · action {item.scores.actionability:.2f} · diversity {item.scores.diversity:.2f}",
        ]
        if item.trim_ranges:
            ranges = ", ".join(f"lines {r.start_line}-{r.end_line} (chars {r.start_char}-{r.end_char})" for r in item.trim_ranges)
            lines.append(f"[$warning]trimmed: {ranges}[/]")
        if item.redaction_count:
            lines.append(f"[$warning]{item.redaction_count} secret(s) redacted at ingest[/]")
        lines.append("cited by: " + (", ".join(item.cited_by) or "no reply cited it"))
        header.update("\n".join(lines))
        parts: list[str | tuple[str, str]] = []
        for line in item.visible_text.split("\n"):
            if line.startswith("[… line"):
                parts.append((line, "$warning"))
            elif "[REDACTED:" in line:
                parts.append((line, "$warning italic"))
            else:
                parts.append(line)  # plain Content: whitespace exactly as the model saw it
            parts.append("\n")
        body.update(Content.assemble(*parts[:-1]))
        body.border_title = "what the model saw" + (f" · lines {item.lines}" if item.lines else "")
