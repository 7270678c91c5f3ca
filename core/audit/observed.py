"""Imported sessions read back from the store: what each call saw, and where a file was seen.

An imported session's observed snapshots each hold the context items new at their call
(``core/importers/observed_snapshot.py``); a call saw the items at the positions its
``ObservedCall`` names, which this module gathers from the session's snapshots. Nothing here
reads a session file or searches: the store is the record.

A file is **seen** at a call when lines of it (a file read) were in the call's context, and
**mentioned** when only its name was (a search hit, a traceback frame, a file list).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from scopelens.core.contracts import AuditSnapshot, ObservedCall, ObservedItem, SessionHeader, SnapshotItem
from scopelens.core.errors import InvalidInputError, UnknownIdError
from scopelens.core.store.store import Store
from scopelens.core.vocab import ObservedKind, SnapshotKind


class NotImportedError(InvalidInputError):
    """A session with no observed snapshots: it was not imported (a retrieval session)."""


@dataclass(frozen=True)
class SeenItem:
    """A context item of an imported session, and the first call that saw it."""

    item: SnapshotItem
    snapshot_id: str
    turn: int

    @property
    def observed(self) -> ObservedItem:
        assert self.item.observed is not None, "items of observed snapshots say how they were observed"
        return self.item.observed

    @property
    def position(self) -> int:
        return self.observed.position

    def how(self) -> str:
        """``file-read via open (history[7])``: the kind, the tool and where it is in the file."""
        tool = f" via {self.observed.tool}" if self.observed.tool else ""
        return f"{self.observed.kind.value}{tool} ({self.observed.ref})"


@dataclass(frozen=True)
class ObservedSession:
    """An imported session's observed snapshots, by turn, and its items by position."""

    header: SessionHeader
    snapshots: tuple[AuditSnapshot, ...]
    items: dict[int, SeenItem]

    def call(self, turn: int) -> ObservedCall:
        return self.snapshot(turn).observed  # type: ignore[return-value]  # observed snapshots have their call

    def snapshot(self, turn: int) -> AuditSnapshot:
        for snapshot in self.snapshots:
            if snapshot.turn == turn:
                return snapshot
        raise UnknownIdError(f"session {self.header.id} has no call at turn {turn}")

    def in_order(self, turn: int | None = None) -> list[SeenItem]:
        """Every item the call at ``turn`` had in its context (no turn: every item the session's
        calls saw), in context order."""
        if turn is not None:
            return self.visible(turn)
        return [self.items[p] for p in sorted(self.items)]

    def visible(self, turn: int) -> list[SeenItem]:
        """Every item the call at ``turn`` had in its context, in context order."""
        call = self.call(turn)
        return [self.items[p] for p in range(call.visible_from, call.visible_to) if p in self.items]


def read_observed(store: Store, session_id: str) -> ObservedSession:
    """The observed side of a session; an error in one line for a session that was not imported."""
    header = store.get_session(session_id)
    return observed_session(header, [s.snapshot for s in store.snapshots_of(session_id, kind=SnapshotKind.OBSERVED)])


def observed_session(header: SessionHeader, snapshots: Iterable[AuditSnapshot]) -> ObservedSession:
    """The observed side of a session from its snapshots, already read (others are ignored)."""
    snapshots = tuple(s for s in snapshots if s.kind == SnapshotKind.OBSERVED)
    if not snapshots:
        raise NotImportedError(
            f"session {header.id} has no observed snapshots (it was not imported with `scopelens import`); "
            "for a retrieval, ask of its snapshot: why-not SNAPSHOT --path P"
        )
    items: dict[int, SeenItem] = {}
    for snapshot in snapshots:
        for item in snapshot.selected:
            assert item.observed is not None
            items.setdefault(item.observed.position, SeenItem(item, snapshot.id, snapshot.turn))
    return ObservedSession(header, snapshots, items)


# --------------------------------------------------------------------------- sightings


def same_path(named: str, wanted: str) -> bool:
    """Whether a path as the session wrote it is ``wanted`` (relative to the workspace): the
    same, or one ends with the other at a ``/`` (an absolute path of the agent's machine)."""
    named, wanted = named.removeprefix("./"), wanted.removeprefix("./")
    return named == wanted or named.endswith("/" + wanted) or wanted.endswith("/" + named)


def mentioned_path(mention: str) -> str:
    """The path of a mention (``pkg/mod.py:17`` -> ``pkg/mod.py``)."""
    path, _, line = mention.rpartition(":")
    return path if path and line.isdigit() else mention


@dataclass(frozen=True)
class Sighting:
    """Whether an imported session's model saw a file's lines, only its name, or neither."""

    path: str
    status: Literal["seen", "mentioned", "never"]
    reads: tuple[SeenItem, ...]
    """Every read of the file's lines, in context order."""
    first_named: SeenItem | None
    """The first item that named the file without its lines (a hit, a frame), if any."""
    gold: bool = False
    """The file is one a reference fix changes (``--instance``)."""

    @property
    def turn(self) -> int | None:
        """The first call that saw it (its lines if it was seen, else its name)."""
        if self.reads:
            return self.reads[0].turn
        return self.first_named.turn if self.first_named else None

    def summary(self) -> str:
        gold = " (a gold file)" if self.gold else ""
        if self.status == "never":
            return f"{self.path}{gold}: never seen or named in this session"
        if self.status == "mentioned":
            assert self.first_named is not None
            return (f"{self.path}{gold}: mentioned, never seen: first named at turn {self.first_named.turn} "
                    f"by {self.first_named.how()}; its lines were never in the model's context")
        first = self.reads[0]
        lines = f" lines {first.item.line_start}-{first.item.line_end}" if first.item.line_start is not None else ""
        named = (f"; named earlier at turn {self.first_named.turn} by {self.first_named.how()}"
                 if self.first_named is not None and self.first_named.turn < first.turn else "")
        more = f"; read {len(self.reads)} times in all" if len(self.reads) > 1 else ""
        return f"{self.path}{gold}: seen at turn {first.turn}{lines} by {first.how()}{named}{more}"


def sighting(session: ObservedSession, path: str, *, gold: bool = False) -> Sighting:
    """Where in ``session`` the model first saw ``path``, from its observed snapshots."""
    ordered = session.in_order()
    reads = tuple(s for s in ordered if s.observed.kind == ObservedKind.FILE_READ and s.item.path
                  and same_path(s.item.path, path))
    named = next((s for s in ordered if s not in reads and (
        (s.item.path is not None and same_path(s.item.path, path))
        or any(same_path(mentioned_path(m), path) for m in s.observed.mentions))), None)
    status: Literal["seen", "mentioned", "never"] = "seen" if reads else "mentioned" if named else "never"
    return Sighting(path, status, reads, named, gold)


def counterfactual_at(store: Store, session_id: str, turn: int) -> AuditSnapshot | None:
    """The counterfactual snapshot stored for a session's turn (the last, if run again), if any."""
    found = [s.snapshot for s in store.snapshots_of(session_id, kind=SnapshotKind.COUNTERFACTUAL, turn=turn)]
    return found[-1] if found else None
