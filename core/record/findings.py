"""Findings: the failure forms of scoped retrieval, detected from recorded facts.

The seed essay (section 十) names seven ways retrieval misleads an agent. scopelens cannot
stop a harness from asking for a bad scope or a model from citing badly; its job is to make
each form *visible* in the record. A finding says which form, where (session, turn,
snapshot, source_ref), and one line of why, with an **outcome**:

* ``occurred``: the failure reached model-visible text or the model's reply;
* ``prevented``: the engine withheld the polluting evidence at a recorded stage;
* ``detected``: a condition the record exposes without a model-visible effect (the index
  moved on since a snapshot: a replay that re-searched would see something else).

Each rule below is documented in ``docs/session-scripts.md``; they read only the snapshot,
the reply and the store (``facts.py``), never the script's intentions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from scopelens.core.clock import when
from scopelens.core.contracts import SCORE_COMPONENTS, AuditSnapshot, Contract, SnapshotItem
from scopelens.core.pipeline.probe import OTHER_PROJECTS_PREFIX, place_withheld
from scopelens.core.pipeline.rerank import WEIGHTS
from scopelens.core.record import facts
from scopelens.core.store.store import Store
from scopelens.core.textsafety import clip, listing
from scopelens.core.vocab import (
    WORKSPACE_SOURCES,
    DriftClass,
    EvidenceKind,
    FindingKind,
    MemoryStatus,
    Outcome,
    Source,
    Stage,
    Visibility,
)


class Finding(Contract):
    """One failure form found in a recorded session."""

    kind: FindingKind
    outcome: Outcome
    scenario: str
    session_id: str
    turn: int
    snapshot_id: str | None = None
    source_ref: str | None = None
    citation_id: str | None = None
    stage: Stage | None = None
    explanation: str

    def one_line(self) -> str:
        where = f"turn {self.turn}"
        if self.snapshot_id:
            where += f" {self.snapshot_id}"
        if self.source_ref:
            where += f" {self.source_ref}"
        return f"{self.kind.value} ({self.outcome.value}) {where}: {self.explanation}"


EXCEPTION_LINE = re.compile(
    r"\b(never|must not|mustn't|do not|don't|does not apply|except|exception|unless|however|instead|"
    r"forbidden|not allowed|prohibited)\b|禁止|してはいけない|しないこと|してはならない|ではなく|例外",
    re.IGNORECASE,
)
"""A line that states an exception or a prohibition: what budget trimming must not lose silently."""


LOCATED_KINDS = frozenset({EvidenceKind.CODE, EvidenceKind.DOC, EvidenceKind.TEST_LOG, EvidenceKind.EVENT})
"""Evidence kinds tied to a place or a moment, whose nearness to the task can be scored."""


@dataclass
class FindingContext:
    """What the rules know about the session being recorded, and what they already said."""

    scenario: str
    session_id: str
    project: str
    findings: list[Finding] = field(default_factory=list)
    overlap_places: dict[str, tuple[str, Source]] = field(default_factory=dict)
    """source_ref -> (path, source) of the workspace files selected on word overlap alone: a
    later scope's masks may keep those out (a log or an event has no such place)."""
    _said: set[tuple[str, str, str]] = field(default_factory=set)

    def add(self, finding: Finding, *, once: bool = False) -> None:
        """Record a finding; ``once`` keeps only the first per (kind, outcome, source_ref) in the session."""
        key = (finding.kind.value, finding.outcome.value, finding.source_ref or "")
        if once and key in self._said:
            return
        self._said.add(key)
        self.findings.append(finding)

    def make(self, kind: FindingKind, outcome: Outcome, turn: int, explanation: str, **where: object) -> Finding:
        return Finding(
            kind=kind, outcome=outcome, scenario=self.scenario, session_id=self.session_id, turn=turn,
            explanation=explanation, **where,
        )


# --------------------------------------------------------------------------- per snapshot


def snapshot_findings(store: Store, snapshot: AuditSnapshot, ctx: FindingContext) -> None:
    """Every rule that reads one snapshot, run right after it is written."""
    _similarity(snapshot, ctx)
    _time(store, snapshot, ctx)
    _permission(store, snapshot, ctx)
    _candidate_memory(store, snapshot, ctx)
    _budget_trim(store, snapshot, ctx)


def _similarity(snapshot: AuditSnapshot, ctx: FindingContext) -> None:
    """Selected on word overlap alone; or, later, withheld by a retrieval that fixed the scope.

    Occurred: a selected item of a *located* kind (code, doc, test-log, event: evidence tied
    to a place or a moment) that hits no anchor (anchor 0), lies outside the current files'
    neighbourhood (scope 0), and whose largest weighted score component under the purpose is
    ``lexical``. Rules, decisions and memories are project-wide guidance, judged by
    governance rather than by nearness; the session's own events are the task itself.
    Prevented: an item that an earlier snapshot of the session selected that way, which
    this snapshot did not select.
    """
    weights = WEIGHTS[snapshot.retrieval.scope.purpose]
    selected = {item.source_ref for item in snapshot.selected}
    for item in snapshot.selected:
        scores = item.scores
        if scores.anchor or scores.scope or item.evidence_kind not in LOCATED_KINDS:
            continue
        if item.source == Source.SESSION_EVENT and item.source_ref.startswith(f"{ctx.session_id}#"):
            continue  # the session's own conversation is the task itself, not a look-alike
        contributions = {name: weights[name] * getattr(scores, name) for name in SCORE_COMPONENTS}
        best = max(contributions, key=lambda name: (contributions[name], name == "lexical"))
        if best != "lexical" or not scores.lexical:
            continue
        ctx.add(ctx.make(
            FindingKind.SIMILARITY_POLLUTION, Outcome.OCCURRED, snapshot.turn,
            f"selected on word overlap alone (lexical {scores.lexical:.2f}, anchor 0, scope 0, "
            f"{item.evidence_kind.value}) at rank {item.rank} "
            f"as [{item.citation_id}]: similar is not relevant",
            snapshot_id=snapshot.id, source_ref=item.source_ref, citation_id=item.citation_id,
            stage=Stage.SELECTED,
        ))
        if item.path and item.source in WORKSPACE_SOURCES:
            ctx.overlap_places[item.source_ref] = (item.path, item.source)
    earlier = [
        f for f in ctx.findings
        if f.kind == FindingKind.SIMILARITY_POLLUTION and f.outcome == Outcome.OCCURRED and f.snapshot_id != snapshot.id
    ]
    rejected = {r.source_ref: r for r in snapshot.rejected}
    for finding in earlier:
        ref = finding.source_ref or ""
        if ref in selected:
            continue
        if ref in rejected:
            stage = rejected[ref].stage
            why = f"withheld at {stage.value} ({rejected[ref].reason})"
        elif (place := ctx.overlap_places.get(ref)) and (kept_out := place_withheld(*place, snapshot.retrieval.scope)):
            stage, reason = kept_out
            why = f"{reason}, never searched"
        else:
            stage = Stage.NOT_RECALLED
            why = "not recalled under this scope"
        ctx.add(ctx.make(
            FindingKind.SIMILARITY_POLLUTION, Outcome.PREVENTED, snapshot.turn,
            f"{why}; {finding.snapshot_id} had selected it on word overlap alone",
            snapshot_id=snapshot.id, source_ref=ref, stage=stage,
        ), once=True)


def _time(store: Store, snapshot: AuditSnapshot, ctx: FindingContext) -> None:
    """A version or memory past its time shown (occurred), or withheld as stale (prevented).

    Occurred: a selected workspace item whose version was no longer live when the snapshot
    was taken (superseded at or before ``created_at``: only a time boundary pinned in the
    past lets that through), or a selected memory whose ``valid_until`` is before the
    snapshot's ``as_of``. Prevented: a ``stale`` rejection of a memory past its validity or
    of a superseded version.
    """
    boundary = snapshot.retrieval.scope.time_boundary
    as_of = boundary.as_of or snapshot.created_at
    newer = [r for r in snapshot.rejected if r.stage == Stage.STALE and r.path]
    for item in snapshot.selected:
        if item.path and item.source in WORKSPACE_SOURCES:
            versions = [v for v in _versions(store, snapshot, item.path) if v.content_hash == item.source_version]
            if not versions or any(v.live_at(snapshot.created_at) for v in versions):
                continue
            superseded = max(v.valid_to for v in versions if v.valid_to is not None)
            withheld = [r for r in newer if r.path == item.path]
            tail = "; the current version was withheld as stale" if withheld else ""
            ctx.add(ctx.make(
                FindingKind.TIME_POLLUTION, Outcome.OCCURRED, snapshot.turn,
                f"shown as [{item.citation_id}] in a version superseded at {when(superseded)}, before this "
                f"retrieval at {when(snapshot.created_at)}: the scope's as_of "
                f"{when(boundary.as_of) if boundary.as_of else '(unset)'} let the old text through{tail}",
                snapshot_id=snapshot.id, source_ref=item.source_ref, citation_id=item.citation_id,
                stage=Stage.SELECTED,
            ))
        elif item.source == Source.MEMORY:
            found = facts.memory_record(store, item.source_ref.removeprefix("memory:"))
            if found is None or found[0].valid_until is None or found[0].valid_until >= as_of:
                continue
            ctx.add(ctx.make(
                FindingKind.TIME_POLLUTION, Outcome.OCCURRED, snapshot.turn,
                f"memory valid until {when(found[0].valid_until)} shown as [{item.citation_id}] at "
                f"{when(as_of)} (the scope allows stale memory)",
                snapshot_id=snapshot.id, source_ref=item.source_ref, citation_id=item.citation_id,
                stage=Stage.SELECTED,
            ))
    for rejected in snapshot.rejected:
        if rejected.stage != Stage.STALE:
            continue
        if rejected.source == Source.MEMORY:
            why = f"memory past its validity withheld at stale ({rejected.reason})"
        elif rejected.path:
            versions = [v for v in _versions(store, snapshot, rejected.path) if v.content_hash == rejected.source_version]
            if not versions or not all(v.valid_to is not None and v.valid_to <= snapshot.created_at for v in versions):
                continue  # a newer version withheld by a pinned as_of is part of the pollution, not a prevention
            why = f"superseded version withheld at stale ({rejected.reason})"
        else:
            continue
        ctx.add(ctx.make(
            FindingKind.TIME_POLLUTION, Outcome.PREVENTED, snapshot.turn, why,
            snapshot_id=snapshot.id, source_ref=rejected.source_ref, stage=Stage.STALE,
        ), once=True)


def _versions(store: Store, snapshot: AuditSnapshot, path: str) -> list[facts.Version]:
    return facts.versions_of(store, project=snapshot.retrieval.scope.project, path=path, branch=snapshot.retrieval.scope.branch)


def _permission(store: Store, snapshot: AuditSnapshot, ctx: FindingContext) -> None:
    """Evidence from beyond the session's permissions shown (occurred), or withheld (prevented).

    Occurred: the snapshot's scope names a project other than the session's, so everything
    it selected came from another project. Prevented: an ``out-of-scope`` rejection of a
    chunk or memory that belongs to another project (since [2/9] the probe's count of other
    projects' hits; older snapshots name each); a ``memory-status`` rejection of
    another user's private memory; any ``denied-source`` or ``not-visible`` rejection (the
    two permission gates).
    """
    if snapshot.retrieval.scope.project != ctx.project and snapshot.selected:
        ctx.add(ctx.make(
            FindingKind.PERMISSION_POLLUTION, Outcome.OCCURRED, snapshot.turn,
            f"the scope names project {snapshot.retrieval.scope.project} but the session is project {ctx.project}: "
            f"{len(snapshot.selected)} item(s) of another project reached the model",
            snapshot_id=snapshot.id, stage=Stage.SELECTED,
        ))
    for rejected in snapshot.rejected:
        why = None
        if rejected.stage == Stage.OUT_OF_SCOPE and rejected.candidate_id.startswith(OTHER_PROJECTS_PREFIX):
            why = f"withheld at out-of-scope: {rejected.reason}; their text never entered the block"
        elif rejected.stage == Stage.OUT_OF_SCOPE:
            owner = _owner_project(store, rejected.candidate_id)
            if owner is not None and owner != snapshot.retrieval.scope.project:
                what = "memory" if rejected.source == Source.MEMORY else rejected.source.value
                why = (
                    f"a {what} of project {owner} scored on this task's query and was withheld at out-of-scope; "
                    "its text never entered the block"
                )
        elif rejected.stage == Stage.MEMORY_STATUS and rejected.source == Source.MEMORY:
            found = facts.memory_record(store, rejected.source_ref.removeprefix("memory:"))
            if found is not None and found[0].status == MemoryStatus.PRIVATE:
                why = f"another user's private memory withheld at memory-status ({rejected.reason})"
        elif rejected.stage in (Stage.DENIED_SOURCE, Stage.NOT_VISIBLE):
            why = f"withheld at {rejected.stage.value} ({rejected.reason})"
        if why is not None:
            ctx.add(ctx.make(
                FindingKind.PERMISSION_POLLUTION, Outcome.PREVENTED, snapshot.turn, why,
                snapshot_id=snapshot.id, source_ref=rejected.source_ref, stage=rejected.stage,
            ), once=True)


def _owner_project(store: Store, candidate_id: str) -> str | None:
    kind, _, key = candidate_id.partition(":")
    if kind == "memory":
        found = facts.memory_record(store, key)
        return found[0].project if found else None
    if kind == "chunk" and key.isdigit():
        return facts.chunk_project(store, int(key))
    return None


def _candidate_memory(store: Store, snapshot: AuditSnapshot, ctx: FindingContext) -> None:
    """An unverified candidate memory shown as a fact (occurred), or withheld (prevented).

    Occurred: a selected memory whose status is ``candidate`` (the boundary should make this
    impossible; the rule is the guard). Prevented: a ``memory-status`` rejection of a
    candidate memory.
    """
    for item in snapshot.selected:
        if item.source != Source.MEMORY:
            continue
        found = facts.memory_record(store, item.source_ref.removeprefix("memory:"))
        if found is not None and found[0].status == MemoryStatus.CANDIDATE:
            ctx.add(ctx.make(
                FindingKind.CANDIDATE_MEMORY_POLLUTION, Outcome.OCCURRED, snapshot.turn,
                f"unverified candidate memory shown as [{item.citation_id}]",
                snapshot_id=snapshot.id, source_ref=item.source_ref, citation_id=item.citation_id,
                stage=Stage.SELECTED,
            ))
    for rejected in snapshot.rejected:
        if rejected.stage != Stage.MEMORY_STATUS or rejected.source != Source.MEMORY:
            continue
        found = facts.memory_record(store, rejected.source_ref.removeprefix("memory:"))
        if found is None or found[0].status != MemoryStatus.CANDIDATE:
            continue
        ctx.add(ctx.make(
            FindingKind.CANDIDATE_MEMORY_POLLUTION, Outcome.PREVENTED, snapshot.turn,
            f"unverified candidate memory \"{clip(found[0].content, 70)}\" matched and was withheld at "
            "memory-status: it never reached the model as experience",
            snapshot_id=snapshot.id, source_ref=rejected.source_ref, stage=Stage.MEMORY_STATUS,
        ), once=True)


def _budget_trim(store: Store, snapshot: AuditSnapshot, ctx: FindingContext) -> None:
    """Budget trimming removed an exception or prohibition line from a selected item.

    Occurred: a selected, budget-trimmed item (not a summary-only extract, whose cut is the
    policy's) whose trimmed-away text contains a line matching :data:`EXCEPTION_LINE`. The
    untrimmed text is read back from the index (or the memory or artifact store).
    """
    for item in snapshot.selected:
        if not item.trim_ranges or item.visibility == Visibility.SUMMARY_ONLY:
            continue
        original = _original_text(store, snapshot, item)
        if original is None:
            continue
        lost: list[tuple[int, str]] = []
        for trim in item.trim_ranges:
            removed = original[trim.start_char : trim.end_char].split("\n")
            for offset, line in enumerate(removed):
                if line.strip() and EXCEPTION_LINE.search(line):
                    lost.append((trim.start_line + offset, line))
        if not lost:
            continue
        ranges = ", ".join(
            f"{r.start_line}-{r.end_line}" if r.start_line != r.end_line else str(r.start_line) for r in item.trim_ranges
        )
        first_line, first_text = lost[0]
        ctx.add(ctx.make(
            FindingKind.BUDGET_TRIM_DISTORTION, Outcome.OCCURRED, snapshot.turn,
            f"the token budget ({snapshot.retrieval.budget.max_tokens}) trimmed lines {ranges} of [{item.citation_id}], "
            f"losing {len(lost)} exception line(s) the model never saw; line {first_line}: \"{clip(first_text, 90)}\"",
            snapshot_id=snapshot.id, source_ref=item.source_ref, citation_id=item.citation_id,
            stage=Stage.TRIMMED_AWAY,
        ))


def _original_text(store: Store, snapshot: AuditSnapshot, item: SnapshotItem) -> str | None:
    if item.path and item.source in WORKSPACE_SOURCES and item.line_start and item.line_end:
        return facts.chunk_text(
            store, project=snapshot.retrieval.scope.project, path=item.path, content_hash=item.source_version,
            start_line=item.line_start, end_line=item.line_end,
        )
    if item.source == Source.MEMORY:
        found = facts.memory_record(store, item.source_ref.removeprefix("memory:"))
        return found[0].content if found and found[1] == item.source_version else None
    if item.source == Source.ARTIFACT and item.line_start and item.line_end:
        try:
            lines = store.get_blob(item.source_version).decode("utf-8", errors="replace").splitlines()
        except Exception:  # noqa: BLE001 - a missing blob is verify's problem, not a finding
            return None
        return "\n".join(lines[item.line_start - 1 : item.line_end])
    return None


# --------------------------------------------------------------------------- after the script


def drift_findings(store: Store, snapshots: Iterable[AuditSnapshot], ctx: FindingContext) -> None:
    """Evidence that changed after a snapshot was taken (detected).

    For each selected item of each snapshot: a workspace item whose shown version was live
    when the snapshot was taken and is not live now (changed or removed), or a memory whose
    stored version differs now. The snapshot keeps what was seen; a replay that re-searched
    today's index would see something else.
    """
    for snapshot in snapshots:
        for item in snapshot.selected:
            change = _change_since(store, snapshot, item)
            if change is None:
                continue
            what, drift_says = change
            seen = ("the same lines in another version of the file" if drift_says.startswith(DriftClass.UNCHANGED)
                    else "other evidence")
            ctx.add(ctx.make(
                FindingKind.REPLAY_DRIFT, Outcome.DETECTED, snapshot.turn,
                f"[{item.citation_id}] {what} since this snapshot: a replay that re-searched today would see "
                f"{seen}; replay reads the frozen snapshot, and drift reports it as {drift_says}",
                snapshot_id=snapshot.id, source_ref=item.source_ref, citation_id=item.citation_id,
            ))


def _change_since(store: Store, snapshot: AuditSnapshot, item: SnapshotItem) -> tuple[str, str] | None:
    """How a selected item changed since the snapshot, and what drift says of it."""
    if item.path and item.source in WORKSPACE_SOURCES:
        versions = _versions(store, snapshot, item.path)
        shown = [v for v in versions if v.content_hash == item.source_version]
        if not any(v.live_at(snapshot.created_at) for v in shown):
            return None  # it was already old when shown: time pollution, not drift
        if any(v.valid_to is None for v in shown):
            return None
        live = [v for v in versions if v.valid_to is None]
        if not live:
            return "was removed", DriftClass.REMOVED.value
        return _file_change(store, snapshot, item, live[-1].content_hash)
    if item.source == Source.MEMORY:
        found = facts.memory_record(store, item.source_ref.removeprefix("memory:"))
        if found is None:
            return "memory was removed", DriftClass.REMOVED.value
        if found[1] != item.source_version:
            return f"memory is now {found[0].status.value} (its stored version changed)", DriftClass.CONTENT_CHANGED.value
    return None


def _file_change(store: Store, snapshot: AuditSnapshot, item: SnapshotItem, live_hash: str) -> tuple[str, str]:
    """A file with a new version: whether the item's own lines changed, as drift tells it.

    A version is the whole file's hash, so an edit outside the item's lines leaves its text
    as shown (drift: ``changed_elsewhere``), or at another range (drift: ``shifted``).
    """
    versions = f"live version {live_hash[:12]}, shown {item.source_version[:12]}"
    changed = (f"changed ({versions})", DriftClass.CONTENT_CHANGED.value)
    if item.path is None or item.line_start is None or item.line_end is None:
        return changed
    project = snapshot.retrieval.scope.project
    shown = facts.chunk_text(store, project=project, path=item.path, content_hash=item.source_version,
                             start_line=item.line_start, end_line=item.line_end)
    if shown is None:
        return changed
    live = facts.chunks_of(store, project=project, path=item.path, content_hash=live_hash)
    if (item.line_start, item.line_end, shown) in live:
        return (f"had its file changed outside lines {item.line_start}-{item.line_end}, whose text is as shown "
                f"({versions})", f"{DriftClass.UNCHANGED.value} with changed_elsewhere")
    same_text = [(start, end) for start, end, text in live if text == shown]
    if len(same_text) == 1:
        start, end = same_text[0]
        return (f"moved to lines {start}-{end} with the same text ({versions})", DriftClass.SHIFTED.value)
    return changed


# --------------------------------------------------------------------------- replies


@dataclass(frozen=True)
class CiteCheck:
    """One citation of a reply, after resolution."""

    source_ref: str | None
    citation_id: str | None
    claim: str
    item: SnapshotItem | None
    snapshot: AuditSnapshot | None

    @property
    def target(self) -> str:
        return self.source_ref if self.source_ref is not None else f"[{self.citation_id}]"


def reply_findings(
    ctx: FindingContext,
    turn: int,
    request_snapshots: Sequence[AuditSnapshot],
    checks: Sequence[CiteCheck],
) -> None:
    """Citation distortion, unsupported citations and uncited replies.

    * citation-distortion (occurred): a citation that resolves to no selected item of the
      snapshots of the request the reply answers: evidence the model was not shown;
    * unsupported-citation (occurred): the cited item's visible text does not contain
      enough of the claim's key terms (``support.py``);
    * uncited-reply (occurred): no citations at all, though a snapshot of the request
      requires them.
    """
    from scopelens.core.record.support import SUPPORT_THRESHOLD, check_support

    shown = ", ".join(s.id for s in request_snapshots) or "none"
    for check in checks:
        if check.item is None or check.snapshot is None:
            ctx.add(ctx.make(
                FindingKind.CITATION_DISTORTION, Outcome.OCCURRED, turn,
                f"cites {check.target}, which the model was not shown (no selected item of snapshot(s) {shown}): "
                "citation to evidence the model was not shown",
                snapshot_id=request_snapshots[-1].id if request_snapshots else None,
                source_ref=check.source_ref,
                citation_id=check.citation_id,
            ))
            continue
        support = check_support(check.claim, check.item.visible_text)
        if support.supported:
            continue
        missing = listing(support.missing, 6) or "(the claim has no key terms)"
        ctx.add(ctx.make(
            FindingKind.UNSUPPORTED_CITATION, Outcome.OCCURRED, turn,
            f"[{check.item.citation_id}] does not support \"{clip(check.claim, 70)}\": "
            f"{len(support.found)}/{len(support.terms)} key terms in its visible text "
            f"(needs {SUPPORT_THRESHOLD:.0%}); missing: {missing}",
            snapshot_id=check.snapshot.id, source_ref=check.item.source_ref, citation_id=check.item.citation_id,
            stage=Stage.CITED,
        ))
    if not checks and any(s.retrieval.scope.evidence_policy.require_citation and s.selected for s in request_snapshots):
        ctx.add(ctx.make(
            FindingKind.UNCITED_REPLY, Outcome.OCCURRED, turn,
            f"the reply cites nothing, though snapshot {request_snapshots[-1].id} requires citation",
            snapshot_id=request_snapshots[-1].id,
        ))
