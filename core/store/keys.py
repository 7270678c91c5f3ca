"""Where a store's redaction key lives: in a file beside the store, never in it.

A SQLite store ``/x/s.db`` keeps its key in ``/x/s.db.redaction-key``. A server store
(PostgreSQL) keeps it in ``$SCOPELENS_REDACTION_KEY_FILE`` if set, else in the user's config
directory, one file per store URL. The key is made on the first write that needs it (32 random
bytes, hex, mode 0600). Losing it loses nothing stored: only the ability to match a suspected
leak against the records' HMACs (docs/security.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from pathlib import Path

from platformdirs import user_config_dir

from scopelens.core.errors import StoreUnavailableError
from scopelens.core.redaction_scan import RedactionKey
from scopelens.core.store.location import sqlite_file

KEY_FILE_ENV = "SCOPELENS_REDACTION_KEY_FILE"
KEY_SUFFIX = ".redaction-key"


def key_path_for(url: str) -> Path | None:
    """The key file of the store at ``url``; None for an in-memory store."""
    override = _override()
    if override is not None:
        return override
    from scopelens.core.store.engine import display_url, sqlite_path_of  # SQLAlchemy: not for early_key

    path = sqlite_path_of(url)
    if path is not None:
        return _beside(path)
    if url.startswith("sqlite"):
        return None
    name = hashlib.sha256(display_url(url).encode("utf-8")).hexdigest()[:16]
    return Path(user_config_dir("scopelens")) / "redaction-keys" / f"{name}{KEY_SUFFIX}"


def early_key(db: str) -> RedactionKey | None:
    """The key of the SQLite store ``db`` (a path or a plain ``sqlite:///`` URL:
    ``location.sqlite_file``) before the store is opened (and before SQLAlchemy is loaded):
    read if its file exists, made if the store does not exist yet (its first write would make
    it), else ``None``: an existing store without a key gets one once it has been opened and
    checked, and a key that cannot be read or made is reported by the run that opens the
    store. Any other store gets ``None`` too."""
    database = sqlite_file(db)
    if database is None:
        return None
    path = _override() or _beside(database)
    try:
        try:
            return _read_key(path)
        except FileNotFoundError:
            pass
        if database.exists() or not database.parent.is_dir():
            return None
        return load_or_create_key(path)
    except StoreUnavailableError:  # the run opens the store and reports it
        return None


def load_or_create_key(path: Path | None) -> RedactionKey:
    """The key in ``path``, made there first if missing (an in-memory store gets a fresh one)."""
    if path is None:
        return RedactionKey(secrets.token_bytes(32))
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    # Written whole to a private temporary file, then linked into place: a concurrent reader
    # never sees a half-written key, and of two writers racing, the first link wins.
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="ascii") as handle:
            handle.write(secrets.token_hex(32) + "\n")
        with contextlib.suppress(FileExistsError):  # another process made it first: use theirs
            os.link(temporary, path)
    except OSError as exc:
        raise StoreUnavailableError(f"cannot create the redaction key {path}: {exc.strerror}") from None
    finally:
        temporary.unlink(missing_ok=True)
    return _read_key(path)


def _override() -> Path | None:
    override = os.environ.get(KEY_FILE_ENV)
    return Path(override).expanduser() if override else None


def _beside(database: Path) -> Path:
    return database.with_name(database.name + KEY_SUFFIX)


def _read_key(path: Path) -> RedactionKey:
    try:
        secret = bytes.fromhex(path.read_text(encoding="ascii").strip())
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise StoreUnavailableError(f"cannot read the redaction key {path}: {exc}") from None
    if len(secret) < 16:
        raise StoreUnavailableError(f"the redaction key {path} is too short ({len(secret)} bytes)")
    return RedactionKey(secret)
