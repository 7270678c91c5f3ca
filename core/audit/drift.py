"""Drift: re-run a snapshot's recorded plan, under its recorded scope and policy, against
today's index, and classify every item.

Classes: ``unchanged``; ``moved`` (same item, another rank); ``content-changed`` (the same
source, a new version; with a unified diff of the visible text); ``added`` (selected today
only); ``removed`` (selected then, not today; with the stage it now meets). Items are matched
by source_ref first, then by path and symbol, so an edit that shifts a function's lines is
``content-changed``, not removed-and-added.

The report also says whether the engine or its configuration changed since the snapshot
(from what the snapshot pins), apart from the index. A drift run is recorded in
``drift_runs`` (when, against which index version) and never modifies the snapshot.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import ValidationError
from sqlmodel import col, select

from scopelens.core import ENGINE_VERSION
from scopelens.core.clock import Clock, SystemClock, stored_time
from scopelens.core.contracts import AuditSnapshot, DriftItem, DriftReport, RejectedItem, SnapshotItem
from scopelens.core.errors import IntegrityError, UnknownIdError
from scopelens.core.hashing import as_bytes, canonical_json, document_hash, sha256_hex
from scopelens.core.index.scorer import Scorer
from scopelens.core.pipeline import rerank as rerank_module
from scopelens.core.pipeline.policy import Policy
from scopelens.core.pipeline.retriever import bind_citations, current_pins, engine_config, run_pipeline
from scopelens.core.store.store import Store
from scopelens.core.store.tables import DriftRunRow
from scopelens.core.vocab import DriftClass, Stage


@dataclass(frozen=True)
class DriftRunSummary:
    id: str
    snapshot_id: str
    created_at: str
    index_version: str
    summary: str


def _key(item: SnapshotItem | RejectedItem) -> tuple[str | None, str | None]:
    return (item.path or item.source_ref, item.symbol)


def _diff(then: SnapshotItem, now: SnapshotItem) -> str:
    """A unified diff; a last line without a newline is marked as GNU diff marks it, so
    the removed and the added line never run together."""
    lines = difflib.unified_diff(
        then.visible_text.splitlines(keepends=True),
        now.visible_text.splitlines(keepends=True),
        fromfile=f"{then.source_ref}@{then.source_version[:12]}",
        tofile=f"{now.source_ref}@{now.source_version[:12]}",
    )
    return "".join(line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n" for line in lines)


def recorded_policy(store: Store, snapshot: AuditSnapshot) -> Policy:
    """The policy the snapshot ran under, from its content-addressed blob.

    Never a default in its place: drift under another policy would report differences the
    snapshot's own scope never had (or hide ones it had).
    """
    policy_hash = snapshot.pins.policy_hash
    try:
        return Policy.model_validate_json(store.get_blob(policy_hash))
    except UnknownIdError:
        raise IntegrityError(
            f"snapshot {snapshot.id}: the policy it ran under (blob {policy_hash[:12]}…) is missing from the store; "
            "run `scopelens verify`"
        ) from None
    except ValidationError:
        raise IntegrityError(
            f"snapshot {snapshot.id}: the policy it ran under (blob {policy_hash[:12]}…) is not a readable policy"
        ) from None


def classify(frozen: AuditSnapshot, today: list[SnapshotItem], rejected_today: list[RejectedItem]) -> list[DriftItem]:
    """Match frozen items to today's and classify each (frozen order, then additions)."""
    by_ref = {item.source_ref: item for item in today}
    unmatched_today = {item.source_ref: item for item in today}
    results: list[DriftItem] = []
    pending: list[SnapshotItem] = []
    for then in frozen.selected:
        now = by_ref.get(then.source_ref)
        if now is None:
            pending.append(then)
            continue
        unmatched_today.pop(now.source_ref, None)
        results.append(_compare(then, now))
    for then in pending:
        same = [i for i in unmatched_today.values() if _key(i) == _key(then)]
        if len(same) == 1:
            now = same[0]
            unmatched_today.pop(now.source_ref)
            results.append(_compare(then, now))
            continue
        stage, reason = _now_rejected(then, rejected_today)
        results.append(
            DriftItem(drift_class=DriftClass.REMOVED, source_ref=then.source_ref, path=then.path,
                      frozen_rank=then.rank, frozen_version=then.source_version, stage_today=stage, reason=reason)
        )
    for now in sorted(unmatched_today.values(), key=lambda i: i.rank):
        results.append(
            DriftItem(drift_class=DriftClass.ADDED, source_ref=now.source_ref, path=now.path,
                      today_rank=now.rank, today_version=now.source_version, reason="selected today only")
        )
    return results


def _compare(then: SnapshotItem, now: SnapshotItem) -> DriftItem:
    common = {"source_ref": now.source_ref, "path": now.path, "frozen_rank": then.rank, "today_rank": now.rank,
                  "frozen_version": then.source_version, "today_version": now.source_version}
    if then.source_version != now.source_version or then.visible_text != now.visible_text:
        return DriftItem(drift_class=DriftClass.CONTENT_CHANGED, diff=_diff(then, now),
                         reason=f"was {then.source_ref}" if then.source_ref != now.source_ref else None, **common)
    if then.rank != now.rank:
        return DriftItem(drift_class=DriftClass.MOVED, reason=f"rank {then.rank} -> {now.rank}", **common)
    return DriftItem(drift_class=DriftClass.UNCHANGED, **common)


def _now_rejected(then: SnapshotItem, rejected_today: list[RejectedItem]) -> tuple[Stage, str]:
    for rejected in rejected_today:
        if rejected.source_ref == then.source_ref or _key(rejected) == _key(then):
            return rejected.stage, rejected.reason
    return Stage.NOT_RECALLED, "not recalled by today's search (gone from the index or outranked)"


def compute_drift(
    store: Store,
    snapshot_id: str,
    *,
    clock: Clock | None = None,
    scorer: Scorer | None = None,
    record: bool = True,
) -> DriftReport:
    """Re-run the snapshot's plan against today's index; record the run unless told not to."""
    clock = clock or store.clock or SystemClock()
    stored = store.get_snapshot(snapshot_id)
    frozen = stored.snapshot
    policy = recorded_policy(store, frozen)
    scope = frozen.scope.model_copy(
        update={"time_boundary": frozen.scope.time_boundary.model_copy(update={"as_of": None})}
    )
    now = clock.now()
    scorer = scorer or Scorer(store)
    outcome = run_pipeline(store, scorer, policy, frozen.intent, scope, frozen.plan, now)
    today = bind_citations("drift", outcome.fitted, outcome.labels, rerank_module.WEIGHTS[scope.purpose])
    pins_now = current_pins(store, scope, policy)
    report = DriftReport(
        id=store.ids.new_id("drift"),
        snapshot_id=snapshot_id,
        session_id=frozen.session_id,
        created_at=now,
        index_version_then=frozen.pins.index_version,
        index_version_now=pins_now.index_version,
        engine_then=frozen.pins.engine_version,
        engine_now=ENGINE_VERSION,
        engine_changed=frozen.pins.engine_version != ENGINE_VERSION,
        config_changed=frozen.pins.config_hash != document_hash(engine_config()),
        index_changed=frozen.pins.index_version != pins_now.index_version,
        items=tuple(classify(frozen, today, outcome.rejected)),
    )
    if record and not store.read_only:
        body = canonical_json(report)
        with store.write() as conn:
            conn.add(
                DriftRunRow(
                    id=report.id, snapshot_id=snapshot_id, created_at=stored_time(now),
                    index_version=report.index_version_now, engine_version=report.engine_now,
                    config_hash=document_hash(engine_config()), summary=report.summary(),
                    body=body, hash=sha256_hex(body),
                )
            )
    return report


def session_snapshot_ids(store: Store, session_id: str) -> list[str]:
    return [
        e.payload["snapshot_id"] for e in store.events(session_id) if e.type.value == "retrieval.snapshot.created"
    ]


def drift_session(
    store: Store, session_id: str, *, clock: Clock | None = None, progress: Callable[[int, int], None] | None = None
) -> list[DriftReport]:
    """Drift for every snapshot of a session, sharing one scorer (its caches)."""
    ids = session_snapshot_ids(store, session_id)
    scorer = Scorer(store)
    reports = []
    for done, snapshot_id in enumerate(ids, start=1):
        reports.append(compute_drift(store, snapshot_id, clock=clock, scorer=scorer))
        if progress:
            progress(done, len(ids))
    return reports


def list_drift_runs(store: Store, snapshot_id: str | None = None) -> list[DriftRunSummary]:
    statement = select(DriftRunRow).order_by(col(DriftRunRow.created_at), col(DriftRunRow.id))
    if snapshot_id is not None:
        statement = statement.where(col(DriftRunRow.snapshot_id) == snapshot_id)
    with store.read() as conn:
        rows = list(conn.exec(statement))
    return [DriftRunSummary(r.id, r.snapshot_id, r.created_at, r.index_version, r.summary) for r in rows]


def load_drift_run(store: Store, run_id: str) -> DriftReport:
    with store.read() as conn:
        row = conn.get(DriftRunRow, run_id)
    if row is None:
        raise UnknownIdError(f"no drift run {run_id!r} in this store")
    return DriftReport.model_validate(json.loads(as_bytes(row.body)))

