"""Replay: what the model was shown, turn by turn, read from snapshots and events only.

Replay never searches and never touches the index: it reads the session's events, the
snapshots they reference and their blobs. Every hash it shows is re-derived on the way:
the snapshot's bytes against the hash its event recorded, the context block blob against
the projection, each item's visible text against its hash, and each model request's
context hash against the blocks it names (``context_hash_of``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scopelens.core.contracts import AuditSnapshot, Event, SessionHeader
from scopelens.core.errors import UnknownIdError
from scopelens.core.hashing import sha256_hex, text_hash
from scopelens.core.store.store import Store
from scopelens.core.vocab import EventType


def context_hash_of(blocks: Sequence[str]) -> str:
    """The context hash a ``model.request`` records: the text hash of its blocks, in order."""
    return text_hash("".join(blocks))


@dataclass(frozen=True)
class HashCheck:
    """One re-derived hash: what it covers, what was recorded, what was found."""

    what: str
    recorded: str
    derived: str

    @property
    def ok(self) -> bool:
        return self.recorded == self.derived


@dataclass(frozen=True)
class ReplayedSnapshot:
    snapshot: AuditSnapshot
    content_hash: str
    context_block: str
    checks: tuple[HashCheck, ...]


@dataclass
class ReplayedTurn:
    turn: int
    events: list[Event] = field(default_factory=list)
    snapshots: list[ReplayedSnapshot] = field(default_factory=list)
    checks: list[HashCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks) and all(c.ok for s in self.snapshots for c in s.checks)


@dataclass(frozen=True)
class SessionReplay:
    header: SessionHeader
    turns: tuple[ReplayedTurn, ...]

    @property
    def ok(self) -> bool:
        return all(turn.ok for turn in self.turns)


def replay_snapshot(store: Store, snapshot_id: str, recorded_hash: str | None) -> ReplayedSnapshot:
    stored = store.get_snapshot(snapshot_id)
    snapshot = stored.snapshot
    checks = [HashCheck(f"snapshot {snapshot_id}", recorded_hash or stored.content_hash, stored.content_hash)]
    try:
        raw = store.get_blob(snapshot.projection.block_ref)
    except UnknownIdError:
        raw = b""
    block = raw.decode("utf-8", errors="replace")
    checks.append(HashCheck("context block blob", snapshot.projection.block_ref, sha256_hex(raw)))
    checks.append(HashCheck("context block text", snapshot.projection.visible_text_hash, text_hash(block)))
    for item in snapshot.selected:
        checks.append(HashCheck(f"item {item.citation_id}", item.visible_text_hash, text_hash(item.visible_text)))
    return ReplayedSnapshot(snapshot, stored.content_hash, block, tuple(checks))


def replay_session(store: Store, session_id: str, *, turn: int | None = None) -> SessionReplay:
    """Every turn (or one) of a session as the model saw it; hashes re-derived."""
    header = store.get_session(session_id)
    events = store.events(session_id)
    turns: dict[int, ReplayedTurn] = {}
    blocks: dict[str, str] = {}
    for event in events:
        if turn is not None and event.turn != turn:
            continue
        current = turns.setdefault(event.turn, ReplayedTurn(event.turn))
        current.events.append(event)
        if event.type == EventType.RETRIEVAL_SNAPSHOT_CREATED:
            replayed = replay_snapshot(store, event.payload["snapshot_id"], event.payload["snapshot_hash"])
            blocks[replayed.snapshot.id] = replayed.context_block
            current.snapshots.append(replayed)
        elif event.type == EventType.MODEL_REQUEST:
            ids = list(event.payload.get("snapshot_ids", []))
            missing = [i for i in ids if i not in blocks]
            for snapshot_id in missing:
                blocks[snapshot_id] = replay_snapshot(store, snapshot_id, None).context_block
            current.checks.append(
                HashCheck(
                    f"model request {event.payload['request_id']} context",
                    event.payload["context_hash"],
                    context_hash_of([blocks[i] for i in ids]),
                )
            )
    if turn is not None and not turns:
        raise UnknownIdError(f"session {session_id} has no turn {turn}")
    return SessionReplay(header, tuple(turns[t] for t in sorted(turns)))
