"""The lock that makes index runs of one store run one at a time, across transactions.

An index run streams (``core/index/indexer.py``): it writes its segments in short
transactions, so that retrievals and other writers are never kept waiting behind a whole run,
and makes them live in a short final one. Its diff against the live documents, its chunk and
document ids and the cleanup of runs a killed process left unfinished all rely on no other
run writing meanwhile, so a run holds this lock from before its diff to after its final
commit. Nothing but index runs takes it: readers and event appends never wait for it.

* **SQLite file**: an exclusive ``flock`` on ``<store>.index-lock`` beside the database. The
  kernel releases it when the holder exits, however it exits, so a killed run never leaves
  the store locked.
* **PostgreSQL**: a session-level advisory lock on a connection held for the run (released
  when that connection closes, also if the process dies).
* **Anything else** (an in-memory SQLite store): a lock of this process.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, text

from scopelens.core.store.engine import sqlite_path_of

INDEX_RUN_LOCK = 7133702
"""PostgreSQL advisory lock key held by an index run (the key its write transaction took
before runs streamed)."""

_process_lock = threading.Lock()


@contextmanager
def index_run_lock(engine: Engine, url: str) -> Iterator[None]:
    """Hold the store's index-run lock for the block (waits for a run holding it)."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execute(text(f"SELECT pg_advisory_lock({INDEX_RUN_LOCK})"))
            conn.commit()  # the lock is the session's: no transaction stays open for the run
            try:
                yield
            finally:
                conn.execute(text(f"SELECT pg_advisory_unlock({INDEX_RUN_LOCK})"))
                conn.commit()
        return
    path = sqlite_path_of(url)
    if path is None:
        with _process_lock:
            yield
        return
    with _locked_file(path.with_name(path.name + ".index-lock")):
        yield


@contextmanager
def _locked_file(path: Path) -> Iterator[None]:
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        os.close(descriptor)
