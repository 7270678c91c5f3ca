"""The shared vocabularies of scopelens, each defined once.

Every word that more than one part of the system uses (stored documents, the CLI, the
inspector, importers) lives here as a ``StrEnum``. The pipeline stages double as funnel
steps, rejection stages and why-not answers, so they are one enum, in pipeline order.
``docs/vocabulary.md`` is generated from this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any


class Source(StrEnum):
    """Where a candidate comes from."""

    WORKSPACE_CODE = "workspace-code"
    WORKSPACE_DOC = "workspace-doc"
    PROJECT_RULE = "project-rule"
    DECISION_RECORD = "decision-record"
    SESSION_EVENT = "session-event"
    ARTIFACT = "artifact"
    MEMORY = "memory"


WORKSPACE_SOURCES = frozenset({Source.WORKSPACE_CODE, Source.WORKSPACE_DOC, Source.PROJECT_RULE, Source.DECISION_RECORD})
"""The sources read from a workspace's versioned index (per project, branch and root)."""


class EvidenceKind(StrEnum):
    """What a piece of evidence is; also the citation prefix (``[code#2]``)."""

    CODE = "code"
    DOC = "doc"
    RULE = "rule"
    DECISION = "decision"
    TEST_LOG = "test-log"
    EVENT = "event"
    MEMORY = "memory"


class SubQueryIntent(StrEnum):
    """The kind of evidence a sub-query looks for."""

    FIND_ERROR = "find-error"
    FIND_CODE = "find-code"
    FIND_RULE = "find-rule"
    FIND_MEMORY = "find-memory"
    FIND_DECISION = "find-decision"


class Visibility(StrEnum):
    """How much of a thing the model may see (the second permission gate)."""

    RAW = "raw"
    REDACTED = "redacted"
    SUMMARY_ONLY = "summary-only"
    RUNTIME_ONLY = "runtime-only"


class Trust(StrEnum):
    """The voice in which projected text is placed before the model."""

    INSTRUCTION = "instruction"
    EVIDENCE = "evidence"
    UNTRUSTED_OBSERVATION = "untrusted-observation"


class MemoryStatus(StrEnum):
    """The governance status of a memory record."""

    CANDIDATE = "candidate"
    VERIFIED = "verified"
    DEPRECATED = "deprecated"
    CONFLICTED = "conflicted"
    PRIVATE = "private"


class MemoryChange(StrEnum):
    """What made a version of a memory: the governance event each entry of its log records
    (``scopelens memory history ID``)."""

    IMPORTED = "imported"
    REIMPORTED = "reimported"
    PROMOTED = "promoted"
    DEPRECATED = "deprecated"
    LINKED_CONFLICT = "linked-conflict"
    MIGRATED = "migrated"


MEMORY_CHANGE_MEANINGS: dict[MemoryChange, str] = {
    MemoryChange.IMPORTED: "first written, by `memory import` or a scenario's starting state",
    MemoryChange.REIMPORTED: "written again by an import, with different text or fields",
    MemoryChange.PROMOTED: "candidate to verified, by `memory promote`",
    MemoryChange.DEPRECATED: "marked as history, by `memory deprecate`",
    MemoryChange.LINKED_CONFLICT: "marked as conflicting with another memory, by `memory link-conflict`",
    MemoryChange.MIGRATED: "the state the memory had when its store gained the version log; its history before is unknown",
}


class Stage(StrEnum):
    """Pipeline stages, in order: funnel steps, rejection stages and why-not answers."""

    NOT_RECALLED = "not-recalled"
    OUT_OF_SCOPE = "out-of-scope"
    DENIED_SOURCE = "denied-source"
    NOT_VISIBLE = "not-visible"
    STALE = "stale"
    MEMORY_STATUS = "memory-status"
    BELOW_CUTOFF = "below-cutoff"
    DUPLICATE = "duplicate"
    OVER_BUDGET = "over-budget"
    TRIMMED_AWAY = "trimmed-away"
    SELECTED = "selected"
    CITED = "cited"


REJECTION_STAGES: frozenset[Stage] = frozenset(
    {
        Stage.OUT_OF_SCOPE,
        Stage.DENIED_SOURCE,
        Stage.NOT_VISIBLE,
        Stage.STALE,
        Stage.MEMORY_STATUS,
        Stage.BELOW_CUTOFF,
        Stage.DUPLICATE,
        Stage.OVER_BUDGET,
        Stage.TRIMMED_AWAY,
    }
)
"""Stages at which a recalled candidate can be dropped (and so recorded as a rejection)."""


class Purpose(StrEnum):
    """What the retrieval serves; weights in rerank depend on it."""

    FIX_TEST = "fix-test"
    EXPLAIN_CODE = "explain-code"
    REVIEW_RISK = "review-risk"
    ANSWER_QUESTION = "answer-question"


class Authority(StrEnum):
    """How much a source is trusted as evidence, coarse-grained."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class AcceptedAuthority(StrEnum):
    """Classes of evidence an evidence policy may accept."""

    CURRENT_WORKSPACE = "current-workspace"
    PROJECT_DOC = "project-doc"
    VERIFIED_MEMORY = "verified-memory"
    SESSION_EVENT = "session-event"


class MergePolicy(StrEnum):
    """How a plan's sub-query results merge into one `lexical` score (`core/pipeline/rerank.py`).
    Plans use `interleave-by-relevance` unless the retriever is given another
    (`Retriever(store, merge_policy=...)`); a snapshot records its plan's, and drift re-runs it."""

    INTERLEAVE_BY_RELEVANCE = "interleave-by-relevance"
    RRF = "rrf"
    GLOBAL_NORM = "global-norm"


class EventType(StrEnum):
    """Types of the events in a session's append-only log."""

    SESSION_STARTED = "session.started"
    USER_MESSAGE = "user.message"
    MODEL_REQUEST = "model.request"
    MODEL_RESPONSE = "model.response"
    TOOL_STARTED = "tool.started"
    TOOL_FINISHED = "tool.finished"
    RETRIEVAL_SNAPSHOT_CREATED = "retrieval.snapshot.created"


class SnapshotKind(StrEnum):
    """What a snapshot records.

    ``retrieved``: a scoped retrieval's evidence, as its block showed it to the model.
    ``observed``: what an imported agent session's model had in its context at one call (file
    reads, tool output, instructions), as the agent's own log recorded it: no scope, intent or
    plan, nothing recalled or rejected. ``counterfactual``: a scoped retrieval run afterwards at
    an imported session's turn, to show what it would have given; never shown to that model.
    """

    RETRIEVED = "retrieved"
    OBSERVED = "observed"
    COUNTERFACTUAL = "counterfactual"


class ObservedKind(StrEnum):
    """What an item of an observed snapshot was in the agent's context (``docs/import.md``)."""

    INSTRUCTION = "instruction"
    TASK = "task"
    FILE_READ = "file-read"
    SEARCH = "search"
    COMMAND_OUTPUT = "command-output"
    TOOL_OUTPUT = "tool-output"
    MODEL_OUTPUT = "model-output"
    SUMMARY = "summary"


OBSERVED_KIND_MEANINGS: dict[ObservedKind, str] = {
    ObservedKind.INSTRUCTION: "a system prompt, an injected instruction (AGENTS.md, CLAUDE.md, a reminder), a demonstration",
    ObservedKind.TASK: "what the user asked: an issue text, a typed prompt",
    ObservedKind.FILE_READ: "lines of one file, with its path and the line range the model saw: the file is *seen*",
    ObservedKind.SEARCH: "a search's output: file lists and `path:line` hits, whose files are *mentioned*",
    ObservedKind.COMMAND_OUTPUT: "a command's output; traceback frames in it are mentions",
    ObservedKind.TOOL_OUTPUT: "any other tool's result (an edit's diff names its file)",
    ObservedKind.MODEL_OUTPUT: "what the model wrote earlier, which it sees again",
    ObservedKind.SUMMARY: "a compaction summary that stands for the context it replaced",
}


class DriftClass(StrEnum):
    """How an item of a frozen snapshot compares with today's search.

    A frozen item matched to an item of today gets one class: the first that applies of
    ``relabelled``, ``content-changed``, ``shifted``, ``moved``, ``unchanged``. An item's
    labels are its source, evidence kind, authority, trust and visibility. Every difference
    is still recorded on the item (its diff, both ranges, both citation ids, each label
    change), and ``changed_elsewhere`` says separately that the source has a new version
    although the item's own text is the same (a file edited outside the item's lines). A
    frozen item without a match is ``removed``; an item of today without one is ``added``.
    Drift runs recorded before ``shifted`` and ``relabelled`` existed used ``moved`` and
    ``content-changed`` more loosely; they still load as they were written.
    """

    UNCHANGED = "unchanged"
    MOVED = "moved"
    SHIFTED = "shifted"
    CONTENT_CHANGED = "content-changed"
    RELABELLED = "relabelled"
    ADDED = "added"
    REMOVED = "removed"


DRIFT_CLASS_MEANINGS: dict[DriftClass, str] = {
    DriftClass.UNCHANGED: "the same text at the same range, with the same labels, rank and citation id",
    DriftClass.MOVED: (
        "the same text at the same range with the same labels, at another rank (or renumbered within "
        "its kind, `code#2` → `code#3`, which follows from rank); never a change of lines or text"
    ),
    DriftClass.SHIFTED: (
        "the same text at another line range of the same file (lines added or removed above it); "
        "the item keeps both ranges"
    ),
    DriftClass.CONTENT_CHANGED: (
        "the text the model would see for the item differs from the frozen text, at the same range or "
        "a new one; always with a non-empty diff. An edit elsewhere in the file is not this: it is "
        "`changed_elsewhere` on an item of another class"
    ),
    DriftClass.RELABELLED: (
        "the item is labelled otherwise today: another source, evidence kind (so another citation "
        "prefix, `doc#1` → `rule#1`), authority, trust or visibility; a diff too if its text changed"
    ),
    DriftClass.ADDED: "selected today, with no frozen item that matches it",
    DriftClass.REMOVED: "selected then, not today; with the stage at which it now drops out and why",
}
"""One line per drift class, for the docs and the inspector's help."""

DRIFT_CLASS_PRECEDENCE: tuple[DriftClass, ...] = (
    DriftClass.RELABELLED,
    DriftClass.CONTENT_CHANGED,
    DriftClass.SHIFTED,
    DriftClass.MOVED,
    DriftClass.UNCHANGED,
)
"""For a matched item, the first of these that applies is its class."""


class RedactionKind(StrEnum):
    """Families of secrets that redaction at ingest recognises."""

    AWS_ACCESS_KEY = "aws-access-key"
    AWS_SECRET_KEY = "aws-secret-key"
    GCP_API_KEY = "gcp-api-key"
    GCP_SERVICE_ACCOUNT_KEY = "gcp-service-account-key"
    AZURE_STORAGE_KEY = "azure-storage-key"
    GITHUB_TOKEN = "github-token"
    GITLAB_TOKEN = "gitlab-token"
    SLACK_TOKEN = "slack-token"
    SLACK_WEBHOOK = "slack-webhook"
    STRIPE_KEY = "stripe-key"
    OPENAI_KEY = "openai-key"
    ANTHROPIC_KEY = "anthropic-key"
    TWILIO_KEY = "twilio-key"
    SENDGRID_KEY = "sendgrid-key"
    NPM_TOKEN = "npm-token"
    PYPI_TOKEN = "pypi-token"
    JWT = "jwt"
    PRIVATE_KEY_BLOCK = "private-key-block"
    URL_PASSWORD = "url-password"
    ENV_ASSIGNMENT = "env-assignment"
    BEARER_TOKEN = "bearer-token"
    AUTHORIZATION_CREDENTIALS = "authorization-credentials"


class FindingKind(StrEnum):
    """The failure forms (section 十 of the seed essay), plus two checks of replies."""

    SIMILARITY_POLLUTION = "similarity-pollution"
    TIME_POLLUTION = "time-pollution"
    PERMISSION_POLLUTION = "permission-pollution"
    CANDIDATE_MEMORY_POLLUTION = "candidate-memory-pollution"
    CITATION_DISTORTION = "citation-distortion"
    BUDGET_TRIM_DISTORTION = "budget-trim-distortion"
    REPLAY_DRIFT = "replay-drift"
    UNSUPPORTED_CITATION = "unsupported-citation"
    UNCITED_REPLY = "uncited-reply"


class Outcome(StrEnum):
    """Whether a failure form reached the model, was withheld, or is only exposed."""

    OCCURRED = "occurred"
    PREVENTED = "prevented"
    DETECTED = "detected"


MERGE_POLICY_MEANINGS: dict[MergePolicy, str] = {
    MergePolicy.INTERLEAVE_BY_RELEVANCE: (
        "each candidate's BM25 score divided by the best score of its own sub-query (the best over "
        "its sub-queries): the best match of every sub-query counts as fully matching its question; "
        "workspace code and docs found by find-code share one best, since one index scored them"
    ),
    MergePolicy.RRF: (
        "reciprocal rank fusion: the sum over the candidate's sub-queries of 1 / (60 + its rank in "
        "that sub-query), divided by the best such sum; a candidate several sub-queries find rises"
    ),
    MergePolicy.GLOBAL_NORM: (
        "each candidate's BM25 score divided by the best score across all sub-queries: a sub-query "
        "whose best match scores low keeps that low score"
    ),
}

MEMBER_MEANINGS: dict[type[StrEnum], Mapping[Any, str]] = {
    DriftClass: DRIFT_CLASS_MEANINGS,
    MergePolicy: MERGE_POLICY_MEANINGS,
    MemoryChange: MEMORY_CHANGE_MEANINGS,
    ObservedKind: OBSERVED_KIND_MEANINGS,
}
"""Vocabularies whose members each carry a definition in ``docs/vocabulary.md``."""

ALL_VOCABULARIES: tuple[type[StrEnum], ...] = (
    Source,
    EvidenceKind,
    SubQueryIntent,
    Visibility,
    Trust,
    MemoryStatus,
    MemoryChange,
    Stage,
    Purpose,
    Authority,
    AcceptedAuthority,
    MergePolicy,
    EventType,
    SnapshotKind,
    ObservedKind,
    DriftClass,
    RedactionKind,
    FindingKind,
    Outcome,
)
