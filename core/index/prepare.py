"""Preparing files for the index: decode, redact, chunk, count terms; in worker processes too
when there is enough to do.

This module imports no database code, so a worker process (started fresh:
``prepare_worker``) loads only what preparation needs. A worker returns each document with its terms already counted
(``TermCounts``: a few numpy arrays), never token lists: a list of five million strings
would cost more to send back than to make.

Results come back in the order the files were given, and a file is prepared by the same
functions in a worker as in the calling process, so chunks, their hashes and their terms do
not depend on the number of workers (a test checks it).
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from scopelens.core.hashing import canonical_json
from scopelens.core.index.batching import IN_FLIGHT_PER_WORKER, FileOnDisk, ToPrepare, cut_batches, item_size, pool_size
from scopelens.core.index.chunker import Chunk, chunk_text, decode_source
from scopelens.core.index.head_start import HeadStart
from scopelens.core.index.languages import language_of
from scopelens.core.index.prepare_worker import PreparingWorker
from scopelens.core.index.sources import SourceClassifier
from scopelens.core.index.tokenizer import TermCounts, count_terms, tokenize
from scopelens.core.redaction_scan import RedactionKey, redaction_records

OWN_AHEAD = 2
"""Batches this process prepares ahead of the worker's batch it is waiting for."""


class Unreadable(NamedTuple):
    """A ``FileOnDisk`` that could not be read when it was to be prepared (removed meanwhile,
    say): the caller reports it as skipped."""

    path: str
    message: str


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
    assert isinstance(document, PreparedDocument)  # bytes given: nothing to read
    return document if replaces is None else replace(document, replaces=replaces)


def prepare_batch(
    files: Sequence[ToPrepare], classifier: SourceClassifier, key: RedactionKey
) -> list[PreparedDocument | Unreadable]:
    """Prepare several files (reading those on disk); their terms are counted in one call, so
    numpy's per-call cost is paid once per batch instead of once per file (most files are
    small), and the documents share one list of term strings (sent back from a worker once).
    A file on disk that cannot be read gives an ``Unreadable`` in its place."""
    decoded = []
    units: list[tuple[str, ...]] = []
    unreadable: dict[int, Unreadable] = {}
    for at, item in enumerate(files):
        path, data = _read(item)
        if isinstance(data, Unreadable):
            unreadable[at] = data
            continue
        language = language_of(path)
        text, _had_errors = decode_source(data)
        redacted, redactions = redaction_records(text, key)
        chunks = tuple(chunk_text(path, redacted))
        decoded.append((path, language, data, redactions, chunks, len(units)))
        units += map(_pieces, chunks)
    counts = count_terms(units)
    documents: list[PreparedDocument | Unreadable] = [
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
    for at in sorted(unreadable):
        documents.insert(at, unreadable[at])
    return documents


def _read(item: ToPrepare) -> tuple[str, bytes | Unreadable]:
    if not isinstance(item, FileOnDisk):
        return item
    try:
        return item.path, item.location.read_bytes()
    except OSError as exc:
        return item.path, Unreadable(item.path, exc.strerror or str(exc))


def _pieces(chunk: Chunk) -> tuple[str, ...]:
    return (chunk.text, chunk.path, chunk.symbol) if chunk.symbol else (chunk.text, chunk.path)


def prepare_all(
    files: Iterable[ToPrepare],
    *,
    classifier: SourceClassifier,
    key: RedactionKey,
    workers: int | None = None,
    total_bytes: int | None = None,
    head_start: HeadStart | None = None,
) -> Iterator[PreparedDocument | Unreadable]:
    """Prepare files (``(path, data)``, or ``FileOnDisk`` read where they are prepared),
    yielding documents (or ``Unreadable``) in the same order, as they come.

    ``workers`` helper processes prepare batches alongside this one (default: one fewer than
    the cores, and none when ``total_bytes``, the bytes to prepare if known, is below
    ``POOL_MIN_BYTES``); ``workers=0`` prepares in this process alone. This process takes a
    batch itself whenever the next one to yield is not ready yet, so it is never idle while
    it waits, and one process fewer is started than there are cores.

    ``files`` is consumed as it is prepared: at most ``IN_FLIGHT_PER_WORKER`` batches per
    worker, and ``OWN_AHEAD`` of this process, are prepared ahead of the document being
    yielded, so the files' bytes need not all be held.

    ``head_start``, if given (and made with the same classifier and key), supplies the workers
    and the batches already handed to them: each is used if it is the batch due at its turn,
    and thrown away otherwise (``HeadStart``). ``workers`` is then not looked at.
    """
    if head_start is not None:
        started = head_start.take(classifier, key)
        if started:
            yield from _run_pool(cut_batches(files), started, classifier, key, head_start.ahead)
            return
    if workers is None:
        if total_bytes is None:
            files = list(files)
            total_bytes = sum(map(item_size, files))
        workers = pool_size(total_bytes)
    batches = cut_batches(files)
    if workers < 1:
        for batch in batches:
            yield from prepare_batch(batch, classifier, key)
        return
    pool: list[PreparingWorker] = []
    try:
        pool += [PreparingWorker(classifier, key) for _ in range(workers)]
    except BaseException:
        for worker in pool:
            worker.close(wait=False)
        raise
    yield from _run_pool(batches, pool, classifier, key, [])


def _run_pool(
    batches: Iterator[list[ToPrepare]], pool: list[PreparingWorker], classifier: SourceClassifier,
    key: RedactionKey, ahead: list[tuple[PreparingWorker, list[ToPrepare]]],
) -> Iterator[PreparedDocument | Unreadable]:
    finished = False
    try:
        yield from _prepare_alongside(batches, pool, classifier, key, ahead)
        finished = True
    finally:
        for worker in pool:
            worker.close(wait=finished)


class _Slot:
    """One batch, in order: prepared here, or by ``worker`` (``documents`` once it answered).
    A batch handed out ahead (``HeadStart``) that was not the batch due is ``discarded``: its
    answer is read, to keep the worker's answers in order, and dropped."""

    __slots__ = ("batch", "discarded", "documents", "worker")

    def __init__(
        self, worker: PreparingWorker | None, documents: list[PreparedDocument | Unreadable] | None = None,
        batch: list[ToPrepare] | None = None,
    ) -> None:
        self.worker = worker
        self.documents = documents
        self.batch = batch
        self.discarded = False


def _prepare_alongside(
    batches: Iterator[list[ToPrepare]], pool: list[PreparingWorker], classifier: SourceClassifier,
    key: RedactionKey, ahead: list[tuple[PreparingWorker, list[ToPrepare]]],
) -> Iterator[PreparedDocument | Unreadable]:
    """``prepare_all``'s schedule. Answers are read as soon as they arrive, so a worker always
    has ``IN_FLIGHT_PER_WORKER`` batches to do; while the oldest batch is a worker's and not
    answered yet, this process prepares the next batch itself (at most ``OWN_AHEAD`` ahead).
    Batches handed out ``ahead`` take their place in order while they are the batches due."""
    order: deque[_Slot] = deque()  # batch order
    waiting: dict[PreparingWorker, deque[_Slot]] = {worker: deque() for worker in pool}  # per worker
    handed: deque[_Slot] = deque()
    for worker, given in ahead:
        handed.append(_Slot(worker, batch=given))
        waiting[worker].append(handed[-1])
    exhausted = False

    def next_batch() -> list[ToPrepare] | None:
        """The next batch not handed out ahead (those are put in order as they come)."""
        nonlocal exhausted
        while not exhausted:
            batch = next(batches, None)
            exhausted = batch is None
            if handed and batch is not None and handed[0].batch == batch:
                order.append(handed.popleft())
                continue
            for slot in handed:  # not the batch due: none of the rest can be used
                slot.discarded = True
            handed.clear()
            return batch
        return None

    def receive(worker: PreparingWorker) -> None:
        slot = waiting[worker].popleft()
        documents = worker.take()
        if not slot.discarded:
            slot.documents = documents

    while True:
        for worker in pool:
            while worker.in_flight and worker.ready():
                receive(worker)
            while worker.in_flight < IN_FLIGHT_PER_WORKER and (batch := next_batch()) is not None:
                worker.submit(batch)
                order.append(_Slot(worker))
                waiting[worker].append(order[-1])
        if exhausted:
            break
        while order and order[0].documents is not None:
            yield from order.popleft().documents or ()
        head = order[0] if order else None
        if head is not None and sum(slot.worker is None for slot in order) >= OWN_AHEAD:
            assert head.worker is not None  # a batch prepared here is never left waiting
            receive(head.worker)
        elif (batch := next_batch()) is not None:
            order.append(_Slot(None, prepare_batch(batch, classifier, key)))
    # The last batches are collected before they are written, so the workers are gone while
    # the caller writes them (and commits): their memory is not part of the run's peak then.
    for worker in pool:
        while waiting[worker]:
            receive(worker)
        worker.close()
    for slot in order:
        yield from slot.documents or ()
