"""Small builders of valid contracts for tests that need a snapshot without the pipeline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scopelens.core.clock import stored_time
from scopelens.core.contracts import (
    AuditSnapshot,
    BudgetRecord,
    CitationEntry,
    DriftReport,
    Pins,
    Projection,
    RankedEntry,
    RejectedItem,
    RetrievalIntent,
    RetrievalPlan,
    RetrievalScope,
    ScoreBreakdown,
    SnapshotItem,
    SubQuery,
)
from scopelens.core.hashing import canonical_json, sha256_hex, text_hash
from scopelens.core.pipeline.policy import Policy
from scopelens.core.store.drift_checks import drift_check_hash, drift_result_hash
from scopelens.core.vocab import Authority, EvidenceKind, Source, Stage, SubQueryIntent, Trust, Visibility

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

FACTORY_POLICY = canonical_json(Policy())
"""The policy every made snapshot pins: pass it as ``write_snapshot(..., blobs=[FACTORY_POLICY])``."""


def make_snapshot(
    snapshot_id: str, session_id: str, *, turn: int = 1, texts: tuple[str, ...] = ("def f():\n    return 1",)
) -> tuple[AuditSnapshot, str]:
    """A minimal valid snapshot with one selected item per text and one rejection; and its block."""
    items = []
    for n, body in enumerate(texts, start=1):
        items.append(
            SnapshotItem(
                item_id=f"{snapshot_id}-i{n}",
                candidate_id=f"c{n}",
                citation_id=f"code#{n}",
                source=Source.WORKSPACE_CODE,
                source_ref=f"src/m{n}.py:1-2",
                source_version=text_hash(body),
                path=f"src/m{n}.py",
                line_start=1,
                line_end=2,
                captured_at=T0,
                evidence_kind=EvidenceKind.CODE,
                trust=Trust.EVIDENCE,
                authority=Authority.HIGH,
                visibility=Visibility.RAW,
                selected_reason="matched identifier",
                visible_text=body,
                visible_text_hash=text_hash(body),
                scores=ScoreBreakdown(lexical=0.5, final=0.5),
                rank=n,
            )
        )
    block = "\n".join(f"[{i.citation_id}] {i.visible_text}" for i in items)
    snapshot = AuditSnapshot(
        id=snapshot_id,
        session_id=session_id,
        turn=turn,
        created_at=T0,
        intent=RetrievalIntent(question="why does f fail"),
        scope=RetrievalScope(project="p"),
        plan=RetrievalPlan(
            sub_queries=(SubQuery(id="q1", intent=SubQueryIntent.FIND_CODE, query_text="f", sources=(Source.WORKSPACE_CODE,)),)
        ),
        stats={Stage.SELECTED: len(items), Stage.OUT_OF_SCOPE: 1},
        selected=tuple(items),
        rejected=(
            RejectedItem(
                candidate_id="c-out",
                source=Source.WORKSPACE_CODE,
                source_ref="other/x.py:1-3",
                source_version="0" * 64,
                path="other/x.py",
                stage=Stage.OUT_OF_SCOPE,
                reason="project other is outside the scope",
                from_probe=True,
            ),
        ),
        ranked=tuple(
            RankedEntry(
                rank=i.rank, candidate_id=i.candidate_id, source_ref=i.source_ref, path=i.path, final_score=0.5, selected=True
            )
            for i in items
        ),
        budget=BudgetRecord(max_tokens=1200, estimated_tokens=20, max_items=8, trimming_policy="keep-anchors"),
        projection=Projection(
            block_ref=sha256_hex(block.encode()),
            visible_text_hash=text_hash(block),
            nonce="n0",
            citation_map={
                i.citation_id: CitationEntry(
                    citation_id=i.citation_id,
                    item_id=i.item_id,
                    source_ref=i.source_ref,
                    visible_text_hash=i.visible_text_hash,
                    authority=i.authority,
                    evidence_kind=i.evidence_kind,
                )
                for i in items
            },
        ),
        pins=Pins(engine_version="test", config_hash="c", policy_hash=sha256_hex(FACTORY_POLICY), index_version="i"),
    )
    return snapshot, block


DRIFT_RUN_INSERT = (
    "INSERT INTO drift_runs (id, snapshot_id, created_at, index_version, engine_version, config_hash, summary, body, hash) "
    "VALUES (:id, :snapshot_id, :created_at, :index_version, :engine_version, 'c', :summary, :body, :hash)"
)
"""Insert a drift run row made by :func:`made_drift_run` (drift runs are written by compute_drift)."""


def made_drift_run(run_id: str, snapshot_id: str, session_id: str) -> dict[str, object]:
    """The column values of a well-formed drift run of a made snapshot, for DRIFT_RUN_INSERT."""
    report = DriftReport(
        id=run_id, snapshot_id=snapshot_id, session_id=session_id, created_at=T0,
        index_version_then="i", index_version_now="i2", engine_then="test", engine_now="test",
        config_changed=False, engine_changed=False, index_changed=True, items=(),
    )
    body = canonical_json(report)
    return {
        "id": run_id, "snapshot_id": snapshot_id, "created_at": stored_time(T0), "index_version": "i2",
        "engine_version": "test", "summary": report.summary(), "body": body, "hash": sha256_hex(body),
    }


DRIFT_CHECK_INSERT = (
    "INSERT INTO drift_checks (id, run_id, snapshot_id, checked_at, hash) "
    "VALUES (:id, :run_id, :snapshot_id, :checked_at, :hash)"
)
"""Insert a confirmation made by :func:`made_drift_check` (confirmations are written by compute_drift)."""


def made_drift_check(check_id: str, run: dict[str, object], *, after: timedelta = timedelta(hours=1)) -> dict[str, object]:
    """The column values of a well-formed confirmation of ``run`` (from :func:`made_drift_run`),
    checked ``after`` the run, for DRIFT_CHECK_INSERT."""
    body = run["body"]
    assert isinstance(body, bytes)
    checked_at = stored_time(T0 + after)
    values = {"id": check_id, "run_id": str(run["id"]), "snapshot_id": str(run["snapshot_id"]), "checked_at": checked_at}
    digest = drift_check_hash(
        check_id=check_id, run_id=values["run_id"], snapshot_id=values["snapshot_id"], checked_at=checked_at,
        result_hash=drift_result_hash(body, "c"),  # the config_hash DRIFT_RUN_INSERT writes
    )
    return {**values, "hash": digest}
