"""OpenHands V0 trajectories: one JSON array of events (the trajectory export).

Each event has ``id``, ``source`` (``user``, ``agent``, ``environment``) and either ``action``
+ ``args`` or ``observation`` + ``content`` + ``extras`` (an observation's ``cause`` is its
action's id). Read as:

* ``action: system`` -> ``instruction`` (the system prompt, in newer V0);
* a user ``message`` -> ``task``;
* an agent action is a model call: its ``thought`` (or a message's ``content``) is what the
  model wrote; actions sharing ``tool_call_metadata.model_response.id`` came from one
  response and are one call;
* observations: ``read`` of a file -> ``file-read`` of the ``cat -n`` line range (of a
  directory: a ``search``-like listing, its paths mentions); ``run`` / ``run_ipython`` ->
  ``command-output``; ``edit`` -> ``tool-output`` naming the file; ``recall`` -> the
  ``instruction`` it injected (repository instructions, microagent knowledge);
* ``action: condensation`` ends the visible context: later calls see its summary and what
  follows (OpenHands forgets only the listed events; this model takes the conservative
  reading that everything before was replaced, and says so in ``not_recorded``);
* environment state changes and empty (``null``) observations carry no context: skipped.

Paths are relative to ``/workspace``, the sandbox's working directory.
"""

from __future__ import annotations

from typing import Any

from scopelens.core.errors import InvalidInputError
from scopelens.core.importers.model import ImportedSession, Mention, ModelCall, Observed, ObservedKind
from scopelens.core.importers.observations import cat_n_range, json_list, json_object, mentions_in, relative_to, string

WORKSPACE = "/workspace"
SILENT = frozenset({"agent_state_changed", "change_agent_state", "null", "pause", "resume"})
NOT_RECORDED = (
    "tool schemas",
    "the exact model input: which events a condenser kept (a condensation is read as replacing everything before it)",
)


def looks_like_openhands(document: object) -> bool:
    return isinstance(document, list) and any(
        isinstance(e, dict) and ("action" in e or "observation" in e) for e in document[:20]
    )


def parse_openhands(document: object, *, name: str) -> ImportedSession:
    if not looks_like_openhands(document):
        raise InvalidInputError(f"{name}: not an OpenHands trajectory (a JSON array of events)")
    assert isinstance(document, list)
    session = ImportedSession(
        format="openhands", session_id=name.rsplit("/", 1)[-1].removesuffix(".json"), cwd=WORKSPACE, title="",
        agent="OpenHands", not_recorded=NOT_RECORDED,
    )
    visible_from = 0
    replaced: tuple[int, int] | None = None
    response_id: str | None = None
    for index, event in enumerate(document):
        if not isinstance(event, dict):
            raise InvalidInputError(f"{name}: event [{index}] is not a JSON object")
        ref = f"event {event.get('id', index)}"
        args = json_object(event.get("args"))
        action, observation = _name(event.get("action")), _name(event.get("observation"))
        if action == "condensation":
            replaced = (visible_from, len(session.items))
            visible_from = len(session.items)
            summary = string(args.get("summary"))
            if summary:
                session.items.append(Observed("summary", summary, ref))
            response_id = None
        elif action == "system":
            session.items.append(Observed("instruction", string(args.get("content")), ref, tool="system"))
        elif action is not None and event.get("source") == "user":
            if action == "message":
                text = string(args.get("content"))
                if not session.title and text.strip():
                    session.title = text.strip().splitlines()[0]
                session.items.append(Observed("task", text, ref, mentions=mentions_in(text, WORKSPACE)))
            response_id = None
        elif action is not None and event.get("source") == "agent":
            if action in SILENT:
                continue
            response_id, replaced = _agent_action(session, event, args, ref, response_id, visible_from, replaced)
        elif observation is not None:
            if observation in SILENT:
                continue
            item = _observation(str(observation), event, ref)
            if item is None:
                session.unknown[f"observation {observation}"] = session.unknown.get(f"observation {observation}", 0) + 1
                continue
            session.items.append(item)
            response_id = None
        elif action not in SILENT:
            label = f"action {action}" if action is not None else "(no action or observation)"
            session.unknown[label] = session.unknown.get(label, 0) + 1
    return session


def _agent_action(
    session: ImportedSession, event: dict[str, Any], args: dict[str, Any], ref: str, response_id: str | None,
    visible_from: int, replaced: tuple[int, int] | None,
) -> tuple[str | None, tuple[int, int] | None]:
    metadata = json_object(event.get("tool_call_metadata"))
    model_response = json_object(metadata.get("model_response"))
    this_response = str(model_response["id"]) if model_response.get("id") else None
    text = string(args.get("thought")) or string(args.get("content"))
    tool = str(metadata.get("function_name") or event.get("action"))
    detail = next((str(args[k]) for k in ("command", "path", "code", "query") if args.get(k)), "")
    summary = f"{tool} {detail.splitlines()[0] if detail else ''}".strip()
    if this_response is not None and this_response == response_id and session.calls:
        last = session.calls[-1]
        session.calls[-1] = ModelCall(last.number, last.visible_from, last.visible_to, last.response,
                                      (*last.tool_calls, summary), last.ref, last.at, last.replaced)
        return response_id, replaced
    session.calls.append(ModelCall(len(session.calls) + 1, visible_from, len(session.items), text,
                                   (summary,) if event.get("action") != "message" else (), ref, None, replaced))
    if text:
        session.items.append(Observed("model-output", text, ref))
    return this_response, None


def _observation(kind: str, event: dict[str, Any], ref: str) -> Observed | None:
    content = string(event.get("content"))
    extras = json_object(event.get("extras"))
    path = extras.get("path") if isinstance(extras.get("path"), str) else None
    tool = str(json_object(event.get("tool_call_metadata")).get("function_name") or kind)
    if kind == "read":
        span = cat_n_range(content)
        if path is not None and span is not None:
            return Observed("file-read", content, ref, tool=tool, path=relative_to(path, WORKSPACE),
                            line_start=span[0], line_end=span[1])
        return Observed("search", content, ref, tool=tool, mentions=mentions_in(content, WORKSPACE))
    if kind in ("run", "run_ipython"):
        return Observed("command-output", content, ref, tool=tool, mentions=mentions_in(content, WORKSPACE))
    if kind == "edit":
        named = (Mention(relative_to(path, WORKSPACE)),) if path else ()
        return Observed("tool-output", content, ref, tool=tool, mentions=named)
    if kind == "recall":
        return Observed("instruction", _recalled(extras), ref, tool="recall")
    if kind in ("error", "browse", "mcp", "think"):
        kind_of: ObservedKind = "tool-output"
        return Observed(kind_of, content, ref, tool=tool, mentions=mentions_in(content, WORKSPACE))
    return None


def _name(value: object) -> str | None:
    """An action's or observation's name; ``None`` when absent, ``"(invalid)"`` when not text."""
    if value is None:
        return None
    return value if isinstance(value, str) else "(invalid)"


def _recalled(extras: dict[str, Any]) -> str:
    parts = [string(extras.get("repo_instructions"))]
    for knowledge in json_list(extras.get("microagent_knowledge")):
        if isinstance(knowledge, dict):
            parts.append(f"{knowledge.get('name', '')}: {knowledge.get('content', '')}")
    return "\n\n".join(part for part in parts if part)
