"""The hash contract: one canonical JSON encoding and one digest, used by every hash.

**Changing anything in this module changes every hash in every store.** It is a contract:

* ``canonical_json(value)`` is UTF-8 JSON with keys sorted by code point, no insignificant
  whitespace (``separators=(",", ":")``), non-ASCII characters written as themselves (not
  ``\\u`` escapes), and NaN/Infinity refused. Floats are written by Python's ``repr``
  (shortest round-trip form), so a value read back and re-encoded gives the same bytes.
* ``sha256_hex(data)`` is the lowercase hex SHA-256 of bytes.
* Stored documents are written as ``canonical_json`` bytes and their hash is taken over
  **those stored bytes**, never over a re-serialisation of columns, so a copy of a store
  between SQLite and PostgreSQL still verifies.
* Event chains: ``event_hash = sha256_hex(body)`` where ``body`` is the stored canonical JSON
  of the event, which itself contains ``prev_hash`` (the hash of the event before it, or
  the zero hash for the first event of a session).
* The store chain: ``store_hash(n) = sha256_hex(f"{store_hash(n-1)}:{event_hash(n)}")`` over
  all events of the store in the order they were appended (``store_seq``), starting at the
  zero hash. Its last value is the *store head*, which covers every session head.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

ZERO_HASH = "0" * 64
"""The predecessor of every chain's first link."""


def canonical_json(value: Any) -> bytes:
    """Encode ``value`` (JSON-able data or a pydantic model) as canonical JSON bytes.

    A model is recognised by its ``model_dump`` rather than by importing pydantic, which a
    process preparing files for the index never loads (``core/index/prepare.py``)."""
    if hasattr(type(value), "model_dump"):
        value = value.model_dump(mode="json")
    return json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    ).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    """The lowercase hex SHA-256 digest of ``data``."""
    return hashlib.sha256(data).hexdigest()


def text_hash(text: str) -> str:
    """The hash of a text as it is stored and shown: SHA-256 of its UTF-8 bytes."""
    return sha256_hex(text.encode("utf-8"))


def document_hash(value: Any) -> str:
    """The hash of a document, taken over its canonical JSON bytes."""
    return sha256_hex(canonical_json(value))


def store_chain_next(previous: str, event_hash: str) -> str:
    """The next link of the store chain, given the previous link and an event's hash."""
    return sha256_hex(f"{previous}:{event_hash}".encode("ascii"))


def as_bytes(value: bytes | bytearray | memoryview | str) -> bytes:
    """Stored bytes as bytes. A TEXT value where bytes belong (a tampered or hand-edited row)
    is read as its UTF-8 encoding, so verification reports a mismatch instead of crashing."""
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)
