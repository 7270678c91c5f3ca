"""Writing one index run as it streams: a segment per batch of files, each in a short
transaction, made live by a short final one.

A run holds the store's index-run lock (``core/store/index_lock.py``) from before its diff to
after its final commit, so its chunk and document ids are taken in order after the highest
stored (no other run writes meanwhile). Each segment is written in a transaction of its own:
its chunks and their postings, with chunk-id offsets from the segment's first chunk. Until the
final commit nothing of the run is visible:

* its document rows do not exist yet (chunks are joined with their documents everywhere they
  are read, so chunks without one are invisible), and
* its run row has no ``finished_at`` (recall, the index version and drift read finished runs
  only).

The final transaction inserts the run's document versions, ends the versions they replace,
and sets the run's counts and ``finished_at``. A run whose process died before it leaves rows
that nothing reads; the next run removes them first, under the same lock
(``clean_interrupted_runs``). Retrievals and other writers wait for at most one segment's
transaction, never for a whole run.

**Speed.** On SQLite rows go in as plain values through multi-row ``INSERT`` statements on the
driver's cursor, postings in term order (the order of their (segment_id, term) key, so its
B-tree is appended to) with their blobs as ``bytearray``, with a larger page cache on the
writing connection only; no durability setting is touched. On PostgreSQL they go through
``COPY``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, islice
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Table, bindparam, delete, func, update
from sqlmodel import Session, col, select

from scopelens.core.index.postings import PackedPostings
from scopelens.core.index.prepare import PreparedDocument
from scopelens.core.store.faults import fault_point
from scopelens.core.store.store import Store
from scopelens.core.store.tables import (
    IndexChunkRow,
    IndexDocumentRow,
    IndexPostingRow,
    IndexRunRow,
    IndexSegmentRow,
    table_of,
)

if TYPE_CHECKING:
    from scopelens.core.index.indexer import IndexReport, LiveDocument

WRITE_CACHE_KIB = 4 * 1024
"""SQLite page cache of a connection that writes a segment (the default is 2 MiB)."""
SEGMENT_BYTES = 1_000_000
"""A segment is written once its files hold about this many bytes: the bound on what the
indexing process keeps of a run (about 5 MiB of chunks and counts per MB of source)."""

_DOCUMENT_COLUMNS = (
    "id", "run_id", "project", "branch", "root", "path", "source", "language", "content_hash", "size",
    "valid_from", "redactions", "mtime_ns",
)
_CHUNK_COLUMNS = (
    "id", "run_id", "document_id", "ordinal", "path", "start_line", "end_line", "kind", "symbol",
    "token_count", "text",
)
POSTING_COLUMNS = ("segment_id", "term", "chunk_ids", "tfs")


@dataclass
class RunWriter:
    """One run of ``report``'s project, branch and root, written segment by segment.

    The caller holds the index-run lock throughout, and has run ``clean_interrupted_runs``.
    ``live`` is what the documents replace (by path). The run row is inserted with the first
    segment; a run without documents (only removals) gets it in ``finish``.
    """

    store: Store
    report: IndexReport
    live: dict[str, LiveDocument]
    run_id: int | None = None
    next_chunk: int = 0
    next_document: int = 0
    documents: list[tuple[Any, ...]] = field(default_factory=list)
    """The run's document rows (without ``valid_from``), inserted by ``finish``."""
    replaced: list[int] = field(default_factory=list)
    mtimes: dict[str, int | None] = field(default_factory=dict)
    """Each document's trusted file modification time, by path (see ``indexer._Diff``)."""
    refreshed: dict[int, int] = field(default_factory=dict)
    """Live versions left as they are whose recorded modification time ``finish`` updates."""

    def write_segment(self, documents: Sequence[PreparedDocument]) -> None:
        """Write the chunks and postings of ``documents`` (in path order) as one segment."""
        if not documents:
            return
        with self.store.write() as conn:
            if self.run_id is None:
                self._begin(conn)
            assert self.run_id is not None
            connection = conn.connection()
            driver = _sqlite_driver(connection)
            if driver is not None:
                # Page cache of this (pooled) connection only: it changes no durability
                # setting, and keeps the ends of the B-trees being appended to in memory.
                connection.exec_driver_sql(f"PRAGMA cache_size = -{WRITE_CACHE_KIB}")
            chunk_lo = self.next_chunk
            chunk_hi = chunk_lo + sum(len(document.chunks) for document in documents)
            segment = IndexSegmentRow(run_id=self.run_id, chunk_lo=chunk_lo, chunk_hi=chunk_hi)
            conn.add(segment)
            conn.flush()
            assert segment.id is not None
            document_ids = range(self.next_document, self.next_document + len(documents))
            if driver is not None:
                per_statement = _rows_per_statement(driver, _CHUNK_COLUMNS)
                chunk_values = _chunk_value_batches(documents, document_ids, self.run_id, chunk_lo, per_statement)
                _execute_batches(driver, table_of(IndexChunkRow), _CHUNK_COLUMNS, chunk_values)
            else:
                chunks = _chunk_rows(documents, document_ids, self.run_id, chunk_lo)
                insert_many(connection, table_of(IndexChunkRow), _CHUNK_COLUMNS, chunks)
            packed = PackedPostings.from_counts([document.terms for document in documents])
            if driver is not None:
                batches = packed.value_batches(segment.id, _rows_per_statement(driver, POSTING_COLUMNS))
                _execute_batches(driver, table_of(IndexPostingRow), POSTING_COLUMNS, batches)
            else:
                rows = ((segment.id, term, ids, tfs) for term, ids, tfs in packed.postings())
                insert_many(connection, table_of(IndexPostingRow), POSTING_COLUMNS, rows)
        fault_point("index.segment_committed")
        self.next_chunk, self.next_document = chunk_hi, self.next_document + len(documents)
        self.report.chunks += chunk_hi - chunk_lo
        self.report.redactions += sum(document.redactions.count(b'"kind"') for document in documents)
        for document, document_id in zip(documents, document_ids, strict=True):
            self.documents.append(self._document_row(document, document_id))
            previous = self.live.get(document.path)
            if previous is not None:
                self.replaced.append(previous.id)

    def finish(self, now_us: int) -> int:
        """Make the run live: its document versions valid from ``now_us``, the versions they
        replace and those of removed paths valid until then. Returns the run id."""
        report = self.report
        with self.store.write() as conn:
            if self.run_id is None:
                self._begin(conn)
            assert self.run_id is not None
            ended = self.replaced + [self.live[path].id for path in report.removed]
            for start in range(0, len(ended), 500):
                conn.execute(
                    update(IndexDocumentRow)
                    .where(col(IndexDocumentRow.id).in_(ended[start : start + 500]))
                    .values(valid_to=now_us)
                )
            rows = ((*row[:10], now_us, *row[10:]) for row in self.documents)
            insert_many(conn.connection(), table_of(IndexDocumentRow), _DOCUMENT_COLUMNS, rows)
            _update_mtimes(conn, self.refreshed)
            conn.execute(
                update(IndexRunRow)
                .where(col(IndexRunRow.id) == self.run_id)
                .values(
                    started_at=now_us,
                    finished_at=now_us,
                    added=len(report.added),
                    changed=len(report.changed),
                    removed=len(report.removed),
                    unchanged=report.unchanged,
                    chunk_hi=self.next_chunk,
                )
            )
            fault_point("index.before_final_commit")
        report.run_id = self.run_id
        return self.run_id

    def _begin(self, conn: Session) -> None:
        """Insert the run's row (not finished: invisible) and take its first chunk and
        document ids after the highest stored."""
        report = self.report
        self.next_chunk = _highest(conn, IndexChunkRow) + 1
        self.next_document = _highest(conn, IndexDocumentRow) + 1
        run = IndexRunRow(
            project=report.project,
            branch=report.branch,
            root=report.root,
            started_at=0,
            git_commit=report.git_commit,
            git_dirty=None if report.git_dirty is None else int(report.git_dirty),
            added=0,
            changed=0,
            removed=0,
            unchanged=0,
            chunk_lo=self.next_chunk,
            chunk_hi=self.next_chunk,
            version=report.version,
        )
        conn.add(run)
        conn.flush()
        assert run.id is not None
        self.run_id = int(run.id)

    def _document_row(self, document: PreparedDocument, document_id: int) -> tuple[Any, ...]:
        report = self.report
        return (
            document_id, self.run_id, report.project, report.branch, report.root, document.path, document.source,
            document.language, document.content_hash, document.size, document.redactions,
            self.mtimes.get(document.path),
        )


def _highest(conn: Session, table: type[IndexChunkRow] | type[IndexDocumentRow]) -> int:
    return int(conn.execute(select(func.coalesce(func.max(table.id), 0))).scalar_one())


def record_mtimes(store: Store, refreshed: dict[int, int]) -> None:
    """Record newly trusted modification times of live versions (a run that wrote nothing
    else): no index version, only what lets the next run skip reading those files."""
    if refreshed:
        with store.write() as conn:
            _update_mtimes(conn, refreshed)


def _update_mtimes(conn: Session, refreshed: dict[int, int]) -> None:
    table = table_of(IndexDocumentRow)
    statement = update(table).where(table.c.id == bindparam("document_id")).values(mtime_ns=bindparam("mtime"))
    rows = [{"document_id": document_id, "mtime": mtime} for document_id, mtime in refreshed.items()]
    if rows:
        conn.connection().execute(statement, rows)


def clean_interrupted_runs(store: Store) -> int:
    """Remove what runs that never finished wrote (their process died); how many there were.

    Called under the index-run lock, so no run is being written: a run without
    ``finished_at`` then belongs to a process that is gone. Its rows were never visible.
    Postings are found by a scan (they are keyed by term), which only this rare case pays.
    """
    with store.read() as conn:
        unfinished = list(conn.exec(select(IndexRunRow).where(col(IndexRunRow.finished_at).is_(None))))
    if not unfinished:
        return 0
    with store.write() as conn:
        for run in unfinished:
            segments = list(conn.execute(select(col(IndexSegmentRow.id)).where(col(IndexSegmentRow.run_id) == run.id)).scalars())
            if segments:
                conn.execute(delete(IndexPostingRow).where(col(IndexPostingRow.segment_id).in_(segments)))
            conn.execute(delete(IndexSegmentRow).where(col(IndexSegmentRow.run_id) == run.id))
            conn.execute(
                delete(IndexChunkRow).where(col(IndexChunkRow.id) >= run.chunk_lo, col(IndexChunkRow.run_id) == run.id)
            )
            conn.execute(delete(IndexDocumentRow).where(col(IndexDocumentRow.run_id) == run.id))
            conn.execute(delete(IndexRunRow).where(col(IndexRunRow.id) == run.id))
    return len(unfinished)


def _chunk_rows(
    documents: Sequence[PreparedDocument], document_ids: Iterable[int], run_id: int, chunk_lo: int
) -> Iterator[tuple[Any, ...]]:
    chunk_id = chunk_lo
    for document, document_id in zip(documents, document_ids, strict=True):
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


def _chunk_value_batches(
    documents: Sequence[PreparedDocument], document_ids: Iterable[int], run_id: int, chunk_lo: int, rows: int
) -> Iterator[list[Any]]:
    """``_chunk_rows`` flattened, ``rows`` rows at a time, filled a column at a time (list
    slice assignment, in C) rather than a tuple per chunk: for SQLite's multi-row INSERTs."""
    chunks = [chunk for document in documents for chunk in document.chunks]
    owners = [(document_id, len(document.chunks)) for document, document_id in zip(documents, document_ids, strict=True)]
    document_of = [document_id for document_id, count in owners for _ in range(count)]
    ordinals = [ordinal for _, count in owners for ordinal in range(count)]
    lengths = [length for document in documents for length in document.terms.lengths.tolist()]
    width = len(_CHUNK_COLUMNS)
    for start in range(0, len(chunks), rows):
        part = chunks[start : start + rows]
        n = len(part)
        values: list[Any] = [run_id] * (width * n)
        values[0::width] = range(chunk_lo + start, chunk_lo + start + n)
        values[2::width] = document_of[start : start + n]
        values[3::width] = ordinals[start : start + n]
        values[4::width] = [chunk.path for chunk in part]
        values[5::width] = [chunk.start_line for chunk in part]
        values[6::width] = [chunk.end_line for chunk in part]
        values[7::width] = [chunk.kind for chunk in part]
        values[8::width] = [chunk.symbol for chunk in part]
        values[9::width] = lengths[start : start + n]
        values[10::width] = [chunk.text for chunk in part]
        yield values


def _sqlite_driver(connection: Connection) -> sqlite3.Connection | None:
    """The ``sqlite3`` connection under ``connection`` (``None`` on other backends)."""
    if connection.dialect.name != "sqlite":
        return None
    driver = connection.connection.dbapi_connection
    return driver if isinstance(driver, sqlite3.Connection) else None


def insert_many(
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
    width = len(columns)
    full = _rows_per_statement(driver, columns)
    try:
        for values in batches:
            at = 0
            for rows in _statement_sizes(len(values) // width, full):
                sql = statements.get(rows) or statements.setdefault(rows, _insert_sql(table.name, columns, rows))
                cursor.execute(sql, values if rows * width == len(values) else values[at : at + rows * width])
                at += rows * width
    finally:
        cursor.close()


def _statement_sizes(rows: int, full: int) -> list[int]:
    """``rows`` as a sum of sizes from a small fixed set: itself when it is a ``full`` batch,
    else its powers of two. sqlite3 keeps each distinct statement it ran prepared (up to 128
    per connection), and a multi-row INSERT of a few hundred rows holds a few hundred KiB:
    one for the odd-sized last batch of every segment grew the indexing process by about
    14 MiB on the standard library (and more on a larger corpus)."""
    if rows >= full:
        return [rows]
    return [1 << bit for bit in range(rows.bit_length() - 1, -1, -1) if rows >> bit & 1]


ROWS_PER_INSERT = 500
"""Rows per multi-row INSERT on SQLite (also bounded by its limit on bound parameters)."""


def _insert_sql(table: str, columns: Sequence[str], rows: int = 1) -> str:
    """``INSERT INTO table (columns) VALUES (?, ...), ...`` for ``rows`` rows (SQLite's style)."""
    values = "(" + ", ".join(["?"] * len(columns)) + ")"
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join([values] * rows)}"

