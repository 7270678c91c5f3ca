"""The one-statement append on PostgreSQL stores exactly the bytes and hashes of the Python path."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.exc import DBAPIError

from scopelens.core.contracts import Event
from scopelens.core.errors import ImmutableRecordError, StoreUnavailableError, UnknownIdError
from scopelens.core.hashing import ZERO_HASH, canonical_json, store_chain_next
from scopelens.core.store.pg_append import CHAIN_FIELDS, body_pieces
from scopelens.core.store.store import Store, event_row
from scopelens.core.store.verify import verify_store
from scopelens.core.vocab import EventType

WHEN = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
TEXTS = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXTS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXTS, inner, max_size=4),
    max_leaves=12,
)


def _joined(pieces: list[bytes], values: dict[str, object]) -> bytes:
    out = pieces[0]
    for name, piece in zip(CHAIN_FIELDS, pieces[1:], strict=True):
        out += str(values[name]).encode("ascii") + piece
    return out


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    arguments=st.dictionaries(TEXTS, VALUES, max_size=5),
    session_id=st.from_regex(r"s-[a-z0-9]{1,12}", fullmatch=True),
    seq=st.integers(0, 10**12),
    store_seq=st.integers(1, 10**12),
    turn=st.integers(0, 10**6),
)
def test_pieces_joined_with_the_chain_values_are_the_events_canonical_json(arguments, session_id, seq, store_seq, turn):
    # Payload text that looks like the markers or the fields themselves must not confuse the cut.
    payload = {"call_id": '"seq":1 @x:prev_hash@', "tool": "grep", "arguments": arguments}
    pieces = body_pieces(session_id, EventType.TOOL_STARTED, payload, WHEN)
    prev_hash = "ab" * 32
    values = {"prev_hash": prev_hash, "seq": seq, "store_seq": store_seq, "turn": turn}
    event = Event(session_id=session_id, seq=seq, store_seq=store_seq, turn=turn, type=EventType.TOOL_STARTED,
                  created_at=WHEN, payload=payload, prev_hash=prev_hash)
    assert _joined(pieces, values) == canonical_json(event)


def test_one_statement_appends_store_the_python_paths_bytes_and_hashes(postgres_url):
    with Store.open(postgres_url, create=True) as store:
        session = store.create_session(project="p", session_id="s-one", created_at=WHEN)
        appended = [
            store.append_event(session.id, EventType.USER_MESSAGE, {"text": "héllo \"quoted\" \\ ✓"}, created_at=WHEN),
            store.append_event(session.id, EventType.TOOL_STARTED,
                               {"call_id": "c1", "tool": "rg", "arguments": {"n": [1, 2.5, None]}}, created_at=WHEN),
            store.append_event(session.id, EventType.USER_MESSAGE, {"text": "second"}, created_at=WHEN),
            store.append_event(session.id, EventType.MODEL_RESPONSE, {"text": "at turn 7"}, turn=7, created_at=WHEN),
        ]
        stored = store.events(session.id)
        with store.read() as conn:
            rows = {r.seq: r for r in conn.connection().exec_driver_sql("SELECT seq, body, hash FROM events")}
            head = conn.connection().exec_driver_sql("SELECT store_seq, head_hash FROM store_head").one()
            session_head = conn.connection().exec_driver_sql("SELECT head_seq, head_hash, last_turn FROM session_heads").one()
        report = verify_store(store)
    # user.message opens the next turn, other types stay in the current one, a named turn is kept.
    assert [e.turn for e in appended] == [1, 1, 2, 7]
    assert stored[1:] == appended
    store_hash = ZERO_HASH
    for event in stored:
        expected = event_row(event)
        assert (bytes(rows[event.seq].body), rows[event.seq].hash) == (expected["body"], expected["hash"])
        store_hash = store_chain_next(store_hash, expected["hash"])
    assert tuple(head) == (len(stored), store_hash)
    assert tuple(session_head) == (4, event_row(stored[-1])["hash"], 7)
    assert all(later.prev_hash == event_row(earlier)["hash"] for earlier, later in pairwise(stored))
    assert report.clean, report.problems


def test_one_statement_append_to_an_unknown_session_writes_nothing(postgres_url):
    with Store.open(postgres_url, create=True) as store:
        store.create_session(project="p", session_id="s-known")
        before = store.store_head()
        with pytest.raises(UnknownIdError, match="no session 's-missing'"):
            store.append_event("s-missing", EventType.USER_MESSAGE, {"text": "lost?"})
        assert store.store_head() == before
    with Store.open(postgres_url, read_only=True) as store, pytest.raises(ImmutableRecordError):
        store.append_event("s-known", EventType.USER_MESSAGE, {"text": "no"})


def _terminate_append_backend(store: Store) -> None:
    """End the server process behind the store's kept append connection (as a restart would),
    and wait until it is gone."""
    with store.engine.connect() as conn:
        conn.exec_driver_sql(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )


def test_a_kept_connection_the_server_closed_is_replaced_before_the_next_append(postgres_url):
    with Store.open(postgres_url, create=True) as store:
        session = store.create_session(project="p", session_id="s-closed")
        store.append_event(session.id, EventType.USER_MESSAGE, {"text": "before"})
        _terminate_append_backend(store)
        event = store.append_event(session.id, EventType.USER_MESSAGE, {"text": "after"})
        assert (event.seq, event.turn) == (2, 2)
        assert [e.payload["text"] for e in store.events(session.id)[1:]] == ["before", "after"]
        assert verify_store(store).clean


def test_an_append_cancelled_in_the_server_fails_alone_and_the_next_one_goes_through(postgres_url):
    with Store.open(postgres_url, create=True) as store:
        session = store.create_session(project="p", session_id="s-cancelled")
        failures: list[BaseException] = []

        def append_blocked() -> None:
            try:
                store.append_event(session.id, EventType.USER_MESSAGE, {"text": "cancelled"})
            except DBAPIError as exc:
                failures.append(exc)

        with store.engine.connect() as holder, holder.begin():
            holder.exec_driver_sql("SELECT * FROM store_head FOR UPDATE")  # the head lock, held
            blocked = threading.Thread(target=append_blocked)
            blocked.start()
            with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as admin:
                for _ in range(500):
                    cancelled = admin.exec_driver_sql(
                        "SELECT pg_cancel_backend(pid) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND wait_event_type = 'Lock'").all()
                    if cancelled:
                        break
                    time.sleep(0.01)
            blocked.join(timeout=30)
        assert len(failures) == 1 and "cancel" in str(failures[0])
        event = store.append_event(session.id, EventType.USER_MESSAGE, {"text": "after"})
        assert (event.seq, event.turn) == (1, 1)
        assert [e.payload["text"] for e in store.events(session.id)[1:]] == ["after"]
        assert verify_store(store).clean


def test_a_store_whose_kept_connection_the_server_closed_still_closes_cleanly(postgres_url):
    store = Store.open(postgres_url, create=True)
    store.create_session(project="p", session_id="s-close")
    store.append_event("s-close", EventType.USER_MESSAGE, {"text": "kept"})
    _terminate_append_backend(store)
    store.close()  # no error: the dead connection is dropped, not handed back
    with Store.open(postgres_url, read_only=True) as reopened:
        assert [e.payload.get("text") for e in reopened.events("s-close")[1:]] == ["kept"]


def test_a_postgresql_server_older_than_11_is_refused_in_one_line(postgres_url, monkeypatch):
    """The append statement hashes with ``sha256()``, which PostgreSQL 11 added: an older server
    is named, with the version needed, when the store opens (not a SQL error at the first
    append); this server (15 in CI) opens."""
    from sqlalchemy.dialects.postgresql.base import PGDialect

    with Store.open(postgres_url, create=True) as store:
        assert store.engine.dialect.server_version_info[0] >= 11
    real = PGDialect._get_server_version_info
    monkeypatch.setattr(PGDialect, "_get_server_version_info", lambda self, conn: (10, 23))
    with pytest.raises(StoreUnavailableError) as refused:
        Store.open(postgres_url)
    message = str(refused.value)
    assert "PostgreSQL 10.23" in message and "PostgreSQL 11 or newer" in message and "\n" not in message
    monkeypatch.setattr(PGDialect, "_get_server_version_info", real)
    with Store.open(postgres_url) as store:  # nothing was written or changed by the refusal
        assert store.engine.dialect.server_version_info[0] >= 11


def test_other_backends_and_unknown_versions_are_not_refused() -> None:
    from scopelens.core.store.store import require_supported_server

    require_supported_server("sqlite", (3, 0, 0), "sqlite:///x.db")
    require_supported_server("postgresql", None, "postgresql://h/d")
    require_supported_server("postgresql", (11, 0), "postgresql://h/d")
    with pytest.raises(StoreUnavailableError):
        require_supported_server("postgresql", (9, 6, 24), "postgresql://h/d")
