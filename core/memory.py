"""Governed memory: import, export, list, and the status changes of memory governance.

Statuses decide what retrieval may do with a memory (see ``pipeline/boundary.py``):
``candidate`` is never shown as a fact; ``verified`` is evidence; ``deprecated`` appears only
as labelled history; ``conflicted`` appears only with its counterpart; ``private`` only to its
owner. Content is redacted at import, like everything that enters the system.

Every change is a new version in the memory's append-only log (``core/store/memory_log.py``):
an import with new text, ``promote``, ``deprecate``, ``link-conflict``. ``memories`` holds the
current state that retrieval reads; a retrieval ``as_of`` a past moment reads the log instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, col, select

from scopelens.core.clock import stored_time
from scopelens.core.contracts import MemoryRecord, parse_input
from scopelens.core.errors import InvalidInputError, UnknownIdError, UnreadableFileError
from scopelens.core.hashing import as_bytes, canonical_json
from scopelens.core.redact import redact
from scopelens.core.store.memory_log import MemoryVersion, known_at, next_version, row_values
from scopelens.core.store.store import Store
from scopelens.core.store.tables import MemoryRow, MemoryVersionRow, table_of
from scopelens.core.vocab import MemoryChange, MemoryStatus


def read_jsonl(path: Path) -> list[MemoryRecord]:
    """Parse a JSONL file of memory records strictly; errors name the line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UnreadableFileError(f"cannot read memory file {path}: {exc}") from None
    records: list[MemoryRecord] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UnreadableFileError(f"{path}:{number}: not valid JSON: {exc.msg}") from None
        records.append(parse_input(MemoryRecord, data, what=f"{path}:{number}"))
    return records


IMPORTABLE_STATUSES = frozenset({MemoryStatus.CANDIDATE, MemoryStatus.PRIVATE})
"""The statuses a memory may enter the store with. The others are given only by governance:
``verified`` by :func:`promote`, ``deprecated`` by :func:`deprecate`, ``conflicted`` by
:func:`link_conflict`."""
GOVERNANCE_COMMAND: dict[MemoryStatus, str] = {
    MemoryStatus.VERIFIED: "promote",
    MemoryStatus.DEPRECATED: "deprecate",
    MemoryStatus.CONFLICTED: "link-conflict",
}


def import_memories(store: Store, records: Iterable[MemoryRecord]) -> tuple[int, int]:
    """Insert or replace records (redacted at ingest); returns (imported, redactions).

    Only ``candidate`` and ``private`` records are accepted: an import cannot verify,
    deprecate or link a memory (see :data:`IMPORTABLE_STATUSES`). A record with another
    status is refused before anything is written, so a file is imported whole or not at all.
    """
    batch = list(records)
    for record in batch:
        if record.status not in IMPORTABLE_STATUSES:
            command = GOVERNANCE_COMMAND[record.status]
            raise InvalidInputError(
                f"memory {record.id}: status {record.status.value} cannot be imported; "
                f"import it as candidate (or private) and run `scopelens memory {command}`"
            )
    return seed_memories(store, batch)


def seed_memories(store: Store, records: Iterable[MemoryRecord]) -> tuple[int, int]:
    """Write records with the status they declare, in one transaction (redacted at ingest).

    Not a user import (that is :func:`import_memories`, which refuses governed statuses): this
    is for scenario material whose governance happened before it begins, a session script's
    ``memories.jsonl`` and test fixtures. No command of the CLI reaches it with a user's file
    except ``scopelens record``, which records scripted sample and test material.
    """
    imported = redactions = 0
    now = stored_time(store.clock.now())
    with store.write() as conn:
        for record in records:
            redacted = redact(record.content)
            redactions += len(redacted.redactions)
            clean = record.model_copy(update={"content": redacted.text})
            previous = _last_version(conn, clean.id)
            _append(conn, clean, MemoryChange.IMPORTED if previous is None else MemoryChange.REIMPORTED, now, previous)
            imported += 1
    return imported, redactions


def list_memories(store: Store, *, project: str | None = None, status: MemoryStatus | None = None) -> list[MemoryRecord]:
    statement = select(col(MemoryRow.body)).order_by(col(MemoryRow.project), col(MemoryRow.id))
    if project is not None:
        statement = statement.where(col(MemoryRow.project) == project)
    if status is not None:
        statement = statement.where(col(MemoryRow.status) == status.value)
    with store.read() as conn:
        return [MemoryRecord.model_validate_json(as_bytes(body)) for body in conn.execute(statement).scalars()]


def current_memories(store: Store, project: str, *, as_of: datetime | None = None) -> list[tuple[MemoryRecord, str]]:
    """Every memory of a project with the hash of the version read; with ``as_of``, the
    version each had then (memories recorded later are left out; see ``memory_log.known_at``)."""
    return _memories(store, project, as_of)


def all_current_memories(store: Store, *, as_of: datetime | None = None) -> list[tuple[MemoryRecord, str]]:
    """Every memory of every project (the scope probe uses this; never model-visible)."""
    return _memories(store, None, as_of)


def _memories(store: Store, project: str | None, as_of: datetime | None) -> list[tuple[MemoryRecord, str]]:
    if as_of is not None:
        return _known_at(store, as_of, project)
    statement = select(col(MemoryRow.body), col(MemoryRow.content_hash)).order_by(col(MemoryRow.id))
    if project is not None:
        statement = statement.where(col(MemoryRow.project) == project)
    with store.read() as conn:
        rows = conn.execute(statement).all()
    return [(parsed_memory(as_bytes(body)), digest) for body, digest in rows]


@lru_cache(maxsize=8192)
def parsed_memory(body: bytes) -> MemoryRecord:
    """A stored memory body as a record. Cached by its bytes (records are immutable): recall
    and the probe read every memory on every retrieval, and validating each again cost more
    than reading it."""
    return MemoryRecord.model_validate_json(body)


def memory_history(store: Store, memory_id: str) -> list[MemoryVersion]:
    """Every version of one memory, oldest first; an unknown id is an :class:`UnknownIdError`."""
    with store.read() as conn:
        rows = conn.exec(
            select(MemoryVersionRow).where(col(MemoryVersionRow.memory_id) == memory_id).order_by(col(MemoryVersionRow.version))
        ).all()
    if not rows:
        raise UnknownIdError(f"no memory {memory_id!r} in this store")
    return [_version(row) for row in rows]


def copy_history(old: Store, new: Store, transform: Callable[[MemoryRecord], MemoryRecord]) -> int:
    """Copy every memory's version log from ``old`` into ``new``, each version passed through
    ``transform`` (``rebuild`` redacts), keeping its change and time; returns the memories copied."""
    with old.read() as conn:
        versions = [_version(row) for row in conn.exec(
            select(MemoryVersionRow).order_by(col(MemoryVersionRow.memory_id), col(MemoryVersionRow.version))
        )]
    last: dict[str, MemoryVersion | None] = {}
    with new.write() as conn:
        for version in versions:
            record = transform(MemoryRecord.model_validate_json(version.body))
            last[record.id] = _append(conn, record, version.change, version.recorded_at, last.get(record.id))
    return len({version.memory_id for version in versions})


def _known_at(store: Store, as_of: datetime, project: str | None) -> list[tuple[MemoryRecord, str]]:
    statement = select(MemoryVersionRow).order_by(col(MemoryVersionRow.memory_id), col(MemoryVersionRow.version))
    if project is not None:
        statement = statement.where(col(MemoryVersionRow.project) == project)
    with store.read() as conn:
        rows = conn.exec(statement).all()
    by_memory: dict[str, list[MemoryVersion]] = {}
    for row in rows:
        by_memory.setdefault(row.memory_id, []).append(_version(row))
    known = []
    for versions in by_memory.values():
        version = known_at(versions, as_of)
        if version is not None:
            known.append((parsed_memory(version.body), version.content_hash))
    return known


def _version(row: MemoryVersionRow) -> MemoryVersion:
    return MemoryVersion(
        memory_id=row.memory_id, version=row.version, project=row.project, status=row.status,
        change=MemoryChange(row.change), recorded_at=row.recorded_at, body=as_bytes(row.body),
        content_hash=row.content_hash, prev_hash=row.prev_hash, hash=row.hash,
    )


def _last_version(conn: Session, memory_id: str) -> MemoryVersion | None:
    row = conn.exec(
        select(MemoryVersionRow)
        .where(col(MemoryVersionRow.memory_id) == memory_id)
        .order_by(col(MemoryVersionRow.version).desc())
        .limit(1)
    ).first()
    return None if row is None else _version(row)


def _append(
    conn: Session, record: MemoryRecord, change: MemoryChange, now: str, previous: MemoryVersion | None
) -> MemoryVersion | None:
    """Make ``record`` the memory's current state and append it to its log; a record equal to
    the current one changes nothing (no version). Returns the memory's last version."""
    body = canonical_json(record)
    if previous is not None and previous.body == body:
        return previous
    version = next_version(
        previous, memory_id=record.id, project=record.project, status=record.status.value, change=change,
        recorded_at=now, body=body,
    )
    conn.execute(table_of(MemoryVersionRow).insert().values(**row_values(version)))
    values: dict[str, Any] = {
        "project": record.project, "status": record.status.value, "body": body,
        "content_hash": version.content_hash, "updated_at": now, "version": version.version,
    }
    if previous is None and conn.get(MemoryRow, record.id) is None:
        conn.add(MemoryRow(id=record.id, **values))
    else:
        conn.execute(update(MemoryRow).where(col(MemoryRow.id) == record.id).values(**values))
    return version


def _locked(store: Store, conn: Session, memory_id: str) -> MemoryRecord:
    """A memory read inside a write transaction (its row locked on PostgreSQL)."""
    statement = select(col(MemoryRow.body)).where(col(MemoryRow.id) == memory_id)
    if store.dialect == "postgresql":
        statement = statement.with_for_update()
    body = conn.execute(statement).scalar()
    if body is None:
        raise UnknownIdError(f"no memory {memory_id!r} in this store")
    return MemoryRecord.model_validate_json(as_bytes(body))


def _change(store: Store, memory_id: str, change: Callable[[MemoryRecord], MemoryRecord], kind: MemoryChange) -> MemoryRecord:
    """Read, check and rewrite one memory in one transaction (``change`` raises to refuse)."""
    with store.write() as conn:
        record = change(_locked(store, conn, memory_id))
        _append(conn, record, kind, stored_time(store.clock.now()), _last_version(conn, memory_id))
    return record


def promote(store: Store, memory_id: str) -> MemoryRecord:
    """candidate -> verified (anything else is refused: promotion needs a candidate)."""

    def verify(record: MemoryRecord) -> MemoryRecord:
        if record.status != MemoryStatus.CANDIDATE:
            raise InvalidInputError(f"memory {memory_id} is {record.status.value}; only a candidate can be promoted")
        return record.model_copy(update={"status": MemoryStatus.VERIFIED})

    return _change(store, memory_id, verify, MemoryChange.PROMOTED)


def deprecate(store: Store, memory_id: str) -> MemoryRecord:
    def retire(record: MemoryRecord) -> MemoryRecord:
        if record.status == MemoryStatus.DEPRECATED:
            raise InvalidInputError(f"memory {memory_id} is already deprecated")
        return record.model_copy(update={"status": MemoryStatus.DEPRECATED, "valid_until": store.clock.now()})

    return _change(store, memory_id, retire, MemoryChange.DEPRECATED)


def link_conflict(store: Store, first_id: str, second_id: str) -> tuple[MemoryRecord, MemoryRecord]:
    """Mark two memories as conflicting with each other: both records, or neither, in one transaction."""
    if first_id == second_id:
        raise InvalidInputError("a memory cannot conflict with itself")
    with store.write() as conn:
        first, second = _locked(store, conn, first_id), _locked(store, conn, second_id)
        if first.project != second.project:
            raise InvalidInputError(f"memories {first_id} and {second_id} belong to different projects")
        now = stored_time(store.clock.now())
        linked = []
        for record, other in ((first, second_id), (second, first_id)):
            conflicted = record.model_copy(
                update={
                    "status": MemoryStatus.CONFLICTED,
                    "conflicts_with": tuple(dict.fromkeys((*record.conflicts_with, other))),
                }
            )
            _append(conn, conflicted, MemoryChange.LINKED_CONFLICT, now, _last_version(conn, record.id))
            linked.append(conflicted)
    return linked[0], linked[1]


def export_jsonl(records: Iterable[MemoryRecord]) -> str:
    return "".join(json.dumps(r.model_dump(mode="json"), ensure_ascii=False, sort_keys=True) + "\n" for r in records)
