"""Tampering with a store the way an attacker with database access would: triggers bypassed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, create_engine, text

from scopelens.core.hashing import ZERO_HASH, canonical_json, sha256_hex, store_chain_next
from scopelens.core.store.engine import normalise_url


@contextmanager
def tampering(url: str) -> Iterator[Connection]:
    """A raw connection on which append-only triggers do not fire; commits at the end."""
    engine = create_engine(normalise_url(url))
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SET LOCAL session_replication_role = replica"))
            else:
                triggers = conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'trigger'")).scalars().all()
                for name in triggers:
                    conn.execute(text(f'DROP TRIGGER IF EXISTS "{name}"'))
            yield conn
    finally:
        engine.dispose()


def rewrite_consistently(url: str, session_id: str, seq: int, payload: dict[str, Any]) -> None:
    """Change one event's payload and re-derive every later hash: the session chain, the
    session head and the store chain and head, so that ``verify`` alone finds nothing."""
    with tampering(url) as conn:
        rows = conn.execute(text("SELECT session_id, seq, store_seq, body FROM events ORDER BY store_seq")).all()
        bodies = {(r[0], r[1]): json.loads(bytes(r[3])) for r in rows}
        bodies[(session_id, seq)]["payload"] = payload
        hashes: dict[tuple[str, int], str] = {}
        for key in sorted(k for k in bodies if k[0] == session_id):
            if key[1] > 0:
                bodies[key]["prev_hash"] = hashes[(session_id, key[1] - 1)]
            hashes[key] = sha256_hex(canonical_json(bodies[key]))
        store_head = ZERO_HASH
        for sid, event_seq, _store_seq, body in rows:
            event_hash = hashes.get((sid, event_seq)) or sha256_hex(bytes(body))
            store_head = store_chain_next(store_head, event_hash)
            if sid == session_id and event_seq >= seq:
                conn.execute(
                    text("UPDATE events SET body = :b, hash = :h WHERE session_id = :s AND seq = :q"),
                    {"b": canonical_json(bodies[(sid, event_seq)]), "h": event_hash, "s": sid, "q": event_seq},
                )
        last = max(k[1] for k in hashes)
        conn.execute(
            text("UPDATE session_heads SET head_hash = :h WHERE session_id = :s"),
            {"h": hashes[(session_id, last)], "s": session_id},
        )
        conn.execute(text("UPDATE store_head SET head_hash = :h"), {"h": store_head})


def append_forged(url: str, session_id: str, event_type: str, payload: dict[str, Any]) -> None:
    """Append a forged event to a session and move both heads past it, as an attacker with
    write access would: ``verify`` alone finds nothing."""
    with tampering(url) as conn:
        last_seq, last_hash, last_body = conn.execute(
            text("SELECT seq, hash, body FROM events WHERE session_id = :s ORDER BY seq DESC LIMIT 1"), {"s": session_id}
        ).one()
        store_seq, store_head = conn.execute(text("SELECT store_seq, head_hash FROM store_head")).one()
        body = {
            **json.loads(bytes(last_body)), "seq": last_seq + 1, "store_seq": store_seq + 1, "type": event_type,
            "payload": payload, "prev_hash": last_hash,
        }
        raw = canonical_json(body)
        event_hash = sha256_hex(raw)
        conn.execute(
            text(
                "INSERT INTO events (session_id, seq, store_seq, turn, type, created_at, body, hash) "
                "VALUES (:s, :q, :ss, :t, :ty, :at, :b, :h)"
            ),
            {
                "s": session_id, "q": last_seq + 1, "ss": store_seq + 1, "t": body["turn"], "ty": event_type,
                "at": body["created_at"], "b": raw, "h": event_hash,
            },
        )
        conn.execute(
            text("UPDATE session_heads SET head_seq = :q, head_hash = :h WHERE session_id = :s"),
            {"q": last_seq + 1, "h": event_hash, "s": session_id},
        )
        conn.execute(
            text("UPDATE store_head SET store_seq = :n, head_hash = :h"),
            {"n": store_seq + 1, "h": store_chain_next(store_head, event_hash)},
        )
