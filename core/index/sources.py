"""Which source and evidence kind a workspace file belongs to, decided by its path.

Project rules and decision records live in the workspace as documents; what makes them
rules or decisions is where they are. The defaults below follow common layouts (ADRs,
``docs/rules``, ``AGENTS.md``); a project policy can add its own globs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase, translate
from functools import cached_property

from scopelens.core.vocab import EvidenceKind, Source

DEFAULT_RULE_GLOBS: tuple[str, ...] = (
    "AGENTS.md",
    "CONTRIBUTING.md",
    "CONVENTIONS.md",
    "rules/*",
    "docs/rules/*",
    "*/rules/*.md",
    ".scopelens/rules/*",
)
DEFAULT_DECISION_GLOBS: tuple[str, ...] = (
    "docs/decisions/*",
    "decisions/*",
    "docs/adr/*",
    "adr/*",
    "*/adr/*.md",
)
DOC_LANGUAGES = frozenset({"markdown", "text", "rst"})
LOG_LANGUAGES = frozenset({"log"})


@dataclass(frozen=True)
class SourceClassifier:
    """Maps a workspace path (``/``-separated, relative) to its source."""

    rule_globs: tuple[str, ...] = DEFAULT_RULE_GLOBS
    decision_globs: tuple[str, ...] = DEFAULT_DECISION_GLOBS
    extra: tuple[tuple[str, Source], ...] = field(default_factory=tuple)

    def with_globs(self, rules: Iterable[str] = (), decisions: Iterable[str] = ()) -> SourceClassifier:
        return SourceClassifier(
            rule_globs=(*self.rule_globs, *rules),
            decision_globs=(*self.decision_globs, *decisions),
            extra=self.extra,
        )

    def source_of(self, path: str, language: str) -> Source:
        for pattern, source in self.extra:
            if fnmatchcase(path, pattern):
                return source
        if (decisions := self._decision_pattern) is not None and decisions.match(path):
            return Source.DECISION_RECORD
        if (rules := self._rule_pattern) is not None and rules.match(path):
            return Source.PROJECT_RULE
        if language in DOC_LANGUAGES or language in LOG_LANGUAGES:
            return Source.WORKSPACE_DOC
        return Source.WORKSPACE_CODE

    @cached_property
    def _decision_pattern(self) -> re.Pattern[str] | None:
        return _any_glob(self.decision_globs)

    @cached_property
    def _rule_pattern(self) -> re.Pattern[str] | None:
        return _any_glob(self.rule_globs)


def _any_glob(globs: tuple[str, ...]) -> re.Pattern[str] | None:
    """One regex matching a path where any of ``globs`` matches it as ``fnmatchcase`` does (a
    ``fnmatchcase`` per glob was most of the time a re-index spends on files it does not
    read: every walked file is classified). A pattern, not a function: a classifier is
    pickled to the preparing workers, its cached patterns with it."""
    if not globs:
        return None
    return re.compile("|".join(f"(?:{translate(glob)})" for glob in globs))


def evidence_kind_of(source: Source, language: str) -> EvidenceKind:
    """The citation prefix of a workspace chunk."""
    if source == Source.PROJECT_RULE:
        return EvidenceKind.RULE
    if source == Source.DECISION_RECORD:
        return EvidenceKind.DECISION
    if language in LOG_LANGUAGES:
        return EvidenceKind.TEST_LOG
    if source == Source.WORKSPACE_DOC:
        return EvidenceKind.DOC
    return EvidenceKind.CODE
