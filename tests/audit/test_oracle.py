"""The audit oracle ([3/9]): over generated workspaces and intents, on both backends, every
recorded snapshot's answers agree with the snapshot itself.

- why-not by each candidate row's source_ref names that row's recorded stage (selected items
  say selected, with their citation id);
- the funnel adds up;
- the block re-rendered from the snapshot document alone equals the stored block blob;
- drift right after the snapshot, with nothing changed, reports every item unchanged and no
  index change, and creates no index version.

Examples: the `ci` profile's count, capped here at 40 per backend (about 50 s together); the
`bench` profile runs thousands (HYPOTHESIS_PROFILE=bench).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel import func, select

from scopelens.core.audit.drift import compute_drift
from scopelens.core.audit.whynot import why_not
from scopelens.core.contracts import RetrievalBudget, RetrievalIntent, RetrievalScope
from scopelens.core.pipeline.project import render_block
from scopelens.core.store.tables import IndexRunRow
from scopelens.core.vocab import DriftClass, Purpose, Stage
from tests.pipeline.test_funnel_adds_up import _workspace, worlds
from tests.support.workspaces import Lab

_counter = itertools.count()


@pytest.fixture
def shared_lab(tmp_path, store_url):
    """One store per backend for all examples; each example indexes its own project."""
    lab = Lab(tmp_path, store_url)
    yield lab
    lab.close()


def _index_versions(lab: Lab) -> int:
    with lab.store.read() as conn:
        return int(conn.execute(select(func.count()).select_from(IndexRunRow)).scalar_one())


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                                   HealthCheck.data_too_large])
@given(world=worlds(), purpose=st.sampled_from(list(Purpose)))
def test_recorded_answers_agree_with_the_snapshot(shared_lab, world, purpose):
    lab = shared_lab
    project = f"p{next(_counter)}"
    root: Path = lab.workspace(project, _workspace(world["files"]))
    lab.index(root, project, branch="main")
    if world["other_branch"]:
        other = {f"src/o{n}.py": f"def o{n}():\n    # {t}\n    return {n}\n" for n, t in enumerate(world["other_branch"])}
        lab.index(lab.workspace(f"{project}-feature", other), project, branch="feature")
    scope = RetrievalScope(
        project=project, branch="main",
        budget=RetrievalBudget(max_items=world["max_items"], max_tokens=world["max_tokens"]),
    )
    observation = lab.retriever().retrieve(RetrievalIntent(purpose=purpose, question=world["query"]), scope)
    snapshot = observation.snapshot

    # why-not names every recorded row's stage.
    for item in snapshot.selected:
        answer = why_not(lab.store, snapshot.id, "path", item.source_ref)
        assert answer.stage in (Stage.SELECTED, Stage.CITED) and answer.citation_id == item.citation_id, answer.summary
    for row in snapshot.rejected:
        if row.candidate_id.startswith("other-projects:"):
            continue
        answer = why_not(lab.store, snapshot.id, "path", row.source_ref)
        assert (row.stage, row.source_ref) in {(m.stage, m.source_ref) for m in answer.matches}, answer.summary

    # The funnel adds up.
    funnel = snapshot.funnel()
    assert funnel.recalled - sum(n for _, n in funnel.dropped) == funnel.selected == len(snapshot.selected)

    # The block is a function of the snapshot document.
    rendered = render_block(
        snapshot_id=snapshot.id, nonce=snapshot.projection.nonce, purpose=snapshot.scope.purpose.value,
        items=list(snapshot.selected), missing=list(snapshot.missing_evidence), branch=snapshot.scope.branch,
    )
    assert rendered.encode("utf-8") == lab.store.get_blob(snapshot.projection.block_ref)

    # Drift with nothing changed: every item unchanged, no index change, no new version.
    versions = _index_versions(lab)
    report = compute_drift(lab.store, snapshot.id, record=False)
    assert not report.index_changed
    assert all(item.drift_class == DriftClass.UNCHANGED for item in report.items), [
        (i.source_ref, i.drift_class) for i in report.items
    ]
    assert _index_versions(lab) == versions
