"""Run a session script through the real engine, deterministically, and collect findings.

Determinism: each script gets its own :class:`SteppingClock` (from the script's ``start``)
and :class:`SequentialIds` (namespaced by the scenario), injected into the store handle,
the indexer and the retriever. The workspace is copied to a temporary directory and
edited there (``sample_sessions/`` is never touched). The copy's absolute path never
reaches a hash: the session's ``workspace_root`` is the logical ``script:<scenario>``,
and retrievals leave the scope's ``workspace_root`` unset, so they are bounded by the
scenario's project instead (each scenario must have a project of its own in a store).
The same script therefore gives the same event, snapshot and store hashes wherever and
whenever it is recorded, as long as the store held the same things before.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlmodel import col, select

from scopelens.core.clock import SequentialIds, SteppingClock
from scopelens.core.contracts import (
    SCHEMA_VERSION,
    ArtifactRef,
    AuditSnapshot,
    ModelRequestPayload,
    ModelResponsePayload,
    ToolFinishedPayload,
    ToolStartedPayload,
    UserMessagePayload,
)
from scopelens.core.errors import InvalidInputError, UnknownIdError, UnreadableFileError
from scopelens.core.hashing import text_hash
from scopelens.core.index.indexer import index_workspace
from scopelens.core.index.sources import SourceClassifier
from scopelens.core.memory import deprecate, import_memories, link_conflict, promote, read_jsonl, seed_memories
from scopelens.core.pipeline.policy import Policy, find_policy, load_policy
from scopelens.core.pipeline.retriever import Retriever
from scopelens.core.record.findings import CiteCheck, Finding, FindingContext, drift_findings, reply_findings, snapshot_findings
from scopelens.core.record.script import (
    AdvanceStep,
    Cite,
    DeleteStep,
    EditStep,
    Expectation,
    ExpectStep,
    LoadedScript,
    MemoryStep,
    ReindexStep,
    ReplyStep,
    Retrieval,
    Step,
    ToolStep,
    TurnStep,
    UserStep,
    load_script,
    parse_duration,
    ref_matches,
)
from scopelens.core.redact import RedactionKey, redact, redact_values
from scopelens.core.store.store import Store
from scopelens.core.store.tables import IndexRunRow
from scopelens.core.vocab import EventType

PREVIEW_CHARS = 300
"""How much of a tool's output goes into ``tool.finished`` itself (the rest is the artifact)."""
MARKER = re.compile(r"\[(\d{1,3})\]")


@dataclass(frozen=True)
class SnapshotRecord:
    """A snapshot a script produced, as the summary lists it."""

    snapshot_id: str
    snapshot_hash: str
    turn: int
    request_id: str
    selected: int
    rejected: int


@dataclass(frozen=True)
class RecordResult:
    """What recording one script produced."""

    scenario: str
    title: str
    script: Path
    project: str
    session_id: str
    session_head: str
    events: int
    snapshots: tuple[SnapshotRecord, ...]
    findings: tuple[Finding, ...]
    expectations: tuple[Expectation, ...]
    unmet: tuple[Expectation, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "scenario": self.scenario,
            "title": self.title,
            "project": self.project,
            "session_id": self.session_id,
            "session_head": self.session_head,
            "events": self.events,
            "snapshots": [
                {"snapshot_id": s.snapshot_id, "snapshot_hash": s.snapshot_hash, "turn": s.turn,
                 "request_id": s.request_id, "selected": s.selected, "rejected": s.rejected}
                for s in self.snapshots
            ],
            "findings": [f.model_dump(mode="json") for f in self.findings],
            "expected": [e.model_dump(mode="json", exclude_none=True) for e in self.expectations],
            "unmet": [e.model_dump(mode="json", exclude_none=True) for e in self.unmet],
        }


RECORDER_KEY = RedactionKey(hashlib.sha256(b"scopelens deterministic recorder redaction key").digest())
"""A fixed, public redaction key: a recorded script gives the same hashes on every machine.
Scripts are test and sample material, so their redaction hashes protect nothing secret."""


def record_scripts(scripts: list[LoadedScript | Path], *, db: str, workdir: Path | None = None) -> list[RecordResult]:
    """Record several scripts into one store, in order; all are validated before any is recorded."""
    loaded = [s if isinstance(s, LoadedScript) else load_script(Path(s)) for s in scripts]
    seen: dict[str, Path] = {}
    for script in loaded:
        for key in (f"scenario {script.scenario}", f"project {script.script.project}"):
            if key in seen:
                raise InvalidInputError(f"{script.path} and {seen[key]} both use {key}; each script needs its own")
            seen[key] = script.path
    return [record_script(script, db=db, workdir=workdir) for script in loaded]


def record_script(script: LoadedScript | Path, *, db: str, workdir: Path | None = None) -> RecordResult:
    """Record one script into the store at ``db`` (created if missing); see the module docstring."""
    loaded = script if isinstance(script, LoadedScript) else load_script(Path(script))
    policy = load_policy(loaded.policy_file) if loaded.policy_file else None
    memories = read_jsonl(loaded.memories_file) if loaded.memories_file else []
    # Open once without the script's clock, so that creating or migrating the store does
    # not consume clock ticks (a fresh store and a used one then record alike).
    Store.open(db, create=True).close()
    clock = SteppingClock(loaded.script.start, parse_duration(loaded.script.clock_step))
    ids = SequentialIds(namespace=loaded.scenario)
    with tempfile.TemporaryDirectory(prefix=f"scopelens-{loaded.scenario}-", dir=workdir) as tmp:
        root = Path(tmp) / "workspace"
        shutil.copytree(loaded.workspace_dir, root, symlinks=True)
        with Store.open(db, create=True, clock=clock, ids=ids, redaction_key=RECORDER_KEY) as store:
            _refuse_reuse(store, loaded)
            recorder = _Recorder(store, loaded, root, clock, ids, policy or find_policy(root, None))
            return recorder.run(memories)


def _refuse_reuse(store: Store, loaded: LoadedScript) -> None:
    session_id = SequentialIds(namespace=loaded.scenario).new_id("s")
    try:
        store.get_session(session_id)
    except UnknownIdError:
        pass
    else:
        raise InvalidInputError(
            f"scenario {loaded.scenario} is already recorded in this store (session {session_id}); record into a fresh store"
        )
    with store.read() as conn:
        indexed = conn.execute(select(col(IndexRunRow.id)).where(col(IndexRunRow.project) == loaded.script.project)).first()
    if indexed is not None:
        raise InvalidInputError(
            f"project {loaded.script.project} is already indexed in this store; a script needs a project of its own"
        )


@dataclass
class _Request:
    request_id: str
    snapshots: list[AuditSnapshot] = field(default_factory=list)


class _Recorder:
    """One script's run: the turn counter, the latest model request, and the findings."""

    def __init__(
        self, store: Store, loaded: LoadedScript, root: Path, clock: SteppingClock, ids: SequentialIds, policy: Policy
    ) -> None:
        self.store = store
        self.loaded = loaded
        self.script = loaded.script
        self.root = root
        self.clock = clock
        self.ids = ids
        self.policy = policy
        self.classifier = SourceClassifier().with_globs(policy.rule_globs, policy.decision_globs)
        self.turn = 0
        self.request: _Request | None = None
        self.snapshots: list[AuditSnapshot] = []
        self.records: list[SnapshotRecord] = []
        self.session_id = ""
        self.ctx: FindingContext | None = None

    def run(self, memories: list[Any]) -> RecordResult:
        self._reindex()
        if memories:
            # The scenario's starting state, governance included (see docs/session-scripts.md).
            seed_memories(self.store, memories)
        header = self.store.create_session(
            project=self.script.project,
            branch=self.script.branch,
            workspace_root=f"script:{self.loaded.scenario}",
            title=redact(self.script.title or self.loaded.scenario).text,
            agent=redact(self.script.agent).text,
            session_id=self.ids.new_id("s"),
            created_at=self.clock.now(),
        )
        self.session_id = header.id
        self.ctx = FindingContext(self.loaded.scenario, header.id, self.script.project)
        self.retriever = Retriever(self.store, policy=self.policy, clock=self.clock, ids=self.ids)
        for index, step in enumerate(self.loaded.steps):
            self._step(index, step)
        drift_findings(self.store, self.snapshots, self.ctx)
        findings = tuple(self.ctx.findings)
        expectations = self.loaded.expectations
        unmet = tuple(e for e in expectations if not any(e.matches(f) for f in findings))
        summary = next(s for s in self.store.list_sessions(project=self.script.project) if s.header.id == header.id)
        return RecordResult(
            scenario=self.loaded.scenario,
            title=self.script.title,
            script=self.loaded.path,
            project=self.script.project,
            session_id=header.id,
            session_head=summary.head_hash,
            events=summary.events,
            snapshots=tuple(self.records),
            findings=findings,
            expectations=expectations,
            unmet=unmet,
        )

    # ------------------------------------------------------------------ steps

    def _where(self, index: int, verb: str) -> str:
        return f"script {self.loaded.path}: steps[{index}] ({verb})"

    def _step(self, index: int, step: Step) -> None:
        match step:
            case UserStep():
                self._open_turn()
                self._append(EventType.USER_MESSAGE, UserMessagePayload(text=redact(step.user).text))
            case TurnStep():
                self._open_turn()
            case ToolStep():
                self._tool(step)
            case EditStep():
                self._edit(index, step)
            case DeleteStep():
                target = self.root / step.delete
                if not target.is_file():
                    raise InvalidInputError(f"{self._where(index, 'delete')}: {step.delete} is not a file of the workspace")
                target.unlink()
            case ReindexStep():
                self._reindex()
            case AdvanceStep():
                self.clock.advance(step.delta)
            case MemoryStep():
                self._memory(step)
            case Retrieval():
                self._retrieve(step)
            case ReplyStep():
                self._reply(step)
            case ExpectStep():
                pass  # checked after the whole script ran
            case _:  # pragma: no cover - the loader only makes the types above
                raise TypeError(f"unknown step {step!r}")

    def _open_turn(self) -> None:
        self.turn += 1
        self.request = None

    def _event_turn(self) -> int:
        if self.turn == 0:
            self._open_turn()
        return self.turn

    def _append(self, event_type: EventType, payload: Any) -> None:
        self.store.append_event(
            self.session_id, event_type, payload, turn=self._event_turn(), created_at=self.clock.now()
        )

    def _reindex(self) -> None:
        index_workspace(
            self.store, self.root, project=self.script.project, branch=self.script.branch,
            classifier=self.classifier, clock=self.clock,
        )

    def _tool(self, step: ToolStep) -> None:
        call_id = self.ids.new_id("call")
        output = redact(step.output).text
        tool = redact(step.tool).text  # a command line: `curl -H "Authorization: Bearer …"`
        self._append(
            EventType.TOOL_STARTED, ToolStartedPayload(call_id=call_id, tool=tool, arguments=redact_values(step.arguments))
        )
        artifacts: tuple[ArtifactRef, ...] = ()
        if step.artifact:
            data = output.encode("utf-8")
            blob = self.store.put_blob(data)
            artifacts = (
                ArtifactRef(blob=blob, name=step.artifact, media_type=step.media_type, size=len(data),
                            evidence_kind=step.evidence_kind),
            )
        self._append(
            EventType.TOOL_FINISHED,
            ToolFinishedPayload(call_id=call_id, tool=tool, exit_code=step.exit_code,
                                output_preview=preview(output), artifacts=artifacts),
        )

    def _edit(self, index: int, step: EditStep) -> None:
        spec = step.edit
        target = self.root / spec.path
        if spec.content is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(spec.content, encoding="utf-8")
            return
        try:
            current = target.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            raise InvalidInputError(f"{self._where(index, 'edit')}: {spec.path} is not a text file of the workspace") from None
        count = current.count(spec.old or "")
        if count != 1:
            raise InvalidInputError(
                f"{self._where(index, 'edit')}: old text occurs {count} times in {spec.path} (it must occur once)"
            )
        target.write_text(current.replace(spec.old or "", spec.new or ""), encoding="utf-8")

    def _memory(self, step: MemoryStep) -> None:
        spec = step.memory
        if spec.promote is not None:
            promote(self.store, spec.promote)
        elif spec.deprecate is not None:
            deprecate(self.store, spec.deprecate)
        elif spec.link_conflict is not None:
            link_conflict(self.store, *spec.link_conflict)
        elif spec.import_file is not None:
            path = self.loaded.base_dir / spec.import_file
            if not path.is_file():
                raise UnreadableFileError(f"script {self.loaded.path}: memory file {path} does not exist")
            import_memories(self.store, read_jsonl(path))

    def _retrieve(self, step: Retrieval) -> None:
        turn = self._event_turn()
        scope = step.scope()
        request_id = self.ids.new_id("req")
        observation = self.retriever.retrieve(
            step.intent, scope, project=scope.project, session_id=self.session_id, turn=turn,
            model_request_id=request_id,
        )
        self._append(
            EventType.MODEL_REQUEST,
            ModelRequestPayload(
                request_id=request_id,
                snapshot_ids=(observation.snapshot_id,),
                context_hash=text_hash(observation.context_block),
                model=step.model or self.script.model,
            ),
        )
        snapshot = observation.snapshot
        self.request = _Request(request_id, [snapshot])
        self.snapshots.append(snapshot)
        self.records.append(
            SnapshotRecord(observation.snapshot_id, observation.snapshot_hash, turn, request_id,
                           len(snapshot.selected), len(snapshot.rejected))
        )
        assert self.ctx is not None
        snapshot_findings(self.store, snapshot, self.ctx)

    def _reply(self, step: ReplyStep) -> None:
        turn = self._event_turn()
        request = self.request
        snapshots = request.snapshots if request else []
        checks = [resolve_cite(cite, snapshots) for cite in step.reply.cites]
        text, cited_ids = render_reply(redact(step.reply.text).text, checks)
        self._append(
            EventType.MODEL_RESPONSE,
            ModelResponsePayload(request_id=request.request_id if request else None, text=text, cited_ids=cited_ids),
        )
        assert self.ctx is not None
        reply_findings(self.ctx, turn, snapshots, checks)


def preview(output: str) -> str:
    """The start of a tool's output, cut at a line end when one is near."""
    if len(output) <= PREVIEW_CHARS:
        return output
    cut = output.rfind("\n", 0, PREVIEW_CHARS)
    return output[: cut if cut > PREVIEW_CHARS // 2 else PREVIEW_CHARS] + "\n…"


def resolve_cite(cite: Cite, snapshots: list[AuditSnapshot]) -> CiteCheck:
    """Resolve a citation against the snapshots of the request the reply answers, latest first.

    Citation ids are per snapshot (``code#1`` means different items in two snapshots), so
    a reply resolves only against what its own request showed. A ``source_ref`` given as a
    bare path matches the best-ranked selected item of that path.
    """
    for snapshot in reversed(snapshots):
        for item in snapshot.selected:
            if (cite.source_ref is not None and ref_matches(cite.source_ref, item.source_ref)) or (
                cite.citation_id is not None and item.citation_id == cite.citation_id
            ):
                return CiteCheck(cite.source_ref, cite.citation_id, cite.claim, item, snapshot)
    return CiteCheck(cite.source_ref, cite.citation_id, cite.claim, None, None)


def render_reply(text: str, checks: list[CiteCheck]) -> tuple[str, tuple[str, ...]]:
    """Replace ``[1]``, ``[2]``… with the resolved citation ids; returns (text, cited ids).

    An unresolved ``citation_id`` stays as the model wrote it (and is listed, dangling, among
    the cited ids); an unresolved ``source_ref`` is written as a plain reference.
    """
    labels = []
    for check in checks:
        if check.item is not None:
            labels.append(check.item.citation_id)
        elif check.citation_id is not None:
            labels.append(check.citation_id)
        else:
            labels.append(str(check.source_ref))
    used: set[int] = set()

    def replace(match: re.Match[str]) -> str:
        number = int(match.group(1))
        if 1 <= number <= len(labels):
            used.add(number - 1)
            return f"[{labels[number - 1]}]"
        return match.group(0)

    rendered = MARKER.sub(replace, text)
    rest = [f"[{labels[i]}]" for i in range(len(labels)) if i not in used]
    if rest:
        rendered = f"{rendered.rstrip()} {''.join(rest)}"
    cited = [
        label for check, label in zip(checks, labels, strict=True) if check.item is not None or check.citation_id is not None
    ]
    return rendered, tuple(dict.fromkeys(cited))
