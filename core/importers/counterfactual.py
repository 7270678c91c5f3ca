"""What scoped retrieval would have given an imported session's model, turn by turn.

At each call of an imported session, an intent is derived from what the agent had seen so
far (the task, the last traceback and error line of a command's output, the files it read or
saw named, and a failing test: an instance's ``FAIL_TO_PASS`` one, else the last a pytest
summary in a command's output named), a scoped retrieval runs against the
project's index today, and its snapshot is stored in the session at the same turn as kind
``counterfactual``: never named by the turn's ``model.request``, never mixed with what the
model saw. The scope admits workspace sources only: the session's own events (later turns'
replies among them) and memories must not answer for the agent.

For each turn the outcome gives the rank of the gold files (an instance's) and of the files
the agent edited, in the counterfactual, beside whether the agent had seen them by then.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scopelens.core.audit.observed import ObservedSession, mentioned_path, read_observed, same_path
from scopelens.core.contracts import Anchors, AuditSnapshot, RetrievalIntent, RetrievalScope
from scopelens.core.importers.instance import Instance
from scopelens.core.pipeline.branch import indexed_branches
from scopelens.core.pipeline.retriever import Retriever
from scopelens.core.store.store import Store
from scopelens.core.textsafety import clip
from scopelens.core.vocab import WORKSPACE_SOURCES, ObservedKind, Purpose, SnapshotKind, Source

QUESTION_CHARS = 1500
"""The task text an intent carries (an issue's first part: its title and report)."""
MAX_FILES = 8
"""Files read or named an intent names as current files, the most recent first."""
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):\n(?:.*\n)*?(?P<error>[\w.]*(?:Error|Exception)\b[^\n]*)")
_ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception|Failure)\b:.*$", re.M)
_FAILED_TEST = re.compile(r"^(?:FAILED|ERROR) (?P<test>\S+::\S+)", re.M)
"""A failing test as pytest's summary names it (``FAILED tests/test_x.py::test_y - …``)."""
_EDIT_TOOLS = re.compile(r"edit|write|patch|str_replace|create|insert", re.I)


def intent_at(session: ObservedSession, turn: int, instance: Instance | None) -> RetrievalIntent:
    """An intent from what the call at ``turn`` had in context."""
    seen = session.visible(turn)
    task = next((s.item.visible_text for s in seen if s.observed.kind == ObservedKind.TASK), "")
    outputs = [s.item.visible_text for s in seen if s.observed.kind == ObservedKind.COMMAND_OUTPUT]
    traceback = next((m.group(0) for text in reversed(outputs) for m in [_last(_TRACEBACK, text)] if m), None)
    error = next((m.group(0) for text in reversed(outputs) for m in [_last(_ERROR_LINE, text)] if m), None)
    seen_failing = next((m.group("test") for text in reversed(outputs) for m in [_last(_FAILED_TEST, text)] if m), None)
    failing = instance.fail_to_pass[0] if instance and instance.fail_to_pass else seen_failing
    files: dict[str, None] = {}
    for s in reversed(seen):
        for path in ([s.item.path] if s.item.path else []) + [mentioned_path(m) for m in s.observed.mentions]:
            if path and not path.startswith("/"):
                files.setdefault(path, None)
    return RetrievalIntent(
        purpose=Purpose.FIX_TEST if traceback or error or failing else Purpose.ANSWER_QUESTION,
        question=clip(task, QUESTION_CHARS, one_line=False),
        anchors=Anchors(
            failing_test=failing,
            error_text=clip(error, 300) if error else None,
            traceback=clip(traceback, 3000, one_line=False, keep_end=True) if traceback else None,
            current_files=tuple(list(files)[:MAX_FILES]),
        ),
    )


def _last(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    last = None
    for last in pattern.finditer(text):  # noqa: B007 - the last match is the one wanted
        pass
    return last


def edited_files(session: ObservedSession) -> list[str]:
    """Files the agent changed in the session: what an edit, write or patch tool showed or named."""
    found: dict[str, None] = {}
    for s in session.in_order():
        if s.observed.tool and _EDIT_TOOLS.search(s.observed.tool):
            for path in ([s.item.path] if s.item.path else []) + [mentioned_path(m) for m in s.observed.mentions]:
                found.setdefault(path, None)
    return list(found)


@dataclass(frozen=True)
class FileRank:
    """Where a file stood at one turn: in the counterfactual (rank, selected) and for the agent."""

    path: str
    gold: bool
    edited: bool
    """The agent changed it (in the whole session)."""
    rank: int | None
    """Its best rank among the counterfactual's ranked candidates (None: not ranked)."""
    selected: bool
    seen_by_agent: bool
    """The agent's model had seen its lines by this turn."""


@dataclass(frozen=True)
class CounterfactualTurn:
    turn: int
    snapshot_id: str
    files: tuple[FileRank, ...]
    shown: tuple[str, ...] = ()
    """The source_refs its block showed, in rank order."""


def file_ranks(
    snapshot: AuditSnapshot, session: ObservedSession, turn: int, *, gold: Sequence[str], edited: Sequence[str]
) -> tuple[FileRank, ...]:
    """The rank of each gold and edited file in a counterfactual snapshot, and whether the
    agent had seen it by ``turn``: gold files first."""
    seen = [s for s in session.visible(turn) if s.observed.kind == ObservedKind.FILE_READ and s.item.path]
    ranks = []
    for path in dict.fromkeys([*gold, *edited]):
        ranked = [e for e in snapshot.ranked if e.path and same_path(e.path, path)]
        ranks.append(FileRank(path, path in gold, any(same_path(e, path) for e in edited),
                              min((e.rank for e in ranked), default=None), any(e.selected for e in ranked),
                              any(same_path(s.item.path or "", path) for s in seen)))
    return tuple(ranks)


def run_counterfactuals(
    store: Store, session_id: str, *, instance: Instance | None = None, turns: Sequence[int] | None = None,
    workspace: Path | None = None,
) -> list[CounterfactualTurn]:
    """A counterfactual retrieval at each call of an imported session (or at ``turns``),
    stored in the session; the project must be indexed (``scopelens index``)."""
    session = read_observed(store, session_id)
    header = session.header
    store.require_project(header.project)
    root = workspace or (Path(header.workspace_root) if header.workspace_root else None)
    retriever = Retriever(store, workspace_root=root)
    # The branch the agent's log names, when the project was indexed under it; else the
    # project's index as the checkout was indexed (the log's branch need not be an index's).
    branch = header.branch if header.branch in indexed_branches(store, header.project) else None
    scope = RetrievalScope(
        project=header.project, task_id=instance.instance_id if instance else None,
        allowed_sources=tuple(s for s in Source if s in WORKSPACE_SOURCES),
    )
    gold = list(instance.gold_files) if instance else []
    edited = edited_files(session)
    results = []
    for turn in turns if turns is not None else [s.turn for s in session.snapshots]:
        intent = intent_at(session, turn, instance)
        observation = retriever.retrieve(intent, scope.model_copy(update={"purpose": intent.purpose}),
                                         session_id=session_id, turn=turn, kind=SnapshotKind.COUNTERFACTUAL,
                                         branch=branch)
        results.append(CounterfactualTurn(turn, observation.snapshot_id,
                                          file_ranks(observation.snapshot, session, turn, gold=gold, edited=edited),
                                          tuple(i.source_ref for i in observation.snapshot.selected)))
    return results

