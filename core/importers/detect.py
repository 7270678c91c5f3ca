"""Reading session files of any supported format, the format told from the content.

``read_sessions(path)`` reads one file, or every session file of a directory (a Claude Code
project directory, a folder of SWE-agent trajectories), in name order. The format is told
from the content, not the name: a JSON object with ``history`` and ``trajectory`` lists is a
SWE-agent trajectory; a JSON list of events an OpenHands (V0) trajectory; JSON lines with
``uuid``-carrying ``user``/``assistant`` entries are a Claude Code transcript, and
``{timestamp, type, payload}`` lines (or a bare ``{id, instructions}`` first line) a Codex
rollout.
Every failure is one line naming the file (and the line or entry), before anything is kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from scopelens.core.errors import InvalidInputError, UnreadableFileError
from scopelens.core.hashing import sha256_hex
from scopelens.core.importers.claude_code import (
    looks_like_claude_code,
    parse_claude_code,
    parse_lines,
    sidechain_agents,
)
from scopelens.core.importers.codex import looks_like_codex, parse_codex
from scopelens.core.importers.model import ImportedSession, SourceFile
from scopelens.core.importers.observations import decoded, read_file_bytes
from scopelens.core.importers.openhands import looks_like_openhands, parse_openhands
from scopelens.core.importers.swe_agent import looks_like_swe_agent, parse_swe_agent

FORMATS = ("swe-agent", "claude-code", "codex", "openhands")
SESSION_SUFFIXES = (".traj", ".jsonl", ".json")


class NotASessionError(InvalidInputError):
    """A file of no known session format (as opposed to a broken session file)."""


@dataclass
class SessionFiles:
    """What a file or directory held: its sessions, and the files of a directory that were
    not sessions of a known format (a SWE-bench instance, a config file), with why."""

    sessions: list[ImportedSession] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def read_sessions(path: Path, *, format: str | None = None) -> SessionFiles:
    """The sessions in ``path``: one file (which must be a session), or every session file of
    a directory (files of no known session format are skipped and listed; a session file
    that is broken fails the whole read, naming it)."""
    if format is not None and format not in FORMATS:
        raise InvalidInputError(f"unknown format {format!r}: one of {', '.join(FORMATS)}")
    found = SessionFiles()
    if not path.is_dir():
        found.sessions += read_file_sessions(path, format=format)
        return found
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in SESSION_SUFFIXES)
    for file in files:
        try:
            found.sessions += read_file_sessions(file, format=format)
        except NotASessionError as exc:
            found.skipped.append(str(exc))
    if not found.sessions:
        raise UnreadableFileError(f"{path}: no session files of a known format (*.traj, *.jsonl, *.json) in this directory")
    return found


def read_session_file(path: Path, *, format: str | None = None) -> ImportedSession:
    """One session file, parsed (``format`` given, or told from the content): the file's own
    session (``read_file_sessions`` also gives a Claude Code transcript's subagents)."""
    source, text, found = _read(path, format)
    return _kept([_sourced(_parse(found, text, source.path), source)], source.path, found)[0]


def read_file_sessions(path: Path, *, format: str | None = None) -> list[ImportedSession]:
    """Every session a file holds: its own, and for a Claude Code transcript each subagent's,
    written inline (``isSidechain`` lines, up to 2.0) or beside it in
    ``<session>/subagents/agent-<id>.jsonl`` (2.1). A subagent's own file (2.0's
    ``agent-<id>.jsonl``) holds only its subagent."""
    source, text, found = _read(path, format)
    if found != "claude-code":
        return _kept([_sourced(_parse(found, text, source.path), source)], source.path, found)
    entries = parse_lines(text.splitlines(), name=source.path)
    sessions = [_sourced(parse_claude_code(entries, name=source.path), source)]
    for agent in sidechain_agents(entries):
        sub = parse_claude_code(entries, name=source.path, agent_id=agent)
        sessions.append(_sourced(sub, replace(source, part=f"agent-{agent}")))
    for file in sorted((path.parent / path.stem / "subagents").glob("agent-*.jsonl")):
        subagents = read_file_sessions(file, format="claude-code")
        described = _subagent_description(file.with_name(f"{file.stem}.meta.json"))
        for sub in subagents:
            sub.title = f"{sub.title}: {described}" if described else sub.title
        sessions += subagents
    return _kept(sessions, source.path, found)


def _read(path: Path, format: str | None) -> tuple[SourceFile, str, str]:
    """A session file's source (path, size, hash), its text and its format."""
    data = read_file_bytes(path)
    text = decoded(path, data)
    return SourceFile(str(path), len(data), sha256_hex(data)), text, format or detect_format(text, str(path))


def _sourced(session: ImportedSession, source: SourceFile) -> ImportedSession:
    session.source = source
    return session


def _kept(sessions: list[ImportedSession], name: str, found: str) -> list[ImportedSession]:
    """The sessions with a conversation; an error naming the file when none has one."""
    kept = [s for s in sessions if s.items or s.calls]
    if not kept:
        raise InvalidInputError(f"{name}: no {found} conversation in this file (is it another format?)")
    return kept


def _subagent_description(meta: Path) -> str:
    """``Explore: find rounding`` from a 2.1 subagent's ``agent-<id>.meta.json`` (empty when
    there is none, or it is not the documented object: it only names the session)."""
    if not meta.is_file():
        return ""
    try:
        data = json.loads(decoded(meta, read_file_bytes(meta)))
    except json.JSONDecodeError:
        return ""
    if not isinstance(data, dict):
        return ""
    return ": ".join(str(data[k]) for k in ("agentType", "description") if isinstance(data.get(k), str))


def _parse(found: str, text: str, name: str) -> ImportedSession:
    if found == "swe-agent":
        return parse_swe_agent(_json_document(text, name), name=name)
    if found == "openhands":
        return parse_openhands(_json_document(text, name), name=name)
    entries = parse_lines(text.splitlines(), name=name)
    if found == "codex":
        return parse_codex(entries, name=name)
    return parse_claude_code(entries, name=name)


def detect_format(text: str, name: str) -> str:
    """The format of a session file's text (an ``InvalidInputError`` when none fits)."""
    stripped = text.lstrip()
    if not stripped:
        raise UnreadableFileError(f"{name}: the file is empty")
    first_line = stripped.splitlines()[0]
    if stripped.startswith("[") or not _is_json_object(first_line):
        # one JSON document (a pretty-printed trajectory): a broken one fails here, at its line
        document = _json_document(text, name)
        if looks_like_swe_agent(document):
            return "swe-agent"
        if looks_like_openhands(document):
            return "openhands"
        raise NotASessionError(f"{name}: a JSON document of no known session format (pass --format to say which)")
    if "\n" not in stripped.rstrip():
        document = json.loads(first_line)
        if looks_like_swe_agent(document):
            return "swe-agent"
    entries = parse_lines(text.splitlines(), name=name)
    if looks_like_claude_code(entries):
        return "claude-code"
    if looks_like_codex(entries):
        return "codex"
    raise NotASessionError(f"{name}: JSON lines of no known session format (pass --format to say which)")


def _json_document(text: str, name: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UnreadableFileError(
            f"{name}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno}); nothing was imported"
        ) from None


def _is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False

