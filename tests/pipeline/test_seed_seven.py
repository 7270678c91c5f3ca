"""The seed essay's seven required behaviours of scoped retrieval, one test each."""

from __future__ import annotations

import re
from datetime import timedelta

from scopelens.core.contracts import Anchors, RetrievalBudget, RetrievalIntent, RetrievalScope, TimeBoundary
from scopelens.core.hashing import text_hash
from scopelens.core.pipeline.policy import Policy, VisibilityRule
from scopelens.core.vocab import Purpose, Stage, Visibility
from tests.support.workspaces import AUTH_FILES, write

FIX_TEST = RetrievalIntent(
    purpose=Purpose.FIX_TEST,
    question="tests/auth/session.test.ts fails: expected role admin received undefined",
    anchors=Anchors(
        failing_test="tests/auth/session.test.ts",
        error_text="expected role admin received undefined",
        current_files=("src/auth/session.ts",),
    ),
)


def test_1_scope_filter_keeps_other_projects_out(lab):
    lab.index(lab.workspace("a", AUTH_FILES), "alpha")
    lab.index(lab.workspace("b", {"docs/beta-roles.md": "# Beta\n\nexpected role admin received undefined: beta fix\n"}), "beta")
    observation = lab.retriever().retrieve(FIX_TEST, project="alpha")
    snapshot = observation.snapshot
    assert snapshot.selected and all(not (i.path or "").startswith("docs/beta") for i in snapshot.selected)
    assert "beta fix" not in observation.context_block
    # The probe records that another project had a hit, as a count: never its path or name
    # (a shared store must not copy one team's file names into another's snapshots).
    assert not [r for r in snapshot.rejected if r.path == "docs/beta-roles.md"]
    counted = [r for r in snapshot.rejected if r.candidate_id.startswith("other-projects:")]
    assert counted and all(r.stage == Stage.OUT_OF_SCOPE and r.from_probe for r in counted)
    assert "beta" not in snapshot.model_dump_json()


def test_2_runtime_only_items_never_reach_the_model(lab):
    files = dict(AUTH_FILES)
    files["ops/deploy.log"] = "deploy: role admin token rotated; expected role admin received undefined in prod\n"
    root = lab.workspace("a", files)
    lab.index(root, "alpha")
    policy = Policy(visibility=(VisibilityRule(glob="ops/*", visibility=Visibility.RUNTIME_ONLY),))
    observation = lab.retriever(policy).retrieve(FIX_TEST, project="alpha")
    assert "token rotated" not in observation.context_block
    assert all(i.path != "ops/deploy.log" for i in observation.snapshot.selected)
    recorded = [r for r in observation.snapshot.rejected if r.path == "ops/deploy.log"]
    assert recorded and recorded[0].stage == Stage.NOT_VISIBLE and "runtime-only" in recorded[0].reason


def test_3_time_boundary_selects_the_version_current_at_as_of(lab):
    root = lab.workspace("a", AUTH_FILES)
    lab.index(root, "alpha")
    old_time = lab.clock.now()
    old_text = AUTH_FILES["docs/rules/mocks.md"]
    lab.clock.advance(timedelta(days=3))
    write(
        root, {"docs/rules/mocks.md": "# Test mocks\n\nMocks may default role to viewer since v2; role admin must be explicit.\n"}
    )
    lab.index(root, "alpha")
    scope = RetrievalScope(project="alpha", time_boundary=TimeBoundary(as_of=old_time + timedelta(minutes=30)))
    observation = lab.retriever().retrieve(FIX_TEST, scope)
    rules = [i for i in observation.snapshot.selected if i.path == "docs/rules/mocks.md"]
    assert rules and rules[0].source_version == text_hash(old_text)
    assert "since v2" not in observation.context_block
    current = lab.retriever().retrieve(FIX_TEST, project="alpha")
    assert "since v2" in current.context_block


def test_4_failing_test_file_beats_a_word_similar_generic_doc(lab):
    lab.index(lab.workspace("a", AUTH_FILES), "alpha")
    snapshot = lab.retriever().retrieve(FIX_TEST, project="alpha").snapshot
    rank = {entry.path: entry.rank for entry in snapshot.ranked}
    assert rank["tests/auth/session.test.ts"] < rank["docs/admin-roles.md"]
    assert rank["src/auth/session.ts"] < rank["docs/admin-roles.md"]
    generic = next(e for e in snapshot.ranked if e.path == "docs/admin-roles.md")
    test_file = next(e for e in snapshot.ranked if e.path == "tests/auth/session.test.ts")
    assert test_file.final_score > generic.final_score


def test_5_budget_trimming_records_ranges_and_keeps_anchor_lines(lab):
    filler = "".join(f"Section {n}: general guidance about roles and users in prose.\n" for n in range(60))
    long_doc = "# Role handbook\n\n" + filler + "expected role admin received undefined means the mock lacks a role.\n" + filler
    files = dict(AUTH_FILES, **{"docs/handbook.md": long_doc})
    lab.index(lab.workspace("a", files), "alpha")
    scope = RetrievalScope(project="alpha", budget=RetrievalBudget(max_tokens=420, max_items=8))
    snapshot = lab.retriever().retrieve(FIX_TEST, scope).snapshot
    handbook = [i for i in snapshot.selected if i.path == "docs/handbook.md"]
    assert handbook, "the handbook is selected, trimmed"
    item = handbook[0]
    assert item.trim_ranges
    assert "the mock lacks a role" in item.visible_text
    assert "[… lines" in item.visible_text
    assert item.visible_text_hash == text_hash(item.visible_text)
    assert snapshot.budget.estimated_tokens <= snapshot.budget.max_tokens
    original_lines = long_doc.split("\n")
    untrimmed = "\n".join(original_lines[item.line_start - 1 : item.line_end])
    for trim in item.trim_ranges:
        removed = untrimmed[trim.start_char : trim.end_char]
        assert removed.rstrip("\n").split("\n") == original_lines[trim.start_line - 1 : trim.end_line]


def test_6_citations_are_consistent(lab):
    lab.index(lab.workspace("a", AUTH_FILES), "alpha")
    observation = lab.retriever().retrieve(FIX_TEST, project="alpha")
    snapshot = observation.snapshot
    cited_in_block = set(re.findall(r"^\[([a-z-]+#\d+)\]", observation.context_block, flags=re.M))
    assert cited_in_block == set(snapshot.projection.citation_map)
    items = {i.item_id: i for i in snapshot.selected}
    for citation_id, entry in snapshot.projection.citation_map.items():
        item = items[entry.item_id]
        assert item.citation_id == citation_id and item.source_ref == entry.source_ref
        assert entry.visible_text_hash == item.visible_text_hash == text_hash(item.visible_text)
    assert len({i.citation_id for i in snapshot.selected}) == len(snapshot.selected)


def test_7_frozen_block_survives_workspace_changes(lab):
    root = lab.workspace("a", AUTH_FILES)
    lab.index(root, "alpha")
    observation = lab.retriever().retrieve(FIX_TEST, project="alpha")
    write(root, {"src/auth/session.ts": "export function createUserMock() { return { role: 'admin' }; }\n"})
    lab.index(root, "alpha")
    stored = lab.store.get_snapshot(observation.snapshot_id)
    assert stored.snapshot == observation.snapshot
    assert stored.content_hash == observation.snapshot_hash
    assert lab.store.get_blob(stored.snapshot.projection.block_ref).decode("utf-8") == observation.context_block
