"""The demo's findings inside the inspector, each leading to its turn ([5/9] item 15, onboarding).

`scopelens demo` keeps the findings of each scenario in its stamp (demo.json beside demo.db);
the read model reads them back for the store the stamp names (by store head).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scopelens.core.readmodel import FindingView, ReadModel
from scopelens.core.record.demo import STAMP
from scopelens.core.vocab import FindingKind, Outcome

AUTH = "s-auth-role-mock-0001"
BILLING = "s-billing-cents-time-0001"


def stamped_findings(db: Path) -> list[dict[str, object]]:
    stamp = json.loads((db.parent / STAMP).read_text(encoding="utf-8"))
    return [finding for scenario in stamp["scenarios"] for finding in scenario["findings"]]


def findings_of(db: Path):  # type: ignore[no-untyped-def]
    model = ReadModel(str(db))
    try:
        return model.findings()
    finally:
        model.close()


def one(views: tuple[FindingView, ...], kind: FindingKind, outcome: Outcome, session: str = AUTH,
        **where: object) -> FindingView:
    found = [v for v in views if v.finding.kind == kind and v.finding.outcome == outcome
             and v.finding.session_id == session and all(getattr(v.finding, k) == w for k, w in where.items())]
    assert len(found) == 1, found
    return found[0]


# --------------------------------------------------------------------------- the read model


def test_the_read_model_reads_the_demo_stamps_findings_and_where_each_leads(demo_store):
    view = findings_of(demo_store)
    assert view.problem is None and view.stamp == str(demo_store.parent / STAMP)
    stamped = stamped_findings(demo_store)
    assert len(view.findings) == len(stamped) > 20
    assert sorted(json.dumps(v.finding.model_dump(mode="json"), sort_keys=True) for v in view.findings) == sorted(
        json.dumps(f, sort_keys=True) for f in stamped
    )
    # Session by session as recorded, turn by turn within each.
    sessions = [v.finding.session_id for v in view.findings]
    assert sessions == sorted(sessions, key=sessions.index)
    for session in set(sessions):
        turns = [v.finding.turn for v in view.findings if v.finding.session_id == session]
        assert turns == sorted(turns)
    findings = view.findings

    cited = one(findings, FindingKind.CITATION_DISTORTION, Outcome.OCCURRED, citation_id="rule#2")
    assert (cited.opens, cited.seq, cited.reply_ref) == ("citation", 6, f"{AUTH}#6")  # the reply citing it
    by_path = one(findings, FindingKind.CITATION_DISTORTION, Outcome.OCCURRED, BILLING)
    assert (by_path.opens, by_path.seq) == ("event", 9)  # cited by path: the reply itself
    shown = one(findings, FindingKind.SIMILARITY_POLLUTION, Outcome.OCCURRED, source_ref="src/admin/rbac.ts:1-12")
    assert (shown.opens, shown.seq) == ("item", 4)  # the snapshot event of turn 2
    withheld = one(findings, FindingKind.CANDIDATE_MEMORY_POLLUTION, Outcome.PREVENTED)
    assert (withheld.opens, withheld.seq) == ("candidate", 4)
    never_recalled = one(findings, FindingKind.SIMILARITY_POLLUTION, Outcome.PREVENTED, stage="not-recalled")
    assert (never_recalled.opens, never_recalled.seq) == ("event", 7)  # no row: the snapshot's event


def test_a_store_without_a_stamp_has_no_findings_and_no_problem(sample_store):
    view = findings_of(sample_store)
    assert (view.findings, view.stamp, view.problem) == ((), None, None)


BAD_STAMPS = {
    "not json": "{ not json",
    "not utf-8": b"\xff\xfe{}",
    "a list": "[]",
    "another kind": json.dumps({"kind": "something-else"}),
    "no scenarios": None,  # the real stamp without its scenarios
    "a finding that is no finding": None,  # a finding of an unknown kind
}


def break_stamp(db: Path, case: str) -> None:
    path = db.parent / STAMP
    content = BAD_STAMPS[case]
    if content is not None:
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        return
    stamp = json.loads(path.read_text(encoding="utf-8"))
    if case == "no scenarios":
        del stamp["scenarios"]
    else:
        stamp["scenarios"][0]["findings"][0]["kind"] = "no-such-kind"
    path.write_text(json.dumps(stamp), encoding="utf-8")


@pytest.mark.parametrize("case", sorted(BAD_STAMPS))
def test_a_malformed_stamp_gives_no_findings_and_one_line_saying_so(demo_store, case):
    break_stamp(demo_store, case)
    view = findings_of(demo_store)
    assert view.findings == () and view.stamp is not None
    assert view.problem is not None and "\n" not in view.problem and view.problem.startswith(f"{STAMP} beside this store")


def test_a_stamp_written_for_another_store_head_is_not_believed(demo_store):
    """The stamp names the store head it was built with: a store that moved on gets none, and is told why."""
    path = demo_store.parent / STAMP
    stamp = json.loads(path.read_text(encoding="utf-8"))
    stamp["store_head"] = "0" * 64
    path.write_text(json.dumps(stamp), encoding="utf-8")
    view = findings_of(demo_store)
    assert view.findings == ()
    assert view.problem is not None and "written for store head 000000000000…" in view.problem
