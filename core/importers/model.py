"""The neutral model of an imported agent session: what entered the model's context, and
which part of it each model call could see.

Every format is read into this model: an ordered list of context items (``Observed``) and
the model calls (``ModelCall``), each naming the slice of items visible to it (items from
the last compaction up to the call). Paths are relative to the session's working directory
when they lie under it, and kept as the agent wrote them otherwise. What a format does not
record is listed in ``not_recorded`` rather than invented.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

SUMMARY_CHARS = 120
"""Titles and tool-call summaries are cut to this many characters, after their secrets are
redacted (``observed_snapshot.clean_summary``): cut first, a secret could be cut short of the
end its pattern needs, and its first characters kept."""

ObservedKind = Literal[
    "instruction",  # a system prompt, an injected instruction file, a demonstration
    "task",  # what the user asked (an issue text, a typed prompt)
    "file-read",  # lines of a file, with their range
    "search",  # a search's output: file names or path:line hits
    "command-output",  # a command's output (a test run, a traceback)
    "tool-output",  # another tool's result
    "model-output",  # what the model itself wrote earlier (it sees it again)
    "summary",  # a compaction summary standing for earlier context
]


@dataclass(frozen=True)
class Mention:
    """A file named in context without its content lines (a search hit, a traceback frame)."""

    path: str
    line: int | None = None


@dataclass(frozen=True)
class Observed:
    """One piece of context the model could see, as it saw it."""

    kind: ObservedKind
    text: str
    ref: str
    """Where it is in the source file (``history[7]``, ``line 12``)."""
    tool: str | None = None
    """The tool whose result this is, as the agent named it (``open``, ``Read``, ``bash``)."""
    path: str | None = None
    """The file whose lines these are (``file-read``)."""
    line_start: int | None = None
    line_end: int | None = None
    mentions: tuple[Mention, ...] = ()
    at: datetime | None = None


@dataclass(frozen=True)
class ModelCall:
    """One call of the model: the context items it could see and what it answered."""

    number: int
    """1-based, in the order of the session."""
    visible_from: int
    visible_to: int
    """It saw ``items[visible_from:visible_to]``."""
    response: str
    tool_calls: tuple[str, ...] = ()
    """The tools it called (names with a short argument summary), in order."""
    ref: str = ""
    at: datetime | None = None
    replaced: tuple[int, int] | None = None
    """Items an earlier compaction replaced (``items[a:b]``), when this call is the first after it."""


@dataclass(frozen=True)
class SourceFile:
    """A session file as read: its path, size and the SHA-256 of its bytes."""

    path: str
    size: int
    sha256: str
    part: str = ""
    """Which session of the file this is, when it holds several: ``agent-<id>`` for a Claude
    Code subagent written inline (``isSidechain`` lines); empty for the file's own session."""

    @property
    def name(self) -> str:
        return self.path.replace("\\", "/").rsplit("/", 1)[-1]

    @property
    def key(self) -> str:
        """What an import of this session is recorded under: the file's hash, and its part."""
        return f"{self.sha256}#{self.part}" if self.part else self.sha256


@dataclass
class ImportedSession:
    """One agent session, read from one file (and the files that belong to it)."""

    format: str
    """``swe-agent``, ``claude-code``, ``codex`` or ``openhands``."""
    session_id: str
    cwd: str | None
    title: str
    items: list[Observed] = field(default_factory=list)
    calls: list[ModelCall] = field(default_factory=list)
    agent: str = ""
    model: str | None = None
    branch: str | None = None
    """The git branch the agent worked on, when the format records it (Claude Code's
    ``gitBranch``, Codex's ``session_meta.git.branch``)."""
    not_recorded: tuple[str, ...] = ()
    """What the format does not record (stated, not invented)."""
    unknown: dict[str, int] = field(default_factory=dict)
    """Entries of types this importer does not know, counted by type (never fatal)."""
    source: SourceFile | None = None
    """The file it was read from (set by ``read_session_file``)."""

    def visible(self, call: ModelCall) -> list[Observed]:
        return self.items[call.visible_from : call.visible_to]

    def first_seen(self, path: str) -> tuple[ModelCall, Observed] | None:
        """The first call that saw lines of ``path``, with the item that held them."""
        return self._first_call_seeing([i for i, item in enumerate(self.items)
                                        if item.kind == "file-read" and item.path == path])

    def first_mentioned(self, path: str) -> tuple[ModelCall, Observed] | None:
        """The first call that saw ``path`` named (a hit, a frame, a file list) or read."""
        return self._first_call_seeing([i for i, item in enumerate(self.items)
                                        if item.path == path or any(m.path == path for m in item.mentions)])

    def _first_call_seeing(self, indexes: list[int]) -> tuple[ModelCall, Observed] | None:
        """The first call whose visible slice holds one of ``indexes`` (ascending), with the
        first such item: one pass over the calls, a bisection each."""
        if not indexes:
            return None
        for call in self.calls:
            k = bisect_left(indexes, call.visible_from)
            if k < len(indexes) and indexes[k] < call.visible_to:
                return call, self.items[indexes[k]]
        return None


@dataclass(frozen=True)
class Sighting:
    """Whether a session's model ever saw a file's lines, only its name, or neither."""

    path: str
    status: Literal["seen", "mentioned", "never"]
    call: int | None = None
    """The first call that saw it (or, mentioned only, that saw its name)."""
    item: Observed | None = None
    """The item that showed it: its kind, tool, line range and place in the source file."""
    mentioned_at: int | None = None
    """When seen: the first call that saw its name, if earlier than its lines."""


def sighting(session: ImportedSession, path: str) -> Sighting:
    """Where in ``session`` the model first saw ``path`` (relative to the working directory)."""
    seen = session.first_seen(path)
    named = session.first_mentioned(path)
    if seen is not None:
        earlier = named[0].number if named is not None and named[0].number < seen[0].number else None
        return Sighting(path, "seen", seen[0].number, seen[1], earlier)
    if named is not None:
        return Sighting(path, "mentioned", named[0].number, named[1])
    return Sighting(path, "never")
