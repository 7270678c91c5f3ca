"""Merging index segments, so that recall's cost does not grow with the number of index runs.

Every run writes its postings in one or more *segments* (``run_writer.py``), and recall
reads each query term once per segment: after 200 one-file runs a cold recall read 200 rows
per term. Compaction merges consecutive segments of one *line* (a project, branch and
workspace root) into one, by size tiers: a segment of ``c`` chunks is in tier
``floor(log8(c))``, and ``MERGE_FACTOR`` consecutive segments of one tier at the end of a
line become one of the next tier (a logarithmic method: a line of ``n`` small runs keeps
``O(log n)`` segments, and each posting is rewritten ``O(log n)`` times in all).

* At the end of an index run (``compact_line``, in the same process and under the same lock),
  only segments of at most ``AUTO_MAX_CHUNKS`` chunks are merged: a full build's segments are
  large already, so this costs an incremental run a few milliseconds and a full build nothing.
* ``scopelens compact`` (``compact_store``) merges larger segments too, up to
  ``COMMAND_MAX_CHUNKS`` chunks per segment.

A merged segment holds exactly the postings of the segments it replaces (chunk ids and term
frequencies), so no query, pinned index version or ``as_of`` sees any difference. It spans
the chunk ids of its first to its last segment (other lines' chunks may lie between: they have
no postings in it) and belongs to the newest run it covers, so the cleanup of an interrupted
run never touches it. Each merge is one transaction: readers see the old segments or the new
one, never both; the scorer's view key includes the newest segment id, so a cached view is
replaced after a compaction.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import delete
from sqlalchemy import select as sa_select
from sqlmodel import col

from scopelens.core.hashing import as_bytes
from scopelens.core.index.run_writer import POSTING_COLUMNS, insert_many
from scopelens.core.store.store import Store
from scopelens.core.store.tables import IndexPostingRow, IndexRunRow, IndexSegmentRow, table_of

MERGE_FACTOR = 8
AUTO_MAX_CHUNKS = 8_192
"""The largest segment compaction at the end of an index run makes (or merges)."""
COMMAND_MAX_CHUNKS = 1 << 20
"""The largest segment ``scopelens compact`` makes."""
MAX_SPAN = 1 << 32
"""Chunk offsets in a segment are uint32: a merged segment spans fewer chunk ids."""


@dataclass(frozen=True)
class Segment:
    """One index segment of a line, as compaction sees it."""

    id: int
    run_id: int
    lo: int
    hi: int

    @property
    def chunks(self) -> int:
        return self.hi - self.lo


@dataclass
class CompactionReport:
    """What one compaction did."""

    merges: int = 0
    """Merged segments written."""
    segments_before: int = 0
    segments_after: int = 0
    postings_rewritten: int = 0
    lines: list[tuple[str, str, str]] = field(default_factory=list)
    """The lines (project, branch, root) looked at."""


def tier(chunks: int) -> int:
    """The size tier of a segment of ``chunks`` chunks: ``floor(log8(chunks))``."""
    level, size = 0, max(chunks, 1)
    while size >= MERGE_FACTOR:
        size //= MERGE_FACTOR
        level += 1
    return level


def plan_merges(segments: Sequence[Segment], max_chunks: int) -> list[list[Segment]]:
    """Groups of consecutive ``segments`` (a line's, in chunk order) to merge into one each.

    Segments are pushed on a stack in order; whenever the top ``MERGE_FACTOR`` entries are of
    one tier and together hold at most ``max_chunks`` chunks, they become one entry. A segment
    larger than ``max_chunks`` is never merged (and nothing merges across it).
    """
    stack: list[list[Segment]] = []
    for segment in segments:
        stack.append([segment])
        while len(stack) >= MERGE_FACTOR:
            top = stack[-MERGE_FACTOR:]
            sizes = [sum(s.chunks for s in group) for group in top]
            span = top[-1][-1].hi - top[0][0].lo
            if len({tier(size) for size in sizes}) != 1 or sum(sizes) > max_chunks or span >= MAX_SPAN:
                break
            del stack[-MERGE_FACTOR:]
            stack.append([s for group in top for s in group])
    return [group for group in stack if len(group) > 1]


def compact_line(
    store: Store, project: str, branch: str, root: str, *, max_chunks: int = AUTO_MAX_CHUNKS
) -> CompactionReport:
    """Merge the segments of one line by size tiers. The caller holds the index-run lock."""
    report = CompactionReport(lines=[(project, branch, root)])
    segments = _line_segments(store, project, branch, root)
    report.segments_before = len(segments)
    report.segments_after = len(segments)
    for group in plan_merges(segments, max_chunks):
        report.postings_rewritten += _merge(store, group)
        report.merges += 1
        report.segments_after -= len(group) - 1
    return report


def compact_store(store: Store, *, project: str | None = None, max_chunks: int = COMMAND_MAX_CHUNKS) -> CompactionReport:
    """Merge the segments of every line (of ``project``, if given), under the index-run lock."""
    report = CompactionReport()
    with store.index_run_lock():
        for line in _lines(store, project):
            done = compact_line(store, *line, max_chunks=max_chunks)
            report.merges += done.merges
            report.segments_before += done.segments_before
            report.segments_after += done.segments_after
            report.postings_rewritten += done.postings_rewritten
            report.lines += done.lines
    return report


def _lines(store: Store, project: str | None) -> list[tuple[str, str, str]]:
    statement = sa_select(col(IndexRunRow.project), col(IndexRunRow.branch), col(IndexRunRow.root)).where(
        col(IndexRunRow.finished_at).is_not(None)
    )
    if project is not None:
        statement = statement.where(col(IndexRunRow.project) == project)
    with store.read() as conn:
        rows = conn.execute(statement.distinct()).all()
    return sorted((str(p), str(b), str(r)) for p, b, r in rows)


def _line_segments(store: Store, project: str, branch: str, root: str) -> list[Segment]:
    statement = (
        sa_select(col(IndexSegmentRow.id), col(IndexSegmentRow.run_id), col(IndexSegmentRow.chunk_lo),
                  col(IndexSegmentRow.chunk_hi))
        .join(IndexRunRow, col(IndexRunRow.id) == col(IndexSegmentRow.run_id))
        .where(
            col(IndexRunRow.finished_at).is_not(None),
            col(IndexRunRow.project) == project,
            col(IndexRunRow.branch) == branch,
            col(IndexRunRow.root) == root,
        )
        .order_by(col(IndexSegmentRow.chunk_lo))
    )
    with store.read() as conn:
        return [Segment(int(i), int(r), int(lo), int(hi)) for i, r, lo, hi in conn.execute(statement).all()]


def _merge(store: Store, group: Sequence[Segment]) -> int:
    """Replace ``group`` (consecutive segments of one line) by one segment, in one transaction.
    Returns the number of posting rows read."""
    lo, hi = group[0].lo, max(s.hi for s in group)
    lo_of = {s.id: s.lo for s in group}
    ids = sorted(lo_of)
    with store.write() as conn:
        rows = conn.execute(
            sa_select(
                col(IndexPostingRow.segment_id), col(IndexPostingRow.term), col(IndexPostingRow.chunk_ids),
                col(IndexPostingRow.tfs),
            ).where(col(IndexPostingRow.segment_id).in_(ids))
        ).all()
        merged = IndexSegmentRow(run_id=max(s.run_id for s in group), chunk_lo=lo, chunk_hi=hi)
        conn.add(merged)
        conn.flush()
        assert merged.id is not None
        connection = conn.connection()
        insert_many(connection, table_of(IndexPostingRow), POSTING_COLUMNS, _merged_rows(int(merged.id), lo, lo_of, rows))
        conn.execute(delete(IndexPostingRow).where(col(IndexPostingRow.segment_id).in_(ids)))
        conn.execute(delete(IndexSegmentRow).where(col(IndexSegmentRow.id).in_(ids)))
    return len(rows)


def _merged_rows(
    segment_id: int, lo: int, lo_of: dict[int, int], rows: Sequence[Any]
) -> Iterator[tuple[int, str, bytearray, bytearray]]:
    """One posting row per term: the group's rows of that term, in chunk order, with their
    chunk offsets moved from their segment's first chunk to ``lo``. Terms in code point order
    (the key's order, so the B-tree is appended to)."""
    by_term: dict[str, list[tuple[int, bytes, bytes]]] = {}
    for segment_id_of_row, term, ids, tfs in rows:
        by_term.setdefault(str(term), []).append((lo_of[int(segment_id_of_row)], as_bytes(ids), as_bytes(tfs)))
    for term in sorted(by_term):
        pieces = sorted(by_term[term], key=lambda piece: piece[0])
        offsets = np.concatenate(
            [np.frombuffer(ids, dtype="<u4").astype(np.int64) + (base - lo) for base, ids, _ in pieces]
        ).astype("<u4")
        yield segment_id, term, bytearray(offsets.tobytes()), bytearray(b"".join(tfs for _, _, tfs in pieces))
