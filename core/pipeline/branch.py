"""Which branch a retrieval reads: one, always, stated in the block.

An unset branch used to mean every branch: one checkout indexed as ``main`` and as
``feature`` gave two contradictory copies of the same lines in one block. The branch is now
resolved before anything is read, in this order:

1. the scope file's ``branch`` or ``--branch`` (they must agree, and agree with the session's);
2. the session's branch, when appending to a session that recorded one;
3. the project's only indexed branch (or no branch, for an index made without one);
4. the workspace's checked-out git branch, when the project is indexed on several and it is
   one of them.

Otherwise the retrieval is refused with the branches to choose from.
"""

from __future__ import annotations

from pathlib import Path

from sqlmodel import col, select

from scopelens.core.errors import InvalidInputError
from scopelens.core.index.walker import git_branch
from scopelens.core.store.store import Store
from scopelens.core.store.tables import IndexRunRow


def indexed_branches(store: Store, project: str) -> list[str]:
    """The branches the project's index has runs for ("" for runs made without a branch)."""
    with store.read() as conn:
        finished = col(IndexRunRow.finished_at).is_not(None)
        rows = conn.execute(select(col(IndexRunRow.branch)).where(col(IndexRunRow.project) == project, finished).distinct())
        return sorted(str(b) for b in rows.scalars())


def resolve_branch(
    store: Store,
    project: str,
    *,
    requested: str | None,
    scope_branch: str | None,
    session_branch: str | None,
    workspace_root: str | None,
) -> str | None:
    """The one branch this retrieval reads; None only when the project's index has no branch."""
    if requested is not None and scope_branch is not None and requested != scope_branch:
        raise InvalidInputError(f"--branch {requested} disagrees with the scope file's branch {scope_branch}")
    explicit = requested if requested is not None else scope_branch
    if explicit is not None:
        if session_branch is not None and session_branch != explicit:
            raise InvalidInputError(f"the session is on branch {session_branch}; this retrieval asks for {explicit}")
        return explicit or None
    if session_branch is not None:
        return session_branch
    branches = indexed_branches(store, project)
    if len(branches) <= 1:
        return (branches[0] or None) if branches else None
    checked_out = git_branch(Path(workspace_root)) if workspace_root else None
    if checked_out in branches:
        return checked_out
    named = ", ".join(b or "(none)" for b in branches)
    raise InvalidInputError(
        f"project {project} is indexed on several branches ({named}): pass --branch, or a scope with a branch"
    )
