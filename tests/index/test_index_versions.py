"""Index versions, on both backends: numbered per project and branch (a scenario pins the same
version alone and in a shared store), and only a run that changes something makes one.

(A snapshot's hash still differs between the two stores: candidate ids name chunk ids, which
are numbered store-wide.)"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from scopelens.core.audit.drift import compute_drift
from scopelens.core.cli import main
from scopelens.core.clock import SequentialIds, SteppingClock
from scopelens.core.index.indexer import index_workspace
from scopelens.core.pipeline.retriever import Retriever
from scopelens.core.store.store import Store
from scopelens.core.store.tables import IndexRunRow
from tests.pipeline.test_seed_seven import FIX_TEST
from tests.support.workspaces import AUTH_FILES, T0, Lab, write

OTHER_FILES = {"ledger.rb": "def post_entry(ledger, amount_cents):\n    ledger.append(amount_cents)\n"}


@pytest.fixture
def lab(tmp_path, store_url):
    instance = Lab(tmp_path, store_url)
    yield instance
    instance.close()


def index(lab: Lab, root, project: str, branch: str | None = None):
    return index_workspace(lab.store, root, project=project, branch=branch, clock=lab.clock)


def test_a_reindex_that_changes_nothing_makes_no_version(lab):
    root = lab.workspace("a", AUTH_FILES)
    first = index(lab, root, "alpha", "main")
    assert first.index_version == "alpha@main#1"
    observation = lab.retriever().retrieve(FIX_TEST, project="alpha")
    assert observation.snapshot.pins.index_version == "alpha@main#1"

    again = index(lab, root, "alpha", "main")
    drift = compute_drift(lab.store, observation.snapshot_id).report
    assert drift.summary().endswith("changed since snapshot: nothing")
    assert drift.index_version_now == "alpha@main#1" and not drift.index_changed
    assert lab.store.count(IndexRunRow) == 1
    assert (again.index_version, again.run_id) == (first.index_version, first.run_id)
    assert (again.added, again.changed, again.removed, again.unchanged) == ([], [], [], len(AUTH_FILES))
    assert again.nothing_changed and not first.nothing_changed

    # A removal is a change, and so is new content: each makes the next version.
    (root / "docs" / "admin-roles.md").unlink()
    removed = index(lab, root, "alpha", "main")
    assert removed.removed == ["docs/admin-roles.md"] and removed.index_version == "alpha@main#2"
    write(root, {"src/auth/session.ts": AUTH_FILES["src/auth/session.ts"] + "// touched\n"})
    assert index(lab, root, "alpha", "main").index_version == "alpha@main#3"
    assert lab.store.count(IndexRunRow) == 3


def test_the_first_index_of_an_empty_workspace_is_a_version(lab):
    """Nothing to add, but the project and branch become known: version 1, once."""
    root = lab.tmp / "empty"
    root.mkdir()
    assert index(lab, root, "alpha").index_version == "alpha@-#1"
    assert index(lab, root, "alpha").index_version == "alpha@-#1"
    assert lab.store.count(IndexRunRow) == 1


def test_versions_are_numbered_per_project_and_branch(lab):
    x, y = lab.workspace("x", OTHER_FILES), lab.workspace("y", AUTH_FILES)
    assert index(lab, x, "X", "main").index_version == "X@main#1"
    write(x, {"ledger.rb": OTHER_FILES["ledger.rb"] + "# v2\n"})
    assert index(lab, x, "X", "main").index_version == "X@main#2"
    assert index(lab, y, "Y", "main").index_version == "Y@main#1"
    assert index(lab, y, "Y", "feature").index_version == "Y@feature#1"
    write(y, {"README.md": "# y\n"})
    assert index(lab, y, "Y", "main").index_version == "Y@main#2"
    assert index(lab, y, "Y", "feature").index_version == "Y@feature#2"
    assert index(lab, x, "X", "feature").index_version == "X@feature#1"
    pins = lab.retriever().retrieve(FIX_TEST, project="Y", branch="feature").snapshot.pins
    assert pins.index_version == "Y@feature#2"


def _scenario(store: Store, root) -> str:
    """Index Y and retrieve once, with the scenario's own clock and ids: the pinned version."""
    clock, ids = SteppingClock(T0, timedelta(minutes=1)), SequentialIds("scenario")
    index_workspace(store, root, project="Y", branch="main", clock=clock)
    observation = Retriever(store, clock=clock, ids=ids).retrieve(FIX_TEST, project="Y")
    return observation.snapshot.pins.index_version


def test_a_scenario_pins_the_same_version_alone_and_in_a_shared_store(tmp_path, store_url):
    root = tmp_path / "y"
    write(root, AUTH_FILES)
    other = tmp_path / "x"
    write(other, OTHER_FILES)
    with Store.open(str(tmp_path / "alone.db"), create=True) as alone:
        pinned_alone = _scenario(alone, root)
    with Store.open(store_url, create=True) as shared:
        for project in ("X", "Z"):
            index_workspace(shared, other, project=project, branch="main")
        pinned_shared = _scenario(shared, root)
    assert pinned_alone == pinned_shared == "Y@main#1"


def test_the_index_command_says_when_nothing_changed(capsys, tmp_path, store_url):
    root = tmp_path / "ws"
    write(root, AUTH_FILES)
    argv = ["index", str(root), "--project", "alpha", "--branch", "main", "--db", store_url]
    assert main([*argv, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["index_version"] == "alpha@main#1"
    assert main([*argv, "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["index_version"] == "alpha@main#1" and again["run_id"] == first["run_id"]
    assert (first["nothing_changed"], again["nothing_changed"]) == (False, True)
    assert main(argv) == 0
    out = capsys.readouterr().out.strip()  # after the progress bar's blank line
    assert out.startswith("alpha@main#1: nothing changed") and f"{len(AUTH_FILES)} unchanged" in out


def test_drift_over_a_no_change_run_of_an_older_scopelens_reports_no_index_change(lab):
    """Stores written before no-change runs were skipped hold such runs: a pin before one of
    them names another version than today's, but the index did not change."""
    root = lab.workspace("a", AUTH_FILES)
    first = index(lab, root, "alpha", "main")
    observation = lab.retriever().retrieve(FIX_TEST, project="alpha")
    with lab.store.write() as conn:  # what an older scopelens wrote for a re-index of nothing
        conn.add(IndexRunRow(project="alpha", branch="main", root=first.root, started_at=0, finished_at=0,
                             added=0, changed=0, removed=0, unchanged=len(AUTH_FILES), chunk_lo=99, chunk_hi=99, version=2))
    drift = compute_drift(lab.store, observation.snapshot_id).report
    assert (drift.index_version_then, drift.index_version_now) == ("alpha@main#1", "alpha@main#2")
    assert not drift.index_changed
    write(root, {"README.md": "# alpha\n"})
    assert index(lab, root, "alpha", "main").index_version == "alpha@main#3"
    assert compute_drift(lab.store, observation.snapshot_id).report.index_changed
