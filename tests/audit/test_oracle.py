"""The audit oracle ([3/9]): over generated workspaces and intents, on both backends, every
recorded snapshot's answers agree with the snapshot itself.

- why-not by each candidate row's source_ref names that row's recorded stage (selected items
  say selected, with their citation id);
- the funnel adds up;
- the block re-rendered from the snapshot document alone equals the stored block blob;
- drift right after the snapshot, with nothing changed, reports every item unchanged and no
  index change, and creates no index version;
- after an edit to a line outside an item, that item is not content-changed; after an edit
  inside it, it is (or it dropped out), and every content-changed item shows a diff.

Examples: the `ci` profile's count, capped here at 40 per backend (about 50 s together); the
`bench` profile runs thousands (HYPOTHESIS_PROFILE=bench).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
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


def _edit_line(path: Path, number: int, suffix: str) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[number - 1] = lines[number - 1] + suffix
    path.write_text("\n".join(lines), encoding="utf-8")


@settings(max_examples=10, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                                   HealthCheck.data_too_large])
@given(world=worlds())
def test_drift_names_an_edit_inside_an_item_and_only_there(shared_lab, world):
    lab = shared_lab
    project = f"e{next(_counter)}"
    root: Path = lab.workspace(project, _workspace(world["files"]))
    lab.index(root, project)
    scope = RetrievalScope(
        project=project, budget=RetrievalBudget(max_items=world["max_items"], max_tokens=world["max_tokens"])
    )
    intent = RetrievalIntent(purpose=Purpose.ANSWER_QUESTION, question=world["query"])
    snapshot = lab.retriever().retrieve(intent, scope).snapshot
    items = [i for i in snapshot.selected if i.path and i.line_start and i.line_end and not i.trim_ranges]
    assume(items)  # an item shown whole, to edit around
    item = items[0]
    path = root / item.path
    total = len(path.read_text(encoding="utf-8").split("\n"))
    outside = next((n for n in range(1, total + 1) if not item.line_start <= n <= item.line_end
                    and path.read_text(encoding="utf-8").split("\n")[n - 1].strip()), None)

    if outside is not None:  # an edit elsewhere in the file: never content-changed
        _edit_line(path, outside, " zzedited")
        lab.index(root, project)
        report = compute_drift(lab.store, snapshot.id, record=False)
        mine = [d for d in report.items if d.source_ref == item.source_ref or d.frozen_source_ref == item.source_ref]
        assert all(d.drift_class != DriftClass.CONTENT_CHANGED for d in mine), [(d.drift_class, d.diff) for d in mine]

    inside = next(n for n in range(item.line_start, item.line_end + 1)
                  if path.read_text(encoding="utf-8").split("\n")[n - 1].strip())
    _edit_line(path, inside, " zzinside")
    lab.index(root, project)
    report = compute_drift(lab.store, snapshot.id, record=False)
    mine = [d for d in report.items if d.source_ref == item.source_ref or d.frozen_source_ref == item.source_ref]
    assert mine, [(d.source_ref, d.drift_class) for d in report.items]
    assert mine[0].drift_class in (DriftClass.CONTENT_CHANGED, DriftClass.REMOVED), mine[0]
    for d in report.items:
        if d.drift_class == DriftClass.CONTENT_CHANGED:
            assert d.diff, d  # content-changed always shows what changed
