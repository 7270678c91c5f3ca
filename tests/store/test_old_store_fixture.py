"""A store written before [2/9] (tests/fixtures/stores/pre-2of9) keeps working with every later
version: it migrates, verifies clean with the same head, replays byte-identically, runs drift."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from scopelens.core.cli import main

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
