"""`import --retrieve`: a scoped retrieval at each imported call, stored apart (kind
counterfactual), never named by what the model was sent, ranking the gold file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scopelens.core.cli import main
from scopelens.core.store.store import Store
from scopelens.core.store.verify import verify_store
from scopelens.core.vocab import WORKSPACE_SOURCES, EventType, SnapshotKind
from tests.support.pydicom_checkout import INSTANCE, PYDICOM, write_checkout

SUBAGENT_LAYOUT = Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "claude-code-2.1"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    return write_checkout(tmp_path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_each_call_gets_a_counterfactual_apart_from_what_the_model_saw(capsys, tmp_path, checkout):
    db = str(tmp_path / "s.db")
    run(capsys, "index", str(checkout), "--project", "pydicom", "--db", db)
    report = json.loads(run(capsys, "import", str(PYDICOM), "--project", "pydicom", "--workspace", str(checkout),
                            "--retrieve", "--instance", str(INSTANCE), "--db", db, "--json"))
    [outcome] = report["sessions"]
    session_id = outcome["session_id"]
    turns = report["counterfactuals"][session_id]
    assert [t["turn"] for t in turns] == list(range(1, outcome["calls"] + 1))
    with Store.open(db, read_only=True) as store:
        counterfactuals = store.snapshots_of(session_id, kind=SnapshotKind.COUNTERFACTUAL)
        assert [s.snapshot.turn for s in counterfactuals] == [t["turn"] for t in turns]
        for stored in counterfactuals:
            snapshot = stored.snapshot
            assert snapshot.id.startswith("cf-") and snapshot.retrieval.scope.task_id == "pydicom__pydicom-1458"
            # workspace evidence only: the session's own replies (later turns') never answer for it
            assert all(item.source in WORKSPACE_SOURCES for item in snapshot.selected)
            assert snapshot.funnel().selected == len(snapshot.selected)
        requests = [e for e in store.events(session_id) if e.type == EventType.MODEL_REQUEST]
        assert requests and all(all(i.startswith("obs-") for i in e.payload["snapshot_ids"]) for e in requests)
        assert verify_store(store).clean
    # after the agent ran its script (a traceback naming the file, turn 4), retrieval puts the
    # gold file first and in the block; the agent's model first saw its lines at turn 6
    by_turn = {t["turn"]: next(f for f in t["files"] if f["gold"]) for t in turns}
    assert by_turn[4]["rank"] == 1 and by_turn[4]["selected"] and not by_turn[4]["seen_by_agent"]
    assert by_turn[6]["seen_by_agent"]
    replayed = run(capsys, "replay", session_id, "--turn", "6", "--db", db)
    assert "counterfactual snapshot (never shown to this model)" in replayed


def test_retrieve_needs_the_project_indexed_and_writes_nothing_without_it(capsys, tmp_path):
    db = str(tmp_path / "s.db")
    assert main(["import", str(PYDICOM), "--project", "pydicom", "--retrieve", "--db", db]) != 0
    err = capsys.readouterr().err
    assert "pydicom" in err and len(err.strip().splitlines()) == 1
    with Store.open(db, create=True) as store:
        assert store.list_sessions() == []
    assert main(["import", str(PYDICOM), "--instance", str(INSTANCE), "--db", db]) != 0
    assert "--instance goes with --retrieve" in capsys.readouterr().err


def test_a_session_on_a_branch_the_index_does_not_have_still_gets_the_project_s_index(capsys, tmp_path):
    """Claude Code's lines say gitBranch main; the checkout was indexed without a branch: the
    counterfactual reads the index there is instead of a branch that has none."""
    root = tmp_path / "app"
    (root / "src" / "billing").mkdir(parents=True)
    (root / "src" / "billing" / "totals.py").write_text(
        "\n".join(f"# {n}" for n in range(1, 40)) + "\ndef total(lines):\n    return round_half_even(sum(lines))\n",
        encoding="utf-8")
    db = str(tmp_path / "s.db")
    run(capsys, "index", str(root), "--project", "app", "--db", db)
    report = json.loads(run(capsys, "import", str(SUBAGENT_LAYOUT), "--workspace", str(root), "--retrieve",
                            "--db", db, "--json"))
    with Store.open(db, read_only=True) as store:
        for outcome in report["sessions"]:
            assert store.get_session(outcome["session_id"]).branch == "main"
        shown = [t["shown"] for turns in report["counterfactuals"].values() for t in turns]
    assert shown and all(refs and refs[0].startswith("src/billing/totals.py") for refs in shown)
