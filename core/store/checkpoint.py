"""Checkpoints: the store head at a size, in one line a user can keep somewhere else.

The head rows are ordinary rows: someone who can write to the database can append a forged
event and move the heads, or rewrite history and every later hash, and ``verify`` alone
stays clean. A checkpoint taken earlier and kept out of the attacker's reach (committed,
pasted in a ticket, shipped to a log) pins the first ``size`` events: ``verify --checkpoint``
recomputes the store chain's head at that size and compares.

The format is fixed (later changes to how appends are sequenced keep it)::

    scopelens-checkpoint/1 origin=scopelens/3fa2c0d19e7b4a51 size=42 head=<64 hex>
    scopelens-checkpoint/1 origin=… size=… head=… key=<16 hex> sig=<base64>

``origin`` names the store by the hash of its first event (``scopelens/empty`` before any),
so a checkpoint of another store is refused, and a store rewritten from its first event has
another origin. ``key``/``sig`` are present when signed: Ed25519 (``cryptography``, the
``[sign]`` extra) over the line before `` key=``, with a key in a file the user names; ``key``
is the first 16 hex digits of the SHA-256 of the raw public key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scopelens.core.errors import InvalidInputError, UnreadableFileError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

MAGIC = "scopelens-checkpoint/1"
EMPTY_ORIGIN = "scopelens/empty"
KEY_ENV = "SCOPELENS_CHECKPOINT_KEY"
"""A private key file to sign every checkpoint with, when ``--key`` is not given."""

_LINE = re.compile(
    rf"^{re.escape(MAGIC)} origin=(?P<origin>\S+) size=(?P<size>\d+) head=(?P<head>[0-9a-f]{{64}})"
    r"(?: key=(?P<key>[0-9a-f]{16}) sig=(?P<sig>[A-Za-z0-9+/=]+))?$"
)
_SHORT = re.compile(r"^(?P<size>\d+):(?P<head>[0-9a-f]{64})$")


def origin_of(first_event_hash: str | None) -> str:
    return EMPTY_ORIGIN if first_event_hash is None else f"scopelens/{first_event_hash[:16]}"


@dataclass(frozen=True)
class Checkpoint:
    """A store head at a size; ``origin`` is None for the short ``SIZE:HASH`` form."""

    size: int
    head: str
    origin: str | None = None
    key_id: str | None = None
    signature: str | None = None

    def message(self) -> str:
        """The signed part of the line."""
        return f"{MAGIC} origin={self.origin or EMPTY_ORIGIN} size={self.size} head={self.head}"

    def line(self) -> str:
        if self.key_id and self.signature:
            return f"{self.message()} key={self.key_id} sig={self.signature}"
        return self.message()

    @property
    def signed(self) -> bool:
        return self.signature is not None


def parse_checkpoint(text: str) -> Checkpoint:
    """A checkpoint line, or ``SIZE:HASH``; anything else is a one-line input error."""
    value = text.strip()
    short = _SHORT.match(value)
    if short:
        return Checkpoint(size=int(short["size"]), head=short["head"])
    full = _LINE.match(value)
    if full is None:
        raise InvalidInputError(
            "a checkpoint is SIZE:HASH (64 lowercase hex digits) or a line printed by `scopelens checkpoint`"
        )
    return Checkpoint(
        size=int(full["size"]), head=full["head"], origin=full["origin"], key_id=full["key"], signature=full["sig"]
    )


# ---------------------------------------------------------------------------- signing


def _require_cryptography() -> None:
    try:
        import cryptography  # noqa: F401  (only whether it is installed)
    except ImportError:  # the optional [sign] extra
        raise InvalidInputError(
            "signed checkpoints need the `cryptography` package: pip install 'scopelens[sign]'"
        ) from None


def key_id_of(public: Ed25519PublicKey) -> str:
    from cryptography.hazmat.primitives import serialization

    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def new_signing_key(path: Path) -> str:
    """Write a new Ed25519 private key (PEM, mode 0600) to ``path`` and its public key to
    ``path.pub``; returns the key id. Refuses to overwrite."""
    _require_cryptography()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.generate()
    public_path = path.with_name(path.name + ".pub")
    for target in (path, public_path):
        if target.exists():
            raise InvalidInputError(f"{target} already exists; a key is never overwritten")
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(private_pem)
        public_path.write_bytes(public_pem)
    except OSError as exc:
        raise UnreadableFileError(f"cannot write the key to {path}: {exc.strerror or exc}") from None
    return key_id_of(private.public_key())


def _read_pem(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UnreadableFileError(f"cannot read key file {path}: {exc.strerror or exc}") from None


def load_private_key(path: Path) -> Ed25519PrivateKey:
    _require_cryptography()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        key = serialization.load_pem_private_key(_read_pem(path), password=None)
    except (ValueError, TypeError):
        raise InvalidInputError(f"{path} is not an unencrypted PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InvalidInputError(f"{path} is not an Ed25519 key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """A public key file, or a private key file (its public half)."""
    _require_cryptography()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    pem = _read_pem(path)
    if b"PRIVATE KEY" in pem:
        return load_private_key(path).public_key()
    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError):
        raise InvalidInputError(f"{path} is not a PEM public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InvalidInputError(f"{path} is not an Ed25519 key")
    return key


def sign_checkpoint(checkpoint: Checkpoint, key: Ed25519PrivateKey) -> Checkpoint:
    signature = key.sign(checkpoint.message().encode("utf-8"))
    return Checkpoint(
        size=checkpoint.size,
        head=checkpoint.head,
        origin=checkpoint.origin,
        key_id=key_id_of(key.public_key()),
        signature=base64.b64encode(signature).decode("ascii"),
    )


def signature_problem(checkpoint: Checkpoint, key: Ed25519PublicKey) -> str | None:
    """Why the checkpoint's signature does not hold under ``key``; None when it does."""
    from cryptography.exceptions import InvalidSignature

    if not checkpoint.signed or checkpoint.signature is None:
        return "the checkpoint is not signed"
    if checkpoint.key_id != key_id_of(key):
        return f"signed by key {checkpoint.key_id}, not by the given key {key_id_of(key)}"
    try:
        key.verify(base64.b64decode(checkpoint.signature, validate=True), checkpoint.message().encode("utf-8"))
    except (InvalidSignature, binascii.Error):
        return "the signature does not match the line"
    return None
