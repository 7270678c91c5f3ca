"""Task-aware rerank: decomposed scores, weighted per purpose, with deterministic ties.

Each component is in [0, 1]:

* ``lexical``: the BM25 scores of the sub-queries merged under the plan's merge policy
  (``MergePolicy``). The default, ``interleave-by-relevance``, divides a candidate's BM25
  score by the best BM25 score of the same sub-query (the best over the candidate's
  sub-queries): each sub-query asks its own question (what code, what rule, what memory), so
  the best rule for the task counts as fully matching its question even when code scores
  higher in absolute BM25. ``global-norm`` divides by the best score across all sub-queries
  instead; ``rrf`` (reciprocal rank fusion) sums ``1 / (RRF_K + rank)`` over the candidate's
  sub-queries, its rank in each being by BM25 score, and divides by the best sum. A candidate
  found by several sub-queries carries one BM25 score, its best (recall keeps the best), and
  every policy reads that score in each of them;
* ``anchor``: the share of the intent's anchors (failing test, current files, symbols, the
  error text's handles) that the candidate's path, symbol or text hits;
* ``authority``: from the source and memory status (high 1.0, medium 0.6, low 0.2);
* ``recency``: ``0.5 ** (age_days / 30)`` relative to ``as_of``;
* ``scope``: 1.0 when the candidate is one of the current files or in their directory;
* ``actionability``: how directly this kind of evidence supports the next step for the
  purpose (a failing test's log and code for ``fix-test``; rules and decisions for
  ``review-risk``). For fix purposes a workspace file that is not where fixes go (a rule, a
  test the task does not name, a doc) takes ``FIX_PLACE_PRIOR`` as its actionability, and its
  ``lexical`` is scaled by the same factor (see ``_place_prior``);
* ``diversity``: 1.0 for the first candidate of each evidence kind in rank order, applied
  in a second pass;
* ``semantic``: a slot for an embedding score; 0.0 (there is no model in the engine).

``final`` is the weighted sum under the purpose's row of :data:`WEIGHTS`, except that the
*priors* (authority, recency, actionability, diversity) are multiplied by the candidate's
relevance, ``max(lexical, anchor, scope, semantic)``: a high-authority file that does not
match the task must not float up on authority alone (similar is not relevant, and neither
is authoritative). Ties are broken by source_ref, then candidate id.
"""

from __future__ import annotations

import posixpath
from datetime import datetime

from scopelens.core.contracts import SCORE_COMPONENTS, Candidate, RetrievalIntent, ScoreBreakdown
from scopelens.core.index.tokenizer import tokenize
from scopelens.core.pipeline.locate import is_test_path
from scopelens.core.pipeline.planner import GATED_KINDS, extract_handles
from scopelens.core.vocab import WORKSPACE_SOURCES, Authority, EvidenceKind, MergePolicy, Purpose, Source

RELEVANCE = ("semantic", "lexical", "anchor", "scope")
PRIORS = ("authority", "recency", "actionability", "diversity")

WEIGHTS: dict[Purpose, dict[str, float]] = {
    Purpose.FIX_TEST: {"semantic": 0.0, "lexical": 0.25, "anchor": 0.30, "authority": 0.10, "recency": 0.05,
                       "scope": 0.10, "actionability": 0.15, "diversity": 0.05},
    Purpose.EXPLAIN_CODE: {"semantic": 0.0, "lexical": 0.35, "anchor": 0.25, "authority": 0.15, "recency": 0.0,
                           "scope": 0.10, "actionability": 0.10, "diversity": 0.05},
    Purpose.REVIEW_RISK: {"semantic": 0.0, "lexical": 0.25, "anchor": 0.15, "authority": 0.25, "recency": 0.05,
                          "scope": 0.05, "actionability": 0.20, "diversity": 0.05},
    Purpose.ANSWER_QUESTION: {"semantic": 0.0, "lexical": 0.40, "anchor": 0.15, "authority": 0.20, "recency": 0.05,
                              "scope": 0.05, "actionability": 0.05, "diversity": 0.10},
}
"""The one table of rerank weights: a row per purpose, summing to 1."""

AUTHORITY_VALUE = {Authority.HIGH: 1.0, Authority.MEDIUM: 0.6, Authority.LOW: 0.2}
ACTIONABILITY: dict[Purpose, dict[EvidenceKind, float]] = {
    Purpose.FIX_TEST: {EvidenceKind.TEST_LOG: 1.0, EvidenceKind.CODE: 0.9, EvidenceKind.RULE: 0.7,
                       EvidenceKind.MEMORY: 0.6, EvidenceKind.DECISION: 0.5, EvidenceKind.EVENT: 0.4,
                       EvidenceKind.DOC: 0.2},
    Purpose.EXPLAIN_CODE: {EvidenceKind.CODE: 1.0, EvidenceKind.DOC: 0.7, EvidenceKind.DECISION: 0.6,
                           EvidenceKind.RULE: 0.5, EvidenceKind.MEMORY: 0.4, EvidenceKind.TEST_LOG: 0.3,
                           EvidenceKind.EVENT: 0.2},
    Purpose.REVIEW_RISK: {EvidenceKind.RULE: 1.0, EvidenceKind.DECISION: 1.0, EvidenceKind.CODE: 0.7,
                          EvidenceKind.MEMORY: 0.6, EvidenceKind.TEST_LOG: 0.5, EvidenceKind.DOC: 0.4,
                          EvidenceKind.EVENT: 0.3},
    Purpose.ANSWER_QUESTION: {EvidenceKind.DOC: 0.8, EvidenceKind.CODE: 0.8, EvidenceKind.RULE: 0.8,
                              EvidenceKind.DECISION: 0.8, EvidenceKind.MEMORY: 0.6, EvidenceKind.TEST_LOG: 0.5,
                              EvidenceKind.EVENT: 0.4},
}
FIX_PLACE_PRIOR: dict[str, float] = {"rule": 0.6, "test": 0.4, "doc": 0.3}
"""For fix purposes, how much a workspace file that is not where fixes go counts: its lexical
match is scaled by this (and shown as its actionability). A rule or decision record says how
to fix, never where: it keeps a place in the block below the code that matches well (0.6). A
test file the task does not name as a current file is the failure's evidence, not the place
of the fix (0.4); a doc or a template (README, issue templates) says how things should be,
not where they break (0.3). All stay candidates."""
FIX_PURPOSES = frozenset({Purpose.FIX_TEST})
RECENCY_HALF_LIFE_DAYS = 30.0
RRF_K = 60
"""The rank constant of reciprocal rank fusion (the usual 60): a larger one flattens ranks."""


def anchor_handles(intent: RetrievalIntent) -> list[str]:
    """The intent's anchors as strings to look for (paths, test ids, symbols, error handles)."""
    anchors = intent.anchors
    handles = [h for h in (anchors.failing_test, *anchors.current_files, *anchors.symbols) if h]
    if anchors.failing_test and "::" in anchors.failing_test:
        handles.append(anchors.failing_test.split("::")[0])
    for text in (anchors.error_text, anchors.traceback):
        if text:
            handles += [h.text for h in extract_handles(text) if h.kind not in GATED_KINDS]
            handles.append(text.strip().splitlines()[-1] if text.strip() else "")
    return [h for h in dict.fromkeys(handles) if h]


def _anchor_score(candidate: Candidate, handles: list[str]) -> float:
    if not handles:
        return 0.0
    text = candidate.text.lower()
    path = (candidate.path or candidate.source_ref).lower()
    symbol = (candidate.symbol or "").lower()
    hits = 0.0
    for handle in handles:
        needle = handle.lower()
        file_part = needle.split("::")[0]
        if (path and (path == file_part or path.endswith("/" + file_part) or file_part.endswith(path))) or (
            symbol and (needle == symbol or needle.endswith("." + symbol) or symbol.endswith("." + needle))
        ):
            hits += 1.0
        elif needle in text:
            hits += 0.8
        else:
            words = set(tokenize(needle))
            if words and len(words & set(tokenize(text))) / len(words) >= 0.75:
                hits += 0.5
    return min(1.0, hits / max(1.0, min(len(handles), 3.0)))


def _scope_score(candidate: Candidate, intent: RetrievalIntent) -> float:
    if not candidate.path:
        return 0.0
    current = list(intent.anchors.current_files)
    if intent.anchors.failing_test:
        current.append(intent.anchors.failing_test.split("::")[0])
    if candidate.path in current:
        return 1.0
    directories = {posixpath.dirname(f) for f in current}
    return 0.5 if posixpath.dirname(candidate.path) in directories else 0.0


def _place_prior(candidate: Candidate, intent: RetrievalIntent, purpose: Purpose, anchor: float) -> float | None:
    """``FIX_PLACE_PRIOR`` for a workspace file that is not a place of a fix (``None``: it is)."""
    if purpose not in FIX_PURPOSES or candidate.source not in WORKSPACE_SOURCES or not candidate.path:
        return None
    if candidate.path in intent.anchors.current_files or anchor > 0 or candidate.evidence_kind in intent.required_evidence:
        return None  # named or required by the task, or hitting its anchors: the task says it matters
    if candidate.source in (Source.PROJECT_RULE, Source.DECISION_RECORD):
        return FIX_PLACE_PRIOR["rule"]
    if candidate.source == Source.WORKSPACE_DOC:
        return FIX_PLACE_PRIOR["doc"]
    if is_test_path(candidate.path):
        return FIX_PLACE_PRIOR["test"]
    return None


def _recency(candidate: Candidate, as_of: datetime) -> float:
    age_days = max((as_of - candidate.captured_at).total_seconds() / 86400.0, 0.0)
    return float(0.5 ** (age_days / RECENCY_HALF_LIFE_DAYS))


def merged_lexical(
    candidates: list[Candidate], merge_policy: MergePolicy, shared: frozenset[str] = frozenset()
) -> list[float]:
    """Each candidate's ``lexical`` component in [0, 1], its sub-queries merged by ``merge_policy``.

    ``shared``: sub-queries whose workspace files (code and docs) share one normalisation under
    interleave-by-relevance (see ``_norm_groups``)."""
    if merge_policy == MergePolicy.GLOBAL_NORM:
        best = max((c.scores.lexical for c in candidates), default=0.0)
        return [c.scores.lexical / best if best > 0 else 0.0 for c in candidates]
    if merge_policy == MergePolicy.RRF:
        members: dict[str, list[Candidate]] = {}
        for candidate in candidates:
            for query_id in dict.fromkeys(candidate.sub_query_ids):
                members.setdefault(query_id, []).append(candidate)
        fused: dict[str, float] = {}
        for found in members.values():
            # Ties in score take the rerank's own tie order, so fusion is deterministic.
            ordered = sorted(found, key=lambda c: (-c.scores.lexical, c.source_ref, c.id))
            for rank, candidate in enumerate(ordered, start=1):
                fused[candidate.id] = fused.get(candidate.id, 0.0) + 1.0 / (RRF_K + rank)
        best = max(fused.values(), default=0.0)
        return [fused.get(c.id, 0.0) / best if best > 0 else 0.0 for c in candidates]
    best_of_query: dict[str, float] = {}
    for candidate in candidates:
        for query_id in _norm_groups(candidate, shared):
            best_of_query[query_id] = max(best_of_query.get(query_id, 0.0), candidate.scores.lexical)
    return [
        max((c.scores.lexical / best_of_query[q] for q in _norm_groups(c, shared) if best_of_query.get(q)), default=0.0)
        for c in candidates
    ]


INDEX_GROUP = "workspace-files"
PLACE_SOURCES = frozenset({Source.WORKSPACE_CODE, Source.WORKSPACE_DOC})


def _norm_groups(candidate: Candidate, shared: frozenset[str]) -> tuple[str, ...]:
    """What a candidate's BM25 score is normalised against under interleave-by-relevance.

    Workspace code and docs found by a ``shared`` sub-query (the plan's find-code ones) share
    one group: their scores come from one index with one set of statistics, so they compare,
    and the best doc must not count as fully matching just because it is the best doc. Every
    other sub-query (what rule applies, where the error text appears, what was decided) asks
    its own question and keeps its own best.
    """
    if candidate.source not in PLACE_SOURCES:
        return candidate.sub_query_ids
    return tuple(dict.fromkeys(INDEX_GROUP if q in shared else q for q in candidate.sub_query_ids))


def rerank(
    candidates: list[Candidate],
    intent: RetrievalIntent,
    purpose: Purpose,
    as_of: datetime,
    merge_policy: MergePolicy = MergePolicy.INTERLEAVE_BY_RELEVANCE,
    shared: frozenset[str] = frozenset(),
) -> list[Candidate]:
    """Score every candidate and return them in final order (best first); ``shared`` as in
    :func:`merged_lexical`."""
    if not candidates:
        return []
    weights = WEIGHTS[purpose]
    handles = anchor_handles(intent)
    scored: list[Candidate] = []
    for candidate, lexical in zip(candidates, merged_lexical(candidates, merge_policy, shared), strict=True):
        actionability = ACTIONABILITY[purpose][candidate.evidence_kind]
        anchor = _anchor_score(candidate, handles)
        place = _place_prior(candidate, intent, purpose, anchor)
        if place is not None:
            lexical, actionability = lexical * place, place
        parts = {
            "semantic": 0.0,
            "lexical": lexical,
            "anchor": anchor,
            "authority": AUTHORITY_VALUE[candidate.authority],
            "recency": _recency(candidate, as_of),
            "scope": _scope_score(candidate, intent),
            "actionability": actionability,
            "diversity": 0.0,
        }
        scored.append(candidate.model_copy(update={"scores": _breakdown(parts, weights)}))
    first_pass = sorted(scored, key=_order)
    seen_kinds: set[EvidenceKind] = set()
    final: list[Candidate] = []
    for candidate in first_pass:
        parts = candidate.scores.model_dump()
        parts["diversity"] = 0.0 if candidate.evidence_kind in seen_kinds else 1.0
        seen_kinds.add(candidate.evidence_kind)
        final.append(candidate.model_copy(update={"scores": _breakdown(parts, weights)}))
    return sorted(final, key=_order)


def _breakdown(parts: dict[str, float], weights: dict[str, float]) -> ScoreBreakdown:
    rounded = {name: round(float(parts[name]), 6) for name in SCORE_COMPONENTS}
    relevance = max(rounded[name] for name in RELEVANCE)
    final = sum(weights[name] * rounded[name] for name in RELEVANCE)
    final += relevance * sum(weights[name] * rounded[name] for name in PRIORS)
    return ScoreBreakdown(**rounded, final=round(final, 6))


def _order(candidate: Candidate) -> tuple[float, str, str]:
    return (-candidate.scores.final, candidate.source_ref, candidate.id)
