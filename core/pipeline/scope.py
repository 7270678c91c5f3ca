"""Resolve the scope of one retrieval from the command line, a scope file and the policy.

Precedence (documented in ``docs/scope.md``):

1. ``--project`` (and the session's workspace and branch) give the base scope;
2. a ``--scope`` file may set any field, but its ``project`` must match;
3. the intent's purpose fills ``purpose`` unless the scope file set it;
4. the policy is applied last and **only narrows**: denied sources are added, allowed
   sources are intersected, budget limits take the minimum. Nothing a policy says can
   re-allow a source or raise a limit.
"""

from __future__ import annotations

from scopelens.core.contracts import RetrievalBudget, RetrievalIntent, RetrievalScope
from scopelens.core.errors import InvalidInputError
from scopelens.core.pipeline.policy import Policy


def narrow_budget(budget: RetrievalBudget, limit: RetrievalBudget | None) -> RetrievalBudget:
    """The tighter of two budgets, field by field (per-source caps: the minimum of both)."""
    if limit is None:
        return budget
    per_source = dict(budget.per_source)
    for source, cap in limit.per_source.items():
        per_source[source] = min(cap, per_source.get(source, cap))
    return RetrievalBudget(
        max_tokens=min(budget.max_tokens, limit.max_tokens),
        max_items=min(budget.max_items, limit.max_items),
        per_source=per_source,
    )


def resolve_scope(
    *,
    project: str,
    intent: RetrievalIntent,
    policy: Policy,
    scope: RetrievalScope | None = None,
    session_id: str | None = None,
    workspace_root: str | None = None,
    branch: str | None = None,
) -> RetrievalScope:
    """The effective scope; the policy can only narrow what the caller asked for."""
    if scope is not None and scope.project != project:
        raise InvalidInputError(
            f"scope file is for project {scope.project!r} but --project is {project!r}"
        )
    base = scope or RetrievalScope(project=project, purpose=intent.purpose)
    explicit = base.model_fields_set
    updates: dict[str, object] = {}
    if "purpose" not in explicit:
        updates["purpose"] = intent.purpose
    if session_id is not None:
        updates["session_id"] = session_id
    if "workspace_root" not in explicit and workspace_root is not None:
        updates["workspace_root"] = workspace_root
    if "branch" not in explicit and branch is not None:
        updates["branch"] = branch
    denied = tuple(dict.fromkeys((*base.denied_sources, *policy.denied_sources)))
    updates["denied_sources"] = denied
    updates["allowed_sources"] = tuple(s for s in base.allowed_sources if s not in denied)
    updates["budget"] = narrow_budget(base.budget, policy.budget)
    return base.model_copy(update=updates)
