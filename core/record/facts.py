"""Read-only look-ups of recorded facts that finding rules need beyond the snapshot itself.

Snapshots carry provenance (path, line range, source version) but, by design, not the
untrimmed text, nor the validity of a version, nor the live version of a path today. These
helpers read them from the store's index and memory tables; they never write.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import col, select

from scopelens.core.contracts import MemoryRecord
from scopelens.core.hashing import sha256_hex
from scopelens.core.index.timeutil import from_micros
from scopelens.core.store.store import Store
from scopelens.core.store.tables import IndexChunkRow, IndexDocumentRow, MemoryRow


@dataclass(frozen=True)
class Version:
    """One indexed version of a path: when it became live and when it was superseded."""

    content_hash: str
    valid_from: datetime
    valid_to: datetime | None

    def live_at(self, moment: datetime) -> bool:
        return self.valid_from <= moment and (self.valid_to is None or self.valid_to > moment)


def versions_of(store: Store, *, project: str, path: str, branch: str | None = None) -> list[Version]:
    """Every indexed version of ``path`` in ``project`` (and ``branch`` when given), oldest first."""
    statement = select(
        col(IndexDocumentRow.content_hash), col(IndexDocumentRow.valid_from), col(IndexDocumentRow.valid_to)
    ).where(col(IndexDocumentRow.project) == project, col(IndexDocumentRow.path) == path)
    if branch is not None:
        statement = statement.where(col(IndexDocumentRow.branch) == branch)
    with store.read() as conn:
        rows = conn.execute(statement.order_by(col(IndexDocumentRow.valid_from), col(IndexDocumentRow.id))).all()
    return [
        Version(str(h), from_micros(int(start)), None if end is None else from_micros(int(end)))
        for h, start, end in rows
    ]


def live_hashes(store: Store, *, project: str, path: str, branch: str | None = None) -> set[str]:
    """Content hashes of the live versions of ``path`` today (empty: the file is gone)."""
    return {v.content_hash for v in versions_of(store, project=project, path=path, branch=branch) if v.valid_to is None}


def chunk_text(
    store: Store, *, project: str, path: str, content_hash: str, start_line: int, end_line: int
) -> str | None:
    """The stored (redacted, untrimmed) text of one chunk of one version of a file."""
    with store.read() as conn:
        text = conn.execute(
            select(col(IndexChunkRow.text))
            .join(IndexDocumentRow, col(IndexDocumentRow.id) == col(IndexChunkRow.document_id))
            .where(
                col(IndexDocumentRow.project) == project,
                col(IndexDocumentRow.path) == path,
                col(IndexDocumentRow.content_hash) == content_hash,
                col(IndexChunkRow.start_line) == start_line,
                col(IndexChunkRow.end_line) == end_line,
            )
            .order_by(col(IndexChunkRow.id))
        ).scalars().first()
    return None if text is None else str(text)


def chunks_of(store: Store, *, project: str, path: str, content_hash: str) -> list[tuple[int, int, str]]:
    """The chunks of one version of a file: (start line, end line, stored text), in order."""
    with store.read() as conn:
        rows = conn.execute(
            select(col(IndexChunkRow.start_line), col(IndexChunkRow.end_line), col(IndexChunkRow.text))
            .join(IndexDocumentRow, col(IndexDocumentRow.id) == col(IndexChunkRow.document_id))
            .where(
                col(IndexDocumentRow.project) == project,
                col(IndexDocumentRow.path) == path,
                col(IndexDocumentRow.content_hash) == content_hash,
            )
            .order_by(col(IndexChunkRow.start_line), col(IndexChunkRow.id))
        ).all()
    return [(int(start), int(end), str(text)) for start, end, text in rows]


def chunk_project(store: Store, chunk_id: int) -> str | None:
    """The project an indexed chunk belongs to."""
    with store.read() as conn:
        project = conn.execute(
            select(col(IndexDocumentRow.project))
            .join(IndexChunkRow, col(IndexChunkRow.document_id) == col(IndexDocumentRow.id))
            .where(col(IndexChunkRow.id) == chunk_id)
        ).scalar()
    return None if project is None else str(project)


def memory_record(store: Store, memory_id: str) -> tuple[MemoryRecord, str] | None:
    """A memory as stored now, with the hash of its stored version (what snapshots pin)."""
    with store.read() as conn:
        body = conn.execute(select(col(MemoryRow.body)).where(col(MemoryRow.id) == memory_id)).scalar()
    if body is None:
        return None
    data = bytes(body)
    return MemoryRecord.model_validate_json(data), sha256_hex(data)
