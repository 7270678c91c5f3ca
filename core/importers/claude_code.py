"""Claude Code transcripts (``~/.claude/projects/<slug>/<session>.jsonl``).

There is no official schema; this follows the record shapes documented in the formats notes
(cross-checked against public fixtures). One JSON object per line:

* ``user`` / ``assistant`` / ``system`` entries carry ``uuid``, ``parentUuid``, ``sessionId``,
  ``cwd``, ``timestamp``; ``summary`` gives the title; other types (file-history snapshots,
  queue operations, progress, …) are counted as not imported, never fatal;
* one model response is written as several ``assistant`` lines (one content block each)
  sharing ``message.id``: they are one model call;
* a ``user`` entry is a typed prompt (``task``; text wrapped in ``<system-reminder>`` and the
  like is an injected ``instruction``) or tool results (``tool_result`` blocks, matched to
  their ``tool_use`` by id): ``Read`` is a ``file-read`` of its line range (from
  ``toolUseResult.file`` or the ``cat -n`` numbers), ``Grep``/``Glob`` a ``search``,
  ``Bash`` a ``command-output``, other tools ``tool-output``;
* a ``compact_boundary`` system entry ends the visible context: later calls see the compact
  summary (``isCompactSummary``) and what follows; the first call after it records which
  items were replaced.

Entries are deduplicated by ``uuid`` (a resume copies a prefix). When entries carry
``parentUuid``, the conversation is the chain from the last entry back to its root
(rewound forks are left out); sidechains (``isSidechain``) are left out of the main
conversation. Not recorded by Claude Code: the system prompt, tool schemas, CLAUDE.md as
sent and the exact request.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from scopelens.core.errors import UnreadableFileError
from scopelens.core.importers.model import ImportedSession, Mention, ModelCall, Observed, ObservedKind
from scopelens.core.importers.observations import (
    cat_n_range,
    json_object,
    mentions_in,
    parse_timestamp,
    relative_to,
    string,
)

CONVERSATION_TYPES = frozenset({"user", "assistant", "system"})
INJECTED_TAGS = ("<system-reminder>", "<command-name>", "<local-command-stdout>", "<ide_opened_file>",
                 "<task-notification>", "<bash-input>", "<bash-stdout>")
NOT_RECORDED = ("the system prompt", "tool schemas", "CLAUDE.md as sent", "the exact request")


def parse_lines(lines: Iterable[str], *, name: str) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, entry)`` for each non-blank line; a line that is not a JSON object is an
    :class:`UnreadableFileError` naming the file and line."""
    entries = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UnreadableFileError(f"{name}:{number}: not valid JSON ({exc.msg}); nothing was imported") from None
        if not isinstance(entry, dict):
            raise UnreadableFileError(f"{name}:{number}: a line is not a JSON object; nothing was imported")
        entries.append((number, entry))
    return entries


def looks_like_claude_code(entries: list[tuple[int, dict[str, Any]]]) -> bool:
    return any(
        entry.get("type") in ("user", "assistant") and isinstance(entry.get("message"), dict) and "uuid" in entry
        for _, entry in entries[:50]
    )


def sidechain_agents(entries: list[tuple[int, dict[str, Any]]]) -> list[str]:
    """The ``agentId`` of every subagent whose conversation is in these entries (``isSidechain``
    lines), in order of first appearance."""
    found: dict[str, None] = {}
    for _, entry in entries:
        if entry.get("isSidechain") and isinstance(entry.get("agentId"), str):
            found.setdefault(entry["agentId"], None)
    return list(found)


def parse_claude_code(
    entries: list[tuple[int, dict[str, Any]]], *, name: str, agent_id: str | None = None
) -> ImportedSession:
    """An imported session from a transcript's entries (``parse_lines``): the main conversation,
    or with ``agent_id`` the subagent's (its ``isSidechain`` lines): a subagent is a model call
    chain of its own, with its own context, so it is a session of its own."""
    session = ImportedSession(format="claude-code", session_id="", cwd=None, title="", agent="Claude Code",
                              not_recorded=NOT_RECORDED)
    conversation: list[tuple[int, dict[str, Any]]] = []
    seen: set[str] = set()
    for number, entry in entries:
        kind = string(entry.get("type"))
        if kind == "summary":
            session.title = session.title or string(entry.get("summary"))
        elif kind in CONVERSATION_TYPES:
            uuid = entry.get("uuid")
            if isinstance(uuid, str):
                if uuid in seen:
                    continue
                seen.add(uuid)
            conversation.append((number, entry))
            session.session_id = session.session_id or string(entry.get("sessionId"))
            session.cwd = session.cwd or (str(entry["cwd"]) if isinstance(entry.get("cwd"), str) else None)
            session.branch = session.branch or string(entry.get("gitBranch")) or None
            if string(entry.get("version")) and session.agent == "Claude Code":
                session.agent = f"Claude Code {entry['version']}"
        else:
            label = kind or "(no type)"
            session.unknown[label] = session.unknown.get(label, 0) + 1
    session.session_id = session.session_id or name.rsplit("/", 1)[-1].removesuffix(".jsonl")
    if agent_id is not None:
        session.session_id = f"{session.session_id}/agent-{agent_id}"
        session.agent = session.agent.replace("Claude Code", "Claude Code subagent", 1)
        session.title = f"subagent {agent_id}"
    _read_conversation(session, _chain(conversation, agent_id))
    return session


def _chain(conversation: list[tuple[int, dict[str, Any]]], agent_id: str | None) -> list[tuple[int, dict[str, Any]]]:
    """The entries of the main conversation (or of subagent ``agent_id``), in order: the
    ``parentUuid`` chain from its last entry back to its root (across compaction, by
    ``logicalParentUuid``), or all of its entries in file order when none names a parent."""
    if agent_id is None:
        main = [(n, e) for n, e in conversation if not e.get("isSidechain")]
    else:
        main = [(n, e) for n, e in conversation if e.get("isSidechain") and e.get("agentId") == agent_id]
    if not any(isinstance(e.get("parentUuid"), str) for _, e in main):
        return main
    by_uuid = {e["uuid"]: (n, e) for n, e in main if isinstance(e.get("uuid"), str)}
    chain: list[tuple[int, dict[str, Any]]] = []
    current = main[-1] if main else None
    visited: set[str] = set()
    while current is not None:
        chain.append(current)
        entry = current[1]
        visited.add(str(entry.get("uuid")))
        parent = entry.get("parentUuid") or entry.get("logicalParentUuid")
        current = by_uuid.get(parent) if isinstance(parent, str) and parent not in visited else None
    chain.reverse()
    return chain


def _read_conversation(session: ImportedSession, chain: list[tuple[int, dict[str, Any]]]) -> None:
    tools: dict[str, tuple[str, dict[str, Any]]] = {}
    """tool_use id -> (tool name, input)"""
    visible_from = 0
    replaced: tuple[int, int] | None = None
    response_id: str | None = None
    for number, entry in chain:
        ref = f"line {number}"
        at = parse_timestamp(entry.get("timestamp"))
        message = json_object(entry.get("message"))
        kind = entry.get("type")
        if kind == "system":
            if entry.get("subtype") == "compact_boundary":
                replaced = (visible_from, len(session.items))
                visible_from = len(session.items)
            response_id = None
            continue
        if kind == "assistant":
            session.model = session.model or (str(message["model"]) if isinstance(message.get("model"), str) else None)
            text, calls = _assistant_blocks(message.get("content"), tools)
            message_id = message.get("id") if isinstance(message.get("id"), str) else None
            if message_id is not None and message_id == response_id and session.calls:
                last = session.calls[-1]
                merged = "\n".join(t for t in (last.response, text) if t)
                session.calls[-1] = ModelCall(last.number, last.visible_from, last.visible_to, merged,
                                              last.tool_calls + calls, last.ref, last.at, last.replaced)
                if text:
                    session.items.append(Observed("model-output", text, ref, at=at))
                continue
            response_id = message_id
            session.calls.append(ModelCall(len(session.calls) + 1, visible_from, len(session.items), text, calls, ref,
                                           at, replaced))
            replaced = None
            if text:
                session.items.append(Observed("model-output", text, ref, at=at))
            continue
        response_id = None
        session.items.extend(_user_items(entry, message.get("content"), tools, session.cwd, ref, at))


def _assistant_blocks(content: object, tools: dict[str, tuple[str, dict[str, Any]]]) -> tuple[str, tuple[str, ...]]:
    texts: list[str] = []
    calls: list[str] = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            texts.append(string(block.get("text")))
        elif isinstance(block, dict) and block.get("type") == "tool_use":
            tool = str(block.get("name") or "?")
            arguments = json_object(block.get("input"))
            tools[str(block.get("id"))] = (tool, arguments)
            calls.append(f"{tool} {_argument_summary(tool, arguments)}".strip())
    return "\n".join(t for t in texts if t), tuple(calls)


def _argument_summary(tool: str, arguments: dict[str, Any]) -> str:
    for key in ("file_path", "path", "pattern", "command", "description"):
        if isinstance(arguments.get(key), str):
            return str(arguments[key]).splitlines()[0] if arguments[key] else ""
    return ""


def _user_items(
    entry: dict[str, Any], content: object, tools: dict[str, tuple[str, dict[str, Any]]], cwd: str | None, ref: str,
    at: datetime | None,
) -> list[Observed]:
    if isinstance(content, str):
        return [_typed(content, entry, cwd, ref, at)]
    items: list[Observed] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            items.append(_typed(string(block.get("text")), entry, cwd, ref, at))
        elif block.get("type") == "tool_result":
            tool, arguments = tools.get(str(block.get("tool_use_id")), ("?", {}))
            items.append(_tool_result(tool, arguments, _result_text(block.get("content")), entry.get("toolUseResult"),
                                      cwd, ref, at))
    return items


def _typed(text: str, entry: dict[str, Any], cwd: str | None, ref: str, at: datetime | None) -> Observed:
    if entry.get("isCompactSummary"):
        return Observed("summary", text, ref, at=at)
    kind: ObservedKind = "instruction" if entry.get("isMeta") or text.lstrip().startswith(INJECTED_TAGS) else "task"
    return Observed(kind, text, ref, mentions=mentions_in(text, cwd), at=at)


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(string(part.get("text")) for part in content if isinstance(part, dict) and part.get("type") == "text")
    return ""


def _tool_result(
    tool: str, arguments: dict[str, Any], text: str, structured: object, cwd: str | None, ref: str, at: datetime | None
) -> Observed:
    if tool == "Read":
        read = json_object(json_object(structured).get("file"))
        path = read.get("filePath") or arguments.get("file_path")
        span = None
        if isinstance(read.get("startLine"), int) and isinstance(read.get("numLines"), int) and read["numLines"] > 0:
            span = (read["startLine"], read["startLine"] + read["numLines"] - 1)
        span = span or cat_n_range(text)
        if isinstance(path, str) and span is not None:
            relative = relative_to(path, cwd)
            return Observed("file-read", text, ref, tool=tool, path=relative, line_start=span[0], line_end=span[1], at=at)
    if tool in ("Grep", "Glob"):
        names = structured.get("filenames") if isinstance(structured, dict) else None
        mentions = tuple(Mention(relative_to(str(n), cwd)) for n in names) if isinstance(names, list) else ()
        return Observed("search", text, ref, tool=tool, mentions=mentions or mentions_in(text, cwd), at=at)
    kind: ObservedKind = "command-output" if tool == "Bash" else "tool-output"
    return Observed(kind, text, ref, tool=tool, mentions=mentions_in(text, cwd), at=at)
