"""The data model: every document scopelens reads, stores or prints, as pydantic models.

Two rules shape these classes:

* **Stored documents stay readable by later versions.** Models ignore unknown fields by
  default, so a newer store's extra field does not break an older reader's view.
* **Inputs are strict.** Anything a user hands in (intent, scope, policy, memory import)
  goes through :func:`parse_input`, which rejects unknown fields at any depth.

Every stored document and every ``--json`` output carries ``schema_version``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from scopelens.core.clock import utc as utc  # contracts normalise their times with it
from scopelens.core.errors import InvalidInputError, UnreadableFileError
from scopelens.core.vocab import (
    AcceptedAuthority,
    Authority,
    DriftClass,
    EventType,
    EvidenceKind,
    MemoryStatus,
    MergePolicy,
    ObservedKind,
    Purpose,
    RedactionKind,
    SnapshotKind,
    Source,
    Stage,
    SubQueryIntent,
    Trust,
    Visibility,
)

SCHEMA_VERSION = 1
"""Version of every stored document and ``--json`` output written by this code."""

ModelT = TypeVar("ModelT", bound=BaseModel)


class Contract(BaseModel):
    """Base of every model: immutable, tolerant of unknown fields when reading stored data."""

    model_config = ConfigDict(frozen=True, extra="ignore", use_enum_values=False)


class UtcModel(Contract):
    """A contract whose datetime fields are normalised to aware UTC."""

    @field_validator("*", mode="after")
    @classmethod
    def _aware_utc(cls, value: Any) -> Any:
        return utc(value) if isinstance(value, datetime) else value


def parse_input(model: type[ModelT], data: Any, *, what: str) -> ModelT:
    """Validate user input strictly: unknown fields at any depth are an error.

    ``what`` names the input in the one-line error ("intent file intent.json").
    """
    try:
        return model.model_validate(data, extra="forbid")
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        removed = REMOVED_INPUT_FIELDS.get((model.__name__, where)) if first["type"] == "extra_forbidden" else None
        message = f"no longer a field ({removed}); delete it" if removed else first["msg"]
        raise InvalidInputError(f"{what}: {where}: {message} ({exc.error_count()} problem(s))") from None


REMOVED_INPUT_FIELDS: dict[tuple[str, str], str] = {
    ("RetrievalScope", "evidence_policy.require_snapshot"): "scopelens always writes a snapshot before it returns a block",
}
"""Fields an input document may still carry from an older version, by model and path: the
one-line error says why each went instead of only that it is unknown."""


def load_input_file(model: type[ModelT], path: Path, *, what: str) -> ModelT:
    """Read a JSON input file and validate it strictly."""
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UnreadableFileError(f"cannot read {what} {path}: {exc.__class__.__name__}: {exc}") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UnreadableFileError(
            f"{what} {path} is not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    return parse_input(model, data, what=f"{what} {path}")


# --------------------------------------------------------------------------- scope


class PermissionContext(Contract):
    """Who is asking, and what they may see beyond the defaults."""

    user: str = "local"
    roles: tuple[str, ...] = ()
    grants: tuple[str, ...] = ()
    """Opaque grant names a policy may require to read a source or path."""


class TimeBoundary(UtcModel):
    """The moment the world is seen at, and the window of evidence admitted."""

    as_of: datetime | None = None
    """See the index and memories as they were at this moment (``None``: now)."""
    include_after: datetime | None = None
    """Admit only evidence captured at or after this moment."""
    exclude_after: datetime | None = None
    """Admit only evidence captured at or before this moment."""
    allow_stale_memory: bool = False
    """Admit memories whose validity ended before ``as_of``."""


ALL_ACCEPTED_AUTHORITY: tuple[AcceptedAuthority, ...] = tuple(AcceptedAuthority)


class EvidencePolicy(Contract):
    """What counts as acceptable evidence for this retrieval."""

    require_citation: bool = True
    accepted_authority: tuple[AcceptedAuthority, ...] = ALL_ACCEPTED_AUTHORITY
    max_unverified_items: int = Field(default=2, ge=0)
    """How many not-verified memories (history, conflicts) may be shown, labelled."""


class RetrievalBudget(Contract):
    """How much model-visible text the retrieval may produce."""

    max_tokens: int = Field(default=1200, ge=1)
    max_items: int = Field(default=8, ge=1)
    per_source: dict[Source, int] = Field(default_factory=dict)
    """Maximum items per source; sources not named are capped only by ``max_items``."""


ALL_SOURCES: tuple[Source, ...] = tuple(Source)


class RetrievalScope(UtcModel):
    """The retrieval contract: what this task may look at, and how evidence is judged."""

    schema_version: int = SCHEMA_VERSION
    session_id: str | None = None
    user_id: str = "local"
    project: str
    workspace_root: str | None = None
    branch: str | None = None
    task_id: str | None = None
    """The harness's name for the task this retrieval serves (an issue, a ticket, a benchmark
    instance): recorded with the scope in the snapshot and shown in the inspector's Scope tab."""
    purpose: Purpose = Purpose.ANSWER_QUESTION
    allowed_sources: tuple[Source, ...] = ALL_SOURCES
    denied_sources: tuple[Source, ...] = ()
    path_prefixes: tuple[str, ...] = ()
    """Workspace paths (relative, ``/``-separated) the retrieval is confined to; empty: all."""
    permission_context: PermissionContext = PermissionContext()
    time_boundary: TimeBoundary = TimeBoundary()
    evidence_policy: EvidencePolicy = EvidencePolicy()
    budget: RetrievalBudget = RetrievalBudget()

    def admits_source(self, source: Source) -> bool:
        """Whether ``source`` passes the source-access gate of this scope."""
        return source in self.allowed_sources and source not in self.denied_sources


# --------------------------------------------------------------------------- intent & plan


class Anchors(Contract):
    """Concrete handles on the task; they outweigh prose in planning and ranking."""

    failing_test: str | None = None
    error_text: str | None = None
    current_files: tuple[str, ...] = ()
    symbols: tuple[str, ...] = ()
    traceback: str | None = None


class RetrievalIntent(Contract):
    """A request for evidence, from the model or from runtime policy (same path for both)."""

    schema_version: int = SCHEMA_VERSION
    purpose: Purpose = Purpose.ANSWER_QUESTION
    question: str = ""
    anchors: Anchors = Anchors()
    required_evidence: tuple[EvidenceKind, ...] = ()
    origin: Literal["model", "runtime"] = "model"


class WeightedTerm(Contract):
    """A query term and its weight; identifiers and anchors weigh more than prose."""

    term: str
    weight: float = 1.0
    kind: Literal[
        "identifier", "path", "test-id", "exception", "frame", "error", "prose", "anchor", "located", "quoted"
    ] = "prose"


class SubQuery(Contract):
    """One sub-query of a plan: an intent kind over its own sources and limits."""

    id: str
    intent: SubQueryIntent
    query_text: str
    terms: tuple[WeightedTerm, ...] = ()
    sources: tuple[Source, ...]
    top_k: int = Field(default=10, ge=1)
    min_authority: Authority = Authority.LOW


class RetrievalPlan(Contract):
    """The sub-queries a retrieval runs and how their results merge."""

    sub_queries: tuple[SubQuery, ...]
    merge_policy: MergePolicy = MergePolicy.INTERLEAVE_BY_RELEVANCE


# --------------------------------------------------------------------------- candidates


class ScoreBreakdown(Contract):
    """Decomposed scores; ``final`` is their weighted sum under the purpose's weights."""

    semantic: float = 0.0
    lexical: float = 0.0
    anchor: float = 0.0
    authority: float = 0.0
    recency: float = 0.0
    scope: float = 0.0
    actionability: float = 0.0
    diversity: float = 0.0
    final: float = 0.0


SCORE_COLUMNS: tuple[str, ...] = tuple(ScoreBreakdown.model_fields)
"""Every score a candidate row stores, in column order (migrations keep their own literals)."""
SCORE_COMPONENTS: tuple[str, ...] = tuple(name for name in SCORE_COLUMNS if name != "final")
"""The components ``final`` is weighted from."""


class Redaction(Contract):
    """A secret replaced at ingest. Ranges are code points of the original text."""

    kind: RedactionKind
    start: int = Field(ge=0)
    end: int = Field(ge=0)
    original_hash: str
    """A hash of the secret, so a suspected leak can be matched without storing it: an HMAC
    under the store's redaction key (``hash_kind`` hmac-sha256), or empty when no key was given.
    Records written before 0.1.0's security review hold a plain SHA-256 (``hash_kind`` sha256)."""
    placeholder: str
    hash_kind: Literal["sha256", "hmac-sha256", "none"] = "sha256"
    key_id: str | None = None
    """Which redaction key made ``original_hash`` (a fingerprint of the key, not the key)."""
    line: int | None = Field(default=None, ge=1)
    """The 1-based line the secret starts on; the same in the original and the redacted text,
    since a replacement keeps the secret's line breaks. None in records written before."""


class TrimRange(Contract):
    """A part of an item's text that budget trimming removed.

    Lines are 1-based and inclusive, relative to the item's source; code points are 0-based,
    half-open, relative to the item's untrimmed text.
    """

    start_line: int
    end_line: int
    start_char: int
    end_char: int


class Candidate(UtcModel):
    """A piece of evidence found by a recaller, with its provenance and scores."""

    id: str
    source: Source
    source_ref: str
    """``path:start-end`` for workspace chunks, or a record id."""
    source_version: str
    """Content hash of the version of the source this text came from."""
    path: str | None = None
    line_start: int | None = None
    line_end: int | None = None
    symbol: str | None = None
    project: str
    branch: str | None = None
    captured_at: datetime
    valid_as_of: datetime | None = None
    text: str
    evidence_kind: EvidenceKind
    visibility: Visibility = Visibility.RAW
    trust: Trust = Trust.EVIDENCE
    authority: Authority = Authority.MEDIUM
    memory_status: MemoryStatus | None = None
    owner: str | None = None
    """For private memories: the only user who may see them."""
    about_paths: tuple[str, ...] = ()
    """Further paths the text was drawn from (a tool event previews its artifacts): the policy's
    rules for them apply to it as for ``path``."""
    conflicts_with: tuple[str, ...] = ()
    redactions: tuple[Redaction, ...] = ()
    scores: ScoreBreakdown = ScoreBreakdown()
    sub_query_ids: tuple[str, ...] = ()


# --------------------------------------------------------------------------- the snapshot


class ObservedItem(Contract):
    """How an item of an observed snapshot entered the agent's context."""

    kind: ObservedKind
    position: int = Field(ge=0)
    """Its place among every context item of the session (0-based): a call saw the items at
    positions ``visible_from`` to ``visible_to`` of its snapshot's ``ObservedCall``."""
    tool: str | None = None
    """The tool whose result it was, as the agent named it (``open``, ``Read``, ``bash``)."""
    ref: str
    """Where it is in the session file (``history[7]``, ``line 12``)."""
    mentions: tuple[str, ...] = ()
    """Files named in it without their lines (``path`` or ``path:line``): search hits, frames."""


class SnapshotItem(UtcModel):
    """A selected item: exactly what the model saw of one candidate, and why."""

    item_id: str
    candidate_id: str
    citation_id: str
    source: Source
    source_ref: str
    source_version: str
    path: str | None = None
    line_start: int | None = None
    line_end: int | None = None
    symbol: str | None = None
    captured_at: datetime
    evidence_kind: EvidenceKind
    trust: Trust
    authority: Authority
    visibility: Visibility
    label: str | None = None
    """A qualifier shown with the item, e.g. ``history (deprecated)`` or ``extract``."""
    selected_reason: str
    visible_text: str
    visible_text_hash: str
    trim_ranges: tuple[TrimRange, ...] = ()
    redactions: tuple[Redaction, ...] = ()
    scores: ScoreBreakdown = ScoreBreakdown()
    rank: int
    observed: ObservedItem | None = None
    """Set on the items of an observed snapshot, and only there."""


class RejectedItem(UtcModel):
    """A candidate that did not reach the model, the stage it dropped at, and why.

    Rejections found by the scope probe carry no text at all, by design.
    """

    candidate_id: str
    source: Source
    source_ref: str
    source_version: str
    path: str | None = None
    line_start: int | None = None
    line_end: int | None = None
    symbol: str | None = None
    stage: Stage
    reason: str
    from_probe: bool = False
    scores: ScoreBreakdown | None = None


class RankedEntry(Contract):
    """A candidate past the boundary, in final rank order."""

    rank: int
    candidate_id: str
    source_ref: str
    path: str | None = None
    final_score: float
    selected: bool


class BudgetRecord(Contract):
    """The budget as applied: the limit, the estimate of what was produced, the policy."""

    max_tokens: int
    estimated_tokens: int
    max_items: int
    trimming_policy: str
    per_source: dict[Source, int] = Field(default_factory=dict)


class CitationEntry(Contract):
    """Where a citation id in the block leads: its snapshot item and source."""

    citation_id: str
    item_id: str
    source_ref: str
    visible_text_hash: str
    authority: Authority
    evidence_kind: EvidenceKind


class Projection(Contract):
    """The model-visible block, by reference, and its citation map."""

    block_ref: str
    """Blob hash (SHA-256) of the context block's UTF-8 bytes."""
    visible_text_hash: str
    nonce: str
    citation_map: dict[str, CitationEntry]


class Pins(Contract):
    """What a snapshot was made with, so drift can tell engine, config and index changes apart."""

    engine_version: str
    config_hash: str
    policy_hash: str
    index_version: str
    git_commit: str | None = None
    git_dirty: bool | None = None


class ObservedCall(UtcModel):
    """Where an observed snapshot's model call is in its imported session.

    A call saw the session's context items at positions ``visible_from`` (the first after the
    last compaction) to ``visible_to`` (exclusive). Each snapshot stores only the items that
    were new at its call, so a long session is stored once, not once per call; the items
    before them are in the session's earlier observed snapshots.
    """

    format: str
    """``swe-agent``, ``claude-code``, ``codex`` or ``openhands``."""
    source_file: str
    """The session file's name (not its directory: a path of the importing machine)."""
    call: int = Field(ge=1)
    call_ref: str
    """Where the call is in the session file."""
    visible_from: int = Field(ge=0)
    visible_to: int = Field(ge=0)
    replaced: tuple[int, int] | None = None
    """Positions an earlier compaction replaced, when this call is the first after it."""
    tool_calls: tuple[str, ...] = ()
    """The tools this call asked for, in order (name and a short summary of the arguments)."""
    not_recorded: tuple[str, ...] = ()
    """What the format does not record about a call's context (stated, not invented)."""


class AuditSnapshot(UtcModel):
    """The immutable record of what one model call was given: a retrieval's scope, plan,
    choices, rejections and projection, or (``observed``) the context an imported agent
    session's model had, which has no scope, intent, plan, budget or pins."""

    schema_version: int = SCHEMA_VERSION
    kind: SnapshotKind = SnapshotKind.RETRIEVED
    """Documents written before kinds existed are retrievals: they read as ``retrieved``."""
    id: str
    session_id: str
    turn: int
    model_request_id: str | None = None
    created_at: datetime
    intent: RetrievalIntent | None = None
    scope: RetrievalScope | None = None
    plan: RetrievalPlan | None = None
    stats: dict[Stage, int]
    selected: tuple[SnapshotItem, ...]
    rejected: tuple[RejectedItem, ...]
    ranked: tuple[RankedEntry, ...]
    budget: BudgetRecord | None = None
    projection: Projection
    pins: Pins | None = None
    missing_evidence: tuple[EvidenceKind, ...] = ()
    observed: ObservedCall | None = None

    @model_validator(mode="after")
    def _parts_of_its_kind(self) -> AuditSnapshot:
        """A retrieval (real or counterfactual) has every part of one; an observed snapshot
        has its call and nothing a retrieval decides (no scope, recall or rejection)."""
        if self.kind == SnapshotKind.OBSERVED:
            if self.observed is None or self.rejected or self.ranked:
                raise ValueError("an observed snapshot has its call (observed) and no rejected or ranked rows")
            if any(item.observed is None for item in self.selected):
                raise ValueError("every item of an observed snapshot says how it was observed")
        else:
            missing = [name for name in RETRIEVAL_PARTS if getattr(self, name) is None]
            if missing:
                raise ValueError(f"a {self.kind.value} snapshot needs {', '.join(missing)}")
            if self.observed is not None or any(item.observed is not None for item in self.selected):
                raise ValueError(f"a {self.kind.value} snapshot has no observed call or items")
        return self

    @property
    def retrieval(self) -> RetrievalParts:
        """The parts only a retrieval has, for code that reads them; an observed snapshot has
        none and is refused with one line (a drift or why-not of a retrieval asked of it)."""
        if self.intent is None or self.scope is None or self.plan is None or self.budget is None or self.pins is None:
            raise InvalidInputError(
                f"snapshot {self.id} is {self.kind.value}: it records what an agent's model saw, not a retrieval "
                "(no scope, plan or pins); ask of the session instead (why-not --session, drift --session)"
            )
        return RetrievalParts(self.intent, self.scope, self.plan, self.budget, self.pins)

    def funnel(self) -> Funnel:
        """How many candidates each stage kept or dropped; the scope probe's rows apart (they
        were never recalled), so that recalled − every pipeline rejection = selected.

        A retrieval's and a counterfactual's; an observed snapshot recalled nothing (its items
        are what the agent's log shows its model had), so it has none and is refused."""
        if self.kind == SnapshotKind.OBSERVED:
            raise InvalidInputError(f"snapshot {self.id} is observed: nothing was recalled or dropped, it has no funnel")
        pipeline = Counter(r.stage for r in self.rejected if not r.from_probe)
        probe = Counter(r.stage for r in self.rejected if r.from_probe)
        return Funnel(
            recalled=len(self.selected) + sum(pipeline.values()),
            dropped=tuple((stage, pipeline[stage]) for stage in Stage if pipeline[stage]),
            selected=len(self.selected),
            withheld_by_scope=tuple((stage, probe[stage]) for stage in Stage if probe[stage]),
        )


RETRIEVAL_PARTS = ("intent", "scope", "plan", "budget", "pins")


@dataclass(frozen=True)
class RetrievalParts:
    """A retrieval snapshot's scope, intent, plan, budget and pins, known to be there."""

    intent: RetrievalIntent
    scope: RetrievalScope
    plan: RetrievalPlan
    budget: BudgetRecord
    pins: Pins


@dataclass(frozen=True)
class Funnel:
    """A snapshot's funnel: ``recalled`` minus every ``dropped`` count is ``selected``.

    ``withheld_by_scope`` counts the scope probe's rows: what the masks kept from recall.
    """

    recalled: int
    dropped: tuple[tuple[Stage, int], ...]
    selected: int
    withheld_by_scope: tuple[tuple[Stage, int], ...]

    def line(self) -> str:
        """One line for a terminal: the steps, then what the scope withheld."""
        dropped = ", ".join(f"{stage.value} {n}" for stage, n in self.dropped)
        withheld = ", ".join(f"{stage.value} {n}" for stage, n in self.withheld_by_scope)
        text = f"recalled {self.recalled}" + (f" − {dropped}" if dropped else "") + f" = selected {self.selected}"
        return text + (f"; withheld by the scope (never recalled): {withheld}" if withheld else "")


# --------------------------------------------------------------------------- sessions & events


class SessionStartedPayload(Contract):
    project: str
    branch: str | None = None
    workspace_root: str | None = None
    title: str = ""
    agent: str = ""


class UserMessagePayload(Contract):
    text: str


class ModelRequestPayload(Contract):
    request_id: str
    snapshot_ids: tuple[str, ...] = ()
    context_hash: str
    model: str = ""


class ModelResponsePayload(Contract):
    request_id: str | None = None
    text: str
    cited_ids: tuple[str, ...] = ()


class ToolStartedPayload(Contract):
    call_id: str
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ArtifactRef(Contract):
    """A large tool output kept as a content-addressed blob."""

    blob: str
    name: str
    media_type: str = "text/plain"
    size: int
    evidence_kind: EvidenceKind = EvidenceKind.TEST_LOG


class ToolFinishedPayload(Contract):
    call_id: str
    tool: str
    exit_code: int | None = None
    output_preview: str = ""
    artifacts: tuple[ArtifactRef, ...] = ()


class SnapshotCreatedPayload(Contract):
    snapshot_id: str
    snapshot_hash: str
    visible_text_hash: str
    selected_count: int
    turn: int


EVENT_PAYLOADS: dict[EventType, type[Contract]] = {
    EventType.SESSION_STARTED: SessionStartedPayload,
    EventType.USER_MESSAGE: UserMessagePayload,
    EventType.MODEL_REQUEST: ModelRequestPayload,
    EventType.MODEL_RESPONSE: ModelResponsePayload,
    EventType.TOOL_STARTED: ToolStartedPayload,
    EventType.TOOL_FINISHED: ToolFinishedPayload,
    EventType.RETRIEVAL_SNAPSHOT_CREATED: SnapshotCreatedPayload,
}
"""The payload model of each event type; payloads are validated against it on append."""


class Event(UtcModel):
    """One link of a session's chain, exactly as stored (its hash is over these bytes)."""

    schema_version: int = SCHEMA_VERSION
    session_id: str
    seq: int
    store_seq: int
    turn: int
    type: EventType
    created_at: datetime
    payload: dict[str, Any]
    prev_hash: str


def turn_count(turns: Iterable[int]) -> int:
    """How many turns a session has, from its events' turn numbers: the number of its last turn.

    The one definition everywhere (sessions list, timeline, replay): turns are numbered from 1,
    each user message opens the next; turn 0 holds the session's setup (``session.started``,
    tools run before the first message) and is not a turn. The store keeps this number as the
    session head's ``last_turn`` (checked by verify).
    """
    return max((t for t in turns if t > 0), default=0)


class SessionHeader(UtcModel):
    """A session as listed: its identity and where it ran."""

    id: str
    project: str
    branch: str | None = None
    workspace_root: str | None = None
    title: str = ""
    agent: str = ""
    created_at: datetime


# --------------------------------------------------------------------------- memory


class MemoryRecord(UtcModel):
    """A governed memory: content plus the status and scope that decide if it may be recalled."""

    schema_version: int = SCHEMA_VERSION
    id: str
    project: str
    branch: str | None = None
    content: str
    status: MemoryStatus = MemoryStatus.CANDIDATE
    private_to: str | None = None
    """For ``private`` memories: the user who may see them."""
    source_refs: tuple[str, ...] = ()
    confidence: Authority = Authority.MEDIUM
    valid_from: datetime
    valid_until: datetime | None = None
    conflicts_with: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()


# --------------------------------------------------------------------------- verify & drift


class Problem(Contract):
    """One integrity problem that ``verify`` found, naming the record it concerns."""

    kind: Literal[
        "changed",
        "inserted",
        "deleted",
        "broken-link",
        "missing-session",
        "head-mismatch",
        "malformed",
        "rewritten",
        "rolled-back",
        "bad-signature",
        "interrupted",
    ]
    record: str
    """e.g. ``event s-1#4``, ``snapshot snap-2``, ``blob 3fa2…``, ``session s-1``."""
    detail: str


class CheckpointCheck(Contract):
    """What ``verify --checkpoint`` found: whether the store's first ``size`` events are the
    ones the checkpoint pinned (a mismatch is also a problem in the report)."""

    size: int
    head: str
    origin: str | None
    head_now: str | None
    """The store chain's head recomputed at ``size``; None when the store has fewer events."""
    holds: bool
    signed: bool
    signature_checked: bool
    appended_since: int = 0
    """Events after the checkpoint: new since it was taken, and as trustworthy as the store's
    access control (a checkpoint pins what came before it, not what came after)."""
    appended_sessions: tuple[str, ...] = ()
    """The sessions those events were appended to: an old session here deserves a look."""


class VerifyReport(Contract):
    """The outcome of ``verify``: clean only when ``problems`` is empty."""

    schema_version: int = SCHEMA_VERSION
    store_head: str
    stored_store_head: str
    sessions: int
    events: int
    snapshots: int
    blobs: int
    memory_versions: int = 0
    problems: tuple[Problem, ...]
    checkpoint: CheckpointCheck | None = None
    interrupted: tuple[Problem, ...] = ()
    """Sessions a writer left half-way (a process killed between two of its writes, or one
    still running): reported, not problems: nothing recorded was lost or changed."""

    @property
    def clean(self) -> bool:
        return not self.problems


class LabelChange(Contract):
    """One label of a drift item that differs between the frozen item and today's."""

    field: Literal["source", "evidence-kind", "authority", "trust", "visibility"]
    then: str
    now: str


class DriftItem(Contract):
    """How one item compares between a frozen snapshot and today's search.

    ``source_ref`` is today's reference for a matched item (the frozen one for ``removed``);
    ``frozen_source_ref`` is set when the frozen reference differs (``shifted``, or
    ``content-changed`` at a new range). Items are told apart by ``(branch, workspace_root,
    source_ref)``: one source_ref can name lines in two workspace roots. Fields after
    ``reason`` were added with ``shifted`` and ``relabelled``: drift runs recorded before them
    load with their defaults.
    """

    drift_class: DriftClass
    source_ref: str
    path: str | None = None
    frozen_rank: int | None = None
    today_rank: int | None = None
    frozen_version: str | None = None
    today_version: str | None = None
    diff: str | None = None
    """A unified diff of the visible text, set exactly when the text differs (never empty)."""
    stage_today: Stage | None = None
    reason: str | None = None
    branch: str | None = None
    workspace_root: str | None = None
    """Where a workspace item's file lives; None for records (memories, events) and for a
    frozen item whose index entry is gone."""
    frozen_source_ref: str | None = None
    frozen_citation: str | None = None
    today_citation: str | None = None
    label_changes: tuple[LabelChange, ...] = ()
    changed_elsewhere: bool = False
    """The source has another version today (a file edited outside the item's lines, a record
    updated) while the item's own text is the same."""

    def place(self) -> str | None:
        """Branch and workspace root, for telling apart items that share a source_ref."""
        if self.branch is None and self.workspace_root is None:
            return None
        return ":".join(part for part in (self.branch, self.workspace_root) if part)


class DriftReport(Contract):
    """The outcome of one drift run."""

    schema_version: int = SCHEMA_VERSION
    id: str
    snapshot_id: str
    session_id: str
    created_at: datetime
    index_version_then: str
    index_version_now: str
    engine_then: str
    engine_now: str
    config_changed: bool
    engine_changed: bool
    index_changed: bool
    items: tuple[DriftItem, ...]
    config_hash: str | None = None
    """The hash of the engine configuration the run classified under (what the run row's
    ``config_hash`` column says, inside the hashed body); ``None`` in runs recorded before it
    was kept here."""

    def spans_places(self) -> bool:
        """Whether the items come from more than one branch or workspace root (then a
        source_ref alone does not say which file an item is)."""
        return len({item.place() for item in self.items if item.place() is not None}) > 1

    def counts(self) -> dict[str, int]:
        counts = {cls.value: 0 for cls in DriftClass}
        for item in self.items:
            counts[item.drift_class.value] += 1
        return counts

    def summary(self) -> str:
        parts = [f"{n} {name}" for name, n in self.counts().items() if n]
        elsewhere = sum(item.changed_elsewhere for item in self.items)
        # Only when there is one, so a run recorded before the flag keeps its stored summary.
        also = f"; {elsewhere} with the source changed elsewhere" if elsewhere else ""
        changes = [name for name, flag in (("engine", self.engine_changed), ("config", self.config_changed),
                                             ("index", self.index_changed)) if flag]
        return (f"{', '.join(parts) or 'nothing selected'}{also}; "
                f"changed since snapshot: {', '.join(changes) or 'nothing'}")
