"""The ``imports`` table: which agent session file content went into which session.

A row per import, keyed by the SHA-256 of the file's bytes at the time: importing the same
bytes again finds its row and writes nothing; a file that grew since (Claude Code and Codex
append to their session files) has the bytes of a recorded row as its prefix, and appends its
new context to that row's session. Bookkeeping beside the audit record, not part of it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sqlmodel import Session, col, select

from scopelens.core.store.tables import ImportRow, table_of


@dataclass(frozen=True)
class ImportRecord:
    """One import of a session file's content."""

    sha256: str
    """The SHA-256 of the file's bytes; for a Claude Code subagent written inline in its
    session's file, followed by ``#agent-<id>`` (one file, several sessions)."""
    session_id: str
    format: str
    agent_session: str
    source_name: str
    size: int
    items: int
    """Context items of the agent session stored so far (in its observed snapshots)."""
    calls: int
    digest: str
    """A hash of the items and calls as read then: a grown file must read the same up to there."""
    imported_at: str


def _record(row: ImportRow) -> ImportRecord:
    return ImportRecord(row.sha256, row.session_id, row.format, row.agent_session, row.source_name, row.size,
                        row.items, row.calls, row.digest, row.imported_at)


def import_of(conn: Session, sha256: str) -> ImportRecord | None:
    """The import of exactly these bytes, if there was one."""
    row = conn.exec(select(ImportRow).where(col(ImportRow.sha256) == sha256)).first()
    return _record(row) if row is not None else None


def imports_of(conn: Session, format: str, agent_session: str) -> list[ImportRecord]:
    """Every import of one agent session, the largest file first."""
    rows = conn.exec(
        select(ImportRow)
        .where(col(ImportRow.format) == format, col(ImportRow.agent_session) == agent_session)
        .order_by(col(ImportRow.size).desc())
    ).all()
    return [_record(row) for row in rows]


def record_import(conn: Session, record: ImportRecord) -> None:
    conn.execute(table_of(ImportRow).insert().values(**asdict(record)))
