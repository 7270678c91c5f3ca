"""A store written before [2/9] (tests/fixtures/stores/pre-2of9) keeps working with every later
version: it migrates, verifies clean with the same head, replays byte-identically, runs drift."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from scopelens.core.audit.rebuild import rebuild_store
from scopelens.core.cli import main
from scopelens.core.store.store import Store

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "stores" / "pre-2of9"
SESSIONS = ("s-auth-role-mock-0001", "s-billing-cents-time-0001")


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    copy = tmp_path / "old.db"
    shutil.copy2(FIXTURE / "store.db", copy)
    return copy


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_the_old_store_migrates_verifies_replays_and_drifts(capsys, old_store):
    db = str(old_store)
    recorded = json.loads((FIXTURE / "verify.json").read_text(encoding="utf-8"))

    run(capsys, "migrate", "--db", db)
    verified = json.loads(run(capsys, "verify", "--db", db, "--json"))
    assert verified["clean"] is True, verified["problems"]
    assert verified["store_head"] == recorded["store_head"]
    assert (verified["sessions"], verified["events"], verified["snapshots"]) == (2, 27, 5)

    for session in SESSIONS:
        replayed = run(capsys, "replay", session, "--db", db, "--json")
        assert replayed == (FIXTURE / f"replay-{session}.json").read_text(encoding="utf-8")

    drift = json.loads(run(capsys, "drift", "--session", SESSIONS[1], "--db", db, "--json"))
    assert [r["snapshot_id"] for r in drift["reports"]] == ["snap-billing-cents-time-0001", "snap-billing-cents-time-0002"]
    assert all(r["items"] for r in drift["reports"])
    after = json.loads(run(capsys, "verify", "--db", db, "--json"))
    assert after["clean"] is True, after["problems"]


def test_the_old_stores_index_versions_keep_their_numbers(capsys, old_store, tmp_path):
    """Its runs keep the numbers its snapshots pin (they were global run ids), so drift compares
    an old pin with today's version as before; new runs number per project and branch."""
    db = str(old_store)
    run(capsys, "migrate", "--db", db)
    drift = json.loads(run(capsys, "drift", "snap-billing-cents-time-0001", "--db", db, "--json"))["reports"][0]
    # billing-service's snapshot pinned run 2; run 3 (an edit) came after it.
    assert (drift["index_version_then"], drift["index_version_now"], drift["index_changed"]) == (
        "billing-service@main#2", "billing-service@main#3", True,
    )
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "app.py").write_text("def main():\n    return 0\n", encoding="utf-8")
    web = json.loads(run(capsys, "index", str(workspace), "--project", "web-app", "--branch", "main", "--db", db, "--json"))
    fresh = json.loads(run(capsys, "index", str(workspace), "--project", "fresh", "--branch", "main", "--db", db, "--json"))
    assert (web["index_version"], fresh["index_version"]) == ("web-app@main#6", "fresh@main#1")
    after = json.loads(run(capsys, "verify", "--db", db, "--json"))
    assert after["clean"] is True, after["problems"]


def test_a_rebuild_copies_its_snapshots_byte_for_byte(capsys, old_store, tmp_path):
    """Its snapshots carry fields this version no longer has (require_snapshot, output_shape,
    max_age_days): a rebuild copies a snapshot that held no secret as stored, those included,
    so its hash and the chain that records it stay what they were."""
    db = str(old_store)
    run(capsys, "migrate", "--db", db)
    with sqlite3.connect(old_store) as conn:
        ids = [row[0] for row in conn.execute("SELECT id FROM snapshots ORDER BY id")]
    with Store.open(db, read_only=True) as old:
        before = {sid: old.get_snapshot(sid).body for sid in ids}
        with Store.open(str(tmp_path / "new.db"), create=True) as new:
            report = rebuild_store(old, new)
            after = {sid: new.get_snapshot(sid).body for sid in ids}
    assert report.snapshots == 5 and report.snapshots_changed == 0
    assert after == before
    assert all(b'"require_snapshot"' in body and b'"output_shape"' in body for body in after.values())
