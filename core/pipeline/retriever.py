"""The retrieval runtime: the only place that knows the order of the stages.

``Retriever(store).retrieve(intent, scope)`` resolves the scope, plans, recalls, probes,
filters at the boundary, reranks, packs, trims, binds citations, writes the audit snapshot
in one transaction, and only then returns the model-visible block.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlmodel import col, select

from scopelens.core import ENGINE_VERSION
from scopelens.core.clock import Clock, IdSource, RandomIds, SystemClock
from scopelens.core.contracts import (
    SCHEMA_VERSION,
    AuditSnapshot,
    BudgetRecord,
    Candidate,
    CitationEntry,
    Pins,
    Projection,
    RankedEntry,
    Redaction,
    RejectedItem,
    RetrievalIntent,
    RetrievalPlan,
    RetrievalScope,
    SessionHeader,
    SnapshotItem,
    TrimRange,
)
from scopelens.core.hashing import canonical_json, document_hash, sha256_hex, text_hash
from scopelens.core.index.chunker import CHUNKER_VERSION
from scopelens.core.index.indexer import index_version
from scopelens.core.index.scorer import BM25_B, BM25_K1, Scorer
from scopelens.core.index.tokenizer import TOKENIZER_VERSION
from scopelens.core.pipeline import locate as locate_module
from scopelens.core.pipeline import pack as pack_module
from scopelens.core.pipeline import planner as planner_module
from scopelens.core.pipeline import recall as recall_module
from scopelens.core.pipeline import rerank as rerank_module
from scopelens.core.pipeline import trim as trim_module
from scopelens.core.pipeline.boundary import drop_split_conflicts, filter_boundary
from scopelens.core.pipeline.branch import resolve_branch
from scopelens.core.pipeline.pack import pack
from scopelens.core.pipeline.planner import SUBQUERY_TOP_K, TERM_WEIGHTS, plan
from scopelens.core.pipeline.policy import Policy
from scopelens.core.pipeline.probe import probe
from scopelens.core.pipeline.project import render_block
from scopelens.core.pipeline.recall import IndexLexicon, Recall, time_window
from scopelens.core.pipeline.rerank import anchor_handles, rerank
from scopelens.core.pipeline.scope import resolve_scope
from scopelens.core.pipeline.trim import fit_to_budget
from scopelens.core.redact import redact_document
from scopelens.core.store.store import COUNTERFACTUAL_ID_PREFIX, Store
from scopelens.core.store.tables import IndexRunRow
from scopelens.core.vocab import EvidenceKind, MergePolicy, SnapshotKind, Stage, SubQueryIntent

RANKED_LIMIT = 100
"""The snapshot's ``ranked`` list keeps the first 100 candidates after rerank (every selected
one is among them): enough to see where the right file stood, without a deep recall's whole pool."""

SELECTED_REASONS = (
    ("anchor", "hits an anchor of the task"),
    ("lexical", "matches the query terms"),
    ("authority", "high-authority source"),
    ("actionability", "directly actionable for the purpose"),
    ("scope", "in the current files' neighbourhood"),
)


def engine_config() -> dict[str, Any]:
    """Everything that changes results apart from the index and the policy (pinned by hash)."""
    return {
        "index": {"chunker": CHUNKER_VERSION, "tokenizer": TOKENIZER_VERSION},
        "bm25": {"k1": BM25_K1, "b": BM25_B},
        "term_weights": TERM_WEIGHTS,
        "terms": {"part_share": round(planner_module.PART_SHARE, 6), "prose_max_share": planner_module.PROSE_MAX_SHARE,
                  "prose_gate_min_chunks": planner_module.PROSE_GATE_MIN_CHUNKS},
        "locate": {"min_shared_parts": locate_module.MIN_SHARED_PARTS, "max_bare_matches": locate_module.MAX_BARE_MATCHES,
                   "max_imported": locate_module.MAX_IMPORTED},
        "subquery_top_k": {k.value: v for k, v in SUBQUERY_TOP_K.items()},
        "files": {"kept": recall_module.FILES_KEPT, "docs_kept": recall_module.DOC_FILES_KEPT,
                  "chunks_per_file": recall_module.CHUNKS_PER_FILE,
                  "with_chunks": recall_module.FILES_WITH_CHUNKS,
                  "bonus": recall_module.FILE_BONUS, "bonus_chunks": recall_module.FILE_BONUS_CHUNKS,
                  "defines_bonus": recall_module.DEFINES_BONUS},
        "fix_place_prior": rerank_module.FIX_PLACE_PRIOR,
        "max_items_per_file": pack_module.MAX_ITEMS_PER_FILE,
        "ranked_limit": RANKED_LIMIT,
        "rerank_weights": {p.value: w for p, w in rerank_module.WEIGHTS.items()},
        "cutoff": {"min": pack_module.MIN_FINAL_SCORE, "relative": pack_module.RELATIVE_CUTOFF},
        "required_evidence": pack_module.REQUIRED_EVIDENCE_SEATS,
        "trim": {"item_overhead": trim_module.ITEM_OVERHEAD},
    }


@dataclass(frozen=True)
class RetrievalObservation:
    """What a harness gets back: the block, and the audit facts behind it."""

    session_id: str
    snapshot_id: str
    snapshot_hash: str
    context_block: str
    snapshot: AuditSnapshot

    @property
    def citations(self) -> dict[str, CitationEntry]:
        return dict(self.snapshot.projection.citation_map)

    @property
    def stats(self) -> dict[Stage, int]:
        return dict(self.snapshot.stats)

    def to_json(self) -> dict[str, Any]:
        """The ``retrieve --json`` document."""
        snapshot = self.snapshot
        return {
            "schema_version": SCHEMA_VERSION,
            "session_id": self.session_id,
            "snapshot_id": self.snapshot_id,
            "snapshot_hash": self.snapshot_hash,
            "context_block": self.context_block,
            "citations": {k: v.model_dump(mode="json") for k, v in snapshot.projection.citation_map.items()},
            "stats": {stage.value: count for stage, count in snapshot.stats.items()},
            "missing_evidence": [k.value for k in snapshot.missing_evidence],
            "selected": [
                {
                    "citation_id": item.citation_id,
                    "source_ref": item.source_ref,
                    "path": item.path,
                    "line_start": item.line_start,
                    "line_end": item.line_end,
                    "scores": item.scores.model_dump(),
                    "trim_ranges": [r.model_dump() for r in item.trim_ranges],
                    "visible_text_hash": item.visible_text_hash,
                    "label": item.label,
                    "selected_reason": item.selected_reason,
                }
                for item in snapshot.selected
            ],
            "rejected": [
                {"source_ref": r.source_ref, "path": r.path, "stage": r.stage.value, "reason": r.reason,
                 "from_probe": r.from_probe}
                for r in snapshot.rejected
            ],
            "ranked": [entry.model_dump() for entry in snapshot.ranked],
            "funnel": {
                "recalled": (funnel := snapshot.funnel()).recalled,
                "dropped": {stage.value: n for stage, n in funnel.dropped},
                "selected": funnel.selected,
                "withheld_by_scope": {stage.value: n for stage, n in funnel.withheld_by_scope},
            },
            "scope": snapshot.retrieval.scope.model_dump(mode="json"),
            "plan": snapshot.retrieval.plan.model_dump(mode="json"),
            "pins": snapshot.retrieval.pins.model_dump(mode="json"),
        }


@dataclass
class PipelineOutcome:
    """Everything the stages decided, before citations, projection and the snapshot."""

    ranked: list[Candidate]
    fitted: list[trim_module.Fitted]
    rejected: list[RejectedItem]
    labels: dict[str, str]
    estimated_tokens: int


def run_pipeline(
    store: Store,
    scorer: Scorer,
    policy: Policy,
    intent: RetrievalIntent,
    scope: RetrievalScope,
    retrieval_plan: RetrievalPlan,
    now: datetime,
) -> PipelineOutcome:
    """Recall, probe, boundary, rerank, pack and trim for a resolved scope and a plan.

    Pure with respect to the audit record: it writes nothing. ``retrieve`` and ``drift``
    both run it (drift with a recorded plan and scope).
    """
    window = time_window(scope, now)
    sub_queries = {q.id: q for q in retrieval_plan.sub_queries}
    recalled = Recall(store, scorer, policy).run(retrieval_plan.sub_queries, scope, window)
    probed = probe(store, scorer, retrieval_plan.sub_queries, scope, window, {c.id for c in recalled},
                   memory_limit=policy.memory.max_candidates_probed)
    boundary = filter_boundary(recalled, scope, policy, window, sub_queries)
    shared = frozenset(q.id for q in retrieval_plan.sub_queries if q.intent == SubQueryIntent.FIND_CODE)
    ranked = rerank(boundary.passed, intent, scope.purpose, window.as_of, retrieval_plan.merge_policy, shared)
    packed = pack(ranked, scope.budget, intent.required_evidence)
    strong_terms = [t.term for q in retrieval_plan.sub_queries[:1] for t in q.terms if t.weight >= 2.0]
    trimmed = fit_to_budget(
        packed.selected, scope.budget.max_tokens, anchor_handles(intent) + strong_terms,
        overflow=packed.overflow, max_items=scope.budget.max_items,
    )
    split = drop_split_conflicts({f.candidate.id for f in trimmed.fitted}, {c.id: c for c in ranked})
    cut = {r.candidate_id for r in split}
    fitted = [f for f in trimmed.fitted if f.candidate.id not in cut]
    return PipelineOutcome(
        ranked=ranked,
        fitted=fitted,
        rejected=[*probed, *boundary.rejected, *packed.rejected, *trimmed.rejected, *split],
        labels=boundary.labels,
        estimated_tokens=sum(f.tokens for f in fitted),
    )


class Retriever:
    """Scoped retrieval over one store. Reuse it: it caches index arrays between calls."""

    def __init__(
        self,
        store: Store,
        *,
        policy: Policy | None = None,
        workspace_root: Path | str | None = None,
        clock: Clock | None = None,
        ids: IdSource | None = None,
        engine_version: str = ENGINE_VERSION,
        merge_policy: MergePolicy = MergePolicy.INTERLEAVE_BY_RELEVANCE,
    ) -> None:
        """``merge_policy``: how the plans this retriever makes merge their sub-queries' scores."""
        self.store = store
        self.policy = policy or Policy()
        self.workspace_root = str(Path(workspace_root).resolve()) if workspace_root else None
        self.clock = clock or store.clock or SystemClock()
        self.ids = ids or store.ids or RandomIds()
        self.engine_version = engine_version
        self.merge_policy = merge_policy
        self.scorer = Scorer(store)

    def retrieve(
        self,
        intent: RetrievalIntent,
        scope: RetrievalScope | None = None,
        *,
        project: str | None = None,
        session_id: str | None = None,
        turn: int | None = None,
        model_request_id: str | None = None,
        branch: str | None = None,
        kind: SnapshotKind = SnapshotKind.RETRIEVED,
    ) -> RetrievalObservation:
        """Run the pipeline, write the snapshot (and a new session unless ``session_id`` is
        given), then return the block.

        ``kind`` is ``counterfactual`` for a retrieval run afterwards at a turn of an imported
        session, to show what it would have given (``core/importers/counterfactual.py``).

        Raises :class:`UnknownIdError`, writing nothing, for a project the store does not know
        (no index run, session or memory of it), and :class:`InvalidInputError` for a branch
        that cannot be resolved (``branch.py``).
        """
        project = project or (scope.project if scope else None)
        if project is None:
            raise ValueError("retrieve needs a project (or a scope that names one)")
        # Before anything is written: an unknown project (a typo) would otherwise get a session
        # and a permanent snapshot saying that no evidence was found in scope.
        self.store.require_project(project)
        # Redacted on intake, before anything derives from it: the title, the plan's terms, the
        # snapshot and the block all see the redacted text (and a title is cut after, not before).
        intent = redact_document(intent)
        session = self.store.get_session(session_id) if session_id is not None else None
        branch = resolve_branch(
            self.store, project, requested=branch,
            scope_branch=scope.branch if scope is not None and "branch" in scope.model_fields_set else None,
            # an imported session's branch is what the agent's log said, not an index's: a
            # counterfactual reads the branch it is given, or the project's as indexed
            session_branch=session.branch if session is not None and kind != SnapshotKind.COUNTERFACTUAL else None,
            workspace_root=self.workspace_root,
        )
        new_session = None
        if session_id is None:
            # Written with the snapshot, in its transaction: a retrieval that dies half-way
            # leaves no session without its snapshot.
            new_session = SessionHeader(
                id=self.ids.new_id("s"), project=project, branch=branch, workspace_root=self.workspace_root,
                title=intent.question[:80], created_at=self.clock.now(),
            )
            session_id = new_session.id
        scope = resolve_scope(
            project=project, intent=intent, policy=self.policy, scope=scope, session_id=session_id,
            workspace_root=self.workspace_root, branch=branch,
        )
        now = self.clock.now()
        lexicon = IndexLexicon(self.scorer, scope, time_window(scope, now))
        retrieval_plan = plan(intent, scope, self.merge_policy, lexicon)
        outcome = run_pipeline(self.store, self.scorer, self.policy, intent, scope, retrieval_plan, now)
        ranked = outcome.ranked

        snapshot_id = self.ids.new_id(COUNTERFACTUAL_ID_PREFIX if kind == SnapshotKind.COUNTERFACTUAL else "snap")
        nonce = sha256_hex(f"{snapshot_id}:{self.ids.new_id('nonce')}".encode())[:12]
        items = bind_citations(snapshot_id, outcome.fitted, outcome.labels, rerank_module.WEIGHTS[scope.purpose])
        selected_kinds = {item.evidence_kind for item in items}
        missing = [kind for kind in intent.required_evidence if kind not in selected_kinds]
        block = render_block(
            snapshot_id=snapshot_id, nonce=nonce, purpose=scope.purpose.value, items=items, missing=missing,
            branch=scope.branch,
        )
        rejected = outcome.rejected
        selected_ids = {item.candidate_id for item in items}
        stats = Counter(r.stage for r in rejected)
        stats[Stage.SELECTED] = len(items)
        snapshot = AuditSnapshot(
            kind=kind,
            id=snapshot_id,
            session_id=session_id,
            turn=turn if turn is not None else 1,  # none given: decided as it is written, below
            model_request_id=model_request_id,
            created_at=now,
            intent=intent,
            scope=scope,
            plan=retrieval_plan,
            stats={stage: stats.get(stage, 0) for stage in Stage if stats.get(stage, 0)},
            selected=tuple(items),
            rejected=tuple(rejected),
            ranked=tuple(
                RankedEntry(rank=rank, candidate_id=c.id, source_ref=c.source_ref, path=c.path,
                            final_score=c.scores.final, selected=c.id in selected_ids)
                for rank, c in enumerate(ranked, start=1)
                if rank <= RANKED_LIMIT or c.id in selected_ids
            ),
            budget=BudgetRecord(
                max_tokens=scope.budget.max_tokens,
                estimated_tokens=outcome.estimated_tokens,
                max_items=scope.budget.max_items,
                trimming_policy="keep first line and anchor lines (±1), then fill from the top",
                per_source=dict(scope.budget.per_source),
            ),
            projection=Projection(
                block_ref=sha256_hex(block.encode("utf-8")),
                visible_text_hash=text_hash(block),
                nonce=nonce,
                citation_map={
                    item.citation_id: CitationEntry(
                        citation_id=item.citation_id, item_id=item.item_id, source_ref=item.source_ref,
                        visible_text_hash=item.visible_text_hash, authority=item.authority,
                        evidence_kind=item.evidence_kind,
                    )
                    for item in items
                },
            ),
            pins=self._pins(scope),
            missing_evidence=tuple(missing),
        )
        policy_blob = canonical_json(self.policy)
        if turn is None:
            snapshot, snapshot_hash = self.store.write_snapshot_at_next_turn(
                snapshot, block, blobs=[policy_blob], new_session=new_session
            )
        else:
            snapshot_hash = self.store.write_snapshot(snapshot, block, blobs=[policy_blob], new_session=new_session)
        return RetrievalObservation(session_id, snapshot_id, snapshot_hash, block, snapshot)

    def _pins(self, scope: RetrievalScope) -> Pins:
        return current_pins(self.store, scope, self.policy, self.engine_version)


def current_pins(store: Store, scope: RetrievalScope, policy: Policy, engine_version: str = ENGINE_VERSION) -> Pins:
    """What a retrieval under ``scope`` and ``policy`` would pin right now."""
    statement = select(IndexRunRow).where(col(IndexRunRow.project) == scope.project, col(IndexRunRow.finished_at).is_not(None))
    if scope.branch is not None:
        statement = statement.where(col(IndexRunRow.branch) == scope.branch)
    with store.read() as conn:
        run = conn.exec(statement.order_by(col(IndexRunRow.id).desc())).first()
    return Pins(
        engine_version=engine_version,
        config_hash=document_hash(engine_config()),
        policy_hash=policy.policy_hash,
        index_version=index_version(run.project, run.branch, int(run.version)) if run else "none",
        git_commit=run.git_commit if run else None,
        git_dirty=None if run is None or run.git_dirty is None else bool(run.git_dirty),
    )


def bind_citations(
    snapshot_id: str, fitted: list[trim_module.Fitted], labels: dict[str, str], weights: dict[str, float]
) -> list[SnapshotItem]:
    """Snapshot items in rank order, with citation ids numbered per evidence kind."""
    counters: Counter[EvidenceKind] = Counter()
    items = []
    for rank, fit in enumerate(fitted, start=1):
        candidate = fit.candidate
        counters[candidate.evidence_kind] += 1
        label_parts = [labels[candidate.id]] if candidate.id in labels else []
        if fit.extract:
            label_parts.append("extract (summary-only)")
        if fit.trim_ranges and not fit.extract:
            label_parts.append("trimmed")
        items.append(
            SnapshotItem(
                item_id=f"{snapshot_id}/{rank}",
                candidate_id=candidate.id,
                citation_id=f"{candidate.evidence_kind.value}#{counters[candidate.evidence_kind]}",
                source=candidate.source,
                source_ref=candidate.source_ref,
                source_version=candidate.source_version,
                path=candidate.path,
                line_start=candidate.line_start,
                line_end=candidate.line_end,
                symbol=candidate.symbol,
                captured_at=candidate.captured_at,
                evidence_kind=candidate.evidence_kind,
                trust=candidate.trust,
                authority=candidate.authority,
                visibility=candidate.visibility,
                label="; ".join(label_parts) or None,
                selected_reason=_selected_reason(candidate.scores.model_dump(), weights),
                visible_text=fit.visible_text,
                visible_text_hash=text_hash(fit.visible_text),
                trim_ranges=fit.trim_ranges,
                redactions=visible_redactions(candidate, fit.trim_ranges),
                scores=candidate.scores,
                rank=rank,
            )
        )
    return items


def visible_redactions(candidate: Candidate, trimmed: tuple[TrimRange, ...]) -> tuple[Redaction, ...]:
    """The candidate's redactions on lines the model saw (not inside a trimmed range)."""
    return tuple(
        r for r in candidate.redactions
        if not any(t.start_line <= (r.line or 0) <= t.end_line for t in trimmed)
    )


def _selected_reason(scores: dict[str, float], weights: dict[str, float]) -> str:
    """The component that contributed most to the final score, in words."""
    best = max(SELECTED_REASONS, key=lambda pair: (weights[pair[0]] * scores.get(pair[0], 0.0), pair[0]))
    return best[1]

