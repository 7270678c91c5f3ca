"""Whether a workspace is unchanged since its live index version, by file sizes and times
alone, through the standard library's ``sqlite3``: a no-op ``scopelens index`` answers
without loading SQLAlchemy, SQLModel or numpy (about a second of imports on this machine).

The answer is "unchanged" only when it is certain in the same sense as the indexer's own
check (``indexer._Diff``): the store is a SQLite file at the schema this code writes, the
root has a finished run of the project and branch, every walked file has a live version
with a trusted modification time equal to the file's and the same size and source, and no
live path is gone. Anything else (another backend, an older or newer store, a file to read,
an error) returns ``None`` and the caller runs the indexer, which decides and reports.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from scopelens.core.index.languages import language_of
from scopelens.core.index.report import IndexReport
from scopelens.core.index.sources import SourceClassifier
from scopelens.core.index.walker import WalkedFile, walk_workspace
from scopelens.core.store.location import sqlite_file

SCHEMA_STEPS = 14
"""The number of migrations this code knows (``len(migrations.MIGRATIONS)``, which imports
SQLModel; a test keeps the two equal)."""


@dataclass(frozen=True)
class StatCheck:
    """What sizes and times alone say about a workspace against its live index version."""

    unchanged: IndexReport | None
    """The report of a run that would find nothing to do, or ``None`` when that is not certain."""
    to_read: list[WalkedFile] | None
    """The walked files that are not their live version by size and time (new, changed, or not
    known: every file when the store is new or unreadable here), in walk order; ``None`` when
    the workspace was not walked (a store that is not a SQLite file)."""


def unchanged_by_stat(
    db: str, root: Path, *, project: str, branch: str, classifier: SourceClassifier, max_bytes: int
) -> IndexReport | None:
    """The report of a run that would find nothing to do, or ``None`` when that is not certain
    from sizes and times alone (see the module)."""
    return check_by_stat(db, root, project=project, branch=branch, classifier=classifier, max_bytes=max_bytes).unchanged


def check_by_stat(
    db: str, root: Path, *, project: str, branch: str, classifier: SourceClassifier, max_bytes: int
) -> StatCheck:
    """``unchanged_by_stat``, and the files an index run would have to read."""
    path = sqlite_file(db)
    if path is None or not root.is_dir():
        return StatCheck(None, None)
    root = root.resolve()
    walked = walk_workspace(root, max_bytes=max_bytes)
    everything = StatCheck(None, walked.files)
    if not path.is_file():
        return everything
    try:
        connection = sqlite3.connect(f"file:{quote(str(path.resolve()), safe='/')}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error:
        return everything
    try:
        connection.execute("BEGIN")  # one snapshot for every read below
        if connection.execute("SELECT count(*) FROM scopelens_migrations").fetchone()[0] != SCHEMA_STEPS:
            return everything
        finished = "FROM index_runs WHERE project = ? AND branch = ? AND finished_at IS NOT NULL"
        latest = connection.execute(
            f"SELECT id, version, git_commit, git_dirty {finished} ORDER BY version DESC LIMIT 1", (project, branch)
        ).fetchone()
        of_root = connection.execute(f"SELECT 1 {finished} AND root = ? LIMIT 1", (project, branch, str(root))).fetchone()
        live = {
            row[0]: row[1:]
            for row in connection.execute(
                "SELECT path, source, size, mtime_ns FROM index_documents "
                "WHERE project = ? AND branch = ? AND root = ? AND valid_to IS NULL",
                (project, branch, str(root)),
            )
        }
    except sqlite3.Error:
        return everything
    finally:
        connection.close()
    to_read = [
        entry for entry in walked.files
        if (version := live.get(entry.rel_path)) is None
        or not same_by_stat(entry, version[0], version[1], version[2], classifier)
    ]
    if latest is None or of_root is None or len(live) != len(walked.files) or to_read:
        return StatCheck(None, to_read)
    run_id, number, git_commit, git_dirty = latest
    return StatCheck(
        IndexReport(
            run_id=int(run_id),
            project=project,
            branch=branch,
            root=str(root),
            version=int(number),
            nothing_changed=True,
            unchanged=len(walked.files),
            skipped=walked.skipped,
            ignored=walked.ignored_count,
            git_commit=git_commit,
            git_dirty=None if git_dirty is None else bool(git_dirty),
        ),
        [],
    )


def same_by_stat(entry: WalkedFile, source: str, size: int, mtime_ns: int | None, classifier: SourceClassifier) -> bool:
    """Whether a walked file is the version recorded with ``source``, ``size`` and trusted
    ``mtime_ns`` without reading it: the same size and time, under the source the policy
    gives the path now (the indexer's check too, ``indexer._Diff``)."""
    return (
        mtime_ns is not None
        and mtime_ns == entry.mtime_ns
        and size == entry.size
        and classifier.source_of(entry.rel_path, language_of(entry.rel_path)).value == source
    )


