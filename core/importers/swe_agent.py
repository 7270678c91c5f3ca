"""SWE-agent trajectories (``*.traj``): 0.x text actions and 1.x function calling.

A trajectory is one JSON object with ``history`` (every message of the conversation, the
system prompt and demonstrations included) and ``trajectory`` (one step per action). The
context of each model call is the history before the assistant message it produced:

* ``role: system`` -> ``instruction``; a message with ``is_demo`` -> ``instruction`` (a
  demonstration is in the model's context);
* the first other user message before any assistant message -> ``task`` (the issue text);
* ``role: assistant`` -> a model call (its ``action``, and ``tool_calls`` in 1.x) whose text
  the later calls see again (``model-output``);
* the observations after an action (``role: user`` in 0.x and text-parsing configs,
  ``role: tool`` with ``tool_call_ids`` in 1.x): an editor window is a ``file-read`` of its
  line range; ``find_file``/``search_dir``/``search_file`` output is a ``search``; anything
  else a ``command-output``; files named in them are mentions.

``state`` is a JSON string (0.x), a dict, or a Python repr (1.x dev fixtures); its
``working_dir`` is the repository root paths are made relative to. ``query`` (>= 1.1.0) is
the exact model input of a step, and then each step's query is its call's context
(``_context_from_queries``); without it the context is rebuilt from ``history``, and the
history processors' elision of old observations is not visible (said in ``not_recorded``).
"""

from __future__ import annotations

import ast
import json
from typing import Any

from scopelens.core.errors import InvalidInputError
from scopelens.core.importers.model import ImportedSession, ModelCall, Observed, ObservedKind
from scopelens.core.importers.observations import json_object, mentions_in, string, swe_file_view

SEARCH_TOOLS = frozenset({"find_file", "search_dir", "search_file", "grep", "rg", "find"})


def looks_like_swe_agent(data: object) -> bool:
    return isinstance(data, dict) and isinstance(data.get("history"), list) and isinstance(data.get("trajectory"), list)


def parse_swe_agent(data: object, *, name: str) -> ImportedSession:
    """An imported session from a parsed ``.traj`` (``name``: the file, for errors and ids)."""
    if not looks_like_swe_agent(data):
        raise InvalidInputError(f"{name}: not a SWE-agent trajectory (no 'history' and 'trajectory' lists)")
    assert isinstance(data, dict)
    steps: list[Any] = data["trajectory"]
    history: list[Any] = data["history"]
    cwd = _working_dir(steps)
    info: dict[str, Any] = data["info"] if isinstance(data.get("info"), dict) else {}
    version = str(info.get("swe_agent_version") or ("0.x" if data.get("environment") == "swe_main" else "1.x"))
    session = ImportedSession(
        format="swe-agent",
        session_id=name.rsplit("/", 1)[-1].removesuffix(".traj"),
        cwd=cwd,
        title=_title(history),
        agent=f"SWE-agent {version}",
        model=_model(data),
        not_recorded=_not_recorded(steps),
    )
    last_tool: str | None = None
    for index, message in enumerate(history):
        if not isinstance(message, dict) or "role" not in message:
            raise InvalidInputError(f"{name}: history[{index}] is not a message with a role")
        ref = f"history[{index}]"
        role = string(message["role"])
        text = _text(message.get("content"), name, ref)
        if role == "system":
            session.items.append(Observed("instruction", text, ref))
        elif role == "assistant":
            action = string(message.get("action")).strip()
            tools = _tool_calls(message) or ((action.splitlines()[0],) if action else ())
            last_tool = (tools[0].split()[0] if tools and tools[0] else None)
            session.calls.append(ModelCall(len(session.calls) + 1, 0, len(session.items), text, tools, ref))
            session.items.append(Observed("model-output", text, ref))
        elif role in ("user", "tool"):
            session.items.append(_observation(message, text, ref, cwd, last_tool, first=not session.calls))
        else:
            session.unknown[f"role {role}"] = session.unknown.get(f"role {role}", 0) + 1
    if steps and all(isinstance(step, dict) and isinstance(step.get("query"), list) for step in steps):
        _context_from_queries(session, steps, cwd, name)
    return session


def _context_from_queries(session: ImportedSession, steps: list[Any], cwd: str | None, name: str) -> None:
    """Each step is a call, its context its ``query`` (SWE-agent >= 1.1): the exact messages
    sent, after the history processors. While a query extends the previous one, only its new
    messages are new items; when a processor changed an earlier message (an old observation
    elided), the whole query is new, and the call records the positions it re-sent."""
    items: list[Observed] = []
    calls: list[ModelCall] = []
    previous: list[tuple[str, str]] = []
    start = 0
    for k, step in enumerate(steps):
        query = step["query"]
        keyed = []
        for j, message in enumerate(query):
            if not isinstance(message, dict) or "role" not in message:
                raise InvalidInputError(f"{name}: trajectory[{k}].query[{j}] is not a message with a role")
            keyed.append((string(message["role"]), _text(message.get("content"), name, f"trajectory[{k}].query[{j}]")))
        replaced: tuple[int, int] | None = None
        first_new = len(previous)
        if keyed[: len(previous)] != previous:
            replaced, start, first_new = (start, len(items)), len(items), 0
        last_tool: str | None = None
        for j, ((role, text), message) in enumerate(zip(keyed, query, strict=True)):
            if role == "assistant":
                tools = _tool_calls(message) or ((string(message.get("action")).strip().splitlines() or [""])[0],)
                last_tool = tools[0].split()[0] if tools and tools[0] else None
            if j < first_new:
                continue
            ref = f"trajectory[{k}].query[{j}]"
            if role == "system":
                items.append(Observed("instruction", text, ref))
            elif role == "assistant":
                items.append(Observed("model-output", text, ref))
            else:
                first = not any(r == "assistant" for r, _ in keyed[:j])
                items.append(_observation(message, text, ref, cwd, last_tool, first=first))
        action = string(step.get("action")).strip()
        response = string(step.get("response")) or string(step.get("thought"))
        calls.append(ModelCall(k + 1, start, len(items), response, (action.splitlines()[0],) if action else (),
                               f"trajectory[{k}]", replaced=replaced))
        previous = keyed
    session.items, session.calls = items, calls


def _observation(message: dict[str, Any], text: str, ref: str, cwd: str | None, tool: str | None, *, first: bool) -> Observed:
    if _is_demo(message):
        return Observed("instruction", text, ref, tool="demonstration")
    if first:
        return Observed("task", text, ref, mentions=mentions_in(text, cwd))
    view = swe_file_view(text, cwd)
    if view is not None:
        return Observed("file-read", text, ref, tool=tool, path=view.path, line_start=view.first, line_end=view.last,
                        mentions=mentions_in(text, cwd, exclude=(view.path,)))
    kind: ObservedKind = "search" if tool in SEARCH_TOOLS else "command-output"
    return Observed(kind, text, ref, tool=tool, mentions=mentions_in(text, cwd))


def _is_demo(message: dict[str, Any]) -> bool:
    value = message.get("is_demo")
    return value is True or str(value).lower() == "true" or message.get("message_type") == "demonstration"


def _text(content: object, name: str, ref: str) -> str:
    """A message's text: a string, or the text parts of a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    raise InvalidInputError(f"{name}: {ref} has content that is neither text nor a list of parts")


def _tool_calls(message: dict[str, Any]) -> tuple[str, ...]:
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return ()
    out = []
    for call in calls:
        function = json_object(json_object(call).get("function"))
        tool = string(function.get("name")) or "?"
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except (TypeError, ValueError):
            arguments = {}
        summary = " ".join(str(v) for v in arguments.values()) if isinstance(arguments, dict) else ""
        out.append(f"{tool} {summary}".strip())
    return tuple(out)


def _working_dir(steps: list[Any]) -> str | None:
    for step in steps:
        state = step.get("state") if isinstance(step, dict) else None
        if isinstance(state, str):
            text = state.strip()
            try:
                state = json.loads(text)
            except ValueError:
                try:
                    state = ast.literal_eval(text)
                except (ValueError, SyntaxError):
                    state = None
        if isinstance(state, dict) and isinstance(state.get("working_dir"), str):
            return str(state["working_dir"])
    return None


def _title(history: list[Any]) -> str:
    for message in history:
        if isinstance(message, dict) and message.get("role") == "user" and not _is_demo(message):
            text = message.get("content")
            if isinstance(text, str):
                marker = "ISSUE:\n"
                body = text.split(marker, 1)[1] if marker in text else text
                return body.strip().splitlines()[0] if body.strip() else ""
    return ""


def _model(data: dict[str, Any]) -> str | None:
    config = data.get("replay_config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            config = None
    if isinstance(config, dict):
        model = config.get("agent", {}).get("model", {}) if isinstance(config.get("agent"), dict) else {}
        if isinstance(model, dict) and isinstance(model.get("name"), str):
            return str(model["name"])
    return None


def _not_recorded(steps: list[Any]) -> tuple[str, ...]:
    exact = any(isinstance(step, dict) and "query" in step for step in steps)
    missing = ["tool schemas (only through replay_config, when present)"]
    if not exact:
        missing.append(
            "the exact model input (no 'query' field, SWE-agent < 1.1): the context is rebuilt from 'history', "
            "so observations a history processor elided are shown as seen"
        )
    return tuple(missing)

