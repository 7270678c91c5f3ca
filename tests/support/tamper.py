"""Tampering with a store the way an attacker with database access would: triggers bypassed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, create_engine, text

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
