"""The tools an MCP client may call, as plain Python over one fixed scope (no ``mcp`` import).

The server's configuration fixes the scope: the project, its workspace, the branch and the
policy. A client chooses only what it asks (the question, anchors, purpose, required
evidence) and a token budget no larger than the server's. Every tool answers for that project
alone: a snapshot or session of another project is unknown here, and ``search`` and ``drift``
leave out what the policy keeps from the model (runtime-only or summary-only paths, denied
sources), so no tool output carries text a retrieval in this scope could not show.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from scopelens.core.audit.drift import compute_drift
from scopelens.core.audit.replay import replay_session
from scopelens.core.audit.whynot import QUERY_KINDS, why_not
from scopelens.core.clients.stat_cache import WorkspaceStats
from scopelens.core.contracts import (
    Anchors,
    RetrievalBudget,
    RetrievalIntent,
    RetrievalScope,
    ToolFinishedPayload,
    ToolStartedPayload,
)
from scopelens.core.errors import InvalidInputError, UnknownIdError
from scopelens.core.index.chunks import fetch_chunks
from scopelens.core.index.indexer import index_workspace
from scopelens.core.index.scorer import RecallFilter, Scorer
from scopelens.core.index.sources import SourceClassifier
from scopelens.core.index.stat_check import unchanged_by_stat
from scopelens.core.index.tokenizer import tokenize
from scopelens.core.pipeline.policy import Policy
from scopelens.core.pipeline.retriever import Retriever
from scopelens.core.redact import redact_values
from scopelens.core.store.store import Store, event_summary
from scopelens.core.vocab import EventType, EvidenceKind, Purpose, Source, Visibility

RETRIEVE_ARGUMENTS = ("question", "anchors", "purpose", "required_evidence", "max_tokens", "session_id")
"""What a client may pass to ``retrieve``; anything else would widen or move the scope."""
SHOWN_VISIBILITY = (Visibility.RAW, Visibility.REDACTED)
"""Policy visibilities whose text a tool may return (the index holds it redacted already)."""
SNIPPET_LINES = 6


class ScopeRefusedError(InvalidInputError):
    """A client tried to set what the server's configuration fixes."""


@dataclass(frozen=True)
class ServerScope:
    """What ``scopelens mcp`` was started with: the only scope its tools answer in."""

    workspace: Path
    project: str
    branch: str
    policy: Policy = field(default_factory=Policy)
    db: str = ""
    """The store's URL: a SQLite file lets an unchanged workspace be seen from sizes and times."""
    max_tokens: int = RetrievalBudget().max_tokens
    max_bytes: int = 1_000_000


class ScopedTools:
    """``retrieve``, ``get_snapshot``, ``replay``, ``drift``, ``why_not`` and ``search`` in one scope."""

    def __init__(self, store: Store, scope: ServerScope) -> None:
        self.store = store
        self.scope = scope
        self.classifier = SourceClassifier().with_globs(scope.policy.rule_globs, scope.policy.decision_globs)
        self.session_id: str | None = None
        """The session of this server run (made by its first retrieval or refusal)."""
        self._seen: WorkspaceStats | None = None
        """The workspace as last seen indexed (None: check with ``stat_check``)."""
        self.reindexed = 0
        """Index runs this server made (the workspace had changed since the last call)."""

    # ------------------------------------------------------------------ the workspace

    def refresh_index(self) -> bool:
        """Re-index the workspace if it changed since the last call; whether a run was made.

        With nothing changed since the last call this is one ``stat`` per file and directory
        (``stat_cache``). Otherwise the workspace is recorded again, then indexed: two walks.
        The record comes first, so a change made while the index runs differs from it and is
        seen by the next call. With no record to compare (the first call, or one whose times
        were too recent to trust) ``stat_check`` is asked first: the store may already hold
        this workspace, indexed by another process; with one, something changed.
        No file is read and no index version is made when nothing changed."""
        if self._seen is not None and self._seen.unchanged():
            return False
        scope = self.scope
        compared = self._seen is not None
        seen = WorkspaceStats.record(scope.workspace, max_bytes=scope.max_bytes)
        made = False
        if compared or unchanged_by_stat(scope.db, scope.workspace, project=scope.project, branch=scope.branch,
                                               classifier=self.classifier, max_bytes=scope.max_bytes) is None:
            report = index_workspace(self.store, scope.workspace, project=scope.project, branch=scope.branch,
                                     classifier=self.classifier, max_bytes=scope.max_bytes)
            made = not report.nothing_changed
            self.reindexed += made
        self._seen = seen
        return made

    # ------------------------------------------------------------------ retrieval

    def retrieve(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """A scoped retrieval; its snapshot is written before this returns."""
        self.refuse_widening("retrieve", arguments, RETRIEVE_ARGUMENTS)
        session_id = self._session_for(arguments.get("session_id"))
        max_tokens = arguments.get("max_tokens")
        max_tokens = self.scope.max_tokens if max_tokens is None else _given(max_tokens, int, "max_tokens")
        if max_tokens < 1:
            raise InvalidInputError(f"max_tokens must be positive, not {max_tokens}")
        if max_tokens > self.scope.max_tokens:
            self._refuse(session_id, "retrieve", arguments,
                         f"max_tokens {max_tokens} is more than this server's budget of {self.scope.max_tokens}")
        try:
            purpose = Purpose(arguments.get("purpose") or Purpose.ANSWER_QUESTION.value)
            intent = RetrievalIntent(
                purpose=purpose,
                question=arguments.get("question") or "",
                anchors=Anchors.model_validate(arguments.get("anchors") or {}),
                required_evidence=tuple(EvidenceKind(k) for k in arguments.get("required_evidence") or ()),
            )
        except (ValueError, TypeError, ValidationError) as exc:
            raise InvalidInputError(f"retrieve: {_first_line(exc)}") from None
        self.refresh_index()
        scope = RetrievalScope(
            project=self.scope.project, workspace_root=str(self.scope.workspace), branch=self.scope.branch,
            purpose=purpose, budget=RetrievalBudget(max_tokens=max_tokens),
        )
        observation = Retriever(self.store, policy=self.scope.policy, workspace_root=self.scope.workspace).retrieve(
            intent, scope, project=self.scope.project, session_id=session_id, branch=self.scope.branch
        )
        if session_id is None:
            self.session_id = observation.session_id
        return {
            "context_block": observation.context_block,
            "snapshot_id": observation.snapshot_id,
            "snapshot_hash": observation.snapshot_hash,
            "session_id": observation.session_id,
            "citations": [
                {"citation_id": c.citation_id, "source_ref": c.source_ref, "visible_text_hash": c.visible_text_hash,
                 "authority": c.authority.value, "evidence_kind": c.evidence_kind.value}
                for c in observation.citations.values()
            ],
            "missing_evidence": [k.value for k in observation.snapshot.missing_evidence],
        }

    def refuse_widening(self, tool: str, arguments: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
        """Raise (and record the attempt) if ``arguments`` holds a field the client may not set."""
        extra = sorted(set(arguments) - set(allowed))
        if extra:
            named = arguments.get("session_id") if "session_id" in allowed else None
            session_id = named if isinstance(named, str) and self._in_scope_session(named) else None
            self._refuse(session_id, tool, arguments,
                         f"{', '.join(extra)}: not settable by a client; this server's scope is fixed "
                         f"(project {self.scope.project!r}, branch {self.scope.branch!r}, its policy and budget)")

    def _refuse(self, session_id: str | None, tool: str, arguments: Mapping[str, Any], why: str) -> None:
        """Record a refused call as a tool call that failed, in the session it named (or this
        run's), then raise: the audit trail shows what a client tried. Both events go in one
        transaction: a process killed between them would leave a call that never finished."""
        if session_id is None:
            session_id = self._server_session()
        call_id = self.store.ids.new_id("call")
        shown = {key: value for key, value in arguments.items() if _jsonable(value)}
        now = self.store.clock.now()
        with self.store.batch() as batch:
            turn = batch.current_turn(session_id)
            batch.append(session_id, EventType.TOOL_STARTED, ToolStartedPayload(
                call_id=call_id, tool=f"scopelens.{tool}", arguments=redact_values(shown)), turn=turn, created_at=now)
            batch.append(session_id, EventType.TOOL_FINISHED, ToolFinishedPayload(
                call_id=call_id, tool=f"scopelens.{tool}", exit_code=1, output_preview=f"refused: {why}"),
                turn=turn, created_at=now)
        raise ScopeRefusedError(f"{tool} refused: {why}")

    def _session_for(self, named: object) -> str | None:
        """The session a retrieval goes to: the one named (of this project), else this run's."""
        if named is None:
            return self.session_id
        if not isinstance(named, str) or not self._in_scope_session(named):
            raise UnknownIdError(f"no session {named!r} of project {self.scope.project!r} in this store")
        return named

    def _server_session(self) -> str:
        if self.session_id is None:
            header = self.store.create_session(project=self.scope.project, branch=self.scope.branch,
                                               workspace_root=str(self.scope.workspace), title="MCP server",
                                               agent="scopelens mcp")
            self.session_id = header.id
        return self.session_id

    def _in_scope_session(self, session_id: str) -> bool:
        try:
            return self.store.get_session(session_id).project == self.scope.project
        except UnknownIdError:
            return False

    # ------------------------------------------------------------------ the audit record

    def get_snapshot(self, snapshot_id: str) -> dict[str, Any]:
        stored = self._snapshot(_given(snapshot_id, str, "snapshot_id"))
        return {"snapshot": json.loads(stored.body), "snapshot_hash": stored.content_hash}

    def replay(self, session_id: str, turn: int | None = None) -> dict[str, Any]:
        _given(session_id, str, "session_id")
        if turn is not None:
            _given(turn, int, "turn")
        if not self._in_scope_session(session_id):
            raise UnknownIdError(f"no session {session_id!r} of project {self.scope.project!r} in this store")
        replayed = replay_session(self.store, session_id, turn=turn)
        return {
            "session_id": session_id,
            "ok": replayed.ok,
            "turns": [
                {
                    "turn": t.turn,
                    "ok": t.ok,
                    "events": [{"seq": e.seq, "type": e.type.value, "summary": event_summary(e)} for e in t.events],
                    "snapshots": [
                        {"snapshot_id": s.snapshot.id, "snapshot_hash": s.content_hash, "kind": s.snapshot.kind.value,
                         "context_block": s.context_block, "ok": all(c.ok for c in s.checks)}
                        for s in t.snapshots
                    ],
                }
                for t in replayed.turns
            ],
        }

    def drift(self, snapshot_id: str) -> dict[str, Any]:
        """The snapshot's plan against today's index; a changed item's text diff only where
        the policy lets its path be shown."""
        self._snapshot(_given(snapshot_id, str, "snapshot_id"))
        outcome = compute_drift(self.store, snapshot_id)
        report = outcome.report.model_dump(mode="json")
        for item in report["items"]:
            if item.get("diff") is not None and not self._shown(item.get("path")):
                item["diff"] = None
        return report | {"counts": outcome.report.counts(), "recorded": outcome.recorded}

    def why_not(self, snapshot_id: str, query: Mapping[str, str | None]) -> dict[str, Any]:
        given = [(kind, value) for kind, value in query.items() if value is not None]
        if len(given) != 1 or given[0][0] not in QUERY_KINDS or not isinstance(given[0][1], str):
            raise InvalidInputError("why_not needs exactly one of path, symbol or text (a string)")
        self._snapshot(_given(snapshot_id, str, "snapshot_id"))
        kind, value = given[0]
        return why_not(self.store, snapshot_id, kind, value).model_dump(mode="json")  # type: ignore[arg-type]

    def _snapshot(self, snapshot_id: str) -> Any:
        stored = self.store.get_snapshot(snapshot_id)
        if not self._in_scope_session(stored.snapshot.session_id):
            raise UnknownIdError(f"no snapshot {snapshot_id!r} of project {self.scope.project!r} in this store")
        return stored

    # ------------------------------------------------------------------ raw recall

    def search(self, query: str, top_k: int = 10) -> dict[str, Any]:
        """Chunks of this project's workspace by BM25, with a few lines of each the policy lets
        the model see (unlike ``scopelens search``, which is for debugging and shows all)."""
        _given(query, str, "query")
        if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= 50:
            raise InvalidInputError("top_k must be between 1 and 50")
        terms = [(term, 1.0) for term in tokenize(query)]
        if not terms:
            raise InvalidInputError("the query has no searchable terms")
        self.refresh_index()
        sources = frozenset(s for s in Source if s not in self.scope.policy.denied_sources)
        flt = RecallFilter(project=self.scope.project, branch=self.scope.branch,
                           workspace_root=str(self.scope.workspace), sources=sources)
        hits = Scorer(self.store).search(terms, flt, top_k=top_k * 3)
        chunks = fetch_chunks(self.store, [hit.chunk_id for hit in hits])
        results: list[dict[str, Any]] = []
        for hit in hits:
            chunk = chunks[hit.chunk_id]
            if not self._shown(chunk.path):
                continue
            results.append({
                "rank": len(results) + 1, "score": round(hit.score, 6), "source_ref": chunk.source_ref,
                "path": chunk.path, "start_line": chunk.start_line, "end_line": chunk.end_line,
                "symbol": chunk.symbol, "source": chunk.source.value,
                "snippet": "\n".join(chunk.text.splitlines()[:SNIPPET_LINES]),
            })
            if len(results) == top_k:
                break
        return {"query": query, "results": results}

    def _shown(self, path: str | None) -> bool:
        rules = self.scope.policy.rules_for(path)
        return rules.visibility in SHOWN_VISIBILITY and not rules.missing_grants(())


def _given(value: Any, kind: type, name: str) -> Any:
    """``value`` if it is a ``kind`` (a tool's argument, as a client sent it), else a one-line error."""
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise InvalidInputError(f"{name} must be a {kind.__name__}, not {type(value).__name__}")
    return value


def _jsonable(value: object) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
