"""OpenAI Codex CLI rollouts (``$CODEX_HOME/sessions/…/rollout-*.jsonl``).

One JSON object per line, ``{timestamp, type, payload}``; older builds wrote a bare first
line ``{id, timestamp, instructions}`` and then bare response items (with ``record_type``
markers between them), both read here. What the model saw at a request is the system prompt
(``session_meta.payload.base_instructions.text``, older: ``instructions``) and every
``response_item`` since the last compaction, in file order:

* ``message`` from ``developer``/``system`` -> ``instruction``; from ``user`` -> ``task``,
  or ``instruction`` for injected context (``# AGENTS.md …``, ``<environment_context>``,
  ``<user_instructions>``);
* output items (an assistant ``message``, ``reasoning``, ``function_call``,
  ``custom_tool_call``, ``local_shell_call``, ``web_search_call``) after an input are one
  model call; calls and their outputs are paired by ``call_id``;
* a ``function_call_output`` of a command is a ``command-output`` (or, for ``sed -n 'A,Bp'
  FILE`` and ``cat -n``/``nl`` of a file, a ``file-read`` of those lines; for ``rg``/``grep``
  a ``search``); other outputs are ``tool-output``;
* ``compacted`` (and a ``compaction`` item) replaces what came before: the model then sees
  the summary and ``replacement_history``.

``event_msg`` lines repeat response items for the UI (only the items are read);
``turn_context`` gives the model and working directory. Other line types are counted.
"""

from __future__ import annotations

import json
import re
import shlex
from datetime import datetime
from typing import Any

from scopelens.core.importers.model import ImportedSession, Mention, ModelCall, Observed, ObservedKind
from scopelens.core.importers.observations import (
    cat_n_range,
    json_object,
    mentions_in,
    parse_timestamp,
    relative_to,
    string,
)

OUTPUT_ITEMS = frozenset({"reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call"})
INJECTED = ("# AGENTS.md", "<environment_context>", "<user_instructions>", "<permissions", "<INSTRUCTIONS>")
NOT_RECORDED = ("tool schemas (except dynamic_tools)", "the exact request")
_SED_RANGE = re.compile(r"^(\d+)(?:,(\d+))?p$")


def looks_like_codex(entries: list[tuple[int, dict[str, Any]]]) -> bool:
    head = [entry for _, entry in entries[:20]]
    return any({"type", "payload"} <= entry.keys() for entry in head) or bool(
        head and {"id", "instructions"} <= head[0].keys()
    )


def parse_codex(entries: list[tuple[int, dict[str, Any]]], *, name: str) -> ImportedSession:
    session = ImportedSession(format="codex", session_id="", cwd=None, title="", agent="Codex CLI",
                              not_recorded=NOT_RECORDED)
    reader = _Reader(session)
    for number, entry in entries:
        ref = f"line {number}"
        at = parse_timestamp(entry.get("timestamp"))
        if "payload" in entry and "type" in entry:
            kind, payload = string(entry["type"]), json_object(entry["payload"])
        elif number == entries[0][0] and "instructions" in entry:
            kind, payload = "session_meta", {"id": entry.get("id"), "instructions": entry.get("instructions")}
        elif "record_type" in entry:
            continue
        elif "type" in entry:
            kind, payload = "response_item", entry
        else:
            session.unknown["(no type)"] = session.unknown.get("(no type)", 0) + 1
            continue
        if kind == "session_meta":
            reader.meta(payload, ref, at)
        elif kind == "turn_context":
            session.model = session.model or string(payload.get("model")) or None
            session.cwd = session.cwd or string(payload.get("cwd")) or None
        elif kind == "response_item":
            reader.item(payload, ref, at)
        elif kind == "compacted":
            reader.compacted(payload, ref, at)
        elif kind != "event_msg":
            session.unknown[kind or "(no type)"] = session.unknown.get(kind or "(no type)", 0) + 1
    session.session_id = session.session_id or name.rsplit("/", 1)[-1].removesuffix(".jsonl")
    return session


class _Reader:
    def __init__(self, session: ImportedSession) -> None:
        self.session = session
        self.calls: dict[str, tuple[str, dict[str, Any]]] = {}
        """call_id -> (tool name, arguments)"""
        self.visible_from = 0
        self.replaced: tuple[int, int] | None = None
        self.in_output = False

    def meta(self, payload: dict[str, Any], ref: str, at: datetime | None) -> None:
        session = self.session
        session.session_id = session.session_id or string(payload.get("id"))
        session.cwd = session.cwd or string(payload.get("cwd")) or None
        git = payload.get("git")
        session.branch = session.branch or (string(git.get("branch")) if isinstance(git, dict) else "") or None
        if string(payload.get("cli_version")):
            session.agent = f"Codex CLI {payload['cli_version']}"
        base = payload.get("base_instructions")
        text = base.get("text") if isinstance(base, dict) else payload.get("instructions")
        if isinstance(text, str) and text:
            session.items.append(Observed("instruction", text, ref, tool="base_instructions", at=at))
        else:
            session.not_recorded = (*session.not_recorded, "the system prompt (no base_instructions in session_meta)")

    def item(self, payload: dict[str, Any], ref: str, at: datetime | None) -> None:
        kind = string(payload.get("type"))
        role = string(payload.get("role"))
        if kind == "message" and role == "assistant":
            self._output(_message_text(payload), (), ref, at)
        elif kind in OUTPUT_ITEMS:
            tool = self._tool_call(payload)
            self._output("", (tool,) if tool else (), ref, at)
        elif kind == "message":
            text = _message_text(payload)
            injected = role in ("developer", "system") or text.lstrip().startswith(INJECTED)
            if role == "user" and not injected and not self.session.title:
                self.session.title = text.strip().splitlines()[0] if text.strip() else ""
            self._input(Observed("instruction" if injected else "task", text, ref,
                                 mentions=mentions_in(text, self.session.cwd), at=at))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            self._input(self._result(payload, ref, at))
        elif kind in ("compaction", "compaction_summary"):
            self._compact(None, [], ref, at)
        else:
            label = f"response_item {kind}"
            self.session.unknown[label] = self.session.unknown.get(label, 0) + 1

    def compacted(self, payload: dict[str, Any], ref: str, at: datetime | None) -> None:
        history = payload.get("replacement_history")
        self._compact(str(payload.get("message") or ""), history if isinstance(history, list) else [], ref, at)

    def _compact(self, summary: str | None, history: list[Any], ref: str, at: datetime | None) -> None:
        session = self.session
        self.replaced = (self.visible_from, len(session.items))
        self.visible_from = len(session.items)
        if summary:
            session.items.append(Observed("summary", summary, ref, at=at))
        for replacement in history:
            if isinstance(replacement, dict):
                self.item(replacement, ref, at)
        self.in_output = False

    def _output(self, text: str, tools: tuple[str, ...], ref: str, at: datetime | None) -> None:
        session = self.session
        if self.in_output and session.calls:
            last = session.calls[-1]
            session.calls[-1] = ModelCall(last.number, last.visible_from, last.visible_to,
                                          "\n".join(t for t in (last.response, text) if t), last.tool_calls + tools,
                                          last.ref, last.at, last.replaced)
        else:
            session.calls.append(ModelCall(len(session.calls) + 1, self.visible_from, len(session.items), text, tools,
                                           ref, at, self.replaced))
            self.replaced = None
            self.in_output = True
        if text:
            session.items.append(Observed("model-output", text, ref, at=at))

    def _input(self, item: Observed) -> None:
        self.session.items.append(item)
        self.in_output = False

    def _tool_call(self, payload: dict[str, Any]) -> str:
        kind = payload.get("type")
        if kind == "function_call":
            name = str(payload.get("name") or "?")
            try:
                arguments = json.loads(payload.get("arguments") or "{}")
            except (TypeError, ValueError):
                arguments = {}
            arguments = arguments if isinstance(arguments, dict) else {}
        elif kind == "custom_tool_call":
            name, arguments = str(payload.get("name") or "?"), {"input": payload.get("input")}
        elif kind == "local_shell_call":
            action = json_object(payload.get("action"))
            name, arguments = "shell", {"command": action.get("command")}
        elif kind == "web_search_call":
            return "web_search"
        else:
            return ""
        if payload.get("call_id"):
            self.calls[str(payload["call_id"])] = (name, arguments)
        return f"{name} {_command_text(arguments.get('command') or arguments.get('cmd') or '')}".strip()

    def _result(self, payload: dict[str, Any], ref: str, at: datetime | None) -> Observed:
        output = payload.get("output")
        if isinstance(output, list):
            text = "\n".join(string(p.get("text")) for p in output if isinstance(p, dict))
        elif isinstance(output, dict):
            text = string(output.get("content"))
        else:
            text = _unwrapped(str(output or ""))
        tool, arguments = self.calls.get(str(payload.get("call_id")), ("?", {}))
        cwd = self.session.cwd
        command = _command_text(arguments.get("command") or arguments.get("cmd") or "")
        if command:
            read = _read_of(command, text)
            if read is not None:
                path, first, last = read
                return Observed("file-read", text, ref, tool=tool, path=relative_to(path, cwd), line_start=first,
                                line_end=last, at=at)
            words = command.split()
            kind: ObservedKind = "search" if words and words[0] in ("rg", "grep", "find", "fd", "ls") else "command-output"
            return Observed(kind, text, ref, tool=tool, mentions=mentions_in(text, cwd), at=at)
        named = tuple(Mention(relative_to(p, cwd)) for p in _patched_paths(arguments.get("input")))
        return Observed("tool-output", text, ref, tool=tool, mentions=named or mentions_in(text, cwd), at=at)


def _unwrapped(text: str) -> str:
    """Older builds wrote a command's output as a JSON string ``{"output": …, "metadata": …}``."""
    if text.startswith("{") and '"output"' in text:
        try:
            decoded = json.loads(text)
        except ValueError:
            return text
        if isinstance(decoded, dict) and isinstance(decoded.get("output"), str):
            return str(decoded["output"])
    return text


def _message_text(payload: dict[str, Any]) -> str:
    content = payload.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(string(p.get("text")) for p in content if isinstance(p, dict))
    return ""


def _command_text(command: object) -> str:
    """A command as one line: a list is joined; ``bash -lc "…"`` gives the inner command."""
    if isinstance(command, list):
        parts = [str(p) for p in command]
        if len(parts) >= 3 and parts[0].endswith("sh") and parts[1] in ("-c", "-lc"):
            return parts[2]
        return shlex.join(parts)
    return str(command or "")


def _read_of(command: str, output: str) -> tuple[str, int, int] | None:
    """``(file, first, last)`` when ``command`` prints lines of one file: ``sed -n 'A,Bp' F``,
    ``cat -n F`` / ``nl -ba F`` (the numbers printed), ``cat F`` (the whole file)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if len(words) == 4 and words[0] == "sed" and words[1] == "-n":
        span = _SED_RANGE.match(words[2])
        if span is not None:
            first = int(span.group(1))
            last = int(span.group(2) or first)
            shown = output.count("\n") + (0 if output.endswith("\n") or not output else 1)
            return words[3], first, min(last, first + max(shown, 1) - 1)
    if len(words) in (2, 3) and words[0] in ("cat", "nl") and not words[-1].startswith("-"):
        numbered = cat_n_range(output) if len(words) == 3 else None
        if numbered is not None:
            return words[-1], *numbered
        if len(words) == 2 and words[0] == "cat" and output:
            return words[1], 1, output.count("\n") + (0 if output.endswith("\n") else 1)
    return None


def _patched_paths(patch: object) -> list[str]:
    if not isinstance(patch, str):
        return []
    return re.findall(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", patch, re.M)
