"""A drift re-run that finds what the last recorded run found records a confirmation of that run
("checked at T, unchanged") in drift_checks, not a second full run; anything else it found is
a new run. On both backends, and on a store written before confirmations existed."""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from scopelens.core.audit import drift as drift_module
from scopelens.core.audit.drift import compute_drift, list_drift_runs
from scopelens.core.cli import main
from scopelens.core.clock import SteppingClock, parse_stored_time, stored_time
from scopelens.core.store.store import Store
from scopelens.core.store.tables import DriftCheckRow, DriftRunRow
from scopelens.core.store.verify import verify_store
from tests.pipeline.test_seed_seven import FIX_TEST
from tests.support.tamper import tampering
from tests.support.workspaces import AUTH_FILES, T0, Lab, write

EDITED_MOCK = AUTH_FILES["src/auth/session.ts"].replace("export function", "// edited\nexport function", 1)
OLD_STORE = Path(__file__).resolve().parents[1] / "fixtures" / "stores" / "pre-2of9"


@pytest.fixture
def lab(tmp_path, store_url):
    instance = Lab(tmp_path, store_url)
    yield instance
    instance.close()


def snapshot_of(lab: Lab) -> tuple[Path, str]:
    root = lab.workspace("a", AUTH_FILES)
    lab.index(root, "alpha")
    return root, lab.retriever().retrieve(FIX_TEST, project="alpha").snapshot_id


def test_a_rerun_that_finds_the_same_confirms_the_last_run(lab):
    _, snapshot_id = snapshot_of(lab)
    first = compute_drift(lab.store, snapshot_id)
    again = compute_drift(lab.store, snapshot_id)
    third = compute_drift(lab.store, snapshot_id)

    assert first.recorded == "new run" and first.confirmed_run_id is None
    assert (again.recorded, again.confirmed_run_id, third.confirmed_run_id) == ("confirmed", first.report.id, first.report.id)
    assert again.report == first.report  # the recorded run, its id and time, is what a UI shows
    assert again.checked_at is not None and again.checked_at > first.report.created_at
    assert (lab.store.count(DriftRunRow), lab.store.count(DriftCheckRow)) == (1, 2)
    (run,) = list_drift_runs(lab.store, snapshot_id)
    assert (run.id, run.checks) == (first.report.id, 2)
    assert third.checked_at is not None and run.last_checked_at == stored_time(third.checked_at)
    assert run.last_seen_at == run.last_checked_at
    assert verify_store(lab.store).clean


def test_a_change_in_the_index_records_a_new_full_run_which_later_reruns_confirm(lab):
    root, snapshot_id = snapshot_of(lab)
    first = compute_drift(lab.store, snapshot_id)
    write(root, {"src/auth/session.ts": EDITED_MOCK})
    lab.index(root, "alpha")
    changed = compute_drift(lab.store, snapshot_id)
    again = compute_drift(lab.store, snapshot_id)

    assert changed.recorded == "new run" and changed.report.id != first.report.id
    assert changed.report.index_version_now != first.report.index_version_now
    assert (again.recorded, again.confirmed_run_id) == ("confirmed", changed.report.id)  # the last run, not the first
    runs = list_drift_runs(lab.store, snapshot_id)
    assert [(r.id, r.checks) for r in runs] == [(first.report.id, 0), (changed.report.id, 1)]
    assert runs[0].last_checked_at is None and runs[0].last_seen_at == runs[0].created_at
    assert verify_store(lab.store).clean


def test_another_engine_is_another_result(lab, monkeypatch):
    _, snapshot_id = snapshot_of(lab)
    compute_drift(lab.store, snapshot_id)
    monkeypatch.setattr(drift_module, "ENGINE_VERSION", "scopelens-core/9.9.9")
    assert compute_drift(lab.store, snapshot_id).recorded == "new run"
    assert compute_drift(lab.store, snapshot_id).recorded == "confirmed"


def test_unrecorded_runs_write_nothing(lab, tmp_path):
    _, snapshot_id = snapshot_of(lab)
    compute_drift(lab.store, snapshot_id)
    unrecorded = compute_drift(lab.store, snapshot_id, record=False)
    assert (unrecorded.recorded, unrecorded.confirmed_run_id, unrecorded.checked_at) == ("not recorded", None, None)
    with Store.open(lab.store.url, read_only=True) as reader:
        assert compute_drift(reader, snapshot_id).recorded == "not recorded"
    assert (lab.store.count(DriftRunRow), lab.store.count(DriftCheckRow)) == (1, 0)


def test_a_clock_set_back_before_the_last_run_records_a_new_run(lab):
    """A confirmation is never dated before its run (verify holds it to that)."""
    _, snapshot_id = snapshot_of(lab)
    first = compute_drift(lab.store, snapshot_id)
    earlier = compute_drift(lab.store, snapshot_id, clock=SteppingClock(T0 - timedelta(days=1), timedelta(seconds=1)))
    assert earlier.recorded == "new run" and earlier.report.id != first.report.id
    assert verify_store(lab.store).clean


def test_a_damaged_last_run_is_superseded_not_confirmed(tmp_path):
    lab = Lab(tmp_path)
    try:
        _, snapshot_id = snapshot_of(lab)
        first = compute_drift(lab.store, snapshot_id)
        with tampering(lab.store.url) as conn:
            conn.execute(text("UPDATE drift_runs SET hash = :zero"), {"zero": "0" * 64})
        again = compute_drift(lab.store, snapshot_id)
        assert again.recorded == "new run" and again.report.id != first.report.id
        assert lab.store.count(DriftCheckRow) == 0
    finally:
        lab.close()


def test_the_cli_says_when_a_run_was_confirmed(tmp_path, capsys):
    lab = Lab(tmp_path)
    try:
        _, snapshot_id = snapshot_of(lab)
    finally:
        lab.close()
    db = str(tmp_path / "lab.db")
    assert main(["drift", snapshot_id, "--db", db, "--json"]) == 0
    (first,) = json.loads(capsys.readouterr().out)["reports"]
    assert (first["recorded"], first["confirmed_run_id"], first["checked_at"]) == ("new run", None, None)
    assert main(["drift", snapshot_id, "--db", db, "--json"]) == 0
    (again,) = json.loads(capsys.readouterr().out)["reports"]
    assert (again["recorded"], again["confirmed_run_id"], again["id"]) == ("confirmed", first["id"], first["id"])
    assert again["checked_at"].endswith("Z")
    assert parse_stored_time(again["checked_at"]) > parse_stored_time(first["created_at"])
    assert main(["drift", snapshot_id, "--db", db]) == 0
    out = capsys.readouterr().out
    assert f"unchanged since run {first['id']}" in out and "not as a new run" in out
    assert main(["drift", "--list", snapshot_id, "--db", db, "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert (run["id"], run["checks"]) == (first["id"], 2) and run["last_checked_at"]
    assert main(["drift", "--list", snapshot_id, "--db", db]) == 0
    assert "last checked (UTC)" in capsys.readouterr().out


def test_a_store_from_before_confirmations_gets_them_and_verifies(tmp_path, capsys):
    """The pre-[2/9] fixture store: migrated, its first re-run of a session is recorded as new
    runs (its own old run was written by another engine), the next confirms them."""
    db = str(tmp_path / "old.db")
    shutil.copy2(OLD_STORE / "store.db", db)
    assert main(["migrate", "--db", db]) == 0
    capsys.readouterr()
    recorded = []
    for _ in range(2):
        assert main(["drift", "--session", "s-billing-cents-time-0001", "--db", db, "--json"]) == 0
        recorded.append([r["recorded"] for r in json.loads(capsys.readouterr().out)["reports"]])
    assert recorded == [["new run", "new run"], ["confirmed", "confirmed"]]
    assert main(["verify", "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["clean"] is True
