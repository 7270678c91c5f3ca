"""Reading indexed chunks back with their document's provenance (after scoring chose them)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import col, select

from scopelens.core.contracts import Redaction
from scopelens.core.hashing import as_bytes
from scopelens.core.index.languages import language_of
from scopelens.core.index.sources import evidence_kind_of
from scopelens.core.index.timeutil import from_micros
from scopelens.core.store.store import Store
from scopelens.core.store.tables import IndexChunkRow, IndexDocumentRow
from scopelens.core.vocab import EvidenceKind, Source


@dataclass(frozen=True)
class ChunkRecord:
    """One indexed chunk and where it came from: enough to make a candidate."""

    chunk_id: int
    project: str
    branch: str
    root: str
    path: str
    start_line: int
    end_line: int
    kind: str
    symbol: str | None
    text: str
    source: Source
    evidence_kind: EvidenceKind
    content_hash: str
    valid_from: datetime
    valid_to: datetime | None
    run_id: int
    redactions: tuple[Redaction, ...] = ()
    """The document's redactions that start on this chunk's lines (records written before
    redactions carried a line are not placed, so they are not listed)."""

    @property
    def source_ref(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"


def _redactions_within(stored: bytes | str | None, first: int, last: int) -> tuple[Redaction, ...]:
    raw = as_bytes(stored) if stored else b"[]"
    if raw == b"[]":
        return ()  # the common case: nothing to parse
    records = (Redaction.model_validate(r) for r in json.loads(raw))
    return tuple(r for r in records if r.line is not None and first <= r.line <= last)


def fetch_chunks(store: Store, chunk_ids: Iterable[int]) -> dict[int, ChunkRecord]:
    """The chunks with these ids (unknown ids are absent from the result)."""
    wanted = sorted(set(chunk_ids))
    if not wanted:
        return {}
    found: dict[int, ChunkRecord] = {}
    with store.read() as conn:
        for start in range(0, len(wanted), 500):
            rows = conn.exec(
                select(IndexChunkRow, IndexDocumentRow)
                .join(IndexDocumentRow, col(IndexDocumentRow.id) == col(IndexChunkRow.document_id))
                .where(col(IndexChunkRow.id).in_(wanted[start : start + 500]))
            )
            for chunk, document in rows:
                source = Source(document.source)
                found[chunk.id] = ChunkRecord(
                    chunk_id=chunk.id,
                    project=document.project,
                    branch=document.branch,
                    root=document.root,
                    path=chunk.path,
                    start_line=chunk.start_line,
                    end_line=chunk.end_line,
                    kind=chunk.kind,
                    symbol=chunk.symbol,
                    text=chunk.text,
                    source=source,
                    evidence_kind=evidence_kind_of(source, language_of(chunk.path)),
                    content_hash=document.content_hash,
                    valid_from=from_micros(document.valid_from),
                    valid_to=None if document.valid_to is None else from_micros(document.valid_to),
                    run_id=chunk.run_id,
                    redactions=_redactions_within(document.redactions, chunk.start_line, chunk.end_line),
                )
    return found
