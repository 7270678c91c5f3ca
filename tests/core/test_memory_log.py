"""Memories are an append-only, chained version log ([3/9] item 13).

* every import with new text and every governance change (promote, deprecate, link-conflict)
  is a new version recording what changed and when; a change to nothing writes nothing;
* ``as_of`` reads the log: a retrieval as of a past moment sees the status and text a memory
  had then, and not a memory recorded later;
* ``verify`` re-derives the log: a changed, deleted or inserted version, and a current row that
  disagrees with its last version, are named; the triggers refuse UPDATE and DELETE;
* a store written before the log migrates to one ``migrated`` version per memory, and
  ``rebuild`` copies the whole history.

Both store backends where the store is involved.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from scopelens.core.audit.rebuild import rebuild_store
from scopelens.core.cli import main
from scopelens.core.clock import SteppingClock
from scopelens.core.contracts import MemoryRecord, RetrievalIntent, RetrievalScope, TimeBoundary
from scopelens.core.hashing import ZERO_HASH
from scopelens.core.memory import (
    all_current_memories,
    deprecate,
    import_memories,
    link_conflict,
    list_memories,
    memory_history,
    promote,
    seed_memories,
)
from scopelens.core.store.engine import normalise_url
from scopelens.core.store.store import Store
from scopelens.core.store.verify import verify_store
from scopelens.core.vocab import MemoryChange, MemoryStatus, Purpose, Stage
from tests.support.tamper import tampering
from tests.support.workspaces import Lab

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "stores" / "pre-2of9"


def record(memory_id: str, content: str = "refunds are rounded down to cents", **fields: object) -> MemoryRecord:
    return MemoryRecord(id=memory_id, project="shop", content=content, valid_from=T0, **fields)  # type: ignore[arg-type]


@pytest.fixture
def store(store_url):
    with Store.open(store_url, create=True, clock=SteppingClock(T0, timedelta(minutes=1))) as handle:
        yield handle


def problems(url: str) -> set[tuple[str, str]]:
    with Store.open(url, read_only=True) as handle:
        return {(p.kind, p.record) for p in verify_store(handle).problems}


def test_every_change_is_a_new_chained_version(store):
    import_memories(store, [record("m1"), record("m2")])
    promote(store, "m1")
    link_conflict(store, "m1", "m2")
    deprecate(store, "m1")

    history = memory_history(store, "m1")
    assert [(v.version, v.change, v.status) for v in history] == [
        (1, MemoryChange.IMPORTED, "candidate"),
        (2, MemoryChange.PROMOTED, "verified"),
        (3, MemoryChange.LINKED_CONFLICT, "conflicted"),
        (4, MemoryChange.DEPRECATED, "deprecated"),
    ]
    assert history[0].prev_hash == ZERO_HASH
    assert [v.prev_hash for v in history[1:]] == [v.hash for v in history[:-1]]
    assert sorted({v.recorded_at for v in history}) == [v.recorded_at for v in history], "each change has its own time"
    assert [r.status for r in list_memories(store, project="shop")] == [MemoryStatus.DEPRECATED, MemoryStatus.CONFLICTED]
    report = verify_store(store)
    assert report.clean, report.problems
    assert report.memory_versions == 4 + 2


def test_a_change_to_nothing_writes_no_version_and_new_text_writes_one(store):
    import_memories(store, [record("m1")])
    import_memories(store, [record("m1")])
    assert [v.change for v in memory_history(store, "m1")] == [MemoryChange.IMPORTED]
    import_memories(store, [record("m1", "refunds are rounded half-even")])
    history = memory_history(store, "m1")
    assert [v.change for v in history] == [MemoryChange.IMPORTED, MemoryChange.REIMPORTED]
    assert [MemoryRecord.model_validate_json(v.body).content for v in history] == [
        "refunds are rounded down to cents",
        "refunds are rounded half-even",
    ]


def test_as_of_sees_the_status_and_text_a_memory_had_then(tmp_path):
    lab = Lab(tmp_path)
    try:
        lab.remember(record("m-round"))
        candidate_time = lab.clock.now()
        promote(lab.store, "m-round")
        verified_time = lab.clock.now()
        seed_memories(lab.store, [record("m-round", "refunds are rounded half-even", status=MemoryStatus.VERIFIED)])
        lab.remember(record("m-later", "refunds are rounded by the payment provider"))
        ask = RetrievalIntent(purpose=Purpose.ANSWER_QUESTION, question="how are refunds rounded")

        def memory_rows(moment: datetime | None) -> tuple[list[str], dict[str, Stage]]:
            scope = RetrievalScope(project="shop", time_boundary=TimeBoundary(as_of=moment))
            snapshot = lab.retriever().retrieve(ask, scope).snapshot
            shown = [i.visible_text for i in snapshot.selected if i.source_ref.startswith("memory:")]
            rejected = {r.source_ref: r.stage for r in snapshot.rejected if r.source_ref.startswith("memory:")}
            return shown, rejected

        shown, rejected = memory_rows(candidate_time)
        assert shown == [] and rejected.get("memory:m-round") == Stage.MEMORY_STATUS, "a candidate then"
        assert "memory:m-later" not in rejected, "recorded later: unknown then"
        shown, _ = memory_rows(verified_time)
        assert [t for t in shown if "down to cents" in t] and not [t for t in shown if "half-even" in t], shown
        shown, _ = memory_rows(None)
        assert [t for t in shown if "half-even" in t] and not [t for t in shown if "down to cents" in t], shown
    finally:
        lab.close()


def test_verify_names_a_changed_deleted_or_disagreeing_version(store_url):
    with Store.open(store_url, create=True, clock=SteppingClock(T0, timedelta(minutes=1))) as handle:
        import_memories(handle, [record("m1"), record("m2")])
        promote(handle, "m1")
        deprecate(handle, "m1")
        promote(handle, "m2")
    assert problems(store_url) == set()

    with tampering(store_url) as conn:
        body = bytes(conn.execute(text("SELECT body FROM memory_versions WHERE memory_id='m1' AND version=1")).scalar())
        conn.execute(
            text("UPDATE memory_versions SET body=:b WHERE memory_id='m1' AND version=1"),
            {"b": body.replace(b"down", b"up")},
        )
        conn.execute(text("DELETE FROM memory_versions WHERE memory_id='m1' AND version=2"))
        conn.execute(text("DELETE FROM memory_versions WHERE memory_id='m2' AND version=2"))
    found = problems(store_url)
    assert ("changed", "memory m1 v1") in found
    assert ("deleted", "memory m1 v2..v2") in found
    assert ("changed", "memory m2") in found, "the current row is verified, its last version is gone"

    with tampering(store_url) as conn:
        conn.execute(text("UPDATE memories SET status='verified' WHERE id='m1'"))
        conn.execute(text("UPDATE memory_versions SET status='verified' WHERE memory_id='m1' AND version=3"))
    found = problems(store_url)
    assert ("changed", "memory m1") in found and ("changed", "memory m1 v3") in found


def test_triggers_refuse_rewriting_the_log(store_url):
    with Store.open(store_url, create=True) as handle:
        import_memories(handle, [record("m1")])
    engine = create_engine(normalise_url(store_url))
    try:
        for statement in ("UPDATE memory_versions SET status = 'verified'", "DELETE FROM memory_versions"):
            with pytest.raises(Exception, match="append-only"), engine.begin() as conn:
                conn.execute(text(statement))
    finally:
        engine.dispose()
    assert problems(store_url) == set()


def test_rebuild_copies_each_memorys_history(store, tmp_path):
    import_memories(store, [record("m1")])
    promote(store, "m1")
    with Store.open(str(tmp_path / "new.db"), create=True) as new:
        rebuild_store(store, new)
        copied = memory_history(new, "m1")
    original = memory_history(store, "m1")
    assert [(v.change, v.status, v.recorded_at, v.hash) for v in copied] == [
        (v.change, v.status, v.recorded_at, v.hash) for v in original
    ]


def test_an_old_store_gets_one_migrated_version_per_memory(capsys, tmp_path):
    db = tmp_path / "old.db"
    shutil.copy2(FIXTURE / "store.db", db)
    assert main(["migrate", "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["memory", "history", "mem-auth-default-guess", "--db", str(db), "--json"]) == 0
    history = json.loads(capsys.readouterr().out)["versions"]
    assert [(v["version"], v["change"], v["status"], v["recorded_at"]) for v in history] == [
        (1, "migrated", "candidate", "2026-01-05T09:00:01.000000Z")
    ]
    with Store.open(str(db), read_only=True) as handle:
        report = verify_store(handle)
        assert report.clean and report.memory_versions == 4
        # Its history before the log is unknown: the migrated version stands for it.
        before = [r.id for r, _ in all_current_memories(handle, as_of=T0 - timedelta(days=30))]
    assert "mem-auth-default-guess" in before


def test_history_of_an_unknown_memory_is_one_line_and_exit_2(capsys, tmp_path):
    db = tmp_path / "s.db"
    with Store.open(str(db), create=True) as handle:
        import_memories(handle, [record("m1")])
    assert main(["memory", "history", "nope", "--db", str(db)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "nope" in err
