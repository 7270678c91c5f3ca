"""The MCP server: its tools through the SDK's client, in process and over stdio.

Every retrieval writes its snapshot before it answers; the scope is the server's (a client
that tries to set another project, a source or a time is refused, and the attempt recorded);
and no tool's output carries the text of a denied, runtime-only or other project's file.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from scopelens.core.clients.mcp_server import build_server
from scopelens.core.clients.scoped_tools import ScopedTools, ServerScope
from scopelens.core.contracts import MemoryRecord
from scopelens.core.index.indexer import index_workspace
from scopelens.core.memory import seed_memories
from scopelens.core.pipeline.policy import Policy, VisibilityRule
from scopelens.core.store.store import Store
from scopelens.core.vocab import EventType, MemoryStatus, Source, Visibility
from tests.support.workspaces import T0, write

CANARIES = {
    "runtime": "canaryruntime017zq",
    "denied": "canarydenied042zq",
    "project": "canaryproject099zq",
    "candidate": "canarycandidate123zq",
    "private": "canaryprivate456zq",
}
POLICY = Policy(
    visibility=(VisibilityRule(glob="secret/*", visibility=Visibility.RUNTIME_ONLY),),
    denied_sources=(Source.DECISION_RECORD,),
)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ScopedTools]:
    workspace = tmp_path / "own"
    write(workspace, {
        "src/session.py": "def refresh_session(token):\n    \"\"\"Refresh the session token.\"\"\"\n    return token + 1\n",
        "src/cache.py": "def cache_session(session):\n    return {'session': session}\n",
        "secret/keys.md": f"# session token notes\n\nsession token refresh {CANARIES['runtime']}\n",
        "docs/decisions/adr1.md": f"# session token decision\n\nsession refresh token {CANARIES['denied']}\n",
    })
    other = tmp_path / "other"
    write(other, {"src/o.py": f"def refresh_session():\n    return '{CANARIES['project']} session token'\n"})
    hour_ago = time.time_ns() - 3600 * 10**9  # files written seconds ago are never trusted by their times
    for path in [*workspace.rglob("*"), *other.rglob("*")]:
        os.utime(path, ns=(hour_ago, hour_ago))
    db = tmp_path / "store.db"
    with Store.open(str(db), create=True) as store:
        index_workspace(store, other, project="elsewhere", branch="main", workers=0)
        seed_memories(store, [
            MemoryRecord(id="m-cand", project="own", content=f"session token refresh {CANARIES['candidate']}",
                         status=MemoryStatus.CANDIDATE, valid_from=T0),
            MemoryRecord(id="m-priv", project="own", content=f"session token refresh {CANARIES['private']}",
                         status=MemoryStatus.PRIVATE, private_to="someone-else", valid_from=T0),
        ])
        tools = ScopedTools(store, ServerScope(workspace=workspace.resolve(), project="own", branch="main",
                                               policy=POLICY, db=str(db), max_tokens=800))
        tools.refresh_index()
        yield tools


def call(server_tools: ScopedTools, name: str, arguments: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with Client(build_server(server_tools)) as client:
            return await client.call_tool(name, arguments)
    return anyio.run(go)


def test_retrieve_answers_with_the_block_and_a_snapshot_already_stored(served: ScopedTools) -> None:
    result = call(served, "retrieve", {"question": "how is the session token refreshed?",
                                       "anchors": {"symbols": ["refresh_session"]}})
    assert not result.is_error
    answer = result.structured_content
    assert answer["context_block"] and "refresh_session" in answer["context_block"]
    stored = served.store.get_snapshot(answer["snapshot_id"])  # written before the answer
    assert stored.content_hash == answer["snapshot_hash"]
    assert {c["citation_id"] for c in answer["citations"]} == set(stored.snapshot.projection.citation_map)
    # a second call without a session goes to the same server session
    again = call(served, "retrieve", {"question": "cache session"}).structured_content
    assert again["session_id"] == answer["session_id"]


@pytest.mark.parametrize("widening", [
    {"project": "elsewhere"},
    {"allowed_sources": ["decision-record"]},
    {"as_of": "2020-01-01T00:00:00Z"},
    {"scope": {"project": "elsewhere"}},
])
def test_a_client_cannot_widen_the_scope_and_the_attempt_is_recorded(served: ScopedTools, widening: dict) -> None:
    result = call(served, "retrieve", {"question": "session token", **widening})
    assert result.is_error
    message = result.content[0].text
    assert "refused" in message and next(iter(widening)) in message
    assert all(token not in message for token in CANARIES.values())
    events = served.store.events(served.session_id)
    finished = [e for e in events if e.type == EventType.TOOL_FINISHED]
    assert finished and finished[-1].payload["output_preview"].startswith("refused:")
    assert not served.store.snapshots_of(served.session_id)  # nothing was retrieved


def test_a_refused_call_is_recorded_whole_or_not_at_all(served: ScopedTools, monkeypatch: pytest.MonkeyPatch) -> None:
    from scopelens.core.store import batch as batch_module
    from scopelens.core.store import store as store_module

    checked = store_module.checked_payload

    def failing_on_finish(event_type: EventType, payload: Any) -> dict[str, Any]:
        if event_type == EventType.TOOL_FINISHED:
            raise RuntimeError("the store went away between the two events")
        return checked(event_type, payload)

    assert call(served, "retrieve", {"question": "session token", "project": "elsewhere"}).is_error  # opens the run's session
    before = served.store.events(served.session_id)
    assert before[-1].type == EventType.TOOL_FINISHED
    for module in (batch_module, store_module):
        monkeypatch.setattr(module, "checked_payload", failing_on_finish)
    with pytest.raises(RuntimeError):
        served.retrieve({"question": "session token", "project": "elsewhere"})
    # Neither event of the refused call: a tool.started alone would read as a call left open.
    assert served.store.events(served.session_id) == before


def test_a_budget_above_the_servers_is_refused(served: ScopedTools) -> None:
    result = call(served, "retrieve", {"question": "session", "max_tokens": 5000})
    assert result.is_error and "budget" in result.content[0].text


def test_ids_of_another_project_are_unknown(served: ScopedTools, tmp_path: Path) -> None:
    foreign = served.store.create_session(project="elsewhere", title="not ours")
    for name, arguments in (("replay", {"session_id": foreign.id}), ("retrieve", {"question": "x", "session_id": foreign.id}),
                            ("get_snapshot", {"snapshot_id": "snap-nope"})):
        result = call(served, name, arguments)
        assert result.is_error and "no s" in result.content[0].text, name


def test_no_tool_output_carries_out_of_scope_text(served: ScopedTools) -> None:
    """The canary invariant over every tool: runtime-only, denied and other-project text."""
    question = {"question": "session token refresh notes decision", "anchors": {"error_text": "session token"}}
    retrieved = call(served, "retrieve", question)
    snapshot_id = retrieved.structured_content["snapshot_id"]
    session_id = retrieved.structured_content["session_id"]
    outputs = [retrieved]
    outputs.append(call(served, "get_snapshot", {"snapshot_id": snapshot_id}))
    outputs.append(call(served, "replay", {"session_id": session_id}))
    outputs.append(call(served, "drift", {"snapshot_id": snapshot_id}))
    for target in ({"path": "secret/keys.md"}, {"text": "refresh"}, {"symbol": "refresh_session"}):
        outputs.append(call(served, "why_not", {"snapshot_id": snapshot_id, **target}))
    outputs.append(call(served, "search", {"query": "session token refresh notes decision", "top_k": 20}))
    searched = outputs[-1].structured_content["results"]
    assert searched and {r["path"] for r in searched} <= {"src/session.py", "src/cache.py"}
    for result in outputs:
        assert not result.is_error, result.content
        text = json.dumps(result.structured_content) + "".join(getattr(c, "text", "") for c in result.content)
        for token in CANARIES.values():
            assert token not in text


def test_an_unchanged_workspace_is_not_reindexed_and_a_changed_one_is(served: ScopedTools) -> None:
    runs_before = served.reindexed
    assert served.refresh_index() is False
    (served.scope.workspace / "src" / "new.py").write_text("def brand_new_helper():\n    return 1\n")
    found = call(served, "search", {"query": "brand_new_helper"}).structured_content["results"]
    assert [r["path"] for r in found] == ["src/new.py"]
    assert served.reindexed == runs_before + 1


def test_a_change_costs_two_walks_of_the_workspace_not_three(served: ScopedTools, monkeypatch: pytest.MonkeyPatch) -> None:
    from scopelens.core.clients import stat_cache
    from scopelens.core.index import indexer, stat_check, walker

    walks: list[str] = []

    def counted(module: str) -> Any:
        def walk(*args: Any, **kwargs: Any) -> Any:
            walks.append(module)
            return walker.walk_workspace(*args, **kwargs)
        return walk

    for module in (stat_cache, indexer, stat_check):
        monkeypatch.setattr(module, "walk_workspace", counted(module.__name__.rsplit(".", 1)[-1]))
    workspace = served.scope.workspace
    hour_ago = time.time_ns() - 3600 * 10**9  # times the record trusts (directories' too)
    for path in [workspace, *workspace.rglob("*")]:
        os.utime(path, ns=(hour_ago, hour_ago))
    served.refresh_index()  # the first look after the fixture's: recorded, and checked by stat_check
    walks.clear()
    assert served.refresh_index() is False and walks == []  # nothing changed: stats only
    changed = workspace / "src" / "cache.py"
    changed.write_text("def cache_session(session):\n    return {'session': session, 'kept': True}\n")
    os.utime(changed, ns=(hour_ago + 10**9, hour_ago + 10**9))
    assert served.refresh_index() is True
    assert sorted(walks) == ["indexer", "stat_cache"]  # recorded, then indexed: no stat_check between
    walks.clear()
    assert served.refresh_index() is False and walks == []  # and the record made then holds


def test_one_round_trip_over_stdio(served: ScopedTools, tmp_path: Path) -> None:
    """``scopelens mcp`` as a subprocess, through the SDK's stdio client."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "scopelens.core.cli", "mcp", "--workspace", str(served.scope.workspace), "--project", "own",
              "--branch", "main", "--db", served.scope.db],
        env={"SCOPELENS_DB": ""},
        cwd=str(tmp_path),
    )

    async def go() -> tuple[list[str], Any]:
        async with Client(params) as client:
            names = sorted(tool.name for tool in (await client.list_tools()).tools)
            return names, await client.call_tool("retrieve", {"question": "refresh the session token"})

    names, result = anyio.run(go)
    assert names == ["drift", "get_snapshot", "replay", "retrieve", "search", "why_not"]
    assert not result.is_error
    snapshot_id = result.structured_content["snapshot_id"]
    with Store.open(served.scope.db, read_only=True) as store:
        assert store.get_snapshot(snapshot_id).snapshot.session_id == result.structured_content["session_id"]
