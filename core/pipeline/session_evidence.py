"""What a session contributes as evidence, and which sessions a scope admits.

A retrieval recalls the events and artifacts of its own session only, on its branch and
workspace root; an artifact named by a workspace path outside the scope's prefixes is out of
scope, and so is the event that previews it (docs/scope.md). Shared by recall and the scope
probe (both through ``session_records.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import col, select

from scopelens.core.contracts import ArtifactRef, Event, RetrievalScope
from scopelens.core.errors import IntegrityError, UnknownIdError
from scopelens.core.pathmatch import under_any
from scopelens.core.store.store import Store
from scopelens.core.store.tables import SessionRow
from scopelens.core.vocab import EventType

ARTIFACT_WINDOW_LINES = 30
"""An artifact is recalled in windows of this many lines."""


RECALLED_EVENT_TYPES = (EventType.USER_MESSAGE, EventType.MODEL_RESPONSE, EventType.TOOL_FINISHED)


@dataclass(frozen=True)
class SessionInfo:
    id: str
    branch: str | None
    workspace_root: str | None


def project_sessions(store: Store, project: str) -> list[SessionInfo]:
    """Every session of a project (metadata only; no event is read)."""
    statement = (
        select(col(SessionRow.id), col(SessionRow.branch), col(SessionRow.workspace_root))
        .where(col(SessionRow.project) == project)
        .order_by(col(SessionRow.id))
    )
    with store.read() as conn:
        return [SessionInfo(str(sid), branch, root) for sid, branch, root in conn.execute(statement).all()]


def session_withheld(session: SessionInfo, scope: RetrievalScope) -> str | None:
    """Why the scope keeps a session's events and artifacts out (``None``: it does not).

    A retrieval recalls its own session only (the scope's ``session_id``; a scope without one
    recalls no session at all), on the scope's branch (or none) and workspace root (or none).
    Knowledge that should outlive a session goes through governed memory (docs/scope.md).
    """
    if scope.session_id is None:
        return f"event of session {session.id}; a scope without a session recalls no session events"
    if session.id != scope.session_id:
        return f"event of session {session.id}, outside the scope (session {scope.session_id})"
    if scope.branch is not None and session.branch not in (None, scope.branch):
        return f"session on branch {session.branch}, outside the scope (branch {scope.branch})"
    if scope.workspace_root is not None and session.workspace_root not in (None, scope.workspace_root):
        return f"session in workspace {session.workspace_root}, outside the scope"
    return None


def artifact_withheld(name: str, scope: RetrievalScope) -> str | None:
    """Why the scope's path prefixes keep an artifact out (``None``: they do not).

    An artifact named by a workspace path (it has a directory part: ``ops/deploy.log``) is
    confined by the prefixes like a file; a bare name (``test-output.log``) names the tool's
    output itself, which belongs to the session, not to a place in the workspace.
    """
    if scope.path_prefixes and "/" in name and not under_any(name, scope.path_prefixes):
        return f"artifact path outside the scope's prefixes ({', '.join(scope.path_prefixes)})"
    return None


def artifact_text(store: Store, event: Event, ref: ArtifactRef) -> str:
    """An artifact's text (undecodable bytes replaced); a missing blob is an ``IntegrityError``."""
    try:
        return store.get_blob(ref.blob).decode("utf-8", errors="replace")
    except UnknownIdError:
        # Recalling around a hole would record a snapshot of a damaged store as if whole.
        raise IntegrityError(
            f"artifact {ref.name!r} of session {event.session_id} event #{event.seq} is missing from the store "
            f"(blob {ref.blob[:12]}…): run `scopelens verify`"
        ) from None


def artifact_windows(text: str) -> list[tuple[int, int, str]]:
    """An artifact's windows of ``ARTIFACT_WINDOW_LINES`` lines that are not blank, as
    ``(first line, last line, text)`` (1-based): each is one candidate."""
    lines = text.splitlines()
    windows = []
    for start in range(0, max(len(lines), 1), ARTIFACT_WINDOW_LINES):
        window_lines = lines[start : start + ARTIFACT_WINDOW_LINES]
        if any(line.strip() for line in window_lines):
            first, last = start + 1, start + len(window_lines)
            windows.append((first, last, window_text(lines, first, last)))
    return windows


def window_text(lines: list[str], first: int, last: int) -> str:
    """The text of lines ``first..last`` (1-based) of an artifact split by ``splitlines``."""
    return "\n".join(lines[first - 1 : last])


def artifact_refs(event: Event) -> list[ArtifactRef]:
    """The artifacts a ``tool.finished`` event keeps (none for other events)."""
    if event.type != EventType.TOOL_FINISHED:
        return []
    return [ArtifactRef.model_validate(ref) for ref in event.payload.get("artifacts", [])]


def event_text(event: Event) -> str:
    """What an event contributes as evidence: a message's text, a tool's name and output preview."""
    payload = event.payload
    if event.type == EventType.TOOL_FINISHED:
        return f"{payload.get('tool', '')}: {payload.get('output_preview', '')}".strip()
    return str(payload.get("text", ""))
