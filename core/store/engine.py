"""Opening SQL engines for a store URL: SQLite by default, any SQLAlchemy URL otherwise.

Two things are decided here so no caller has to know them:

* **Write transactions hold the write lock from their start.** Python's sqlite3 begins a
  transaction lazily at the first write, which is too late for reading a chain head and
  appending the next link, so SQLite connections run in driver autocommit mode and we emit
  ``BEGIN IMMEDIATE`` ourselves for connections marked ``write=True`` (plain ``BEGIN`` for
  reads). PostgreSQL takes a row lock on the store head (``FOR UPDATE``) instead.
* **Writable SQLite stores use WAL**, so a long read (verify, the inspector) never blocks a
  writer's commit, and a read sees one consistent snapshot while others write.
* **Read-only opens write nothing.** A read-only SQLite connection (``mode=ro``) on a WAL
  store would create ``-wal`` and ``-shm`` files beside it if they are missing. So each
  read-only connection looks first: when a writer has the store open (its ``-shm`` exists),
  it joins the WAL protocol (``mode=ro``, creating nothing, reading through the existing
  index, which SQLite can also do when the reader may not write it); when no connection has
  it open (no ``-shm``, no ``-wal`` with content, no rollback journal), the main file holds
  every committed transaction and is read as an immutable file (``immutable=1``), which needs
  no lock file and so works in a directory the reader cannot write. A writer that starts
  during such a read appends to its own WAL; the main file changes only at a checkpoint (when
  the WAL passes 1000 pages, or when the last writer closes), the one case in which a long
  immutable read could see a newer page (docs/security.md).
* **Writable SQLite stores keep their connections** (a pool), read-only ones do not. With a
  connection made and closed per transaction, each close was the last connection to the WAL
  store, so SQLite checkpointed the WAL and deleted it, and the next transaction re-created
  it: about 40% of a small retrieval's time. A read-only connection is still made per
  transaction, because whether it may read the file as immutable is decided when it connects.
* **Paths are never parsed as URLs.** A bare path becomes a URL with its special characters
  percent-encoded, and SQLite connections are made from the decoded path (a ``#``, ``?`` or
  ``%20`` in a directory name stays what it is).
"""

from __future__ import annotations

import os
import sqlite3
import weakref
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError
from sqlalchemy.pool import NullPool, QueuePool

from scopelens.core.errors import StoreUnavailableError

SQLITE_BUSY_TIMEOUT_S = 60.0


def sqlite_path_of(url: str) -> Path | None:
    """The file path of a SQLite URL, or ``None`` for other backends and in-memory stores."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    database = parsed.database
    if database.startswith("file:"):
        database = database[len("file:") :]
    return Path(database)


def normalise_url(url_or_path: str) -> str:
    """Turn a bare filesystem path into a SQLite URL; leave URLs as they are.

    ``postgresql://`` URLs get the psycopg 3 driver, which is the one we install.
    """
    if "://" not in url_or_path:
        return "sqlite:///" + quote(str(Path(url_or_path).expanduser().resolve()), safe="/")
    if url_or_path.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url_or_path.split("://", 1)[1]
    return url_or_path


def display_url(url: str, *, name_only: bool = False) -> str:
    """A store for messages and headers: its SQLite file (or just its name), or the URL
    without its password."""
    url = normalise_url(url)
    path = sqlite_path_of(url)
    if path is not None:
        return path.name if name_only else str(path)
    return make_url(url).render_as_string(hide_password=True)


def make_engine(url: str, *, read_only: bool = False) -> Engine:
    """Create an engine for ``url`` with the locking and read-only rules above."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StoreUnavailableError(f"not a database URL: {url!r}") from None
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url, read_only=read_only)
    try:
        engine = create_engine(url, pool_size=2, max_overflow=4, pool_pre_ping=True)
    except (ArgumentError, ImportError, ModuleNotFoundError) as exc:
        raise StoreUnavailableError(f"cannot use database URL {url!r}: {exc}") from None
    _pool_per_process(engine)
    _PRE_PINGED.add(engine)
    if read_only:
        @event.listens_for(engine, "connect")
        def _read_only_session(dbapi_connection: Any, _record: Any) -> None:
            with dbapi_connection.cursor() as cursor:
                cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            dbapi_connection.commit()
    return engine


_PRE_PINGED: weakref.WeakSet[Engine] = weakref.WeakSet()
"""Server engines, whose pools ping a connection before handing it out (``_new_pools_in_child``)."""


def _new_pools_in_child() -> None:
    """Right after ``os.fork()``, in the child: every server engine gets an empty pool, and the
    parent's pooled connections are dropped without being closed (psycopg does not end a
    session from a process other than its own). The checkout rule of ``_pool_per_process``
    would give the child new ones too, but only after the pool's pre-ping, which would talk
    over the parent's socket while the parent may be using it."""
    for engine in list(_PRE_PINGED):
        engine.dispose(close=False)


os.register_at_fork(after_in_child=_new_pools_in_child)


def _pool_per_process(engine: Engine) -> None:
    """A pooled connection is used only by the process that opened it (SQLAlchemy's recipe for
    ``os.fork()``): a forked child that checks out one of its parent's connections gets a new
    one instead, so the two never talk over one socket at once (their messages would mix)."""

    @event.listens_for(engine, "connect")
    def _opened_by(_dbapi_connection: Any, record: Any) -> None:
        record.info["pid"] = os.getpid()

    @event.listens_for(engine, "checkout")
    def _only_in_its_process(_dbapi_connection: Any, record: Any, proxy: Any) -> None:
        if record.info.get("pid") != os.getpid():
            record.dbapi_connection = proxy.dbapi_connection = None  # the parent's: left open for it
            raise DisconnectionError("a pooled connection of another process (forked): connecting anew")


def sqlite_uri(path: Path, *, read_only: bool) -> str:
    """The SQLite URI for one new connection to the store file ``path`` (see the module doc)."""
    location = "file:" + quote(str(path), safe="/")
    if not read_only:
        return f"{location}?mode=rwc"
    if _quiescent(path):
        return f"{location}?mode=ro&immutable=1"
    return f"{location}?mode=ro"


def _quiescent(path: Path) -> bool:
    """No connection has the store open and no transaction is left in a journal or WAL."""
    def size(suffix: str) -> int | None:
        try:
            return path.with_name(path.name + suffix).stat().st_size
        except FileNotFoundError:
            return None

    return size("-shm") is None and not size("-wal") and size("-journal") is None


def _sqlite_engine(url: str, *, read_only: bool) -> Engine:
    path = sqlite_path_of(url)
    if path is None:
        engine = create_engine(url, poolclass=NullPool)
    else:
        def connect() -> sqlite3.Connection:
            return sqlite3.connect(sqlite_uri(path, read_only=read_only), uri=True, check_same_thread=False)

        engine = create_engine("sqlite+pysqlite://", creator=connect, poolclass=NullPool if read_only else QueuePool)
        _pool_per_process(engine)  # SQLite's own rule too: a connection is not used across fork()

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        if not read_only and path is not None:
            cursor.execute("PRAGMA journal_mode = WAL")  # persistent in the file; cheap once set
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        write = connection.get_execution_options().get("write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write and not read_only else "BEGIN")

    return engine
