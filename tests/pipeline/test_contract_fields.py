"""Fields a contract accepted and ignored are gone or real ([3/9] contract cleanup).

Removed: ``EvidencePolicy.require_snapshot`` (a snapshot is always written), ``RetrievalPlan.
output_shape`` (the context block is the only output) and ``SubQuery.max_age_days`` (nothing set
or read it; the scope's time boundary says how old evidence may be). Stored snapshots that
carry them still read (tests/store/test_old_store_fixture.py); an input that sets a removed
field is refused with one line naming it. ``RetrievalScope.task_id`` stays: it is recorded
with the scope and shown in the inspector's Scope tab (tests/inspector/test_flows.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scopelens.core.cli import main
from scopelens.core.contracts import AuditSnapshot, RetrievalScope, parse_input
from scopelens.core.errors import InvalidInputError
from tests.pipeline.test_seed_seven import FIX_TEST
from tests.support.factories import make_snapshot
from tests.support.workspaces import AUTH_FILES

REMOVED = ("require_snapshot", "output_shape", "max_age_days")


def test_a_new_snapshot_document_has_none_of_the_removed_fields(lab):
    lab.index(lab.workspace("a", AUTH_FILES), "alpha")
    observation = lab.retriever().retrieve(FIX_TEST, RetrievalScope(project="alpha", task_id="WEB-142"))
    body = lab.store.get_snapshot(observation.snapshot_id).body.decode("utf-8")
    assert not [name for name in REMOVED if f'"{name}"' in body]
    assert observation.snapshot.scope.task_id == "WEB-142"
    assert observation.to_json()["scope"]["task_id"] == "WEB-142"


def test_a_stored_document_that_has_them_still_reads():
    snapshot, _block = make_snapshot("snap-old", "s-old")
    document = json.loads(snapshot.model_dump_json())
    document["scope"]["evidence_policy"]["require_snapshot"] = True
    document["plan"]["output_shape"] = "context-block"
    document["plan"]["sub_queries"][0]["max_age_days"] = None
    assert AuditSnapshot.model_validate(document) == snapshot


def test_an_input_that_sets_require_snapshot_is_refused_with_the_reason():
    with pytest.raises(InvalidInputError) as raised:
        parse_input(RetrievalScope, {"project": "p", "evidence_policy": {"require_snapshot": True}}, what="scope file s.json")
    assert str(raised.value) == (
        "scope file s.json: evidence_policy.require_snapshot: no longer a field (scopelens always writes a snapshot "
        "before it returns a block); delete it (1 problem(s))"
    )


def test_the_cli_says_so_in_one_line_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    intent = tmp_path / "intent.json"
    intent.write_text(json.dumps({"purpose": "fix-test", "question": "why"}), encoding="utf-8")
    scope = tmp_path / "scope.json"
    scope.write_text(json.dumps({"project": "web-app", "evidence_policy": {"require_snapshot": False}}), encoding="utf-8")
    db = tmp_path / "never.db"
    code = main(["retrieve", "--project", "web-app", "--intent", str(intent), "--scope", str(scope), "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "evidence_policy.require_snapshot: no longer a field" in err
    assert not db.exists()


@pytest.mark.parametrize("field", ["plan", "output_shape", "max_age_days"])
def test_plan_fields_never_were_input(field):
    """A plan is made by the planner, never read from a user, so its removed fields need no
    message: a scope naming them is refused as unknown like any other key."""
    with pytest.raises(InvalidInputError, match=rf"{field}: Extra inputs are not permitted"):
        parse_input(RetrievalScope, {"project": "p", field: 1}, what="scope")
