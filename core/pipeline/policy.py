"""The project policy: what a project declares about its own evidence.

Read from ``.scopelens/policy.toml`` in the workspace, or from ``--policy FILE``. It declares
instruction files, visibility by path glob, denied sources, where rules and decisions live,
memory rules and a budget. Unknown keys are an error (a typo must not silently widen
anything). A policy can only *narrow* a scope; see ``scope.py``.

Example::

    instruction_files = ["AGENTS.md"]
    denied_sources = ["session-event"]
    rule_globs = ["docs/conventions/*"]

    [[visibility]]
    glob = "ops/*.env"
    visibility = "runtime-only"

    [[visibility]]
    glob = "docs/long/*"
    visibility = "summary-only"

    [memory]
    deprecated_as_history = true
    max_candidates_probed = 3

    [budget]
    max_tokens = 1200
    max_items = 8
    per_source = { memory = 2, "session-event" = 2 }
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from pydantic import Field

from scopelens.core.contracts import Contract, RetrievalBudget, parse_input
from scopelens.core.errors import UnreadableFileError
from scopelens.core.hashing import document_hash
from scopelens.core.pipeline.policy_file import policy_file
from scopelens.core.vocab import Source, Trust, Visibility

VISIBILITY_ORDER: tuple[Visibility, ...] = (
    Visibility.RAW, Visibility.REDACTED, Visibility.SUMMARY_ONLY, Visibility.RUNTIME_ONLY
)
"""Least to most restrictive: combined rules take the latest in this order."""


class VisibilityRule(Contract):
    """Files matching ``glob`` are shown to the model only this way."""

    glob: str
    visibility: Visibility
    requires_grant: str | None = None
    """If set, the *source access* gate also requires this grant in the permission context."""


class MemoryRules(Contract):
    deprecated_as_history: bool = True
    """Deprecated memories may appear, labelled as history; otherwise they are dropped."""
    max_candidates_probed: int = Field(default=3, ge=0)
    """How many memories the scope probe takes per query (the best-scoring) to record what the
    scope withheld: another project's are counted, a denied memory source's named. 0: none."""


@dataclass(frozen=True)
class PathRules:
    """The visibility rules that match one path, and what they mean together."""

    matching: tuple[VisibilityRule, ...] = ()

    @property
    def visibility(self) -> Visibility:
        return max((r.visibility for r in self.matching), key=VISIBILITY_ORDER.index, default=Visibility.RAW)

    @property
    def visibility_glob(self) -> str | None:
        """The glob of the (first) rule that set the combined visibility."""
        return next((r.glob for r in self.matching if r.visibility == self.visibility), None)

    def missing_grants(self, grants: Iterable[str]) -> tuple[tuple[str, str], ...]:
        """``(grant, glob)`` for every required grant not in ``grants``, in rule order."""
        held = set(grants)
        return tuple((r.requires_grant, r.glob) for r in self.matching if r.requires_grant and r.requires_grant not in held)


class Policy(Contract):
    """A project's policy. Every field narrows what a retrieval may show."""

    schema_version: int = 1
    instruction_files: tuple[str, ...] = ("AGENTS.md",)
    visibility: tuple[VisibilityRule, ...] = ()
    denied_sources: tuple[Source, ...] = ()
    rule_globs: tuple[str, ...] = ()
    decision_globs: tuple[str, ...] = ()
    memory: MemoryRules = MemoryRules()
    budget: RetrievalBudget | None = None

    @property
    def policy_hash(self) -> str:
        return document_hash(self)

    def rules_for(self, path: str | None) -> PathRules:
        """Every visibility rule whose glob matches ``path``, combined: the most restrictive wins.

        All required grants apply, and the visibility is the most restrictive of the matching
        rules, whatever their order in the file: a rule can only narrow (docs/scope.md).
        """
        return self.rules_for_all((path,))

    def rules_for_all(self, paths: Iterable[str | None]) -> PathRules:
        """Every visibility rule whose glob matches any of ``paths``, combined as in :meth:`rules_for`.

        For text drawn from several paths: a tool event's preview of its artifacts.
        """
        named = [p for p in paths if p is not None]
        return PathRules(tuple(r for r in self.visibility if any(fnmatchcase(p, r.glob) for p in named)))

    def trust_for(self, path: str | None, default: Trust) -> Trust:
        if path is not None and any(fnmatchcase(path, glob) for glob in self.instruction_files):
            return Trust.INSTRUCTION
        return default


def load_policy(path: Path) -> Policy:
    """Read and strictly validate a policy file (one-line errors)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UnreadableFileError(f"cannot read policy {path}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UnreadableFileError(f"policy {path} is not valid TOML: {exc}") from None
    return parse_input(Policy, data, what=f"policy {path}")


def find_policy(workspace_root: Path | None, explicit: Path | None) -> Policy:
    """``--policy`` if given, else the workspace's ``.scopelens/policy.toml``, else defaults."""
    path = policy_file(workspace_root, explicit)
    return Policy() if path is None else load_policy(path)
