"""Index a workspace into the store: versioned documents, chunks and packed postings.

One call is one *run*, and each run is one index version, ``project@branch#N``, numbered per
project and branch; a call that finds nothing to add, change or remove writes no run (no
version for no change). Files are compared with the live version of the same path by content
hash, so re-indexing is incremental: only added and changed files are redacted, chunked and
their terms counted (``prepare.py``, in worker processes when there is enough to do). A
changed or removed file's old version gets ``valid_to`` and stays, so ``as_of`` queries still
see it. The run's chunks get contiguous ids, sorted by path, so
that a path-prefix scope is a range of ids inside each run (see ``scorer.py``). Runs write
one at a time (``Store.lock_index_writers``): the diff, the chunk ids and the run's time are
taken under that lock, so overlapping runs neither collide nor duplicate versions.

Postings are built with numpy from each document's counted terms (only the distinct term
strings go through a dictionary; no per-posting Python loop) and stored one row per (run,
term): chunk-id offsets from the run's first chunk as little-endian uint32, term frequencies
as uint16.

**Speed** (figures in ``docs/performance.md``). On SQLite a run's rows go in as plain values
through multi-row ``INSERT`` statements on the driver's cursor, postings in term order (the
order of their (term, run_id) key, so its B-tree is appended to) with their blobs as
``bytearray`` (bound without the driver's adapter lookup), with a larger page cache
on the writing connection only; no durability setting is touched. The cyclic garbage
collector is paused while a run is prepared and written (see ``gc_paused``).
"""

from __future__ import annotations

import gc
import hashlib
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import chain, islice, pairwise, repeat
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy import Connection, Table, func, insert, update
from sqlmodel import Session, col, select

from scopelens.core.clock import Clock, SystemClock
from scopelens.core.errors import IndexChangedError, UnreadableFileError
from scopelens.core.index.chunker import language_of
from scopelens.core.index.prepare import PreparedDocument, prepare_all, prepare_document
from scopelens.core.index.sources import SourceClassifier
from scopelens.core.index.timeutil import to_micros
from scopelens.core.index.tokenizer import TermCounts
from scopelens.core.index.walker import SkippedPath, WalkedFile, git_state, walk_workspace
from scopelens.core.redact import RedactionKey
from scopelens.core.store.store import Store
from scopelens.core.store.tables import IndexChunkRow, IndexDocumentRow, IndexPostingRow, IndexRunRow, table_of

TF_MAX = np.iinfo(np.uint16).max
Progress = Callable[[int, int, str], None]
"""``progress(done, total, path)`` while files are read."""


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

    @property
    def index_version(self) -> str:
        return index_version(self.project, self.branch, self.version)


def index_version(project: str, branch: str, version: int) -> str:
    """``project@branch#N``: the N-th version of the project's index of that branch (``-`` for
    an index made without a branch). N counts per project and branch, so it does not depend on
    what else a shared store holds (migration ``0009_index_versions``)."""
    return f"{project}@{branch or '-'}#{version}"


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
) -> IndexReport:
    """Index ``root`` for ``project``/``branch``; only new and changed files are processed.

    New and changed files are prepared (decoded, redacted, chunked, their terms counted) by
    ``workers`` processes (``prepare.prepare_all``: by default one per core when there is
    enough to prepare; 0 prepares in this process); the result does not depend on it.

    Runs may overlap (two ``scopelens index`` at once): the files are read and prepared
    against the live documents as they are when the run starts, and the run's diff is made
    again in its write transaction, under the lock that makes index runs write one at a time,
    against what is live then (``_Scan.diff``). A run that waited for another so records
    only what differs from what that one wrote.
    """
    if not root.is_dir():
        raise UnreadableFileError(f"cannot index {root}: not a directory")
    root = root.resolve()
    classifier = classifier or SourceClassifier()
    clock = clock or SystemClock()
    branch_key = branch or ""
    walked = walk_workspace(root, max_bytes=max_bytes)
    # A first look, outside the write lock: which files need preparing (read, redacted,
    # chunked and tokenized). The diff itself is made under the lock.
    first_look = live_documents(store, project=project, branch=branch_key, root=str(root))

    report = IndexReport(run_id=0, project=project, branch=branch_key, root=str(root))
    report.skipped = walked.skipped
    report.ignored = walked.ignored_count
    report.git_commit, report.git_dirty = git_state(root)
    with gc_paused():  # see gc_paused: a collection would walk every token read so far
        scan = _Scan(classifier, store.redaction_key, seen={entry.rel_path for entry in walked.files})
        total = len(walked.files)
        for done, entry in enumerate(walked.files, start=1):
            if progress:
                progress(done, total, entry.rel_path)
            try:
                data = entry.abs_path.read_bytes()
            except OSError as exc:
                report.skipped.append(SkippedPath(entry.rel_path, "unreadable", exc.strerror or str(exc)))
                continue
            scan.add(entry, data, first_look.get(entry.rel_path))
        scan.prepare_pending(workers)
        report.run_id = _write_locked(store, report, clock.now, lambda live: scan.diff(live, report))
    return report


@dataclass
class _Scan:
    """The files a run read: each one's content hash, and a prepared document for each that
    differed from its live version at the first look.

    ``diff`` is the run's diff against the live versions under the write lock. A file it finds
    changed that was not prepared (another run wrote a different version of it meanwhile) is
    read and prepared then.
    """

    classifier: SourceClassifier
    key: RedactionKey
    seen: set[str]
    """Every walked path, read or not: a path not in it whose version is live was removed."""
    files: dict[str, tuple[Path, str]] = field(default_factory=dict)
    """``rel_path -> (abs_path, content hash)`` of the files read, in walk order."""
    prepared: dict[str, PreparedDocument] = field(default_factory=dict)
    pending: list[tuple[str, bytes]] = field(default_factory=list)
    """Files read that differ from their live version at the first look, to be prepared."""

    def add(self, entry: WalkedFile, data: bytes, first_look: LiveDocument | None) -> None:
        digest = hashlib.sha256(data).hexdigest()
        self.files[entry.rel_path] = (entry.abs_path, digest)
        if not self._unchanged(entry.rel_path, digest, first_look):
            self.pending.append((entry.rel_path, data))

    def prepare_pending(self, workers: int | None) -> None:
        """Prepare the pending files (in worker processes when there are enough of them)."""
        pending, self.pending = self.pending, []
        # Documents from workers bring their own copy of every term string: keep one per run.
        one_copy: dict[str, str] = {}
        for document in prepare_all(pending, classifier=self.classifier, key=self.key, workers=workers):
            document.terms.terms[:] = map(one_copy.setdefault, document.terms.terms, document.terms.terms)
            self.prepared[document.path] = document

    def _unchanged(self, path: str, digest: str, previous: LiveDocument | None) -> bool:
        """Same bytes as the live version, which has the source the policy gives the path now.

        Same bytes under another source make a new version, so recall never serves a file
        under the source an older policy gave it (a rule glob added or removed)."""
        return (
            previous is not None
            and previous.content_hash == digest
            and self.classifier.source_of(path, language_of(path)).value == previous.source
        )

    def _prepare(self, path: str, data: bytes) -> PreparedDocument:
        return prepare_document(path, data, classifier=self.classifier, replaces=None, key=self.key)

    def diff(self, live: dict[str, LiveDocument], report: IndexReport) -> list[PreparedDocument]:
        """The documents to write against ``live``; fills the report's counts and lists."""
        report.added, report.changed, report.reclassified, report.unchanged = [], [], [], 0
        documents: list[PreparedDocument] = []
        for path, (abs_path, digest) in list(self.files.items()):
            previous = live.get(path)
            if self._unchanged(path, digest, previous):
                report.unchanged += 1
                continue
            document = self.prepared.get(path)
            if document is None:
                document = self._prepare_again(path, abs_path, report)
                if document is None:
                    continue
                if self._unchanged(path, document.content_hash, previous):
                    report.unchanged += 1
                    continue
            if previous is not None and previous.content_hash == document.content_hash:
                report.reclassified.append(path)
            (report.changed if previous else report.added).append(path)
            documents.append(replace(document, replaces=previous.id if previous else None))
        report.removed = sorted(path for path in live if path not in self.seen)
        report.redactions = sum(document.redactions.count(b'"kind"') for document in documents)
        report.chunks = sum(len(document.chunks) for document in documents)
        return documents

    def _prepare_again(self, path: str, abs_path: Path, report: IndexReport) -> PreparedDocument | None:
        """Read and prepare a file found unchanged at the first look (its bytes now)."""
        try:
            data = abs_path.read_bytes()
        except OSError as exc:
            report.skipped.append(SkippedPath(path, "unreadable", exc.strerror or str(exc)))
            del self.files[path]
            return None
        document = self._prepare(path, data)
        self.files[path] = (abs_path, document.content_hash)
        self.prepared[path] = document
        return document


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


class LiveDocument(NamedTuple):
    """The live version of a path: what an incremental run compares against."""

    id: int
    content_hash: str
    source: str


def live_documents(store: Store, *, project: str, branch: str, root: str) -> dict[str, LiveDocument]:
    """``path -> LiveDocument`` for the live versions under one root."""
    with store.read() as conn:
        return _live_in(conn, project=project, branch=branch, root=root)


def _live_in(conn: Session, *, project: str, branch: str, root: str) -> dict[str, LiveDocument]:
    rows = conn.execute(
        select(
            col(IndexDocumentRow.path),
            col(IndexDocumentRow.id),
            col(IndexDocumentRow.content_hash),
            col(IndexDocumentRow.source),
        ).where(
            col(IndexDocumentRow.project) == project,
            col(IndexDocumentRow.branch) == branch,
            col(IndexDocumentRow.root) == root,
            col(IndexDocumentRow.valid_to).is_(None),
        )
    ).all()
    return {path: LiveDocument(int(doc_id), content_hash, source) for path, doc_id, content_hash, source in rows}


def write_run(
    store: Store,
    report: IndexReport,
    prepared: list[PreparedDocument],
    live: dict[str, LiveDocument],
    now: datetime,
) -> int:
    """Write one run of documents prepared against ``live`` (see ``_write_locked``).

    Raises :class:`IndexChangedError`, writing nothing, when ``live`` is not what is live
    under the write lock: another run wrote this root meanwhile. (``index_workspace`` makes
    its diff under the lock instead.)
    """

    def check(current: dict[str, LiveDocument]) -> list[PreparedDocument]:
        if current != live:
            raise IndexChangedError(
                f"the index of {report.project}@{report.branch or '-'} {report.root} changed while "
                "this run was prepared; index again"
            )
        return prepared

    return _write_locked(store, report, lambda: now, check)


def _write_locked(
    store: Store,
    report: IndexReport,
    now: Callable[[], datetime],
    plan: Callable[[dict[str, LiveDocument]], list[PreparedDocument]],
) -> int:
    """Write one run in one transaction holding the index writers' lock: versions, chunks,
    postings.

    Under the lock, ``plan`` gets the live documents of the run's root and returns the
    documents to write (with the live versions they replace); the run's chunk ids start after
    the highest one stored, and its time (``started_at``, when its versions become valid and
    the ones they replace stop being so) is read then too, so runs that waited for one
    another get their times in the order they wrote. The report's lists say what the run
    added, changed and removed.

    A run with nothing to write (no document added, changed or removed) on a root already
    indexed for its project and branch writes nothing: no version for no change (drift would
    otherwise report an index change where none is). The report then names the latest run
    of the project and branch. The run's version is the next number of its project and
    branch, taken under the same lock.

    On SQLite, rows go in as plain values through multi-row ``INSERT`` statements on the
    driver's cursor (no ORM objects, no per-row type processing), and postings are inserted
    in term order, which is also the order of their (term, run_id) key, so SQLite appends to
    the B-tree instead of splitting pages at random. Other backends go through SQLAlchemy.
    """
    with gc_paused(), store.write() as conn:
        store.lock_index_writers(conn)
        now_us = to_micros(now())
        live = _live_in(conn, project=report.project, branch=report.branch, root=report.root)
        prepared = sorted(plan(live), key=lambda d: d.path)
        latest = conn.exec(
            select(IndexRunRow)
            .where(col(IndexRunRow.project) == report.project, col(IndexRunRow.branch) == report.branch)
            .order_by(col(IndexRunRow.version).desc())
            .limit(1)
        ).first()
        if not prepared and not report.removed and latest is not None and _root_indexed(conn, report):
            assert latest.id is not None
            report.nothing_changed = True
            report.run_id, report.version = int(latest.id), int(latest.version)
            report.git_commit = latest.git_commit
            report.git_dirty = None if latest.git_dirty is None else bool(latest.git_dirty)
            return report.run_id
        report.version = (int(latest.version) if latest is not None else 0) + 1
        n_chunks = sum(len(d.chunks) for d in prepared)
        chunk_lo = int(conn.execute(select(func.coalesce(func.max(col(IndexChunkRow.id)), 0))).scalar_one()) + 1
        run = IndexRunRow(
            project=report.project,
            branch=report.branch,
            root=report.root,
            started_at=now_us,
            git_commit=report.git_commit,
            git_dirty=None if report.git_dirty is None else int(report.git_dirty),
            added=len(report.added),
            changed=len(report.changed),
            removed=len(report.removed),
            unchanged=report.unchanged,
            chunk_lo=chunk_lo,
            chunk_hi=chunk_lo + n_chunks,
            version=report.version,
        )
        conn.add(run)
        conn.flush()
        assert run.id is not None
        run_id = int(run.id)
        superseded = [d.replaces for d in prepared if d.replaces is not None]
        superseded += [live[path].id for path in report.removed]
        if superseded:
            conn.execute(
                update(IndexDocumentRow).where(col(IndexDocumentRow.id).in_(superseded)).values(valid_to=now_us)
            )
        connection = conn.connection()
        if _sqlite_driver(connection) is not None:
            # Page cache of this connection only (NullPool: it is closed after the run). It
            # changes no durability setting; it keeps the B-trees being filled in memory.
            connection.exec_driver_sql(f"PRAGMA cache_size = -{WRITE_CACHE_KIB}")
        document_ids = _insert_documents(connection, run_id, report, prepared, now_us)
        # Rows are generated as they are inserted: few objects live long enough to make the
        # garbage collector walk the whole corpus (a full collection over millions of tokens).
        _insert_many(connection, table_of(IndexChunkRow), _CHUNK_COLUMNS, _chunk_rows(prepared, document_ids, run_id, chunk_lo))
        packed = _PackedPostings.from_counts([document.terms for document in prepared])
        driver = _sqlite_driver(connection)
        if driver is not None:
            batches = packed.value_batches(run_id, _rows_per_statement(driver, _POSTING_COLUMNS))
            _execute_batches(driver, table_of(IndexPostingRow), _POSTING_COLUMNS, batches)
        else:
            _insert_many(
                connection,
                table_of(IndexPostingRow),
                _POSTING_COLUMNS,
                [(run_id, term, ids, tfs) for term, ids, tfs in packed.postings()],
            )
        conn.execute(update(IndexRunRow).where(col(IndexRunRow.id) == run_id).values(finished_at=now_us))
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


def _chunk_rows(
    prepared: list[PreparedDocument], document_ids: list[int], run_id: int, chunk_lo: int
) -> Iterator[tuple[Any, ...]]:
    chunk_id = chunk_lo
    for document, document_id in zip(prepared, document_ids, strict=True):
        lengths = document.terms.lengths.tolist()
        for ordinal, (chunk, length) in enumerate(zip(document.chunks, lengths, strict=True)):
            yield (
                chunk_id,
                run_id,
                document_id,
                ordinal,
                chunk.path,
                chunk.start_line,
                chunk.end_line,
                chunk.kind,
                chunk.symbol,
                length,
                chunk.text,
            )
            chunk_id += 1


WRITE_CACHE_KIB = 256 * 1024
"""SQLite page cache of the connection that writes a run (the default is 2 MiB)."""
_DOCUMENT_COLUMNS = (
    "run_id", "project", "branch", "root", "path", "source", "language", "content_hash", "size",
    "valid_from", "redactions",
)
_CHUNK_COLUMNS = (
    "id", "run_id", "document_id", "ordinal", "path", "start_line", "end_line", "kind", "symbol",
    "token_count", "text",
)
_POSTING_COLUMNS = ("run_id", "term", "chunk_ids", "tfs")


def _insert_documents(
    connection: Connection,
    run_id: int,
    report: IndexReport,
    prepared: list[PreparedDocument],
    now_us: int,
) -> list[int]:
    """Insert one version row per document; their ids, in order."""
    rows = [
        (
            run_id,
            report.project,
            report.branch,
            report.root,
            document.path,
            document.source,
            document.language,
            document.content_hash,
            document.size,
            now_us,
            document.redactions,
        )
        for document in prepared
    ]
    if not rows:
        return []
    table = table_of(IndexDocumentRow)
    driver = _sqlite_driver(connection)
    if driver is not None:  # the driver's cursor and lastrowid
        sql = _insert_sql(table.name, _DOCUMENT_COLUMNS)
        cursor = driver.cursor()
        try:
            ids = []
            for row in rows:
                cursor.execute(sql, row)
                assert cursor.lastrowid is not None  # an INSERT on a rowid table always sets it
                ids.append(cursor.lastrowid)
            return ids
        finally:
            cursor.close()
    statement = insert(table).returning(table.c.id, sort_by_parameter_order=True)
    result = connection.execute(statement, [dict(zip(_DOCUMENT_COLUMNS, row, strict=True)) for row in rows])
    return [int(document_id) for document_id in result.scalars()]


def _sqlite_driver(connection: Connection) -> sqlite3.Connection | None:
    """The ``sqlite3`` connection under ``connection`` (``None`` on other backends)."""
    if connection.dialect.name != "sqlite":
        return None
    driver = connection.connection.dbapi_connection
    return driver if isinstance(driver, sqlite3.Connection) else None


def _insert_many(
    connection: Connection, table: Table, columns: Sequence[str], rows: Iterable[tuple[Any, ...]]
) -> None:
    """Insert plain tuples: on SQLite through ``_execute_batches``, on PostgreSQL through ``COPY``
    (``_copy_rows``), elsewhere through SQLAlchemy."""
    driver = _sqlite_driver(connection)
    if driver is None:
        if _copy_rows(connection, table, columns, rows):
            return
        listed = list(rows)
        if listed:
            connection.execute(table.insert(), [dict(zip(columns, row, strict=True)) for row in listed])
        return
    per_statement = _rows_per_statement(driver, columns)
    remaining = iter(rows)
    # batches of flattened values, until islice() gives an empty one
    batches = iter(lambda: list(chain.from_iterable(islice(remaining, per_statement))), [])
    _execute_batches(driver, table, columns, batches)


def _copy_rows(connection: Connection, table: Table, columns: Sequence[str], rows: Iterable[tuple[Any, ...]]) -> bool:
    """``COPY table (columns) FROM STDIN`` through psycopg, inside the caller's transaction: one
    stream instead of a statement per batch of rows. False (nothing done) when the connection
    is not psycopg's, so the caller inserts the rows itself."""
    if connection.dialect.name != "postgresql":
        return False
    driver = connection.connection.dbapi_connection
    cursor_of = getattr(driver, "cursor", None)
    if cursor_of is None or not hasattr(driver, "pgconn"):  # psycopg 3 connections have a pgconn
        return False
    names = ", ".join(f'"{name}"' for name in columns)
    with cursor_of() as cursor, cursor.copy(f'COPY "{table.name}" ({names}) FROM STDIN') as copy:
        for row in rows:
            copy.write_row(row)
    return True


def _rows_per_statement(driver: sqlite3.Connection, columns: Sequence[str]) -> int:
    limit = driver.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    return max(1, min(ROWS_PER_INSERT, limit // len(columns)))


def _execute_batches(
    driver: sqlite3.Connection, table: Table, columns: Sequence[str], batches: Iterable[list[Any]]
) -> None:
    """Run multi-row ``INSERT ... VALUES (...), (...)`` statements, one per batch of flattened
    row values, on the driver's cursor (inside the caller's transaction): no per-row type
    processing, and one statement step per few hundred rows instead of one per row, which
    is about twice as fast."""
    cursor = driver.cursor()
    statements: dict[int, str] = {}
    try:
        for values in batches:
            rows = len(values) // len(columns)
            sql = statements.get(rows) or statements.setdefault(rows, _insert_sql(table.name, columns, rows))
            cursor.execute(sql, values)
    finally:
        cursor.close()


ROWS_PER_INSERT = 500
"""Rows per multi-row INSERT on SQLite (also bounded by its limit on bound parameters)."""


def _insert_sql(table: str, columns: Sequence[str], rows: int = 1) -> str:
    """``INSERT INTO table (columns) VALUES (?, ...), ...`` for ``rows`` rows (SQLite's style)."""
    values = "(" + ", ".join(["?"] * len(columns)) + ")"
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join([values] * rows)}"


def _sort_order(terms: list[str]) -> np.ndarray:
    """Indices that sort ``terms`` (code point order, as Python and SQLite's BINARY compare).

    numpy's variable-width strings sort in C, several times faster than ``sorted``.
    """
    string_dtype = getattr(np.dtypes, "StringDType", None)
    if string_dtype is not None:
        try:
            return np.argsort(np.array(terms, dtype=string_dtype()), kind="stable")
        except (TypeError, ValueError, UnicodeError):  # e.g. a lone surrogate
            pass
    return np.asarray(sorted(range(len(terms)), key=terms.__getitem__), dtype=np.int64)


def build_postings(chunk_token_lists: list[list[str]]) -> list[tuple[str, bytes, bytes]]:
    """Postings of a run: ``(term, chunk offsets as uint32 bytes, tfs as uint16 bytes)``.

    Offsets are positions in ``chunk_token_lists`` (which is in chunk-id order), ascending.
    Terms come out sorted (that is the order in which they are inserted).
    """
    return list(_PackedPostings.build(chunk_token_lists).postings())


@dataclass(frozen=True)
class _PackedPostings:
    """Every posting of a run, packed: term ``k`` is ``terms[k]`` with its chunk offsets in
    ``offsets[bounds[k]:bounds[k + 1]]`` (uint32 LE) and tfs likewise in ``tfs`` (uint16 LE).

    The buffers are ``bytearray`` so that their slices are too: Python's ``sqlite3`` binds a
    ``bytearray`` directly but sends every ``bytes`` value through its adapter lookup first,
    which cost about as much as SQLite's own work on the 2 blobs of each posting row."""

    terms: list[str]
    offsets: bytearray
    tfs: bytearray
    bounds: list[int]

    @classmethod
    def build(cls, chunk_token_lists: list[list[str]]) -> _PackedPostings:
        """From each chunk's tokens (in chunk-id order)."""
        n = len(chunk_token_lists)
        lengths = np.fromiter(map(len, chunk_token_lists), dtype=np.int64, count=n)
        chunk_of = np.repeat(np.arange(n, dtype=np.int32), lengths)
        return cls._from_occurrences(n, _occurrences_by_term(chunk_token_lists, chunk_of, int(lengths.sum())))

    @classmethod
    def from_counts(cls, documents: list[TermCounts]) -> _PackedPostings:
        """From documents' counted terms (their chunks in chunk-id order, one after another)."""
        distinct: list[str] = []
        items, chunks, tfs = [], [], []
        chunk_base = 0
        for counts in documents:
            units = len(counts.bounds) - 1
            items.append(counts.term_ids.astype(np.int64) + len(distinct))
            chunks.append(np.repeat(np.arange(chunk_base, chunk_base + units, dtype=np.int64), np.diff(counts.bounds)))
            tfs.append(counts.tfs)
            distinct += counts.terms
            chunk_base += units
        if not items:
            return cls._from_occurrences(0, ([], np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)))
        occurrences = (distinct, np.concatenate(items), np.concatenate(chunks), np.concatenate(tfs).astype(np.int64))
        return cls._from_occurrences(chunk_base, occurrences)

    @classmethod
    def _from_occurrences(cls, n: int, occurrences: Occurrences) -> _PackedPostings:
        distinct, item_of, chunks, tfs = occurrences
        if not len(item_of):
            return cls([], bytearray(), bytearray(), [0])
        # Number the distinct strings (far fewer than the tokens) in sorted order: postings
        # are then inserted in the order of their (term, run_id) key.
        vocabulary: dict[str, int] = {}
        term_ids = np.fromiter(
            map(vocabulary.setdefault, distinct, map(len, repeat(vocabulary))), dtype=np.int64, count=len(distinct)
        )
        found = list(vocabulary)
        del vocabulary, distinct
        order = _sort_order(found)
        terms = list(map(found.__getitem__, order.tolist()))
        rank = np.empty(len(found), dtype=np.int64)
        rank[order] = np.arange(len(found), dtype=np.int64)
        del found, order
        keys = rank[term_ids][item_of]
        keys *= n
        keys += chunks
        unique, counts = _sum_by_key(keys, tfs)
        term_of, offset = np.divmod(unique, n)
        offsets = bytearray(offset.astype("<u4").data)
        tf_bytes = bytearray(np.minimum(counts, TF_MAX).astype("<u2").data)
        # Every term occurs, so the k-th run of equal terms is terms[k].
        bounds = [*np.flatnonzero(_changes(term_of)).tolist(), len(unique)]
        return cls(terms, offsets, tf_bytes, bounds)

    def postings(self) -> Iterator[tuple[str, bytes, bytes]]:
        offsets, tfs = self.offsets, self.tfs
        for term, lo, hi in zip(self.terms, self.bounds[:-1], self.bounds[1:], strict=True):
            yield term, bytes(offsets[4 * lo : 4 * hi]), bytes(tfs[2 * lo : 2 * hi])

    def value_batches(self, run_id: int, rows: int) -> Iterator[list[Any]]:
        """``run_id, term, offsets, tfs`` of ``rows`` postings at a time, flattened (the blobs
        as ``bytearray`` slices, see the class)."""
        terms, offsets, tfs, bounds = self.terms, self.offsets, self.tfs, self.bounds
        for start in range(0, len(terms), rows):
            end = min(len(terms), start + rows)
            edges = bounds[start : end + 1]
            values: list[Any] = [run_id] * (4 * (end - start))
            values[1::4] = terms[start:end]
            values[2::4] = [offsets[4 * lo : 4 * hi] for lo, hi in pairwise(edges)]
            values[3::4] = [tfs[2 * lo : 2 * hi] for lo, hi in pairwise(edges)]
            yield values


Occurrences = tuple[list[str], np.ndarray, np.ndarray, np.ndarray]
"""``(distinct, item_of, chunks, tfs)``: (item, chunk) pairs, each occurring ``tfs`` times,
where item ``k`` is the string ``distinct[k]``; equal strings may be several items."""


def _occurrences_by_term(chunk_token_lists: list[list[str]], chunk_of: np.ndarray, total: int) -> Occurrences:
    """Every token is an item of its own (count 1), numbered by a dictionary in one pass."""
    vocabulary: dict[str, int] = {}
    item_of = np.fromiter(
        map(vocabulary.setdefault, chain.from_iterable(chunk_token_lists), map(len, repeat(vocabulary))),
        dtype=np.int64,
        count=total,
    )
    return list(vocabulary), item_of, chunk_of, np.ones(total, dtype=np.int64)


def _changes(values: np.ndarray) -> np.ndarray:
    """``True`` where ``values`` differs from the element before it (and at 0)."""
    changed = np.empty(len(values), dtype=bool)
    changed[:1] = True
    np.not_equal(values[1:], values[:-1], out=changed[1:])
    return changed


def _gaps(starts: np.ndarray, end: int) -> np.ndarray:
    """Lengths of the runs that begin at ``starts`` (the last one ends at ``end``): the
    same as ``np.diff(starts, append=end)`` without its concatenated copy."""
    gaps = np.empty(len(starts), dtype=np.int32)
    np.subtract(starts[1:], starts[:-1], out=gaps[:-1], casting="unsafe")
    gaps[-1:] = end - starts[-1:]
    return gaps


def _sum_by_key(keys: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``keys`` (ascending) and the sum of ``counts`` for each; ``keys`` may be
    overwritten.

    When they fit, keys and counts (capped at ``TF_MAX``, which leaves the capped sums
    unchanged) are packed into one int64 and sorted as values, which is several times
    faster than an argsort.
    """
    if len(keys) and int(keys.max()).bit_length() + 16 <= 63:
        packed = keys  # the caller's array, reused in place
        packed <<= 16
        packed |= np.minimum(counts, TF_MAX)
        packed.sort()
        counts = packed & TF_MAX
        keys = packed
        keys >>= 16
    else:
        order = np.argsort(keys, kind="stable")
        keys, counts = keys[order], counts[order]
    starts = np.flatnonzero(_changes(keys))
    return keys[starts], np.add.reduceat(counts, starts) if len(starts) else counts[:0]
