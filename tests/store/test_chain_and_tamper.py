"""The event chain verifies clean, and every kind of tampering is caught and named, on both backends."""

from __future__ import annotations

import itertools
import json

import pytest
from sqlalchemy import text

from scopelens.core.contracts import Event
from scopelens.core.hashing import canonical_json, sha256_hex
from scopelens.core.store.store import Store
from scopelens.core.store.verify import verify_session, verify_store
from scopelens.core.vocab import EventType
from tests.support.factories import FACTORY_POLICY, make_snapshot
from tests.support.tamper import tampering


@pytest.fixture
def populated(store_url: str) -> tuple[str, list[str]]:
    """A store with two sessions of 6 events each (interleaved appends)."""
    with Store.open(store_url, create=True) as store:
        a = store.create_session(project="alpha", session_id="s-a")
        b = store.create_session(project="beta", session_id="s-b")
        for n in range(5):
            store.append_event(a.id, EventType.USER_MESSAGE, {"text": f"a{n}"})
            store.append_event(b.id, EventType.USER_MESSAGE, {"text": f"b{n}"})
    return store_url, [a.id, b.id]


def report_for(url: str):
    with Store.open(url, read_only=True) as store:
        return verify_store(store)


def test_clean_store_verifies_and_head_is_stable(populated):
    url, _ = populated
    first = report_for(url)
    assert first.clean, first.problems
    assert first.events == 12 and first.sessions == 2
    assert first.store_head == first.stored_store_head
    assert report_for(url).store_head == first.store_head


def test_each_event_links_to_the_one_before(populated):
    url, sessions = populated
    with Store.open(url, read_only=True) as store:
        events = store.events(sessions[0])
    assert [e.seq for e in events] == list(range(6))
    assert events[0].type == EventType.SESSION_STARTED
    for before, after in itertools.pairwise(events):
        assert after.prev_hash == sha256_hex(canonical_json(before))


def test_changed_byte_is_named(populated):
    url, _ = populated
    with tampering(url) as conn:
        body = conn.execute(text("SELECT body FROM events WHERE session_id='s-a' AND seq=3")).scalar()
        forged = bytes(body).replace(b'"a2"', b'"a9"')
        assert forged != bytes(body)
        conn.execute(text("UPDATE events SET body=:b WHERE session_id='s-a' AND seq=3"), {"b": forged})
    report = report_for(url)
    assert ("changed", "event s-a#3") in {(p.kind, p.record) for p in report.problems}


@pytest.mark.parametrize(
    ("column", "value"),
    [("project", "gamma"), ("title", "a friendlier title"), ("branch", "main"), ("created_at", "2020-01-01T00:00:00Z")],
)
def test_a_rewritten_session_header_row_is_named(populated, column, value):
    """The sessions row is what lists show; its start event (hashed, chained) is the truth."""
    url, _ = populated
    with tampering(url) as conn:
        conn.execute(text(f"UPDATE sessions SET {column} = :value WHERE id = 's-a'"), {"value": value})
    with Store.open(url, read_only=True) as store:
        per_session = verify_session(store, "s-a")
    report = report_for(url)
    expected = f"its header row disagrees with its session.started event: {column}"
    assert [(p.kind, p.record, p.detail) for p in report.problems] == [("changed", "session s-a", expected)]
    assert [(p.kind, p.detail) for p in per_session] == [("changed", expected)]


def test_a_later_session_started_event_does_not_make_the_header_disagree(populated):
    """Only the chain's first event describes the session; the API accepts another one later."""
    url, _ = populated
    with Store.open(url) as store:
        store.append_event("s-a", EventType.SESSION_STARTED, {"project": "elsewhere", "title": "restarted"})
    assert report_for(url).clean


def test_deleted_middle_event_is_named(populated):
    url, _ = populated
    with tampering(url) as conn:
        conn.execute(text("DELETE FROM events WHERE session_id='s-a' AND seq=2"))
    report = report_for(url)
    assert ("deleted", "event s-a#2") in {(p.kind, p.record) for p in report.problems}


def test_deleted_last_event_is_named(populated):
    url, _ = populated
    with tampering(url) as conn:
        conn.execute(text("DELETE FROM events WHERE session_id='s-b' AND seq=5"))
    report = report_for(url)
    kinds = {(p.kind, p.record) for p in report.problems}
    assert ("deleted", "event s-b#5") in kinds
    assert any(p.kind == "head-mismatch" and p.record == "store head" for p in report.problems)


def test_deleted_whole_session_is_caught_by_the_store_head(populated):
    url, _ = populated
    with tampering(url) as conn:
        for table, column in (("events", "session_id"), ("session_heads", "session_id"), ("sessions", "id")):
            conn.execute(text(f"DELETE FROM {table} WHERE {column}='s-b'"))
    report = report_for(url)
    assert not report.clean
    assert any(p.kind == "head-mismatch" and p.record == "store head" for p in report.problems)
    assert any(p.kind == "deleted" and p.record.startswith("store_seq") for p in report.problems)


def test_inserted_event_in_the_middle_is_named(populated):
    url, _ = populated
    with tampering(url) as conn:
        rows = conn.execute(
            text("SELECT seq, hash, body FROM events WHERE session_id='s-a' ORDER BY seq")
        ).all()
        top = conn.execute(text("SELECT max(store_seq) FROM events")).scalar()
        for seq, _hash, _body in reversed(rows[3:]):
            conn.execute(text("UPDATE events SET seq=:n WHERE session_id='s-a' AND seq=:o"), {"n": seq + 1, "o": seq})
        before = Event.model_validate_json(bytes(rows[2][2]))
        forged = before.model_copy(
            update={"seq": 3, "store_seq": top + 1, "payload": {"text": "forged"}, "prev_hash": rows[2][1]}
        )
        body = canonical_json(forged)
        conn.execute(
            text(
                "INSERT INTO events (session_id, seq, store_seq, turn, type, created_at, body, hash) "
                "VALUES ('s-a', 3, :ss, :turn, 'user.message', '2026-01-01T00:00:00Z', :body, :hash)"
            ),
            {"ss": top + 1, "turn": forged.turn, "body": body, "hash": sha256_hex(body)},
        )
    report = report_for(url)
    assert ("inserted", "event s-a#3") in {(p.kind, p.record) for p in report.problems}


def test_appended_event_beyond_the_head_is_named(populated):
    url, _ = populated
    with tampering(url) as conn:
        last = conn.execute(text("SELECT hash, body FROM events WHERE session_id='s-a' AND seq=5")).one()
        top = conn.execute(text("SELECT max(store_seq) FROM events")).scalar()
        event = Event.model_validate_json(bytes(last[1])).model_copy(
            update={"seq": 6, "store_seq": top + 1, "prev_hash": last[0]}
        )
        body = canonical_json(event)
        conn.execute(
            text(
                "INSERT INTO events (session_id, seq, store_seq, turn, type, created_at, body, hash) "
                "VALUES ('s-a', 6, :ss, :turn, 'user.message', '2026-01-01T00:00:00Z', :body, :hash)"
            ),
            {"ss": top + 1, "turn": event.turn, "body": body, "hash": sha256_hex(body)},
        )
    report = report_for(url)
    assert ("inserted", "event s-a#6") in {(p.kind, p.record) for p in report.problems}


def test_triggers_refuse_update_and_delete(populated):
    url, _ = populated
    from sqlalchemy import create_engine

    from scopelens.core.store.engine import normalise_url

    with Store.open(url) as store:
        snapshot, block = make_snapshot("snap-t", "s-a")
        store.write_snapshot(snapshot, block, blobs=[FACTORY_POLICY])
    engine = create_engine(normalise_url(url))
    try:
        for statement in (
            "UPDATE events SET turn = 99",
            "DELETE FROM events",
            "DELETE FROM sessions",
            "UPDATE snapshots SET turn = 1",
            "DELETE FROM blobs",
            "UPDATE snapshot_rows SET reason = 'x'",
        ):
            with pytest.raises(Exception, match="append-only"), engine.begin() as conn:
                conn.execute(text(statement))
    finally:
        engine.dispose()
    assert report_for(url).clean


def test_snapshot_write_is_atomic_and_verified(store_url):
    with Store.open(store_url, create=True) as store:
        session = store.create_session(project="p", session_id="s-1")
        snapshot, block = make_snapshot("snap-1", session.id)
        content_hash = store.write_snapshot(snapshot, block, blobs=[FACTORY_POLICY])
        stored = store.get_snapshot("snap-1")
        assert stored.content_hash == content_hash == sha256_hex(stored.body)
        assert stored.snapshot == snapshot
        assert store.get_blob(snapshot.projection.block_ref).decode() == block
        events = store.events(session.id)
        assert events[-1].type == EventType.RETRIEVAL_SNAPSHOT_CREATED
        assert events[-1].payload["snapshot_hash"] == content_hash
        # A second write of the same id fails and leaves nothing half-written.
        with pytest.raises(Exception, match="already exists"):
            store.write_snapshot(snapshot, block, blobs=[FACTORY_POLICY])
        assert len(store.events(session.id)) == len(events)
    assert report_for(store_url).clean


def test_snapshot_tampering_is_named(store_url):
    with Store.open(store_url, create=True) as store:
        session = store.create_session(project="p", session_id="s-1")
        snapshot, block = make_snapshot("snap-1", session.id)
        store.write_snapshot(snapshot, block, blobs=[FACTORY_POLICY])
    with tampering(store_url) as conn:
        body = bytes(conn.execute(text("SELECT body FROM snapshots WHERE id='snap-1'")).scalar())
        document = json.loads(body)
        document["selected"][0]["visible_text"] = "def f():\n    return 2"
        conn.execute(text("UPDATE snapshots SET body=:b WHERE id='snap-1'"), {"b": canonical_json(document)})
        conn.execute(text("UPDATE snapshot_rows SET reason='forged' WHERE snapshot_id='snap-1' AND ordinal=0"))
    problems = {(p.kind, p.record) for p in report_for(store_url).problems}
    assert ("changed", "snapshot snap-1") in problems
    assert ("changed", "snapshot snap-1 item code#1") in problems
    assert ("changed", "snapshot snap-1 candidate rows") in problems


def test_blob_tampering_is_named(store_url):
    with Store.open(store_url, create=True) as store:
        digest = store.put_blob(b"artifact bytes")
        assert store.put_blob(b"artifact bytes") == digest
    with tampering(store_url) as conn:
        conn.execute(text("UPDATE blobs SET data=:d WHERE sha256=:h"), {"d": b"artifact byteZ", "h": digest})
    problems = {(p.kind, p.record) for p in report_for(store_url).problems}
    assert ("changed", f"blob {digest[:16]}…") in problems


def test_forged_candidate_rows_are_caught_where_they_are_shown(store_url):
    """The per-session verify stays cheap (chain and block); the read model checks the candidate
    rows of the snapshot it shows, and verify_store checks them all."""
    from scopelens.core.readmodel import ReadModel
    from scopelens.core.store.verify import verify_session

    with Store.open(store_url, create=True) as store:
        session = store.create_session(project="p", session_id="s-1")
        snapshot, block = make_snapshot("snap-1", session.id)
        store.write_snapshot(snapshot, block, blobs=[FACTORY_POLICY])
    model = ReadModel(store_url)
    try:
        assert model.snapshot("snap-1").rows_ok
    finally:
        model.close()
    with tampering(store_url) as conn:
        conn.execute(text("UPDATE snapshot_rows SET reason='forged' WHERE snapshot_id='snap-1' AND ordinal=0"))
    model = ReadModel(store_url)
    try:
        assert not model.snapshot("snap-1").rows_ok
    finally:
        model.close()
    assert ("changed", "snapshot snap-1 candidate rows") in {(p.kind, p.record) for p in report_for(store_url).problems}
    with tampering(store_url) as conn:
        conn.execute(text("UPDATE blobs SET data=:d"), {"d": b"forged block"})
    with Store.open(store_url, read_only=True) as store:
        problems = {(p.kind, p.record) for p in verify_session(store, "s-1")}
    assert ("changed", "snapshot snap-1 block") in problems
