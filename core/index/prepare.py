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
import os
import select
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from scopelens.core.hashing import canonical_json
from scopelens.core.index.batching import (
    HELD_PER_WORKER,
    IN_FLIGHT_PER_WORKER,
    FileOnDisk,
    ToPrepare,
    cut_batches,
    item_size,
    pool_size,
)
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
        yield from _Schedule(batches, pool, classifier, key, ahead).run()
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


class _Schedule:
    """``prepare_all``'s schedule with a pool of workers (``run`` yields the documents).

    A *feeder* thread keeps every worker at ``IN_FLIGHT_PER_WORKER`` batches to do: it reads
    each answer as it arrives (still pickled: ``PreparingWorker.read_ahead``) and hands that
    worker its next batch at once, whether this thread is preparing a batch of its own or is
    away writing what it was given. Before it, a worker was handed batches only while the
    generator ran, so it went idle while the indexing process wrote a segment, unless it had
    so many batches queued that this process, which yields in order, waited for them instead.

    Batches are cut in order and take their place in ``order`` as they are cut (under
    ``lock``), whoever prepares them, so the documents come out in the order given whatever
    the timing. This thread prepares a batch itself whenever the oldest one is a worker's and
    not answered yet, at most ``OWN_AHEAD`` ahead. At most ``HELD_PER_WORKER`` answers per
    worker are held here read and not taken (the feeder hands out no more until they are).
    Batches handed out ``ahead`` (``HeadStart``) take their place while they are the batches
    due; from the first that is not, their answers are read and dropped.
    """

    def __init__(
        self, batches: Iterator[list[ToPrepare]], pool: list[PreparingWorker], classifier: SourceClassifier,
        key: RedactionKey, ahead: list[tuple[PreparingWorker, list[ToPrepare]]],
    ) -> None:
        self.batches = batches
        self.pool = pool
        self.classifier = classifier
        self.key = key
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        """Notified when the feeder read an answer or ended, when this thread took one, and at
        the end."""
        self.order: deque[_Slot] = deque()  # batch order
        self.waiting: dict[PreparingWorker, deque[_Slot]] = {worker: deque() for worker in pool}  # per worker
        self.handed: deque[_Slot] = deque()
        for worker, given in ahead:
            self.handed.append(_Slot(worker, batch=given))
            self.waiting[worker].append(self.handed[-1])
        self.exhausted = False
        self.feeding = False
        self.stopping = False
        self.failure: BaseException | None = None
        self._feeder = threading.Thread(target=self._feed, name="scopelens-feeder", daemon=True)

    def run(self) -> Iterator[PreparedDocument | Unreadable]:
        self._wake_read, self._wake = os.pipe()
        self.feeding = True
        self._feeder.start()
        try:
            yield from self._in_order()
        finally:
            self._stop_feeding()
            os.close(self._wake_read)
            os.close(self._wake)

    def _in_order(self) -> Iterator[PreparedDocument | Unreadable]:
        order = self.order
        while True:
            batch, own = None, None
            with self.lock:
                ready = []
                while order and order[0].documents is not None:
                    ready.append(order.popleft())
                head = order[0] if order else None
                if (head is None or head.worker is None or not head.worker.answers_held) and sum(
                    slot.worker is None for slot in order
                ) < OWN_AHEAD:
                    batch = self._next_batch()
                    if batch is not None:
                        own = _Slot(None)
                        order.append(own)
                done = batch is None and head is None and self.exhausted
            for slot in ready:
                yield from slot.documents or ()
            if done:
                break
            if own is not None and batch is not None:
                own.documents = prepare_batch(batch, self.classifier, self.key)
            elif head is not None and head.worker is not None:
                self._receive(head.worker)
        # The last batches are collected before they are written, so the workers are gone while
        # the caller writes them (and commits): their memory is not part of the run's peak then.
        self._stop_feeding()
        for worker in self.pool:
            while self.waiting[worker]:
                self._receive(worker)
            worker.close()
        for slot in order:
            yield from slot.documents or ()

    def _receive(self, worker: PreparingWorker) -> None:
        """Take the oldest answer of ``worker``: read by the feeder (waiting for it), or here
        once the feeder has stopped."""
        with self.lock:
            while not worker.answers_held:
                if self.failure is not None:
                    raise self.failure
                if not self.feeding:  # nothing else reads from this worker now
                    worker.read_ahead()
                    break
                self.changed.wait()
            slot = self.waiting[worker].popleft()
            body = worker.take_read()
            self.changed.notify_all()  # room for the feeder to hand out the next batch
        documents = worker.open_answer(body)
        if not slot.discarded:
            slot.documents = documents

    def _next_batch(self) -> list[ToPrepare] | None:
        """The next batch not handed out ahead (those are put in order as they come). Lock held."""
        while not self.exhausted:
            batch = next(self.batches, None)
            self.exhausted = batch is None
            if self.handed and batch is not None and self.handed[0].batch == batch:
                self.order.append(self.handed.popleft())
                continue
            for slot in self.handed:  # not the batch due: none of the rest can be used
                slot.discarded = True
            self.handed.clear()
            return batch
        return None

    def _hand_out(self) -> None:
        """Give each worker batches up to ``IN_FLIGHT_PER_WORKER`` to do. Lock held."""
        for worker in self.pool:
            while (
                worker.unanswered < IN_FLIGHT_PER_WORKER and worker.in_flight < IN_FLIGHT_PER_WORKER + HELD_PER_WORKER
                and (batch := self._next_batch()) is not None
            ):
                worker.submit(batch)
                slot = _Slot(worker)
                self.order.append(slot)
                self.waiting[worker].append(slot)

    def _feed(self) -> None:
        """The feeder thread (see the class doc); the wake pipe becomes readable when it must stop."""
        wake = self._wake_read
        try:
            while True:
                with self.lock:
                    while True:
                        if self.stopping:
                            return
                        self._hand_out()
                        waiting = {worker.answers: worker for worker in self.pool if worker.unanswered}
                        if waiting:
                            break
                        if self.exhausted:
                            return
                        self.changed.wait()  # every answer handed out is held: wait for a take
                readable, _, _ = select.select([wake, *waiting], [], [])
                if wake in readable:
                    return
                for fd in readable:
                    waiting[fd].read_ahead()
                with self.lock:
                    self.changed.notify_all()
        except BaseException as exc:  # noqa: BLE001  (raised in the yielding thread)
            with self.lock:
                self.failure = exc
        finally:
            with self.lock:
                self.feeding = False
                self.changed.notify_all()

    def _stop_feeding(self) -> None:
        """End the feeder thread (once; this thread then reads what is left itself)."""
        with self.lock:
            if self.stopping:
                return
            self.stopping = True
            self.changed.notify_all()
        os.write(self._wake, b"x")
        self._feeder.join()
