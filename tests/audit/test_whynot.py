"""Why-not answers each stage with its evidence."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scopelens.core.audit.whynot import why_not
from scopelens.core.cli import main
from scopelens.core.contracts import MemoryRecord, ModelResponsePayload, RetrievalBudget, RetrievalScope, TimeBoundary
from scopelens.core.pipeline.policy import Policy, VisibilityRule
from scopelens.core.vocab import EventType, MemoryStatus, Source, Stage, Visibility
from tests.pipeline.test_seed_seven import FIX_TEST
from tests.support.workspaces import AUTH_FILES, T0, write


@pytest.fixture
def auth(lab):
    lab.root = lab.workspace("a", AUTH_FILES)
    lab.index(lab.root, "alpha")
    return lab


def test_cited_and_selected_but_not_cited(auth):
    observation = auth.retriever().retrieve(FIX_TEST, project="alpha")
    code = next(i for i in observation.snapshot.selected if i.source_ref == "src/auth/session.ts:3-5")  # createUserMock
    auth.store.append_event(observation.session_id, EventType.MODEL_RESPONSE,
                            ModelResponsePayload(text="see", cited_ids=(code.citation_id,)), turn=observation.snapshot.turn)
    cited = why_not(auth.store, observation.snapshot_id, "path", "src/auth/session.ts:3-5")
    assert cited.stage == Stage.CITED and cited.cited_by
    shown = why_not(auth.store, observation.snapshot_id, "path", "tests/auth/session.test.ts")
    assert shown.stage == Stage.SELECTED and "not cited" in shown.summary
    by_symbol = why_not(auth.store, observation.snapshot_id, "symbol", "createUserMock")
    assert by_symbol.stage == Stage.CITED


def test_trimmed_away_line(lab):
    filler = "".join(f"Paragraph {n}: role guidance in general prose for readers.\n" for n in range(50))
    doc = (
        "# Mock roles\n\nexpected role admin received undefined: see below.\n"
        + filler
        + "Never change the production default role.\n"
    )
    lab.index(lab.workspace("a", dict(AUTH_FILES, **{"docs/mock-roles.md": doc})), "alpha")
    observation = lab.retriever().retrieve(FIX_TEST, RetrievalScope(project="alpha", budget=RetrievalBudget(max_tokens=420)))
    answer = why_not(lab.store, observation.snapshot_id, "text", "Never change the production default role")
    assert answer.stage == Stage.TRIMMED_AWAY
    assert answer.trim_range is not None and answer.trim_range.end_line >= 53
    assert "trimmed" in answer.summary


def test_out_of_scope_path(auth):
    auth.index(auth.workspace("b", {"docs/beta.md": "# Beta\n\nexpected role admin received undefined beta\n"}), "beta")
    observation = auth.retriever().retrieve(FIX_TEST, project="alpha")
    answer = why_not(auth.store, observation.snapshot_id, "path", "docs/beta.md")
    assert answer.stage == Stage.OUT_OF_SCOPE
    assert "project alpha" in answer.summary
    assert "beta" not in answer.summary.replace("docs/beta.md", "")  # the other project is never named
    assert "other projects" in answer.summary


def test_not_visible_and_denied_source(auth):
    write(auth.root, {"ops/run.log": "expected role admin received undefined in ops\n"})
    auth.index(auth.root, "alpha")
    policy = Policy(visibility=(VisibilityRule(glob="ops/*", visibility=Visibility.RUNTIME_ONLY),))
    observation = auth.retriever(policy).retrieve(FIX_TEST, project="alpha")
    assert why_not(auth.store, observation.snapshot_id, "path", "ops/run.log").stage == Stage.NOT_VISIBLE
    denied = auth.retriever().retrieve(FIX_TEST, RetrievalScope(project="alpha", denied_sources=(Source.PROJECT_RULE,)))
    assert why_not(auth.store, denied.snapshot_id, "path", "docs/rules/mocks.md").stage == Stage.DENIED_SOURCE


def test_stale_version(auth):
    auth.clock.advance(timedelta(days=3))
    write(
        auth.root,
        {
            "docs/rules/mocks.md": "# Test mocks\n\nMocks may default the role to viewer; expected role admin received undefined.\n"  # noqa: E501 - data, kept whole
        },
    )
    auth.index(auth.root, "alpha")
    scope = RetrievalScope(project="alpha", time_boundary=TimeBoundary(as_of=T0 + timedelta(hours=1)))
    observation = auth.retriever().retrieve(FIX_TEST, scope)
    answer = why_not(auth.store, observation.snapshot_id, "text", "default the role to viewer")
    assert answer.stage == Stage.STALE and "after as_of" in answer.summary


def test_memory_status_and_over_budget_and_duplicate(auth):
    auth.remember(MemoryRecord(id="m1", project="alpha", content="expected role admin received undefined: change prod default",
                               status=MemoryStatus.CANDIDATE, valid_from=T0 - timedelta(days=1)))
    write(auth.root, {"tests/auth/copy.test.ts": AUTH_FILES["tests/auth/session.test.ts"]})
    auth.index(auth.root, "alpha")
    observation = auth.retriever().retrieve(FIX_TEST, RetrievalScope(project="alpha", budget=RetrievalBudget(max_items=1)))
    assert why_not(auth.store, observation.snapshot_id, "text", "change prod default").stage == Stage.MEMORY_STATUS
    assert why_not(auth.store, observation.snapshot_id, "path", "docs/rules/mocks.md").stage == Stage.OVER_BUDGET
    copies = {why_not(auth.store, observation.snapshot_id, "path", p).stage
              for p in ("tests/auth/copy.test.ts", "tests/auth/session.test.ts")}
    assert Stage.DUPLICATE in copies


def test_not_recalled_names_the_missing_terms(auth):
    write(auth.root, {
        "billing/invoice.go": "package billing\n\nfunc TotalInvoice(lines []int) int { return len(lines) }\n",
        "src/billing/invoice.ts": "export function totalInvoice(lines: number[]) { return lines.length; }\n",
    })
    auth.index(auth.root, "alpha")
    observation = auth.retriever().retrieve(FIX_TEST, project="alpha")
    answer = why_not(auth.store, observation.snapshot_id, "path", "billing/invoice.go")
    assert answer.stage == Stage.NOT_RECALLED
    assert answer.best_chunk is not None and answer.best_chunk.startswith("billing/invoice.go:")
    assert {"role", "admin", "undefined"} <= set(answer.missing_terms)
    assert len(answer.sub_queries) == len(observation.snapshot.plan.sub_queries)
    # Recalled through a weak path fragment only: cut by the score cutoff, and said so.
    weak = why_not(auth.store, observation.snapshot_id, "path", "src/billing/invoice.ts")
    assert weak.stage == Stage.BELOW_CUTOFF and "cutoff" in weak.summary


def test_why_not_cli_json(auth, capsys):
    import json

    observation = auth.retriever().retrieve(FIX_TEST, project="alpha")
    code = main(["why-not", observation.snapshot_id, "--path", "nowhere.ts", "--db", str(auth.tmp / "lab.db"), "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == 0 and document["schema_version"] == 1 and document["stage"] == "not-recalled"
