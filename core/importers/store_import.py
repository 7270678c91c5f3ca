"""Writing imported agent sessions to the store: a session, its events and one observed
snapshot per model call, each file in one transaction.

Every file is read (and must parse) before anything is written. A file whose bytes were
imported before is a no-op; a file that grew since an import (Claude Code and Codex append to
their session files), with that import's bytes as its prefix, appends only the calls after
the ones stored, to the same session. Each model call is a turn: its ``user.message`` (a
task that arrived with it), its observed snapshot, its ``model.request`` naming the snapshot
and its ``model.response``. Every text is redacted before it is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

from scopelens.core.contracts import (
    ModelRequestPayload,
    ModelResponsePayload,
    SessionHeader,
    UserMessagePayload,
)
from scopelens.core.errors import InvalidInputError
from scopelens.core.hashing import canonical_json, sha256_hex
from scopelens.core.importers.detect import read_sessions
from scopelens.core.importers.model import ImportedSession
from scopelens.core.importers.observations import read_file_bytes
from scopelens.core.importers.observed_snapshot import clean, clean_summary, observed_snapshot
from scopelens.core.redact import RedactionKey, redact
from scopelens.core.store.batch import Batch
from scopelens.core.store.imports import ImportRecord, import_of, imports_of, record_import
from scopelens.core.store.store import OBSERVED_ID_PREFIX, Store
from scopelens.core.vocab import EventType, SnapshotKind

Status = Literal["imported", "appended", "unchanged"]


@dataclass(frozen=True)
class ImportOutcome:
    """What importing one session file did."""

    source: str
    format: str
    session_id: str
    status: Status
    calls: int
    """Model calls written by this import (each a turn with its observed snapshot)."""
    items: int
    """Context items written by this import."""
    redactions: int
    unknown: dict[str, int]
    not_recorded: tuple[str, ...]
    note: str = ""


@dataclass
class ImportReport:
    outcomes: list[ImportOutcome] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def import_paths(
    store: Store,
    paths: Sequence[Path],
    *,
    project: str,
    format: str | None = None,
    workspace: Path | None = None,
    branch: str | None = None,
) -> ImportReport:
    """Import every session in ``paths`` (files or directories); all are read first."""
    report = ImportReport()
    sessions: list[ImportedSession] = []
    for path in paths:
        found = read_sessions(path, format=format)
        sessions += found.sessions
        report.skipped += found.skipped
    root = str(workspace.resolve()) if workspace is not None else None
    for session in sessions:
        report.outcomes.append(import_session(store, session, project=project, workspace_root=root, branch=branch))
    return report


def structure_digest(session: ImportedSession, items: int, calls: int) -> str:
    """A hash of the first ``items`` context items and ``calls`` calls as read: a file that grew
    must read the same up to there to be appended to (a rewound conversation does not)."""
    return sha256_hex(canonical_json({
        "items": [[i.kind, i.text, i.path, i.line_start, i.line_end, i.tool] for i in session.items[:items]],
        "calls": [[c.visible_from, c.visible_to, c.response] for c in session.calls[:calls]],
    }))


def import_session(
    store: Store, session: ImportedSession, *, project: str, workspace_root: str | None, branch: str | None
) -> ImportOutcome:
    """Write one read session file in one transaction (see the module's docstring)."""
    source = session.source
    assert source is not None, "read_session_file sets the source"
    key = store.redaction_key
    agent_session = session.session_id or source.name
    with store.batch() as batch:
        if (same := import_of(batch.conn, source.key)) is not None:
            return _outcome(session, same.session_id, "unchanged", 0, 0, 0,
                            note=f"these bytes were imported at {same.imported_at}")
        base, note = _grown_from(session, imports_of(batch.conn, session.format, agent_session))
        now = store.clock.now()
        start = _first_time(session) or now
        if base is None:
            session_id = store.ids.new_id("s")
            batch.create_session(SessionHeader(
                id=session_id, project=project, branch=clean(branch or session.branch or "", key) or None,
                workspace_root=workspace_root,
                title=clean_summary(session.title or source.name, key), agent=clean(session.agent, key),
                created_at=start,
            ))
            first_call, first_item = 0, 0
        else:
            session_id, first_call, first_item = base.session_id, base.calls, base.items
        written = _write_calls(store, batch, session, session_id, first_call, first_item, start, key)
        stored_items = session.calls[-1].visible_to if session.calls else 0
        record_import(batch.conn, ImportRecord(
            sha256=source.key, session_id=session_id, format=session.format, agent_session=agent_session,
            source_name=source.name, size=source.size, items=max(stored_items, first_item), calls=len(session.calls),
            imported_at=now.isoformat(), digest=structure_digest(session, stored_items, len(session.calls)),
        ))
    status: Status = "imported" if base is None else "appended"
    return _outcome(session, session_id, status, len(session.calls) - first_call, written.items, written.redactions,
                    note=note)


def _grown_from(session: ImportedSession, earlier: list[ImportRecord]) -> tuple[ImportRecord | None, str]:
    """The import this file grew from: the largest one whose bytes are this file's prefix and
    whose calls read the same today. With none, the file is a new session (and why, if an
    earlier import of the same agent session exists)."""
    source = session.source
    assert source is not None
    if not earlier:
        return None, ""
    data = read_file_bytes(Path(source.path))
    if sha256_hex(data) != source.sha256:
        raise InvalidInputError(f"{source.path}: the file changed while it was imported; nothing was written, try again")
    for record in earlier:
        if record.size < source.size and sha256_hex(data[: record.size]) == record.sha256.partition("#")[0]:
            if structure_digest(session, record.items, record.calls) == record.digest:
                return record, f"grew since the import of {record.imported_at}: new calls appended"
            return None, (f"grew since the import of {record.imported_at}, but its earlier part reads differently "
                          "now (a rewound conversation?): imported as a new session")
    return None, f"differs from the {len(earlier)} earlier import(s) of this agent session: imported as a new session"


@dataclass(frozen=True)
class _Written:
    items: int
    redactions: int


def _write_calls(
    store: Store, batch: Batch, session: ImportedSession, session_id: str, first_call: int, first_item: int,
    start: datetime, key: RedactionKey,
) -> _Written:
    """``start``: the session's first time, for calls and items the format gives no time."""
    items = redactions = 0
    stored_to = first_item
    at = start
    for call in session.calls[first_call:]:
        at = call.at or at
        turn = call.number
        for position in range(max(stored_to, call.visible_from), call.visible_to):
            item = session.items[position]
            if item.kind == "task":
                batch.append(session_id, EventType.USER_MESSAGE, UserMessagePayload(text=redact(item.text, key).text),
                             turn=turn, created_at=item.at or at)
        observed = observed_snapshot(session, call, snapshot_id=store.ids.new_id(OBSERVED_ID_PREFIX), session_id=session_id,
                                     first_new=stored_to, at=at, key=key)
        batch.write_snapshot(observed.snapshot, observed.block)
        request_id = f"call-{call.number}"
        batch.append(session_id, EventType.MODEL_REQUEST,
                     ModelRequestPayload(request_id=request_id, snapshot_ids=(observed.snapshot.id,),
                                         context_hash=observed.snapshot.projection.visible_text_hash,
                                         model=clean(session.model or "", key)),
                     turn=turn, created_at=at)
        batch.append(session_id, EventType.MODEL_RESPONSE,
                     ModelResponsePayload(request_id=request_id, text=redact(call.response, key).text),
                     turn=turn, created_at=at)
        items += len(observed.snapshot.selected)
        redactions += sum(len(i.redactions) for i in observed.snapshot.selected)
        stored_to = max(stored_to, call.visible_to)
    return _Written(items, redactions)


def _first_time(session: ImportedSession) -> datetime | None:
    return next((t for t in [*(i.at for i in session.items), *(c.at for c in session.calls)] if t is not None), None)


def _outcome(
    session: ImportedSession, session_id: str, status: Status, calls: int, items: int, redactions: int, *, note: str
) -> ImportOutcome:
    assert session.source is not None
    return ImportOutcome(source=session.source.path, format=session.format, session_id=session_id, status=status,
                         calls=calls, items=items, redactions=redactions, unknown=dict(session.unknown),
                         not_recorded=session.not_recorded, note=note)


def new_turns(store: Store, session_id: str, calls: int) -> list[int]:
    """The turns of the last ``calls`` observed snapshots of a session: an import's new calls."""
    turns = [s.snapshot.turn for s in store.snapshots_of(session_id, kind=SnapshotKind.OBSERVED)]
    return turns[len(turns) - calls :] if calls else []
