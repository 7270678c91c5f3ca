"""Opening SQL engines for a store URL: SQLite by default, any SQLAlchemy URL otherwise.

Two things are decided here so no caller has to know them:

* **Write transactions hold the write lock from their start.** Python's sqlite3 begins a
  transaction lazily at the first write, which is too late for reading a chain head and
  appending the next link, so SQLite connections run in driver autocommit mode and we emit
  ``BEGIN IMMEDIATE`` ourselves for connections marked ``write=True`` (plain ``BEGIN`` for
  reads). PostgreSQL takes a row lock on the store head (``FOR UPDATE``) instead.
* **Read-only opens write nothing.** A read-only SQLite store is opened with ``mode=ro`` so
  not even a journal file is created beside it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import NullPool

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
        return f"sqlite:///{Path(url_or_path).expanduser().resolve()}"
    if url_or_path.startswith("postgresql://") or url_or_path.startswith("postgres://"):
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
    if read_only:
        @event.listens_for(engine, "connect")
        def _read_only_session(dbapi_connection: Any, _record: Any) -> None:
            with dbapi_connection.cursor() as cursor:
                cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            dbapi_connection.commit()
    return engine


def _sqlite_engine(url: str, *, read_only: bool) -> Engine:
    path = sqlite_path_of(url)
    if path is not None:
        mode = "ro" if read_only else "rwc"
        url = f"sqlite+pysqlite:///file:{path}?mode={mode}&uri=true"
    engine = create_engine(url, poolclass=NullPool)

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        write = connection.get_execution_options().get("write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write and not read_only else "BEGIN")

    return engine
