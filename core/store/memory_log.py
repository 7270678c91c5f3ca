"""The version log of governed memories: every text or status a memory ever had, chained.

A memory's current state lives in ``memories`` (one row per memory, what retrieval reads
today); every change to it (an import, a re-import with new text, promote, deprecate,
link-conflict) also appends a row to ``memory_versions``, which is append-only. Each version
hashes its own fields and the hash of the version before it, so ``verify`` can tell a changed,
deleted or inserted version, and a current row that disagrees with its last version.

``as_of`` reads the log: the version a memory had at a moment is the last one recorded at or
before it. A store migrated from before the log began has one ``migrated`` version per memory,
recorded when the memory last changed; what came before is unknown, so that version stands
for the memory's whole earlier life (see :func:`known_at`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlmodel import Session

from scopelens.core.clock import parse_stored_time
from scopelens.core.hashing import ZERO_HASH, canonical_json, sha256_hex
from scopelens.core.vocab import MemoryChange


@dataclass(frozen=True)
class MemoryVersion:
    """One row of ``memory_versions``."""

    memory_id: str
    version: int
    project: str
    status: str
    change: MemoryChange
    recorded_at: str
    body: bytes
    content_hash: str
    prev_hash: str
    hash: str


def version_hash(
    *, memory_id: str, version: int, project: str, status: str, change: str, recorded_at: str, content_hash: str, prev_hash: str
) -> str:
    """The hash of a version: its fields and the previous version's hash (the body by its hash)."""
    return sha256_hex(
        canonical_json(
            {
                "memory_id": memory_id,
                "version": version,
                "project": project,
                "status": status,
                "change": change,
                "recorded_at": recorded_at,
                "content_hash": content_hash,
                "prev_hash": prev_hash,
            }
        )
    )


def next_version(
    previous: MemoryVersion | None,
    *,
    memory_id: str,
    project: str,
    status: str,
    change: MemoryChange,
    recorded_at: str,
    body: bytes,
) -> MemoryVersion:
    """The version that follows ``previous`` (``None``: the memory's first)."""
    number = 1 if previous is None else previous.version + 1
    prev_hash = ZERO_HASH if previous is None else previous.hash
    content_hash = sha256_hex(body)
    digest = version_hash(
        memory_id=memory_id, version=number, project=project, status=status, change=change.value,
        recorded_at=recorded_at, content_hash=content_hash, prev_hash=prev_hash,
    )
    return MemoryVersion(memory_id, number, project, status, change, recorded_at, body, content_hash, prev_hash, digest)


def row_values(version: MemoryVersion) -> dict[str, object]:
    return {
        "memory_id": version.memory_id,
        "version": version.version,
        "project": version.project,
        "status": version.status,
        "change": version.change.value,
        "recorded_at": version.recorded_at,
        "body": version.body,
        "content_hash": version.content_hash,
        "prev_hash": version.prev_hash,
        "hash": version.hash,
    }


def known_at(versions: list[MemoryVersion], moment: datetime) -> MemoryVersion | None:
    """The version of one memory (``versions`` in order) known at ``moment``, if any.

    The last version recorded at or before it; before its first version a memory did not exist
    yet, unless that first version is ``migrated``: then it stands for its unknown earlier life.
    """
    known: MemoryVersion | None = None
    for version in versions:
        if parse_stored_time(version.recorded_at) <= moment:
            known = version
        else:
            break
    if known is None and versions and versions[0].change == MemoryChange.MIGRATED:
        return versions[0]
    return known


def backfill_versions(conn: Session) -> None:
    """Migration step: one ``migrated`` version for each memory written before the log."""
    rows = conn.execute(text("SELECT id, project, status, body, updated_at FROM memories ORDER BY id")).all()
    for memory_id, project, status, body, updated_at in rows:
        version = next_version(
            None, memory_id=memory_id, project=project, status=status, change=MemoryChange.MIGRATED,
            recorded_at=updated_at, body=bytes(body),
        )
        conn.execute(
            text(
                "INSERT INTO memory_versions (memory_id, version, project, status, change, recorded_at, body, "
                "content_hash, prev_hash, hash) VALUES (:memory_id, :version, :project, :status, :change, "
                ":recorded_at, :body, :content_hash, :prev_hash, :hash)"
            ),
            row_values(version),
        )
        conn.execute(text("UPDATE memories SET version = 1 WHERE id = :id"), {"id": memory_id})
