"""The boundary filter: two permission gates, the time boundary and memory status rules.

Order matters and is fixed: *source access* (may the system read it?), then *model
visibility* (may the model see it?), then staleness, then memory status, then the evidence
policy. Every rejection carries a stage from the shared vocabulary and a human reason.

Memory rules: a ``candidate`` is never model-visible as a fact; a ``deprecated`` memory
appears only as history, labelled so; a ``conflicted`` memory appears only together with its
counterpart (both labelled); a ``private`` memory only for its owner.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scopelens.core.contracts import Candidate, RejectedItem, RetrievalScope, SubQuery
from scopelens.core.pipeline.policy import Policy
from scopelens.core.pipeline.recall import TimeWindow
from scopelens.core.vocab import AcceptedAuthority, Authority, MemoryStatus, Source, Stage, Visibility

AUTHORITY_RANK = {Authority.LOW: 0, Authority.MEDIUM: 1, Authority.HIGH: 2}
SOURCE_CLASS: dict[Source, AcceptedAuthority] = {
    Source.WORKSPACE_CODE: AcceptedAuthority.CURRENT_WORKSPACE,
    Source.WORKSPACE_DOC: AcceptedAuthority.PROJECT_DOC,
    Source.PROJECT_RULE: AcceptedAuthority.PROJECT_DOC,
    Source.DECISION_RECORD: AcceptedAuthority.PROJECT_DOC,
    Source.MEMORY: AcceptedAuthority.VERIFIED_MEMORY,
    Source.SESSION_EVENT: AcceptedAuthority.SESSION_EVENT,
    Source.ARTIFACT: AcceptedAuthority.SESSION_EVENT,
}


@dataclass
class BoundaryResult:
    passed: list[Candidate] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    """candidate id -> label shown with it (``history (deprecated)``, ``conflicts with …``)."""
    rejected: list[RejectedItem] = field(default_factory=list)


def rejection(candidate: Candidate, stage: Stage, reason: str) -> RejectedItem:
    return RejectedItem(
        candidate_id=candidate.id,
        source=candidate.source,
        source_ref=candidate.source_ref,
        source_version=candidate.source_version,
        path=candidate.path,
        line_start=candidate.line_start,
        line_end=candidate.line_end,
        symbol=candidate.symbol,
        stage=stage,
        reason=reason,
        scores=candidate.scores,
    )


def filter_boundary(
    candidates: list[Candidate],
    scope: RetrievalScope,
    policy: Policy,
    window: TimeWindow,
    sub_queries: dict[str, SubQuery],
) -> BoundaryResult:
    result = BoundaryResult()
    survivors: list[Candidate] = []
    for candidate in candidates:
        verdict = _gate(candidate, scope, policy, window, sub_queries)
        if verdict is None:
            survivors.append(candidate)
        else:
            result.rejected.append(rejection(candidate, *verdict))
    present = {c.id for c in survivors}
    unverified = 0
    for candidate in survivors:
        status = candidate.memory_status
        if status == MemoryStatus.CONFLICTED:
            missing = [other for other in candidate.conflicts_with if other not in present]
            if missing:
                result.rejected.append(
                    rejection(candidate, Stage.MEMORY_STATUS,
                              f"conflicted memory shown only with its counterpart; {', '.join(missing)} is not available")
                )
                continue
            result.labels[candidate.id] = f"conflicted: contradicts {', '.join(candidate.conflicts_with)}"
        elif status == MemoryStatus.DEPRECATED:
            result.labels[candidate.id] = "history (deprecated): not current guidance"
        if status is not None and status != MemoryStatus.VERIFIED and status != MemoryStatus.PRIVATE:
            unverified += 1
            if unverified > scope.evidence_policy.max_unverified_items:
                result.rejected.append(
                    rejection(candidate, Stage.BELOW_CUTOFF,
                              f"evidence policy allows {scope.evidence_policy.max_unverified_items} unverified item(s)")
                )
                result.labels.pop(candidate.id, None)
                continue
        result.passed.append(candidate)
    # A conflicted pair must stay a pair: if one side was cut, cut the other too.
    passed_ids = {c.id for c in result.passed}
    for candidate in list(result.passed):
        if candidate.memory_status == MemoryStatus.CONFLICTED and any(o not in passed_ids for o in candidate.conflicts_with):
            result.passed.remove(candidate)
            result.labels.pop(candidate.id, None)
            result.rejected.append(
                rejection(candidate, Stage.MEMORY_STATUS, "conflicted memory shown only with its counterpart, which was cut")
            )
    return result


def _gate(
    candidate: Candidate,
    scope: RetrievalScope,
    policy: Policy,
    window: TimeWindow,
    sub_queries: dict[str, SubQuery],
) -> tuple[Stage, str] | None:
    if not scope.admits_source(candidate.source):
        return Stage.DENIED_SOURCE, f"source {candidate.source.value} is not allowed in this scope"
    rules = policy.rules_for_all((candidate.path, *candidate.about_paths))
    missing = rules.missing_grants(scope.permission_context.grants)
    if missing:
        return Stage.DENIED_SOURCE, "; ".join(f"{glob} requires grant {grant!r}" for grant, glob in missing)
    if candidate.visibility == Visibility.RUNTIME_ONLY:
        glob = rules.visibility_glob or "policy"
        return Stage.NOT_VISIBLE, f"runtime-only by policy ({glob}): recorded for audit, never shown to the model"
    status = candidate.memory_status
    if status == MemoryStatus.CANDIDATE:
        return Stage.MEMORY_STATUS, "candidate memory: not verified, never shown as a fact"
    if status == MemoryStatus.PRIVATE and candidate.owner not in (scope.user_id, scope.permission_context.user):
        return Stage.MEMORY_STATUS, "private memory of another user"
    if status == MemoryStatus.DEPRECATED and not policy.memory.deprecated_as_history:
        return Stage.MEMORY_STATUS, "deprecated memory, and the policy does not show history"
    if (
        status not in (None, MemoryStatus.DEPRECATED)
        and candidate.valid_as_of is not None
        and candidate.valid_as_of < window.as_of
        and not scope.time_boundary.allow_stale_memory
    ):
        return Stage.STALE, f"memory valid until {candidate.valid_as_of.isoformat()}, before as_of"
    accepted = scope.evidence_policy.accepted_authority
    if SOURCE_CLASS[candidate.source] not in accepted:
        return Stage.BELOW_CUTOFF, f"evidence policy does not accept {SOURCE_CLASS[candidate.source].value}"
    minimum = min(
        (AUTHORITY_RANK[sub_queries[q].min_authority] for q in candidate.sub_query_ids if q in sub_queries),
        default=0,
    )
    if AUTHORITY_RANK[candidate.authority] < minimum:
        return Stage.BELOW_CUTOFF, f"authority {candidate.authority.value} below the sub-query minimum"
    return None


def drop_split_conflicts(selected_ids: set[str], candidates: dict[str, Candidate]) -> list[RejectedItem]:
    """Conflicted memories whose counterpart was cut later (caps, budget): withhold them too."""
    dropped = []
    for candidate_id in sorted(selected_ids):
        candidate = candidates[candidate_id]
        if candidate.memory_status == MemoryStatus.CONFLICTED and any(
            other not in selected_ids for other in candidate.conflicts_with
        ):
            dropped.append(
                rejection(candidate, Stage.MEMORY_STATUS, "conflicted memory shown only with its counterpart, which was cut")
            )
    return dropped
