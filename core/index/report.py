"""What an index run did (``IndexReport``) and how its version is named: no database and no
numpy, so the CLI can report a run that found nothing to do without loading either
(``stat_check.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from scopelens.core.index.walker import SkippedPath


@dataclass
class IndexReport:
    """What a run did. ``index_version`` is what snapshots pin.

    A run that finds nothing to add, change or remove writes nothing (``nothing_changed``):
    its report names the current version, ``run_id`` and git state of the run that made it.
    """

    run_id: int
    project: str
    branch: str
    root: str
    version: int = 0
    """The run's number within its project and branch (``#N`` of the index version)."""
    nothing_changed: bool = False
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    """New content, or the same content under a source the policy now gives it (see reclassified)."""
    reclassified: list[str] = field(default_factory=list)
    """Unchanged content whose source changed with the policy's globs (also in ``changed``)."""
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    chunks: int = 0
    redactions: int = 0
    skipped: list[SkippedPath] = field(default_factory=list)
    ignored: int = 0
    git_commit: str | None = None
    git_dirty: bool | None = None
    segments_merged: int = 0
    """Index segments of the run's line merged into fewer after it (``compaction.py``)."""

    @property
    def index_version(self) -> str:
        return index_version(self.project, self.branch, self.version)


def index_version(project: str, branch: str, version: int) -> str:
    """``project@branch#N``: the N-th version of the project's index of that branch (``-`` for
    an index made without a branch). N counts per project and branch, so it does not depend on
    what else a shared store holds (migration ``0009_index_versions``)."""
    return f"{project}@{branch or '-'}#{version}"
