"""A plan's merge policy decides how its sub-queries' BM25 scores merge into ``lexical``:
``interleave-by-relevance`` (the default, unchanged), ``rrf`` and ``global-norm`` each order
the same candidates their own way, and a retrieval records the policy it ran, which drift re-runs."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scopelens.core.audit.drift import compute_drift
from scopelens.core.contracts import Candidate, MemoryRecord, RetrievalIntent, ScoreBreakdown
from scopelens.core.pipeline.rerank import RRF_K, merged_lexical, rerank
from scopelens.core.pipeline.retriever import Retriever
from scopelens.core.vocab import DriftClass, EvidenceKind, MemoryStatus, MergePolicy, Purpose, Source
from tests.pipeline.test_seed_seven import FIX_TEST
from tests.support.workspaces import AUTH_FILES, T0

ASK = RetrievalIntent(purpose=Purpose.ANSWER_QUESTION, question="refunds")


def chunk(name: str, bm25: float, *sub_queries: str) -> Candidate:
    """A code chunk that differs from the others only in its BM25 score and sub-queries."""
    return Candidate(
        id=f"chunk:{name}", source=Source.WORKSPACE_CODE, source_ref=f"{name}.py:1-2", source_version="v",
        path=f"{name}.py", project="p", captured_at=T0, text="unrelated words", evidence_kind=EvidenceKind.CODE,
        scores=ScoreBreakdown(lexical=bm25), sub_query_ids=sub_queries,
    )


CASE = [
    chunk("a", 10.0, "q1"),
    chunk("b", 9.0, "q1"),
    chunk("c", 4.0, "q1", "q2"),
    chunk("m", 3.0, "q2"),
]
"""q1 (say code) scores high in absolute BM25; q2 (say rules) scores low. ``c`` is found by both."""


def order(policy: MergePolicy) -> list[str]:
    return [c.path or "" for c in rerank(CASE, ASK, Purpose.ANSWER_QUESTION, T0, policy)]


def test_the_default_normalises_each_sub_query_by_its_own_best():
    """Unchanged by the new policies: q2's best (c, 4) counts as fully matching, like q1's best."""
    assert merged_lexical(CASE, MergePolicy.INTERLEAVE_BY_RELEVANCE) == [1.0, 0.9, 1.0, 0.75]
    assert order(MergePolicy.INTERLEAVE_BY_RELEVANCE) == ["a.py", "c.py", "b.py", "m.py"]


def test_global_norm_divides_by_the_best_score_across_sub_queries():
    assert merged_lexical(CASE, MergePolicy.GLOBAL_NORM) == [1.0, 0.9, 0.4, 0.3]
    assert order(MergePolicy.GLOBAL_NORM) == ["a.py", "b.py", "c.py", "m.py"]


def test_rrf_fuses_ranks_so_a_candidate_both_sub_queries_found_comes_first():
    fused = {"a": 1 / (RRF_K + 1), "b": 1 / (RRF_K + 2), "c": 1 / (RRF_K + 3) + 1 / (RRF_K + 1), "m": 1 / (RRF_K + 2)}
    expected = [fused[name] / fused["c"] for name in "abcm"]
    assert merged_lexical(CASE, MergePolicy.RRF) == pytest.approx(expected)
    assert order(MergePolicy.RRF) == ["c.py", "a.py", "b.py", "m.py"]


def test_every_policy_keeps_lexical_in_unit_range_and_survives_zero_scores():
    zeros = [chunk("z", 0.0, "q1"), chunk("y", 0.0, "q2")]
    for policy in MergePolicy:
        assert all(0.0 <= value <= 1.0 for value in merged_lexical(CASE, policy)), policy
        assert merged_lexical(zeros, policy) == ([0.0, 0.0] if policy != MergePolicy.RRF else [1.0, 1.0])


def memory(mid: str, content: str) -> MemoryRecord:
    return MemoryRecord(id=mid, project="alpha", content=content, status=MemoryStatus.VERIFIED,
                        valid_from=T0 - timedelta(days=30))


@pytest.mark.parametrize("policy", [MergePolicy.GLOBAL_NORM, MergePolicy.RRF])
def test_a_retrieval_records_its_merge_policy_and_drift_reruns_it(lab, policy):
    lab.index(lab.workspace("a", AUTH_FILES), "alpha")
    lab.remember(memory("m-fixture", "a mock role: set it in the fixture createUserMock, not the default"))
    default = lab.retriever().retrieve(FIX_TEST, project="alpha").snapshot
    retriever = Retriever(lab.store, clock=lab.clock, ids=lab.ids, merge_policy=policy)
    merged = retriever.retrieve(FIX_TEST, project="alpha").snapshot
    assert default.plan.merge_policy == MergePolicy.INTERLEAVE_BY_RELEVANCE
    assert merged.plan.merge_policy == policy
    assert [(r.source_ref, r.final_score) for r in default.ranked] != [(r.source_ref, r.final_score) for r in merged.ranked]
    report = compute_drift(lab.store, merged.id, record=False).report
    assert {item.drift_class for item in report.items} == {DriftClass.UNCHANGED}, report.summary()
