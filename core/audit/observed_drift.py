"""Drift of an imported session: each file read the model saw, against the workspace today.

For every file read (each path, range and text once), the lines the model saw are compared
with the same lines of the file in the workspace: ``unchanged``; ``shifted`` (the same lines
elsewhere in the file: lines were added or removed above them); ``content-changed``, with a
unified diff of what was seen against what is there today; ``removed`` (no such file). A read
whose lines cannot be told from the tool's framing, or of a path outside the workspace, is
listed as not compared, with why. Nothing is searched and nothing is recorded: observed
snapshots are compared with files, not re-run.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from scopelens.core.audit.observed import ObservedSession, SeenItem
from scopelens.core.contracts import DriftItem
from scopelens.core.hashing import text_hash
from scopelens.core.vocab import DriftClass, ObservedKind

_SWE_LINE = re.compile(r"^(\d+):(.*)$")
_CAT_N_LINE = re.compile(r"^\s*(\d+)(?:→|â†’|\t)(.*)$")


def shown_lines(text: str, start: int, end: int) -> list[str] | None:
    """The file's lines ``start``-``end`` as a tool showed them: numbered (``273:code``,
    ``   273→code``, ``cat -n``) or, when the text has exactly that many lines, as they are.
    None when the lines cannot be told from the tool's framing."""
    lines = text.splitlines()
    for pattern in (_SWE_LINE, _CAT_N_LINE):
        numbered: dict[int, str] = {}
        for line in lines:
            match = pattern.match(line)
            if match is not None:
                numbered.setdefault(int(match.group(1)), match.group(2))
        if numbered and all(n in numbered for n in range(start, end + 1)):
            return [numbered[n] for n in range(start, end + 1)]
    return lines if len(lines) == end - start + 1 else None


@dataclass(frozen=True)
class ObservedDrift:
    """Every file read of an imported session (or of one call) against the workspace today."""

    session_id: str
    workspace_root: str
    items: tuple[DriftItem, ...]
    not_compared: tuple[tuple[str, str], ...]
    """(source_ref, why) of reads that could not be compared."""

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for item in self.items:
            counts[item.drift_class.value] = counts.get(item.drift_class.value, 0) + 1
        return counts

    def summary(self) -> str:
        parts = [f"{n} {name}" for name, n in sorted(self.counts().items())]
        skipped = f"; {len(self.not_compared)} not compared" if self.not_compared else ""
        return f"{', '.join(parts) or 'no file reads'}{skipped} (against {self.workspace_root})"


def drift_observed(session: ObservedSession, workspace: Path, *, turn: int | None = None) -> ObservedDrift:
    """Compare the file reads of ``session`` (of the call at ``turn``: every read it had in
    context) with the files under ``workspace``."""
    reads = [s for s in session.in_order(turn) if s.observed.kind == ObservedKind.FILE_READ and s.item.path]
    items: list[DriftItem] = []
    skipped: list[tuple[str, str]] = []
    done: set[tuple[str, int | None, int | None, str]] = set()
    for read in reads:
        key = (read.item.path or "", read.item.line_start, read.item.line_end, read.item.visible_text_hash)
        if key in done:
            continue
        done.add(key)
        compared = _compare(read, workspace)
        if isinstance(compared, str):
            skipped.append((read.item.source_ref, compared))
        else:
            items.append(compared)
    return ObservedDrift(session.header.id, str(workspace), tuple(items), tuple(skipped))


def _compare(read: SeenItem, workspace: Path) -> DriftItem | str:
    item = read.item
    path = item.path or ""
    relative = PurePosixPath(path)
    if relative.is_absolute() or ".." in relative.parts:
        return "a path outside the session's working directory"
    if item.line_start is None or item.line_end is None:
        return "no line range recorded for this read"
    seen = shown_lines(item.visible_text, item.line_start, item.line_end)
    if seen is None:
        return "the lines shown cannot be told from the tool's framing"
    frozen_version = text_hash("\n".join(seen))
    common = {"source_ref": item.source_ref, "path": path, "frozen_rank": item.rank, "frozen_version": frozen_version,
              "frozen_citation": item.citation_id}
    file = workspace / path
    try:
        today_lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return DriftItem(drift_class=DriftClass.REMOVED, reason="no such file in the workspace today", **common)
    except OSError as exc:
        return f"cannot be read today ({exc.__class__.__name__})"
    today = today_lines[item.line_start - 1 : item.line_end]
    today_version = text_hash("\n".join(today))
    if today == seen:
        return DriftItem(drift_class=DriftClass.UNCHANGED, today_version=today_version, **common)
    at = _find(today_lines, seen)
    if at is not None:
        moved_to = f"{path}:{at + 1}-{at + len(seen)}"
        return DriftItem(drift_class=DriftClass.SHIFTED, today_version=frozen_version,
                         reason=f"the same lines are at {at + 1}-{at + len(seen)} today",
                         **(common | {"source_ref": moved_to, "frozen_source_ref": item.source_ref}))
    diff = "\n".join(difflib.unified_diff(
        seen, today, fromfile=f"{item.source_ref} (seen at turn {read.turn})",
        tofile=f"{item.source_ref} (workspace today)", lineterm=""))
    return DriftItem(drift_class=DriftClass.CONTENT_CHANGED, today_version=today_version, diff=diff,
                     reason=f"the lines the model saw (shown by {read.how()}) read otherwise today", **common)


def _find(lines: list[str], block: list[str]) -> int | None:
    """Where ``block`` starts in ``lines`` (the first place), or None."""
    if not block:
        return None
    for start in range(len(lines) - len(block) + 1):
        if lines[start] == block[0] and lines[start : start + len(block)] == block:
            return start
    return None
