"""Tampering with a store the way an attacker with database access would: triggers bypassed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, create_engine, text

from scopelens.core.store.engine import normalise_url
from scopelens.core.store.migrations import APPEND_ONLY_TABLES


@contextmanager
def tampering(url: str) -> Iterator[Connection]:
    """A raw connection on which append-only triggers do not fire; commits at the end."""
    engine = create_engine(normalise_url(url))
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SET LOCAL session_replication_role = replica"))
            else:
                for table in APPEND_ONLY_TABLES:
                    for action in ("update", "delete"):
                        conn.execute(text(f"DROP TRIGGER IF EXISTS {table}_no_{action}"))
            yield conn
    finally:
        engine.dispose()
