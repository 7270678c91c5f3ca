"""Drift: re-run a snapshot's recorded plan, under its recorded scope and policy, against
today's index, and classify every item.

Each frozen item is matched to at most one item of today, then classified by what differs
(the classes and their precedence are defined in ``core/vocab.py``, ``DriftClass``):
``relabelled`` > ``content-changed`` > ``shifted`` > ``moved`` > ``unchanged``, plus ``added``
and ``removed`` for what has no match. ``changed_elsewhere`` says apart from the class that the
source has a new version while the item's own text is the same: a file's version is the whole
file's hash, so an edit anywhere in it is not a change of every item in it.

Items are located by ``(branch, workspace root, source_ref)``: with no root in the scope, one
retrieval reads every root of the project, and a source_ref names lines in each. The branch,
root and symbol of a workspace item come from its chunk in the index (the snapshot does not
carry them); a frozen item whose chunk no longer matches it is matched by source_ref alone.

Matching runs in passes, each over every frozen item before the next, so that a weak match
never takes an item of today that a strong one needs: (1) the same place, source_ref and
text; (2) the same place, path and text at another range (``shifted``); (3) the same place and
source_ref, the text changed; (4) the same place, path and symbol at another range, the text
changed. Passes 2 and 4 need a single candidate.

The report also says whether the engine or its configuration changed since the snapshot
(from what the snapshot pins), apart from the index (``index_changed``: runs after the pinned
index version that changed something). A drift run is recorded in
``drift_runs`` (when, against which index version) and never modifies the snapshot.

A re-run that finds what the last recorded run of its snapshot found (the same report but for
its id and time, under the same engine configuration: ``core/store/drift_checks.py``) writes
no new run: it appends a confirmation of that run to ``drift_checks`` ("checked at T,
unchanged"), and :class:`DriftOutcome` says which of the two it recorded, or that it recorded
nothing (a read-only store, or ``record=False``).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic import ValidationError
from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from scopelens.core import ENGINE_VERSION
from scopelens.core.clock import Clock, SystemClock, stored_time
from scopelens.core.contracts import (
    AuditSnapshot,
    DriftItem,
    DriftReport,
    Event,
    LabelChange,
    RejectedItem,
    RetrievalScope,
    SnapshotItem,
)
from scopelens.core.errors import IntegrityError, UnknownIdError
from scopelens.core.hashing import as_bytes, canonical_json, document_hash, sha256_hex, text_hash
from scopelens.core.index.chunks import fetch_chunks
from scopelens.core.index.indexer import index_version
from scopelens.core.index.scorer import Scorer
from scopelens.core.pipeline import rerank as rerank_module
from scopelens.core.pipeline.policy import Policy
from scopelens.core.pipeline.retriever import bind_citations, current_pins, engine_config, run_pipeline
from scopelens.core.store.drift_checks import drift_check_hash, drift_result_hash
from scopelens.core.store.store import Store, stored_time_or_none
from scopelens.core.store.tables import DriftCheckRow, DriftRunRow, IndexRunRow
from scopelens.core.vocab import DRIFT_CLASS_PRECEDENCE, WORKSPACE_SOURCES, DriftClass, EventType, Stage


@dataclass(frozen=True)
class DriftRunSummary:
    """One recorded drift run, and the re-runs since that found the same (its confirmations)."""

    id: str
    snapshot_id: str
    created_at: str
    index_version: str
    summary: str
    checks: int = 0
    """How many later re-runs found what this run found (rows of ``drift_checks``)."""
    last_checked_at: str | None = None
    """When the last of them ran (a stored time); None when none has."""

    @property
    def last_seen_at(self) -> str:
        """The last time drift found this result: the last confirmation, else the run itself."""
        return self.last_checked_at or self.created_at


DriftRecorded = Literal["new run", "confirmed", "not recorded"]
"""What a drift re-run recorded: a new run, a confirmation of the last run, or nothing."""


@dataclass(frozen=True)
class DriftOutcome:
    """What :func:`compute_drift` found and what it recorded.

    ``report`` is the run to show: the new run's report; for a confirmation, the confirmed
    run's own report (its id and time; the re-run found the same at ``checked_at``); when
    nothing was recorded, the report computed now (with an id no run has).
    """

    report: DriftReport
    recorded: DriftRecorded
    confirmed_run_id: str | None = None
    """The run a confirmation confirms (``report.id``); None unless ``recorded == "confirmed"``."""
    check_id: str | None = None
    """The confirmation's id in ``drift_checks``; None unless ``recorded == "confirmed"``."""
    checked_at: datetime | None = None
    """When the re-run that confirmed ran; None unless ``recorded == "confirmed"``."""


@dataclass(frozen=True)
class _Place:
    """Where an item's lines live: its branch and workspace root, the chunk's symbol, and the
    hash of the chunk's whole text (before budget trimming: what the source says at the range)."""

    branch: str | None
    root: str | None
    symbol: str | None
    source_text_hash: str | None = None


_RECORD = _Place(None, None, None)
"""The place of a record (a memory, an event, an artifact): one per source_ref."""

Located = SnapshotItem | RejectedItem


def _chunk_id(candidate_id: str) -> int | None:
    prefix, _, number = candidate_id.partition(":")
    return int(number) if prefix == "chunk" and number.isdigit() else None


def locate(store: Store, items: Iterable[Located]) -> dict[str, _Place | None]:
    """The place of each item, by candidate id; None when it cannot be known.

    A workspace item's place is its chunk's. A frozen item's chunk id is trusted only while
    that chunk is still the item's own lines of its own version: a store rebuilt without its
    index reuses the ids for other chunks.
    """
    items = list(items)
    chunk_ids = {item.candidate_id: n for item in items if (n := _chunk_id(item.candidate_id)) is not None}
    chunks = fetch_chunks(store, chunk_ids.values())
    places: dict[str, _Place | None] = {}
    for item in items:
        if item.candidate_id not in chunk_ids:
            places[item.candidate_id] = _RECORD if item.source not in WORKSPACE_SOURCES else None
            continue
        chunk = chunks.get(chunk_ids[item.candidate_id])
        own = chunk is not None and (chunk.path, chunk.start_line, chunk.end_line, chunk.content_hash) == (
            item.path, item.line_start, item.line_end, item.source_version
        )
        places[item.candidate_id] = (
            _Place(chunk.branch or None, chunk.root, chunk.symbol, text_hash(chunk.text)) if chunk and own else None
        )
    return places


def _same_place(then: _Place | None, now: _Place | None) -> bool:
    return then is None or now is None or (then.branch, then.root) == (now.branch, now.root)


def _same_symbol(then: _Place | None, now: _Place | None) -> bool:
    """Equal symbols (no symbol on both counts as equal); an unknown place agrees with any."""
    return then is None or now is None or then.symbol == now.symbol


def _compatible_symbol(then: _Place | None, now: _Place | None) -> bool:
    """At one range: not two different named definitions."""
    return then is None or now is None or then.symbol is None or now.symbol is None or then.symbol == now.symbol


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
    policy_hash = snapshot.retrieval.pins.policy_hash
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


def _same_source_text(then: SnapshotItem, at: _Place | None, now: SnapshotItem, now_at: _Place | None) -> bool:
    """Whether the source says the same at both items' ranges, however each was trimmed.

    The same version of the same range says the same; chunks located in the index compare
    their whole texts; otherwise (a record, or a chunk no longer in the index) only the
    visible texts can be compared.
    """
    if then.source_ref == now.source_ref and then.source_version == now.source_version:
        return True
    if at is not None and now_at is not None and at.source_text_hash and now_at.source_text_hash:
        return at.source_text_hash == now_at.source_text_hash
    return then.visible_text == now.visible_text


def _same_lines_same_text(then: SnapshotItem, at: _Place | None, now: SnapshotItem, now_at: _Place | None) -> bool:
    return _same_place(at, now_at) and now.source_ref == then.source_ref and _same_source_text(then, at, now, now_at)


def _other_lines_same_text(then: SnapshotItem, at: _Place | None, now: SnapshotItem, now_at: _Place | None) -> bool:
    return (_same_place(at, now_at) and then.path is not None and now.path == then.path
            and _same_source_text(then, at, now, now_at))


def _same_lines_new_text(then: SnapshotItem, at: _Place | None, now: SnapshotItem, now_at: _Place | None) -> bool:
    return _same_place(at, now_at) and now.source_ref == then.source_ref and _compatible_symbol(at, now_at)


def _same_symbol_new_lines(then: SnapshotItem, at: _Place | None, now: SnapshotItem, now_at: _Place | None) -> bool:
    return _same_place(at, now_at) and then.path is not None and now.path == then.path and _same_symbol(at, now_at)


Pass = Callable[[SnapshotItem, _Place | None, SnapshotItem, _Place | None], bool]
_PASSES: tuple[tuple[Pass, bool], ...] = (
    (_same_lines_same_text, False),
    (_other_lines_same_text, True),
    (_same_lines_new_text, False),
    (_same_symbol_new_lines, True),
)
"""The matching passes, strongest first, each with whether it needs a single candidate."""


def classify(
    frozen: AuditSnapshot,
    today: list[SnapshotItem],
    rejected_today: list[RejectedItem],
    places_then: dict[str, _Place | None] | None = None,
    places_now: dict[str, _Place | None] | None = None,
) -> list[DriftItem]:
    """Match frozen items to today's and classify each (frozen order, then additions).

    ``places_then`` and ``places_now`` come from :func:`locate`; without them every item's
    place is unknown and items are matched by source_ref, path and text alone.
    """
    then_at = (places_then or {}).get
    now_at = (places_now or {}).get
    unmatched = sorted(today, key=lambda i: i.rank)
    matches: dict[int, SnapshotItem] = {}
    for test, single in _PASSES:
        for index, then in enumerate(frozen.selected):
            if index in matches:
                continue
            found = [n for n in unmatched if test(then, then_at(then.candidate_id), n, now_at(n.candidate_id))]
            if found and (len(found) == 1 or not single):
                matches[index] = found[0]
                unmatched.remove(found[0])
    results: list[DriftItem] = []
    for index, then in enumerate(frozen.selected):
        if index in matches:
            now = matches[index]
            results.append(_compare(then, now, then_at(then.candidate_id), now_at(now.candidate_id)))
            continue
        place = then_at(then.candidate_id)
        stage, reason = _now_rejected(then, place, rejected_today, now_at)
        results.append(
            DriftItem(drift_class=DriftClass.REMOVED, source_ref=then.source_ref, path=then.path,
                      frozen_rank=then.rank, frozen_version=then.source_version, stage_today=stage, reason=reason,
                      frozen_citation=then.citation_id, **_where(place))
        )
    for now in unmatched:
        results.append(
            DriftItem(drift_class=DriftClass.ADDED, source_ref=now.source_ref, path=now.path,
                      today_rank=now.rank, today_version=now.source_version, reason="selected today only",
                      today_citation=now.citation_id, **_where(now_at(now.candidate_id)))
        )
    return results


def _where(place: _Place | None) -> dict[str, str | None]:
    return {"branch": place.branch, "workspace_root": place.root} if place else {}


_LABELS: tuple[tuple[str, str], ...] = (
    ("source", "source"), ("evidence-kind", "evidence_kind"), ("authority", "authority"), ("trust", "trust"),
    ("visibility", "visibility"),
)


def _compare(then: SnapshotItem, now: SnapshotItem, at: _Place | None, now_at: _Place | None) -> DriftItem:
    """One matched pair: every difference recorded, the class by precedence (see DriftClass).

    ``content-changed`` means the source says something else at the item's range; the same
    text trimmed otherwise for today's budget is noted, with the diff of what is shown."""
    place = now_at or at
    labels = tuple(
        LabelChange(field=name, then=str(getattr(then, attr)), now=str(getattr(now, attr)))
        for name, attr in _LABELS
        if getattr(then, attr) != getattr(now, attr)
    )
    shown_otherwise = then.visible_text != now.visible_text
    text_changed = not _same_source_text(then, at, now, now_at)
    lines_changed = then.source_ref != now.source_ref
    applies = {
        DriftClass.RELABELLED: bool(labels),
        DriftClass.CONTENT_CHANGED: text_changed,
        DriftClass.SHIFTED: lines_changed,
        DriftClass.MOVED: then.rank != now.rank or then.citation_id != now.citation_id,
        DriftClass.UNCHANGED: True,
    }
    drift_class = next(c for c in DRIFT_CLASS_PRECEDENCE if applies[c])
    changed_elsewhere = not text_changed and then.source_version != now.source_version
    notes = []
    if then.citation_id != now.citation_id:
        notes.append(f"{then.citation_id} -> {now.citation_id}")
    notes += [f"{change.field} {change.then} -> {change.now}" for change in labels]
    if text_changed and drift_class != DriftClass.CONTENT_CHANGED:
        notes.append("text changed too (see the diff)")
    if shown_otherwise and not text_changed:
        notes.append("same text at these lines, shown otherwise (trimmed or projected)")
    if lines_changed:
        notes.append(_range_note(then, now))
    if then.rank != now.rank:
        notes.append(f"rank {then.rank} -> {now.rank}")
    if changed_elsewhere:
        notes.append("file changed outside these lines" if now.path and now.source in WORKSPACE_SOURCES
                     else "record changed, not its text")
    return DriftItem(
        drift_class=drift_class, source_ref=now.source_ref, path=now.path, frozen_rank=then.rank, today_rank=now.rank,
        frozen_version=then.source_version, today_version=now.source_version,
        diff=_diff(then, now) if shown_otherwise else None, reason="; ".join(notes) or None,
        frozen_source_ref=then.source_ref if lines_changed else None,
        frozen_citation=then.citation_id, today_citation=now.citation_id, label_changes=labels,
        changed_elsewhere=changed_elsewhere, **_where(place),
    )


def _range_note(then: SnapshotItem, now: SnapshotItem) -> str:
    if then.path == now.path and None not in (then.line_start, then.line_end, now.line_start, now.line_end):
        return f"lines {then.line_start}-{then.line_end} -> {now.line_start}-{now.line_end}"
    return f"was {then.source_ref}"


def _now_rejected(
    then: SnapshotItem, place: _Place | None, rejected_today: list[RejectedItem],
    now_at: Callable[[str], _Place | None],
) -> tuple[Stage, str]:
    """The stage a removed item meets today: its own source_ref's rejection first, then its file's."""
    here = [r for r in rejected_today if _same_place(place, now_at(r.candidate_id))]
    for rejected in (*[r for r in here if r.source_ref == then.source_ref],
                     *[r for r in here if then.path is not None and r.path == then.path]):
        return rejected.stage, rejected.reason
    return Stage.NOT_RECALLED, "not recalled by today's search (gone from the index or outranked)"


def index_changed(store: Store, scope: RetrievalScope, then: str, now: str) -> bool:
    """Whether today's index version (``now``) differs in content from the pinned one (``then``).

    Versions are ``project@branch#N``, numbered per project and branch; a store from before
    that kept its runs' old numbers (their ids), which are what its snapshots pinned, so
    both compare alike. Different versions mean a change, except that stores written before
    no-change runs were skipped may hold runs that added, changed and removed nothing: when
    every run after the pinned one, up to today's, is such a run, nothing changed.
    """
    if then == now:
        return False
    statement = select(IndexRunRow).where(col(IndexRunRow.project) == scope.project, col(IndexRunRow.finished_at).is_not(None))
    if scope.branch is not None:
        statement = statement.where(col(IndexRunRow.branch) == scope.branch)
    with store.read() as conn:
        runs = list(conn.exec(statement))
    named = {index_version(scope.project, run.branch, int(run.version)): run for run in runs}
    pinned, today = named.get(then), named.get(now)
    if pinned is None or today is None or pinned.branch != today.branch or today.version < pinned.version:
        return True
    return any(
        run.added or run.changed or run.removed
        for run in runs
        if run.branch == today.branch and pinned.version < run.version <= today.version
    )


def compute_drift(
    store: Store,
    snapshot_id: str,
    *,
    clock: Clock | None = None,
    scorer: Scorer | None = None,
    record: bool = True,
) -> DriftOutcome:
    """Re-run the snapshot's plan against today's index and record what it found, unless told
    not to (or the store is read-only): a new run, or, when the last recorded run of the
    snapshot found the same, a confirmation of that run."""
    clock = clock or store.clock or SystemClock()
    stored = store.get_snapshot(snapshot_id)
    frozen = stored.snapshot
    parts = frozen.retrieval
    policy = recorded_policy(store, frozen)
    scope = parts.scope.model_copy(update={"time_boundary": parts.scope.time_boundary.model_copy(update={"as_of": None})})
    now = clock.now()
    scorer = scorer or Scorer(store)
    outcome = run_pipeline(store, scorer, policy, parts.intent, scope, parts.plan, now)
    today = bind_citations("drift", outcome.fitted, outcome.labels, rerank_module.WEIGHTS[scope.purpose])
    pins_now = current_pins(store, scope, policy)
    found = DriftReport(
        id="",  # named when it is recorded as a new run (or returned unrecorded)
        snapshot_id=snapshot_id,
        session_id=frozen.session_id,
        created_at=now,
        index_version_then=parts.pins.index_version,
        index_version_now=pins_now.index_version,
        engine_then=parts.pins.engine_version,
        engine_now=ENGINE_VERSION,
        engine_changed=parts.pins.engine_version != ENGINE_VERSION,
        config_changed=parts.pins.config_hash != document_hash(engine_config()),
        index_changed=index_changed(store, scope, parts.pins.index_version, pins_now.index_version),
        items=tuple(classify(frozen, today, outcome.rejected, locate(store, frozen.selected),
                             locate(store, [*today, *outcome.rejected]))),
    )
    if not record or store.read_only:
        return DriftOutcome(found.model_copy(update={"id": store.ids.new_id("drift")}), "not recorded")
    config_hash = document_hash(engine_config())
    result = drift_result_hash(canonical_json(found), config_hash)
    with store.write() as conn:
        # Read the last run in the write transaction, so that on SQLite (whose write lock is
        # taken at its start) a run recorded meanwhile is the one compared with.
        last = _last_run(conn, snapshot_id)
        if last is not None and _found_again(last, result, now):
            check_id = store.ids.new_id("drift-check")
            checked_at = stored_time(now)
            conn.add(
                DriftCheckRow(
                    id=check_id, run_id=last.id, snapshot_id=snapshot_id, checked_at=checked_at,
                    hash=drift_check_hash(check_id=check_id, run_id=last.id, snapshot_id=snapshot_id,
                                          checked_at=checked_at, result_hash=result),
                )
            )
            confirmed = DriftReport.model_validate_json(as_bytes(last.body))
            return DriftOutcome(confirmed, "confirmed", confirmed_run_id=last.id, check_id=check_id, checked_at=now)
        report = found.model_copy(update={"id": store.ids.new_id("drift"), "config_hash": config_hash})
        body = canonical_json(report)
        conn.add(
            DriftRunRow(
                id=report.id, snapshot_id=snapshot_id, created_at=stored_time(now),
                index_version=report.index_version_now, engine_version=report.engine_now,
                config_hash=config_hash, summary=report.summary(),
                body=body, hash=sha256_hex(body),
            )
        )
    return DriftOutcome(report, "new run")


def _last_run(conn: Session, snapshot_id: str) -> DriftRunRow | None:
    """The snapshot's last recorded run, in the order :func:`list_drift_runs` lists them."""
    statement = (
        select(DriftRunRow)
        .where(col(DriftRunRow.snapshot_id) == snapshot_id)
        .order_by(col(DriftRunRow.created_at).desc(), col(DriftRunRow.id).desc())
        .limit(1)
    )
    return conn.exec(statement).first()


def _found_again(last: DriftRunRow, result: str, now: datetime) -> bool:
    """Whether a re-run at ``now`` with result hash ``result`` confirms the run ``last``.

    Only a run whose bytes match its hash is confirmed (a damaged run is superseded by a new
    one, never vouched for), and only from a time no earlier than the run's (a clock set back
    records a new run: verify holds a confirmation to its run's time).
    """
    body = as_bytes(last.body)
    if sha256_hex(body) != last.hash:
        return False
    recorded_at = stored_time_or_none(last.created_at)
    if recorded_at is None or now < recorded_at:
        return False
    try:
        return drift_result_hash(body, last.config_hash) == result
    except ValueError:
        return False


def snapshot_turns_of(events: Iterable[Event]) -> list[tuple[str, int]]:
    """(snapshot id, turn) of each snapshot event, in the order recorded (an event without its
    snapshot id, as in a damaged store, names none)."""
    return [
        (str(e.payload["snapshot_id"]), e.turn)
        for e in events
        if e.type == EventType.RETRIEVAL_SNAPSHOT_CREATED and "snapshot_id" in e.payload
    ]


def session_snapshot_ids(store: Store, session_id: str) -> list[str]:
    return [snapshot_id for snapshot_id, _turn in snapshot_turns_of(store.events(session_id))]


def drift_session(
    store: Store, session_id: str, *, clock: Clock | None = None, progress: Callable[[int, int], None] | None = None
) -> list[DriftOutcome]:
    """Drift for every snapshot of a session, sharing one scorer (its caches)."""
    ids = session_snapshot_ids(store, session_id)
    scorer = Scorer(store)
    outcomes = []
    for done, snapshot_id in enumerate(ids, start=1):
        outcomes.append(compute_drift(store, snapshot_id, clock=clock, scorer=scorer))
        if progress:
            progress(done, len(ids))
    return outcomes


def list_drift_runs(store: Store, snapshot_id: str | None = None) -> list[DriftRunSummary]:
    """Recorded runs, oldest first, each with how often and when last it was confirmed."""
    statement = select(DriftRunRow).order_by(col(DriftRunRow.created_at), col(DriftRunRow.id))
    checks = sa_select(
        col(DriftCheckRow.run_id), func.count(), func.max(col(DriftCheckRow.checked_at))
    ).group_by(col(DriftCheckRow.run_id))
    if snapshot_id is not None:
        statement = statement.where(col(DriftRunRow.snapshot_id) == snapshot_id)
        checks = checks.where(col(DriftCheckRow.snapshot_id) == snapshot_id)
    with store.read() as conn:
        rows = list(conn.exec(statement))
        confirmed = {run_id: (int(count), last) for run_id, count, last in conn.execute(checks)}
    return [
        DriftRunSummary(r.id, r.snapshot_id, r.created_at, r.index_version, r.summary, *confirmed.get(r.id, (0, None)))
        for r in rows
    ]


def load_drift_run(store: Store, run_id: str) -> DriftReport:
    with store.read() as conn:
        row = conn.get(DriftRunRow, run_id)
    if row is None:
        raise UnknownIdError(f"no drift run {run_id!r} in this store")
    return DriftReport.model_validate(json.loads(as_bytes(row.body)))

