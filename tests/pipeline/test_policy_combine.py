"""Policy rules combine: every matching rule applies and the most restrictive wins, whatever the
order of the rules in the file. A rule can only narrow."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scopelens.core.contracts import PermissionContext, RetrievalIntent, RetrievalScope
from scopelens.core.pipeline.policy import VISIBILITY_ORDER, Policy, VisibilityRule
from scopelens.core.vocab import Purpose, Stage, Visibility
from tests.support.workspaces import Lab

SECRET_RUNBOOK = "# Refund runbook\n\nRefund approvals need the finance ledger key rotation steps.\n"
FILES = {
    "docs/intro.md": "# Intro\n\nRefund approvals are described in the runbook.\n",
    "docs/secret/runbook.md": SECRET_RUNBOOK,
}
INTENT = RetrievalIntent(purpose=Purpose.ANSWER_QUESTION, question="how are refund approvals done in the runbook")


@pytest.fixture
def lab(tmp_path):
    lab = Lab(tmp_path)
    lab.index(lab.workspace("ws", FILES), "books")
    yield lab
    lab.close()


def rows_for(snapshot, path):
    selected = [i for i in snapshot.selected if i.path == path]
    rejected = [r for r in snapshot.rejected if r.path == path and not r.from_probe]
    return selected, rejected


@pytest.mark.parametrize("broad", [Visibility.RAW, Visibility.SUMMARY_ONLY, Visibility.REDACTED])
def test_a_broad_rule_first_does_not_lift_a_later_grant(lab, broad):
    """`docs/*` first, `docs/secret/*` (grant finance) second: no grant, no runbook."""
    policy = Policy(visibility=(
        VisibilityRule(glob="docs/*", visibility=broad),
        VisibilityRule(glob="docs/secret/*", visibility=Visibility.RAW, requires_grant="finance"),
    ))
    snapshot = lab.retriever(policy).retrieve(INTENT, project="books").snapshot
    selected, rejected = rows_for(snapshot, "docs/secret/runbook.md")
    assert selected == []
    assert rejected and rejected[0].stage == Stage.DENIED_SOURCE and "finance" in rejected[0].reason
    assert "ledger key rotation" not in lab.store.get_blob(snapshot.projection.block_ref).decode()

    granted = RetrievalScope(project="books", permission_context=PermissionContext(grants=("finance",)))
    shown = lab.retriever(policy).retrieve(INTENT, granted).snapshot
    items, _ = rows_for(shown, "docs/secret/runbook.md")
    assert items and items[0].visibility == broad


def test_a_broad_rule_first_does_not_lift_a_later_runtime_only(lab):
    policy = Policy(visibility=(
        VisibilityRule(glob="docs/*", visibility=Visibility.SUMMARY_ONLY),
        VisibilityRule(glob="docs/secret/*", visibility=Visibility.RUNTIME_ONLY),
    ))
    snapshot = lab.retriever(policy).retrieve(INTENT, project="books").snapshot
    selected, rejected = rows_for(snapshot, "docs/secret/runbook.md")
    assert selected == []
    assert rejected and rejected[0].stage == Stage.NOT_VISIBLE and "docs/secret/*" in rejected[0].reason


RULES = st.builds(
    VisibilityRule,
    glob=st.sampled_from(["*", "docs/*", "docs/secret/*", "*.md", "src/*"]),
    visibility=st.sampled_from(list(Visibility)),
    requires_grant=st.sampled_from([None, None, "finance", "ops"]),
)
PATHS = st.sampled_from(["docs/intro.md", "docs/secret/runbook.md", "src/app.py", "README.md"])


@given(rules=st.lists(RULES, max_size=6), path=PATHS, order=st.randoms(use_true_random=False))
def test_rules_combine_the_same_in_any_order_and_only_narrow(rules, path, order):
    shuffled = list(rules)
    order.shuffle(shuffled)
    combined = Policy(visibility=tuple(rules)).rules_for(path)
    reordered = Policy(visibility=tuple(shuffled)).rules_for(path)
    assert combined.visibility == reordered.visibility
    assert sorted(combined.missing_grants(())) == sorted(reordered.missing_grants(()))
    for rule in rules:
        if Policy(visibility=(rule,)).rules_for(path).matching:
            assert VISIBILITY_ORDER.index(combined.visibility) >= VISIBILITY_ORDER.index(rule.visibility)
            if rule.requires_grant:
                assert rule.requires_grant in {g for g, _ in combined.missing_grants(())}
                assert (rule.requires_grant, rule.glob) not in combined.missing_grants((rule.requires_grant,))
