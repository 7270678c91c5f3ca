"""`verify` covers every stored field a screen or drift relies on, not only the hashed bodies.

Each record here is something the sessions list, the timeline or drift reads: a session
head's counters, a snapshot row's columns, an event's time column, the policy and artifact
blobs, and recorded drift runs and their confirmations. Tampered through SQL (triggers bypassed), each is named.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from scopelens.core.audit.drift import recorded_policy
from scopelens.core.contracts import ArtifactRef, ToolFinishedPayload
from scopelens.core.errors import IntegrityError
from scopelens.core.hashing import sha256_hex
from scopelens.core.store.drift_checks import drift_check_hash, drift_result_hash
from scopelens.core.store.store import Store
from scopelens.core.store.verify import verify_session, verify_store
from scopelens.core.vocab import EventType
from tests.support.factories import (
    DRIFT_CHECK_INSERT,
    DRIFT_RUN_INSERT,
    FACTORY_POLICY,
    T0,
    made_drift_check,
    made_drift_run,
    make_snapshot,
)
from tests.support.tamper import tampering

ARTIFACT = b"FAILED tests/test_money.py::test_cents - assert 99 == 100\n"


@pytest.fixture
def recorded(store_url: str) -> str:
    """One session: a user message, a tool run with an artifact, a snapshot, a drift run and a
    confirmation of it."""
    with Store.open(store_url, create=True) as store:
        session = store.create_session(project="p", session_id="s-v", created_at=T0)
        store.append_event(session.id, EventType.USER_MESSAGE, {"text": "fix cents"})
        blob = store.put_blob(ARTIFACT)
        store.append_event(
            session.id,
            EventType.TOOL_FINISHED,
            ToolFinishedPayload(
                call_id="c1", tool="pytest", exit_code=1,
                artifacts=(ArtifactRef(blob=blob, name="pytest.log", size=len(ARTIFACT)),),
            ),
        )
        snapshot, block = make_snapshot("snap-v", session.id, turn=1)
        store.write_snapshot(snapshot, block, blobs=[FACTORY_POLICY])
    with tampering(store_url) as conn:  # drift runs are written by compute_drift; this one is made by hand
        run = made_drift_run("drift-v", "snap-v", "s-v")
        conn.execute(text(DRIFT_RUN_INSERT), run)
        conn.execute(text(DRIFT_CHECK_INSERT), made_drift_check("check-v", run))
    return store_url


def problems(url: str) -> set[tuple[str, str]]:
    with Store.open(url, read_only=True) as store:
        return {(p.kind, p.record) for p in verify_store(store).problems}


def session_problems(url: str) -> set[tuple[str, str]]:
    with Store.open(url, read_only=True) as store:
        return {(p.kind, p.record) for p in verify_session(store, "s-v")}


def details(url: str) -> str:
    with Store.open(url, read_only=True) as store:
        return " | ".join(p.detail for p in verify_store(store).problems)


def test_the_recorded_store_verifies_clean(recorded):
    assert problems(recorded) == set()
    assert session_problems(recorded) == set()


@pytest.mark.parametrize(
    ("column", "value"),
    [("last_turn", 9), ("snapshot_count", 5), ("updated_at", "2031-01-01T00:00:00.000000Z")],
)
def test_session_head_counters_are_checked(recorded, column, value):
    with tampering(recorded) as conn:
        conn.execute(text(f"UPDATE session_heads SET {column} = :v WHERE session_id = 's-v'"), {"v": value})
    assert ("changed", "session s-v") in problems(recorded)
    assert ("changed", "session s-v") in session_problems(recorded)
    assert column in details(recorded)


@pytest.mark.parametrize(
    ("column", "value"),
    [("turn", 7), ("session_id", "s-other"), ("created_at", "2031-01-01T00:00:00.000000Z")],
)
def test_snapshot_row_columns_are_checked(recorded, column, value):
    with tampering(recorded) as conn:
        conn.execute(text(f"UPDATE snapshots SET {column} = :v WHERE id = 'snap-v'"), {"v": value})
    assert ("changed", "snapshot snap-v") in problems(recorded)
    assert ("changed", "snapshot snap-v") in session_problems(recorded)
    assert column in details(recorded)


@pytest.mark.parametrize(
    ("table", "column", "where"),
    [("events", "created_at", "seq = 1"), ("sessions", "created_at", "id = 's-v'"),
     ("session_heads", "updated_at", "session_id = 's-v'"), ("snapshots", "created_at", "id = 'snap-v'")],
)
def test_a_time_column_in_another_form_of_the_same_moment_is_named(recorded, table, column, where):
    """``2026-02-02C09:00:00.000000Z`` parses as the same moment; it is still a changed byte."""
    with tampering(recorded) as conn:
        conn.execute(text(f"UPDATE {table} SET {column} = replace({column}, 'T', 'C') WHERE {where}"))
    assert problems(recorded), (table, column)


def test_an_event_time_column_is_checked(recorded):
    with tampering(recorded) as conn:
        conn.execute(text("UPDATE events SET created_at = '2031-01-01T00:00:00.000000Z' WHERE session_id = 's-v' AND seq = 1"))
    assert ("changed", "event s-v#1") in problems(recorded)
    assert "created_at" in details(recorded)


def test_a_missing_policy_blob_is_named_and_drift_refuses_to_guess(recorded):
    policy = sha256_hex(FACTORY_POLICY)
    with tampering(recorded) as conn:
        conn.execute(text("DELETE FROM blobs WHERE sha256 = :s"), {"s": policy})
    assert ("deleted", f"blob {policy[:16]}…") in problems(recorded)
    assert "its policy" in details(recorded)
    with Store.open(recorded, read_only=True) as store:
        snapshot = store.get_snapshot("snap-v").snapshot
        with pytest.raises(IntegrityError, match="policy it ran under"):
            recorded_policy(store, snapshot)


def test_a_missing_artifact_blob_is_named(recorded):
    artifact = sha256_hex(ARTIFACT)
    with tampering(recorded) as conn:
        conn.execute(text("DELETE FROM blobs WHERE sha256 = :s"), {"s": artifact})
    assert ("deleted", f"blob {artifact[:16]}…") in problems(recorded)
    assert ("deleted", f"blob {artifact[:16]}…") in session_problems(recorded)
    assert "pytest.log" in details(recorded)


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("UPDATE drift_runs SET summary = 'nothing changed'", "summary"),
        ("UPDATE drift_runs SET index_version = 'i'", "index_version"),
        ("UPDATE drift_runs SET hash = :zero", "do not match"),
        ("UPDATE drift_runs SET snapshot_id = 'snap-gone'", "snapshot_id"),
        # a run recorded before reports held their configuration: the snapshot's pinned one
        ("UPDATE drift_runs SET config_hash = 'x' || substr(config_hash, 2)", "config_hash"),
        # one changed byte that a lenient time parser reads as the same moment
        ("UPDATE drift_runs SET created_at = replace(created_at, 'T', 'C')", "created_at"),
    ],
)
def test_drift_runs_are_checked(recorded, statement, expected):
    with tampering(recorded) as conn:
        conn.execute(text(statement), {"zero": "0" * 64})
    assert ("changed", "drift run drift-v") in problems(recorded)
    assert expected in details(recorded)


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        # a changed byte in any column: the hash covers them all
        ("UPDATE drift_checks SET checked_at = '2026-01-02T05:04:05.000001Z'", "does not match its columns"),
        ("UPDATE drift_checks SET hash = :zero", "does not match its columns"),
        ("UPDATE drift_checks SET hash = upper(hash)", "does not match its columns"),
        # moved to another snapshot, or to before its run, with the hash re-derived to match
        ("UPDATE drift_checks SET snapshot_id = 'snap-gone', hash = :rehashed_snapshot", "snapshot_id is not that of"),
        ("UPDATE drift_checks SET checked_at = :before, hash = :rehashed_before", "checked_at is before"),
    ],
)
def test_drift_checks_are_checked(recorded, statement, expected):
    run = made_drift_run("drift-v", "snap-v", "s-v")
    checked_at = str(made_drift_check("check-v", run)["checked_at"])
    before = "2026-01-02T03:04:04.000000Z"  # a second before the run (T0)

    def rehashed(snapshot_id: str, at: str) -> str:
        return drift_check_hash(check_id="check-v", run_id="drift-v", snapshot_id=snapshot_id, checked_at=at,
                                result_hash=drift_result_hash(bytes(run["body"]), "c"))

    values = {
        "zero": "0" * 64,
        "before": before,
        "rehashed_snapshot": rehashed("snap-gone", checked_at),
        "rehashed_before": rehashed("snap-v", before),
    }
    with tampering(recorded) as conn:
        conn.execute(text(statement), {k: v for k, v in values.items() if f":{k}" in statement})
    assert problems(recorded) == {("changed", "drift check check-v")}
    assert expected in details(recorded)


def test_a_drift_check_whose_run_is_gone_is_named(recorded):
    with tampering(recorded) as conn:
        conn.execute(text("UPDATE drift_checks SET run_id = 'drift-gone'"))
    assert problems(recorded) == {("deleted", "drift run drift-gone")}
    with tampering(recorded) as conn:
        conn.execute(text("UPDATE drift_checks SET run_id = 'drift-v'"))
        conn.execute(text("DELETE FROM drift_runs"))
    assert problems(recorded) == {("deleted", "drift run drift-v")}
    assert "drift check check-v confirms it but it is missing" in details(recorded)


def test_a_drift_check_follows_its_runs_result(recorded):
    """A run rewritten consistently (bytes and hash) no longer matches the confirmation of it."""
    run = made_drift_run("drift-v", "snap-v", "s-v")
    forged = dict(run)
    forged["body"] = bytes(run["body"]).replace(b'"index_changed":true', b'"index_changed":false')
    assert forged["body"] != run["body"]
    forged["hash"] = sha256_hex(forged["body"])
    with tampering(recorded) as conn:
        conn.execute(text("UPDATE drift_runs SET body = :body, hash = :hash"), {"body": forged["body"], "hash": forged["hash"]})
    found = problems(recorded)
    assert ("changed", "drift check check-v") in found


def test_a_store_without_a_snapshot_policy_cannot_be_written(store_url):
    with Store.open(store_url, create=True) as store:
        session = store.create_session(project="p", session_id="s-n")
        snapshot, block = make_snapshot("snap-n", session.id)
        with pytest.raises(Exception, match="policy"):
            store.write_snapshot(snapshot, block)
        assert store.events(session.id)[-1].type == EventType.SESSION_STARTED
