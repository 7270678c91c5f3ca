"""Memory governance: an import cannot verify, and a status change is one transaction.

* ``import_memories`` / ``scopelens memory import`` refuse a record whose status only a
  governance command can give (``verified``: promote; ``deprecated``: deprecate;
  ``conflicted``: link-conflict): a one-line error, and nothing of the file is written;
* ``link_conflict`` writes both records in one transaction: a failure between the two writes
  leaves both as they were.

Both store backends.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from sqlmodel import col, select

from scopelens.core import memory
from scopelens.core.cli import main
from scopelens.core.contracts import MemoryRecord
from scopelens.core.errors import InvalidInputError
from scopelens.core.memory import import_memories, link_conflict, list_memories, promote
from scopelens.core.store.store import Store
from scopelens.core.store.tables import MemoryRow
from scopelens.core.vocab import MemoryStatus

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
GOVERNED = [MemoryStatus.VERIFIED, MemoryStatus.DEPRECATED, MemoryStatus.CONFLICTED]


def record(memory_id: str, status: MemoryStatus = MemoryStatus.CANDIDATE, **fields: object) -> MemoryRecord:
    return MemoryRecord(id=memory_id, project="p", content=f"{memory_id} says so", status=status, valid_from=T0,
                        **fields)  # type: ignore[arg-type]


def stored_rows(store: Store) -> list[tuple[str, str, str, str]]:
    with store.read() as conn:
        rows = conn.execute(
            select(col(MemoryRow.id), col(MemoryRow.status), col(MemoryRow.content_hash), col(MemoryRow.updated_at))
            .order_by(col(MemoryRow.id))
        ).all()
    return [tuple(row) for row in rows]  # type: ignore[misc]


@pytest.fixture
def store(store_url):
    with Store.open(store_url, create=True) as handle:
        yield handle


@pytest.mark.parametrize("status", GOVERNED, ids=lambda s: s.value)
def test_import_refuses_a_status_only_governance_gives(store, status):
    records = [record("m1"), record("m2", status)]
    with pytest.raises(InvalidInputError) as raised:
        import_memories(store, records)
    message = str(raised.value)
    assert "\n" not in message
    assert "m2" in message and f"status {status.value}" in message and "candidate" in message
    assert stored_rows(store) == [], "nothing of the batch was written"


def test_import_takes_candidates_and_private_records_and_promote_verifies(store):
    imported, _ = import_memories(store, [record("m1"), record("m2", MemoryStatus.PRIVATE, private_to="me")])
    assert imported == 2
    assert [(r.id, r.status) for r in list_memories(store)] == [("m1", MemoryStatus.CANDIDATE), ("m2", MemoryStatus.PRIVATE)]
    assert promote(store, "m1").status == MemoryStatus.VERIFIED, "promote is the way to verify"


def test_cli_import_of_a_verified_record_is_one_line_and_writes_nothing(capsys, tmp_path, store_url):
    path = tmp_path / "memories.jsonl"
    lines = [record("m1").model_dump(mode="json"), record("m2", MemoryStatus.VERIFIED).model_dump(mode="json")]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")

    code = main(["memory", "import", str(path), "--db", store_url])

    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    assert "m2" in err and "status verified" in err and "scopelens memory promote" in err
    assert main(["memory", "list", "--json", "--db", store_url]) == 0
    assert json.loads(capsys.readouterr().out)["memories"] == []


def test_link_conflict_writes_both_records_or_neither(store, monkeypatch):
    import_memories(store, [record("a"), record("b")])
    before = stored_rows(store)
    real = memory.canonical_json
    calls: list[object] = []

    def fail_on_the_second_record(document: object) -> bytes:
        calls.append(document)
        if len(calls) == 2:  # the first record's write has been issued: fail before the second
            raise RuntimeError("injected failure between the two writes")
        return real(document)

    monkeypatch.setattr(memory, "canonical_json", fail_on_the_second_record)
    with pytest.raises(RuntimeError, match="injected"):
        link_conflict(store, "a", "b")
    monkeypatch.undo()

    assert len(calls) == 2
    assert stored_rows(store) == before, "neither record changed"
    first, second = link_conflict(store, "a", "b")
    assert (first.conflicts_with, second.conflicts_with) == (("b",), ("a",))
    assert {r.status for r in list_memories(store)} == {MemoryStatus.CONFLICTED}
