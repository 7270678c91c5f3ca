"""Index a workspace into the store: versioned documents, chunks and packed postings.

One call is one *run*, and each run is one index version, ``project@branch#N``, numbered per
project and branch; a call that finds nothing to add, change or remove writes no run (no
version for no change). Files are compared with the live version of the same path by content
hash, so re-indexing is incremental: only added and changed files are redacted, chunked and
their terms counted (``prepare.py``, in worker processes when there is enough to do). A
changed or removed file's old version gets ``valid_to`` and stays, so ``as_of`` queries still
see it. The run's chunks get contiguous ids, sorted by path, so that a path-prefix scope is a
range of ids inside each run (see ``scorer.py``).

**Streaming.** A run reads its files twice: once to hash them and diff them against the live
versions, then, for the new and changed ones only, as they are prepared. Prepared documents
are written a segment at a time (``run_writer.py``), each in a short transaction, and
released, so what the process holds does not grow with the workspace; the run becomes
visible only at its final commit. Runs of one store run one at a time
(``Store.index_run_lock``, held from before the diff): a run that waited for another diffs
against what that one wrote.
"""

from __future__ import annotations

import gc
import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from scopelens.core.clock import Clock, SystemClock
from scopelens.core.errors import IndexChangedError, UnreadableFileError
from scopelens.core.index.batching import FileOnDisk
from scopelens.core.index.compaction import compact_line
from scopelens.core.index.head_start import HeadStart
from scopelens.core.index.languages import language_of
from scopelens.core.index.prepare import PreparedDocument, Unreadable, prepare_all, prepare_document
from scopelens.core.index.prepare_worker import release_free_heap
from scopelens.core.index.report import IndexReport, index_version
from scopelens.core.index.run_writer import SEGMENT_BYTES, RunWriter, clean_interrupted_runs, record_mtimes
from scopelens.core.index.sources import SourceClassifier
from scopelens.core.index.stat_check import same_by_stat
from scopelens.core.index.timeutil import to_micros
from scopelens.core.index.walker import SkippedPath, WalkedFile, git_state, walk_workspace
from scopelens.core.store.store import Store
from scopelens.core.store.tables import IndexDocumentRow, IndexRunRow

__all__ = ["IndexReport", "LiveDocument", "PreparedDocument", "gc_paused", "index_version", "index_workspace",
           "live_documents", "prepare_document", "write_run"]

Progress = Callable[[int, int, str], None]
"""``progress(done, total, path)`` while files are read."""


def index_workspace(
    store: Store,
    root: Path,
    *,
    project: str,
    branch: str | None = None,
    classifier: SourceClassifier | None = None,
    clock: Clock | None = None,
    max_bytes: int = 1_000_000,
    progress: Progress | None = None,
    workers: int | None = None,
    rehash: bool = False,
    compact: bool = True,
    head_start: HeadStart | None = None,
    git: tuple[str | None, bool | None] | None = None,
) -> IndexReport:
    """Index ``root`` for ``project``/``branch``; only new and changed files are processed.

    A file of the same size and modification time as its live version is taken to be that
    version without being read (see ``_Diff``); ``rehash`` reads and hashes every file, for
    trees written by a tool that keeps sizes and times (``tar -p``, ``rsync -t``).

    New and changed files are prepared (decoded, redacted, chunked, their terms counted) by
    ``workers`` processes (``prepare.prepare_all``: by default one per core when there is
    enough to prepare; 0 prepares in this process); the result does not depend on it.

    ``head_start``: workers already given the first files to prepare (``head_start.HeadStart``,
    made by ``scopelens index`` from its stat check); the caller closes it.

    ``git``: ``walker.git_state(root)``, when the caller has asked git already (``scopelens
    index`` does before it loads the indexer: a child process is counted at its parent's
    size until it runs git, so asking later showed the run's memory peak about 30 MiB higher
    than it was, once in a dozen runs).

    Runs may overlap (two ``scopelens index`` at once): the second waits for the first's
    index-run lock, then diffs against what the first wrote.

    After a run that wrote something, the small segments of its line are merged by size tiers
    (``compaction.compact_line``; ``compact=False`` leaves them, for tests of segments).
    """
    if not root.is_dir():
        raise UnreadableFileError(f"cannot index {root}: not a directory")
    root = root.resolve()
    classifier = classifier or SourceClassifier()
    clock = clock or SystemClock()
    report = IndexReport(run_id=0, project=project, branch=branch or "", root=str(root))
    report.git_commit, report.git_dirty = git if git is not None else git_state(root)
    with store.index_run_lock(), gc_paused():  # see gc_paused
        clean_interrupted_runs(store)
        diff_started = time.time_ns()
        walked = walk_workspace(root, max_bytes=max_bytes)
        report.skipped, report.ignored = walked.skipped, walked.ignored_count
        live = live_documents(store, project=project, branch=report.branch, root=report.root)
        diff = _Diff(classifier, live, report, walked_at_ns=diff_started, trust_times=not rehash)
        total = len(walked.files)
        for done, entry in enumerate(walked.files, start=1):
            if progress:
                progress(done, total, entry.rel_path)
            diff.add(entry)
        report.removed = sorted(path for path in live if path not in diff.seen)
        if not (diff.pending or report.removed) and _nothing_to_write(store, report):
            record_mtimes(store, diff.refreshed)
            return report
        _set_version(store, report)
        writer = RunWriter(store, report, live, mtimes=diff.mtimes, refreshed=diff.refreshed)
        documents = prepare_all(
            diff.pending, classifier=classifier, key=store.redaction_key, workers=workers,
            total_bytes=diff.pending_bytes, head_start=head_start,
        )
        for segment in _segments(diff.kept(documents)):
            writer.write_segment(segment)
            release_free_heap()
        if writer.run_id is None and not report.removed and _nothing_to_write(store, report):
            record_mtimes(store, diff.refreshed)
            return report  # every pending file turned out unchanged when read again
        writer.finish(to_micros(clock.now()))
        if compact:
            _compact_after(store, report)
    return report


def _compact_after(store: Store, report: IndexReport) -> None:
    """Merge the small segments of the run's line (under the run's lock, after its commit)."""
    done = compact_line(store, report.project, report.branch, report.root)
    report.segments_merged = done.segments_before - done.segments_after


RACY_NS = 2_000_000_000
"""A file modified less than this long before a run's walk may be modified again without its
time changing (file systems keep times in ticks, up to 2 s on FAT): its time is not trusted."""


@dataclass
class _Diff:
    """The walked files against the live versions of their paths: which need preparing.

    A file whose size and modification time equal those its live version was indexed with is
    not read: its bytes are taken to be that version's (as ``git status`` does). A time is
    recorded only when it is older than the walk by ``RACY_NS``, so a file written just
    before a run (or during it) is always read next time. Fills the report's lists and counts
    as it goes."""

    classifier: SourceClassifier
    live: dict[str, LiveDocument]
    report: IndexReport
    walked_at_ns: int = field(default_factory=time.time_ns)
    trust_times: bool = True
    """False: read every file, whatever its recorded time (``index_workspace(rehash=True)``)."""
    seen: set[str] = field(default_factory=set)
    mtimes: dict[str, int | None] = field(default_factory=dict)
    """The trusted modification time of each file read (``None``: not trusted)."""
    refreshed: dict[int, int] = field(default_factory=dict)
    """``live version id -> trusted time`` for unchanged files whose recorded time differs."""
    """Every walked path, read or not: a path not in it whose version is live was removed."""
    pending: list[FileOnDisk] = field(default_factory=list)
    """Files that differ from their live version (or have none), to be prepared (read again
    where they are prepared, so they are not all held), in walk order."""
    pending_bytes: int = 0

    def add(self, entry: WalkedFile) -> None:
        self.seen.add(entry.rel_path)
        previous = self.live.get(entry.rel_path)
        if (
            self.trust_times
            and previous is not None
            and same_by_stat(entry, previous.source, previous.size, previous.mtime_ns, self.classifier)
        ):
            self.report.unchanged += 1
            return
        try:
            data = entry.abs_path.read_bytes()
        except OSError as exc:
            self.report.skipped.append(SkippedPath(entry.rel_path, "unreadable", exc.strerror or str(exc)))
            return
        digest = hashlib.sha256(data).hexdigest()
        trusted = entry.mtime_ns if entry.mtime_ns < self.walked_at_ns - RACY_NS and entry.size == len(data) else None
        self.mtimes[entry.rel_path] = trusted
        if self._unchanged(entry.rel_path, digest, previous):
            assert previous is not None
            if trusted is not None and (previous.mtime_ns, previous.size) != (trusted, len(data)):
                self.refreshed[previous.id] = trusted
            self.report.unchanged += 1
            return
        if previous is not None and previous.content_hash == digest:
            self.report.reclassified.append(entry.rel_path)
        (self.report.changed if previous else self.report.added).append(entry.rel_path)
        self.pending.append(FileOnDisk(entry.rel_path, entry.abs_path, len(data)))
        self.pending_bytes += len(data)

    def _unchanged(self, path: str, digest: str, previous: LiveDocument | None) -> bool:
        """Same bytes as the live version, which has the source the policy gives the path now.

        Same bytes under another source make a new version, so recall never serves a file
        under the source an older policy gave it (a rule glob added or removed)."""
        return (
            previous is not None
            and previous.content_hash == digest
            and self.classifier.source_of(path, language_of(path)).value == previous.source
        )

    def kept(self, documents: Iterable[PreparedDocument | Unreadable]) -> Iterator[PreparedDocument]:
        """``documents`` but those whose bytes, read again, are their live version's (the file
        changed back between the two reads): those count as unchanged. A file unreadable now
        is skipped, and leaves the report's lists."""
        for document in documents:
            if isinstance(document, Unreadable):
                self._forget(document.path)
                self.report.skipped.append(SkippedPath(document.path, "unreadable", document.message))
                continue
            if self._unchanged(document.path, document.content_hash, self.live.get(document.path)):
                self._forget(document.path)
                self.report.unchanged += 1
                continue
            yield document

    def _forget(self, path: str) -> None:
        report = self.report
        for listed in (report.added, report.changed, report.reclassified):
            if path in listed:
                listed.remove(path)


def _segments(documents: Iterable[PreparedDocument]) -> Iterator[list[PreparedDocument]]:
    """``documents`` in consecutive groups of about ``SEGMENT_BYTES`` of source each."""
    segment: list[PreparedDocument] = []
    size = 0
    for document in documents:
        segment.append(document)
        size += document.size
        if size >= SEGMENT_BYTES:
            yield segment
            segment, size = [], 0
    if segment:
        yield segment


def _nothing_to_write(store: Store, report: IndexReport) -> bool:
    """Whether a run with no document to write and none removed writes nothing: when its root
    is indexed already for its project and branch (no version for no change; drift would
    otherwise report an index change where none is). The report then names the latest run."""
    with store.read() as conn:
        latest = _latest_run(conn, report)
        if latest is None or not _root_indexed(conn, report):
            return False
    assert latest.id is not None
    report.nothing_changed = True
    report.run_id, report.version = int(latest.id), int(latest.version)
    report.git_commit = latest.git_commit
    report.git_dirty = None if latest.git_dirty is None else bool(latest.git_dirty)
    return True


def _set_version(store: Store, report: IndexReport) -> None:
    """The run's version: the next number of its project and branch (under the run lock)."""
    with store.read() as conn:
        latest = _latest_run(conn, report)
    report.version = (int(latest.version) if latest is not None else 0) + 1


def _latest_run(conn: Session, report: IndexReport) -> IndexRunRow | None:
    return conn.exec(
        select(IndexRunRow)
        .where(col(IndexRunRow.project) == report.project, col(IndexRunRow.branch) == report.branch)
        .where(col(IndexRunRow.finished_at).is_not(None))
        .order_by(col(IndexRunRow.version).desc())
        .limit(1)
    ).first()


class LiveDocument(NamedTuple):
    """The live version of a path: what an incremental run compares against."""

    id: int
    content_hash: str
    source: str
    size: int
    mtime_ns: int | None
    """The file's modification time when this version was indexed, if trusted (see ``_Diff``)."""


def live_documents(store: Store, *, project: str, branch: str, root: str) -> dict[str, LiveDocument]:
    """``path -> LiveDocument`` for the live versions under one root."""
    with store.read() as conn:
        return _live_in(conn, project=project, branch=branch, root=root)


def _live_in(conn: Session, *, project: str, branch: str, root: str) -> dict[str, LiveDocument]:
    rows = conn.execute(
        sa_select(
            col(IndexDocumentRow.path),
            col(IndexDocumentRow.id),
            col(IndexDocumentRow.content_hash),
            col(IndexDocumentRow.source),
            col(IndexDocumentRow.size),
            col(IndexDocumentRow.mtime_ns),
        ).where(
            col(IndexDocumentRow.project) == project,
            col(IndexDocumentRow.branch) == branch,
            col(IndexDocumentRow.root) == root,
            col(IndexDocumentRow.valid_to).is_(None),
        )
    ).all()
    return {
        path: LiveDocument(int(doc_id), content_hash, source, int(size), None if mtime_ns is None else int(mtime_ns))
        for path, doc_id, content_hash, source, size, mtime_ns in rows
    }


def write_run(
    store: Store,
    report: IndexReport,
    prepared: list[PreparedDocument],
    live: dict[str, LiveDocument],
    now: datetime,
    *,
    compact: bool = True,
) -> int:
    """Write one run of documents prepared against ``live`` (for benchmarks and tests: what
    ``index_workspace`` writes, without walking a workspace). The report's lists say what the
    run adds, changes and removes.

    Raises :class:`IndexChangedError`, writing nothing, when ``live`` is not what is live
    under the index-run lock: another run wrote this root meanwhile.
    """
    with store.index_run_lock(), gc_paused():
        clean_interrupted_runs(store)
        current = live_documents(store, project=report.project, branch=report.branch, root=report.root)
        if current != live:
            raise IndexChangedError(
                f"the index of {report.project}@{report.branch or '-'} {report.root} changed while "
                "this run was prepared; index again"
            )
        documents = sorted(prepared, key=lambda document: document.path)
        if not documents and not report.removed and _nothing_to_write(store, report):
            return report.run_id
        _set_version(store, report)
        writer = RunWriter(store, report, live)
        for segment in _segments(documents):
            writer.write_segment(segment)
        run_id = writer.finish(to_micros(now))
        if compact:
            _compact_after(store, report)
        return run_id


def _root_indexed(conn: Session, report: IndexReport) -> bool:
    """Whether the report's root already has a run of its project and branch."""
    found = conn.execute(
        select(col(IndexRunRow.id)).where(
            col(IndexRunRow.project) == report.project,
            col(IndexRunRow.branch) == report.branch,
            col(IndexRunRow.root) == report.root,
        ).limit(1)
    ).first()
    return found is not None


_gc_lock = threading.Lock()
_gc_depth = 0
_gc_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector (if it is on) for the duration; nestable.

    Indexing keeps every prepared chunk alive until the run is written (and, in this process
    or in one without workers, every distinct word and term in the tokenizer's caches), and
    creates no reference cycles of its own. With the collector on, its full collections walk
    all those objects again and again: when chunks carried token lists (5 million strings on
    the standard library) they took about half the time of reading and preparing the files. Nothing else changes; cycles
    made meanwhile elsewhere are collected once the collector is back on.
    """
    global _gc_depth, _gc_was_enabled
    with _gc_lock:
        if _gc_depth == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            if _gc_depth == 0 and _gc_was_enabled:
                gc.enable()
