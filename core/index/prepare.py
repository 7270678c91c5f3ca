"""Preparing files for the index: decode, redact, chunk, count terms; in worker processes when
there is enough to do.

This module imports no database code, so a worker process (started fresh, ``spawn``) loads
only what preparation needs. A worker returns each document with its terms already counted
(``TermCounts``: a few numpy arrays), never token lists: a list of five million strings
would cost more to send back than to make.

Results come back in the order the files were given, and a file is prepared by the same
functions in a worker as in the calling process, so chunks, their hashes and their terms do
not depend on the number of workers (a test checks it).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, replace
from multiprocessing import get_context

from scopelens.core.hashing import canonical_json
from scopelens.core.index.chunker import Chunk, chunk_text, decode_source
from scopelens.core.index.languages import language_of
from scopelens.core.index.sources import SourceClassifier
from scopelens.core.index.tokenizer import TermCounts, count_terms, tokenize
from scopelens.core.redaction_scan import RedactionKey, redaction_records

POOL_MIN_BYTES = 4_000_000
"""Below this many bytes to prepare, a pool costs more to start than it saves."""
BATCH_BYTES = 250_000
"""Files are sent to workers in batches of about this many bytes."""
IN_FLIGHT_PER_WORKER = 1
"""Batches sent to the workers ahead of the one being collected, per worker: enough to keep
them busy while the caller writes, few enough that memory does not grow with the corpus."""


@dataclass(frozen=True)
class PreparedDocument:
    """A new or changed file, ready to be written: its redacted chunks and their counted terms."""

    path: str
    language: str
    source: str
    content_hash: str
    size: int
    redactions: bytes
    chunks: tuple[Chunk, ...]
    terms: TermCounts
    """Unit ``i`` is chunk ``i``: the terms of its text, path and symbol."""
    replaces: int | None
    """Id of the live version this one replaces (``None`` for an added file)."""


def chunk_tokens(chunk: Chunk) -> list[str]:
    """The terms a chunk is indexed under, in order: its text, its path and its symbol."""
    tokens = tokenize(chunk.text)
    tokens += tokenize(chunk.path)
    if chunk.symbol:
        tokens += tokenize(chunk.symbol)
    return tokens


def prepare_document(
    path: str, data: bytes, *, classifier: SourceClassifier, replaces: int | None, key: RedactionKey
) -> PreparedDocument:
    """Decode, redact (records hashed under ``key``), chunk and count the terms of one file."""
    [document] = prepare_batch([(path, data)], classifier, key)
    return document if replaces is None else replace(document, replaces=replaces)


def prepare_batch(
    files: Sequence[tuple[str, bytes]], classifier: SourceClassifier, key: RedactionKey
) -> list[PreparedDocument]:
    """Prepare several files; their terms are counted in one call, so numpy's per-call cost is
    paid once per batch instead of once per file (most files are small), and the documents
    share one list of term strings (sent back from a worker once)."""
    decoded = []
    units: list[tuple[str, ...]] = []
    for path, data in files:
        language = language_of(path)
        text, _had_errors = decode_source(data)
        redacted, redactions = redaction_records(text, key)
        chunks = tuple(chunk_text(path, redacted))
        decoded.append((path, language, data, redactions, chunks, len(units)))
        units += map(_pieces, chunks)
    counts = count_terms(units)
    return [
        PreparedDocument(
            path=path,
            language=language,
            source=classifier.source_of(path, language).value,
            content_hash=hashlib.sha256(data).hexdigest(),
            size=len(data),
            redactions=canonical_json(redactions),
            chunks=chunks,
            terms=counts.slice(first_unit, first_unit + len(chunks)),
            replaces=None,
        )
        for path, language, data, redactions, chunks, first_unit in decoded
    ]


def _pieces(chunk: Chunk) -> tuple[str, ...]:
    return (chunk.text, chunk.path, chunk.symbol) if chunk.symbol else (chunk.text, chunk.path)


def prepare_all(
    files: Iterable[tuple[str, bytes]],
    *,
    classifier: SourceClassifier,
    key: RedactionKey,
    workers: int | None = None,
    total_bytes: int | None = None,
) -> Iterator[PreparedDocument]:
    """Prepare ``(path, data)`` files, yielding documents in the same order, as they come.

    ``files`` is read as it is consumed: at most ``IN_FLIGHT_PER_WORKER`` batches per worker
    are sent ahead of the document being yielded, so the files' bytes need not all be held.
    ``workers`` processes (default: one per core, and none when ``total_bytes``, the bytes to
    prepare if known, is below ``POOL_MIN_BYTES``); ``workers=0`` prepares in this process.
    """
    if workers is None:
        if total_bytes is None:
            files = list(files)
            total_bytes = sum(len(data) for _, data in files)
        workers = (os.cpu_count() or 1) if total_bytes >= POOL_MIN_BYTES else 0
    if workers < 1:
        for batch in _batches(files):
            yield from prepare_batch(batch, classifier, key)
        return
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"))
    try:
        ahead: deque[Future[list[PreparedDocument]]] = deque()
        for batch in _batches(files):
            ahead.append(pool.submit(_prepare_in_worker, batch, classifier, key))
            if len(ahead) > IN_FLIGHT_PER_WORKER * workers:
                yield from ahead.popleft().result()
        # The last batches are collected before they are written, so the workers are gone while
        # the caller writes them (and commits): their memory is not part of the run's peak then.
        rest = [document for future in ahead for document in future.result()]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    yield from rest


def _prepare_in_worker(
    files: Sequence[tuple[str, bytes]], classifier: SourceClassifier, key: RedactionKey
) -> list[PreparedDocument]:
    """``prepare_batch`` in a worker, then the heap it freed given back to the system: glibc
    keeps freed memory otherwise (about 10 MiB a worker on the standard library, measured)."""
    documents = prepare_batch(files, classifier, key)
    _release_free_heap()
    return documents


def _release_free_heap() -> None:
    with contextlib.suppress(AttributeError, OSError):  # not glibc: nothing to give back this way
        ctypes.CDLL(None).malloc_trim(0)


def _batches(files: Iterable[tuple[str, bytes]]) -> Iterator[list[tuple[str, bytes]]]:
    batch: list[tuple[str, bytes]] = []
    size = 0
    for item in files:
        batch.append(item)
        size += len(item[1])
        if size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch
