"""The session script format: strict pydantic models and the loader.

A script is a JSON file (``docs/session-scripts.md`` is the reference). Its ``steps`` are
objects keyed by one *verb* (``user``, ``tool``, ``edit``, ``retrieve``, ``reply`` …). Every
input is strict: an unknown field anywhere is a one-line :class:`InvalidInputError` naming
the script, the step and the field, before anything is recorded.

JSON rather than YAML or TOML: it needs no dependency, and intents and scopes, which
scripts embed, are JSON documents everywhere else in scopelens. Long texts (tool output,
file contents) may be written as a list of lines.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Final, Literal, cast

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from scopelens.core.contracts import RetrievalIntent, RetrievalScope, parse_input
from scopelens.core.errors import InvalidInputError, UnreadableFileError
from scopelens.core.vocab import EvidenceKind, FindingKind, Outcome

SCRIPT_SCHEMA_VERSION: Final = 1
DEFAULT_START = datetime(2026, 1, 5, 9, 0, 0, tzinfo=UTC)
SCRIPT_FILE = "script.json"
SCENARIO_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def _join_lines(value: Any) -> Any:
    """A list of lines is joined with newlines (JSON has no multi-line strings)."""
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return "\n".join(value)
    return value


def _file_content(value: Any) -> Any:
    """Like :func:`_join_lines`, but a file given as lines also ends with a newline."""
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return "".join(line + "\n" for line in value)
    return value


Text = Annotated[str, BeforeValidator(_join_lines)]
FileText = Annotated[str, BeforeValidator(_file_content)]


def parse_duration(value: str) -> timedelta:
    """``"3d"``, ``"2h30m"``, ``"45s"`` as a timedelta (a one-line error otherwise)."""
    match = DURATION.fullmatch(value.strip())
    if not value.strip() or match is None:
        raise ValueError(f"{value!r} is not a duration like 3d, 2h30m or 45s")
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)


def workspace_path(value: str) -> str:
    """A relative, ``/``-separated path that cannot leave the workspace."""
    path = PurePosixPath(value)
    if not value or path.is_absolute() or ".." in path.parts or "\\" in value or value.startswith("~"):
        raise ValueError(f"{value!r} must be a relative path inside the workspace")
    return path.as_posix()


def ref_matches(wanted: str, source_ref: str | None) -> bool:
    """``wanted`` is a full source_ref, or a path that matches any line range of that path."""
    if source_ref is None:
        return False
    return source_ref == wanted or source_ref.startswith(wanted + ":")


class StrictModel(BaseModel):
    """Script models: immutable, and unknown fields are an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------- steps


class UserStep(StrictModel):
    """A user message; opens the next turn."""

    user: Text
    note: str | None = None


class TurnStep(StrictModel):
    """Opens the next turn without a user message (an agent step); the value is a label."""

    turn: str
    note: str | None = None


class ToolStep(StrictModel):
    """A tool run: ``tool.started`` then ``tool.finished``; the output can become an artifact."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    exit_code: int | None = 0
    output: Text = ""
    artifact: str | None = None
    """Artifact name; when set, the whole output is stored as a blob and referenced."""
    media_type: str = "text/plain"
    evidence_kind: EvidenceKind = EvidenceKind.TEST_LOG
    note: str | None = None


class EditSpec(StrictModel):
    path: str
    content: FileText | None = None
    old: str | None = None
    new: str | None = None

    @field_validator("path")
    @classmethod
    def _inside(cls, value: str) -> str:
        return workspace_path(value)

    @model_validator(mode="after")
    def _one_kind(self) -> EditSpec:
        whole = self.content is not None
        replace = self.old is not None or self.new is not None
        if whole == replace:
            raise ValueError("give either content, or old and new")
        if replace and (self.old is None or self.new is None or not self.old):
            raise ValueError("a replacement needs a non-empty old and a new")
        return self


class EditStep(StrictModel):
    """Write a file of the workspace copy (whole content, or replace one exact text)."""

    edit: EditSpec
    note: str | None = None


class DeleteStep(StrictModel):
    delete: str
    note: str | None = None

    @field_validator("delete")
    @classmethod
    def _inside(cls, value: str) -> str:
        return workspace_path(value)


class ReindexStep(StrictModel):
    reindex: Literal[True]
    note: str | None = None


class AdvanceStep(StrictModel):
    """Move the injected clock forward (stages time pollution and replay drift)."""

    advance: str
    note: str | None = None

    @field_validator("advance")
    @classmethod
    def _duration(cls, value: str) -> str:
        parse_duration(value)
        return value

    @property
    def delta(self) -> timedelta:
        return parse_duration(self.advance)


class MemorySpec(StrictModel):
    promote: str | None = None
    deprecate: str | None = None
    link_conflict: tuple[str, str] | None = None
    import_file: str | None = Field(default=None, alias="import")

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _exactly_one(self) -> MemorySpec:
        given = [v for v in (self.promote, self.deprecate, self.link_conflict, self.import_file) if v is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of promote, deprecate, link_conflict, import")
        return self


class MemoryStep(StrictModel):
    """Memory governance during the session."""

    memory: MemorySpec
    note: str | None = None


class RetrieveStep(StrictModel):
    """A retrieval: intent fields plus an optional ``scope``; the project defaults to the script's."""

    retrieve: dict[str, Any]
    note: str | None = None


@dataclass(frozen=True)
class Retrieval:
    """A parsed ``retrieve`` step: the intent, the scope fields (project filled in), the model."""

    intent: RetrievalIntent
    scope_fields: dict[str, Any]
    model: str | None

    def scope(self) -> RetrievalScope:
        """The scope this step asks for (already validated when the script was loaded)."""
        return parse_input(RetrievalScope, self.scope_fields, what="scope")


class Cite(StrictModel):
    """One citation of a reply: by ``source_ref`` (resolved at record time) or by ``citation_id``."""

    source_ref: str | None = None
    citation_id: str | None = None
    claim: Text

    @model_validator(mode="after")
    def _one_target(self) -> Cite:
        if (self.source_ref is None) == (self.citation_id is None):
            raise ValueError("give exactly one of source_ref or citation_id")
        if not self.claim.strip():
            raise ValueError("claim must not be empty")
        return self

    @property
    def target(self) -> str:
        return self.source_ref if self.source_ref is not None else str(self.citation_id)


class ReplySpec(StrictModel):
    text: Text
    cites: tuple[Cite, ...] = ()


class ReplyStep(StrictModel):
    """A model reply answering the turn's latest model request."""

    reply: ReplySpec
    note: str | None = None


class Expectation(StrictModel):
    """A finding the script was built to show; every given field must match."""

    finding: FindingKind
    outcome: Outcome | None = None
    source_ref: str | None = None
    turn: int | None = None

    def matches(self, finding: Any) -> bool:
        return (
            finding.kind == self.finding
            and (self.outcome is None or finding.outcome == self.outcome)
            and (self.source_ref is None or ref_matches(self.source_ref, finding.source_ref))
            and (self.turn is None or finding.turn == self.turn)
        )

    def describe(self) -> str:
        parts = [self.finding.value]
        if self.outcome:
            parts.append(f"({self.outcome.value})")
        if self.source_ref:
            parts.append(f"at {self.source_ref}")
        if self.turn is not None:
            parts.append(f"in turn {self.turn}")
        return " ".join(parts)


class ExpectStep(StrictModel):
    """Expected findings; checked after the whole script ran."""

    expect: tuple[Expectation, ...] = Field(min_length=1)
    note: str | None = None


Step = (
    UserStep
    | TurnStep
    | ToolStep
    | EditStep
    | DeleteStep
    | ReindexStep
    | AdvanceStep
    | MemoryStep
    | Retrieval
    | ReplyStep
    | ExpectStep
)
"""A parsed step (a ``retrieve`` step becomes a :class:`Retrieval`)."""

STEP_VERBS: dict[str, type[StrictModel]] = {
    "user": UserStep,
    "turn": TurnStep,
    "tool": ToolStep,
    "edit": EditStep,
    "delete": DeleteStep,
    "reindex": ReindexStep,
    "advance": AdvanceStep,
    "memory": MemoryStep,
    "retrieve": RetrieveStep,
    "reply": ReplyStep,
    "expect": ExpectStep,
}
"""Each step is an object with exactly one of these keys (plus its own options)."""

# --------------------------------------------------------------------------- the script


class Script(StrictModel):
    """A session script's top level."""

    schema_version: Literal[1] = SCRIPT_SCHEMA_VERSION
    scenario: str | None = None
    """Name used for ids and the workspace copy; defaults to the script's directory name."""
    title: str = ""
    description: Text = ""
    project: str
    branch: str | None = None
    agent: str = "scripted-agent"
    model: str = "scripted-model"
    start: datetime = DEFAULT_START
    clock_step: str = "1s"
    """How far the clock moves on each reading (every event, index run, snapshot reads it)."""
    workspace: str = "workspace"
    memories: str | None = None
    """JSONL of memory records to import first (default: ``memories.jsonl`` beside the script, if any)."""
    policy: str | None = None
    """Policy TOML (default: ``policy.toml`` beside the script, else the workspace's
    ``.scopelens/policy.toml``, if any)."""
    steps: tuple[dict[str, Any], ...] = Field(min_length=1)

    @field_validator("scenario")
    @classmethod
    def _scenario_name(cls, value: str | None) -> str | None:
        if value is not None and not SCENARIO_NAME.fullmatch(value):
            raise ValueError("scenario must be lowercase letters, digits and dashes")
        return value

    @field_validator("clock_step")
    @classmethod
    def _step(cls, value: str) -> str:
        if parse_duration(value) <= timedelta(0):
            raise ValueError("clock_step must be positive")
        return value

    @field_validator("start")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass(frozen=True)
class LoadedScript:
    """A validated script, its parsed steps and where its files are."""

    path: Path
    script: Script
    steps: tuple[Step, ...]
    scenario: str

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    @property
    def workspace_dir(self) -> Path:
        return self.base_dir / self.script.workspace

    @property
    def memories_file(self) -> Path | None:
        if self.script.memories is not None:
            return self.base_dir / self.script.memories
        default = self.base_dir / "memories.jsonl"
        return default if default.is_file() else None

    @property
    def policy_file(self) -> Path | None:
        """The policy to use, if not the workspace's own ``.scopelens/policy.toml``."""
        if self.script.policy is not None:
            return self.base_dir / self.script.policy
        default = self.base_dir / "policy.toml"
        return default if default.is_file() else None

    @property
    def expectations(self) -> tuple[Expectation, ...]:
        return tuple(e for step in self.steps if isinstance(step, ExpectStep) for e in step.expect)


def script_path(path: Path) -> Path:
    """A script file, or a scenario directory holding ``script.json``."""
    if path.is_dir():
        return path / SCRIPT_FILE
    return path


def load_script(path: Path) -> LoadedScript:
    """Read and strictly validate a script; errors are one line naming script, step and field."""
    path = script_path(path)
    what = f"script {path}"
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UnreadableFileError(f"cannot read {what}: {exc.__class__.__name__}: {exc}") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UnreadableFileError(f"{what} is not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    script = parse_input(Script, data, what=what)
    scenario = script.scenario or _default_scenario(path)
    steps = tuple(_parse_step(raw_step, index, script, what) for index, raw_step in enumerate(script.steps))
    loaded = LoadedScript(path=path, script=script, steps=steps, scenario=scenario)
    if not loaded.workspace_dir.is_dir():
        raise UnreadableFileError(f"{what}: workspace {loaded.workspace_dir} is not a directory")
    for extra in (loaded.memories_file, loaded.policy_file):
        if extra is not None and not extra.is_file():
            raise UnreadableFileError(f"{what}: {extra} does not exist")
    return loaded


def _default_scenario(path: Path) -> str:
    name = path.parent.name if path.name == SCRIPT_FILE else path.stem
    name = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-") or "script"
    return name[:63]


def _parse_step(raw: Any, index: int, script: Script, what: str) -> Step:
    where = f"{what}: steps[{index}]"
    if not isinstance(raw, dict):
        raise InvalidInputError(f"{where}: a step must be an object, not {type(raw).__name__}")
    verbs = [key for key in raw if key in STEP_VERBS]
    if len(verbs) != 1:
        keys = ", ".join(sorted(raw)) or "nothing"
        known = ", ".join(STEP_VERBS)
        raise InvalidInputError(f"{where}: a step has exactly one of {known} (this one has {keys})")
    verb = verbs[0]
    step = parse_input(STEP_VERBS[verb], raw, what=f"{where} ({verb})")
    if isinstance(step, RetrieveStep):
        return _parse_retrieve(step, script, f"{where} (retrieve)")
    # Every STEP_VERBS model other than RetrieveStep is itself a member of the Step union.
    return cast(Step, step)


def _parse_retrieve(step: RetrieveStep, script: Script, where: str) -> Retrieval:
    fields = dict(step.retrieve)
    scope = fields.pop("scope", {})
    model = fields.pop("model", None)
    if not isinstance(scope, dict):
        raise InvalidInputError(f"{where}: scope must be an object")
    if model is not None and not isinstance(model, str):
        raise InvalidInputError(f"{where}: model must be a string")
    intent = parse_input(RetrievalIntent, fields, what=where)
    scope = {"project": script.project, **({"branch": script.branch} if script.branch else {}), **scope}
    parse_input(RetrievalScope, scope, what=f"{where}: scope")
    return Retrieval(intent=intent, scope_fields=scope, model=model)
