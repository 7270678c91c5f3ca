"""Workers that start preparing files before the indexer knows which files it will prepare.

``scopelens index`` knows, from its stat check (``stat_check.py``, no database code), which
files are new or changed by size and time about a second before the indexer has imported its
database code, opened the store and diffed the workspace; the other cores would be idle
meanwhile. A ``HeadStart`` starts the workers then and feeds them the first batches of those
files from a thread of its own, ``IN_FLIGHT_PER_WORKER`` at a time as answers come back, until
the indexer takes the workers over (``prepare.prepare_all``). The indexer's own batches are
cut from its diff the same way, so for a workspace whose files all differ (a first index) they
are the same batches, and ``prepare_all`` uses the answers; from the first batch that differs
(a file changed meanwhile, or found unchanged by its hash) what was handed out ahead is thrown
away and prepared as usual. Results never depend on it: a batch is used only if it is exactly
the batch due.

Handing out a few batches at a time, not all at once, matters: the indexing process prepares
batches too once it is ready, and it cannot go on while the batch it must yield next waits
behind a long queue in a worker.

Like ``batching.py``, this module loads no numpy and no database code.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Iterator, Sequence
from itertools import islice

from scopelens.core.index.batching import HELD_PER_WORKER, IN_FLIGHT_PER_WORKER, FileOnDisk, ToPrepare, cut_batches
from scopelens.core.index.prepare_worker import PreparingWorker
from scopelens.core.index.sources import SourceClassifier
from scopelens.core.redaction_scan import RedactionKey

HEAD_START_BATCHES = HELD_PER_WORKER
"""At most this many batches (40) are handed out ahead in all: as many answers as the indexer
holds of a worker, so its feeder hands out more as soon as it takes them; and about what one
worker prepares while the indexing process imports its database code, opens the store and
diffs the workspace (1.0-1.6 s on the standard library, a batch taking about 35 ms with
counting in C). Answers read ahead are held, pickled (about 0.6 MB each on the standard
library), until the indexer takes them, so this bounds them when the start is slow (24 MB at
most; the run's peak was 157-166 MiB with 40, against 157-163 with 12)."""


class HeadStart:
    """Workers started, and fed the first batches of ``files`` from a thread, until ``take``."""

    def __init__(
        self, files: Sequence[FileOnDisk], *, classifier: SourceClassifier, key: RedactionKey, workers: int,
        batches: int = HEAD_START_BATCHES,
    ) -> None:
        self.classifier = classifier
        self.key = key
        self.pool: list[PreparingWorker] = []
        self.ahead: list[tuple[PreparingWorker, list[ToPrepare]]] = []
        """Every batch handed out, in order, with the worker it went to."""
        self._due: Iterator[list[ToPrepare]] = islice(cut_batches(files), batches)
        self._wake_read, self._wake_write = os.pipe()
        self._feeder: threading.Thread | None = None
        try:
            self.pool += [PreparingWorker(classifier, key) for _ in range(workers)]
            self._feed_once()
            self._feeder = threading.Thread(target=self._feed, name="scopelens-head-start", daemon=True)
            self._feeder.start()
        except BaseException:
            self.close()
            raise

    def take(self, classifier: SourceClassifier, key: RedactionKey) -> list[PreparingWorker]:
        """The workers, for ``prepare_all``, which closes them (with ``ahead``, what they were
        given); none (and the workers are stopped) when they were made for another classifier
        or key."""
        self._stop_feeding()
        if classifier != self.classifier or key != self.key:
            self.close()
            return []
        pool, self.pool = self.pool, []
        return pool

    def close(self) -> None:
        """Stop the workers unless ``prepare_all`` took them (the run ended before it prepared)."""
        self._stop_feeding()
        pool, self.pool = self.pool, []
        for worker in pool:
            worker.close(wait=False)

    def __enter__(self) -> HeadStart:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _feed_once(self) -> bool:
        """Hand each worker batches up to ``IN_FLIGHT_PER_WORKER`` not yet answered; whether any
        is still to be answered."""
        for worker in self.pool:
            while worker.unanswered < IN_FLIGHT_PER_WORKER and (batch := next(self._due, None)) is not None:
                worker.submit(batch)
                self.ahead.append((worker, batch))
        return any(worker.unanswered for worker in self.pool)

    def _feed(self) -> None:
        """The thread: read each answer as it comes (kept, unpickled later by ``take``), and hand
        out the next batch, until every batch is handed out and answered or ``take`` is called."""
        try:
            while self._feed_once():
                waiting = {worker.answers: worker for worker in self.pool if worker.unanswered}
                readable, _, _ = select.select([self._wake_read, *waiting], [], [])
                if self._wake_read in readable:
                    return
                for fd in readable:
                    waiting[fd].read_ahead()
        except Exception:  # noqa: BLE001  (a worker that failed fails again, in order, when the indexer takes its answer)
            return

    def _stop_feeding(self) -> None:
        """Wake the thread and wait for it to end (at once: it waits on the wake pipe too)."""
        if self._feeder is not None:
            os.write(self._wake_write, b"x")
            self._feeder.join()
            self._feeder = None
        if self._wake_read >= 0:
            os.close(self._wake_read)
            os.close(self._wake_write)
            self._wake_read = self._wake_write = -1
