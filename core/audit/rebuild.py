"""Rebuild a store into a new chain with every detectable secret redacted.

A store written before secrets were redacted on intake keeps them in immutable, hash-chained
rows: they cannot be deleted without breaking the chain, which is the point of the chain. The
remedy is a new store: every session, event, snapshot, artifact and memory is copied in
append order through today's redaction, and the hashes that cover redacted text are
re-derived (item and block hashes, blob addresses, snapshot hashes, and the events that
record them). The new store's first session records what it was rebuilt from: the old
store's checkpoint line (origin, size, head) and what was carried over.

What is not copied: the workspace index (re-index the workspace) and drift runs (reports that
drift re-computes). A snapshot with no secret in it is rebuilt byte for byte: same hash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlmodel import col, select

from scopelens.core.clock import Clock, SystemClock, utc
from scopelens.core.contracts import AuditSnapshot, Event
from scopelens.core.errors import IntegrityError, InvalidInputError, UnknownIdError
from scopelens.core.hashing import as_bytes, canonical_json, sha256_hex, text_hash
from scopelens.core.memory import copy_history
from scopelens.core.redact import redact, redact_document, redact_values
from scopelens.core.store.store import Store
from scopelens.core.store.tables import EventRow, SessionRow
from scopelens.core.store.verify import make_checkpoint, verify_store
from scopelens.core.vocab import EventType

REBUILD_AGENT = "scopelens rebuild"


@dataclass(frozen=True)
class RebuildReport:
    rebuilt_from: str
    """The old store's checkpoint line."""
    record_session: str
    sessions: int
    events: int
    snapshots: int
    snapshots_changed: int
    hashes_moved: int
    """Addresses the redaction changed (blobs, blocks, item texts, snapshots)."""
    memories: int
    new_head: str


class _Hashes:
    """Old address → new address, for every hash the redaction changed."""

    def __init__(self) -> None:
        self.moved: dict[str, str] = {}

    def note(self, old: str, new: str) -> None:
        if old != new:
            self.moved[old] = new

    def apply(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.moved.get(value, value)
        if isinstance(value, dict):
            return {key: self.apply(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.apply(item) for item in value]
        return value


def rebuild_store(old: Store, new: Store, *, clock: Clock | None = None) -> RebuildReport:
    """Copy ``old`` into the empty store ``new`` through today's redaction; see the module doc."""
    report = verify_store(old)
    if not report.clean:
        raise IntegrityError(
            f"the store to rebuild does not verify ({len(report.problems)} problem(s)): rebuilding would launder them"
        )
    with new.read() as conn:
        if conn.exec(select(SessionRow).limit(1)).first() is not None:
            raise InvalidInputError("the store to rebuild into is not empty: give a new --db")
    checkpoint = make_checkpoint(old, report)
    now = utc((clock or SystemClock()).now())
    record = new.create_session(
        project="(scopelens)", title=f"rebuilt from {checkpoint.origin} at size {checkpoint.size}",
        agent=REBUILD_AGENT, session_id=f"rebuild-{sha256_hex(checkpoint.line().encode())[:12]}", created_at=now,
    )
    new.append_event(
        record.id, EventType.USER_MESSAGE,
        {"text": f"{checkpoint.line()}\nsecrets redacted on rebuild; not copied: the workspace index, drift runs"},
        created_at=now,
    )
    hashes = _Hashes()
    counts = {"sessions": 0, "events": 0, "snapshots": 0, "snapshots_changed": 0}
    with old.read() as conn:
        rows = list(conn.execute(select(col(EventRow.body)).order_by(col(EventRow.store_seq))).scalars())
    for body in rows:
        event = Event.model_validate_json(as_bytes(body))
        counts["events"] += 1
        if event.type == EventType.SESSION_STARTED:
            _copy_session(old, new, event)
            counts["sessions"] += 1
        elif event.type == EventType.RETRIEVAL_SNAPSHOT_CREATED:
            changed = _copy_snapshot(old, new, str(event.payload["snapshot_id"]), hashes)
            counts["snapshots"] += 1
            counts["snapshots_changed"] += int(changed)
        else:
            payload = _copy_artifacts(old, new, event.payload, hashes)
            new.append_event(
                event.session_id, event.type, hashes.apply(redact_values(payload)),
                turn=event.turn, created_at=event.created_at,
            )
    memories = copy_history(old, new, redact_document)
    return RebuildReport(
        rebuilt_from=checkpoint.line(), record_session=record.id, sessions=counts["sessions"],
        events=counts["events"], snapshots=counts["snapshots"], snapshots_changed=counts["snapshots_changed"],
        hashes_moved=len(hashes.moved), memories=memories, new_head=new.store_head()[1],
    )


def _copy_session(old: Store, new: Store, started: Event) -> None:
    header = old.get_session(started.session_id)
    payload = redact_values(dict(started.payload))
    new.create_session(
        project=header.project, branch=header.branch, workspace_root=header.workspace_root,
        title=payload.get("title", ""), agent=payload.get("agent", ""), session_id=header.id,
        created_at=started.created_at,
    )


def _copy_blob(old: Store, new: Store, digest: str, hashes: _Hashes) -> tuple[str, int]:
    """The blob redacted into the new store: its new address and size."""
    data = old.get_blob(digest)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        copied = data  # not text: nothing to redact (the store refuses it if it holds a secret)
    else:
        copied = redact(text).text.encode("utf-8")
    moved = new.put_blob(copied)
    hashes.note(digest, moved)
    return moved, len(copied)


def _copy_artifacts(old: Store, new: Store, payload: dict[str, Any], hashes: _Hashes) -> dict[str, Any]:
    artifacts = payload.get("artifacts")
    if not isinstance(artifacts, list):
        return payload
    copied = []
    for artifact in artifacts:
        moved, size = _copy_blob(old, new, str(artifact["blob"]), hashes)
        copied.append({**artifact, "blob": moved, "size": size})
    return {**payload, "artifacts": copied}


def _copy_snapshot(old: Store, new: Store, snapshot_id: str, hashes: _Hashes) -> bool:
    """Write the redacted snapshot (its event follows from it); True if any byte changed."""
    stored = old.get_snapshot(snapshot_id)
    document = redact_values(json.loads(stored.body))
    for item in document["selected"]:
        item["visible_text_hash"] = text_hash(item["visible_text"])
    by_item = {item["item_id"]: item["visible_text_hash"] for item in document["selected"]}
    for entry in document["projection"]["citation_map"].values():
        entry["visible_text_hash"] = by_item.get(entry["item_id"], entry["visible_text_hash"])
    block = redact(old.get_blob(stored.snapshot.projection.block_ref).decode("utf-8")).text
    document["projection"]["block_ref"] = sha256_hex(block.encode("utf-8"))
    document["projection"]["visible_text_hash"] = text_hash(block)
    hashes.note(stored.snapshot.projection.block_ref, document["projection"]["block_ref"])
    hashes.note(stored.snapshot.projection.visible_text_hash, document["projection"]["visible_text_hash"])
    policies: list[bytes] = []
    if stored.snapshot.pins is not None:  # an observed snapshot pins no policy
        policy_hash = stored.snapshot.pins.policy_hash
        try:
            policy = redact(old.get_blob(policy_hash).decode("utf-8")).text.encode("utf-8")
        except UnknownIdError:
            raise IntegrityError(f"snapshot {snapshot_id}: its policy blob is missing; run `scopelens verify`") from None
        document["pins"]["policy_hash"] = sha256_hex(policy)
        hashes.note(policy_hash, document["pins"]["policy_hash"])
        policies.append(policy)
    snapshot = AuditSnapshot.model_validate(document)
    # The document as stored, not re-serialised from the model: fields this version no longer
    # has (an old plan's output_shape) stay, so a snapshot that held no secret keeps its hash.
    body = canonical_json(document)
    new_hash = new.write_snapshot(snapshot, block, blobs=policies, document=body)
    hashes.note(stored.content_hash, new_hash)
    return new_hash != stored.content_hash or body != as_bytes(stored.body)
