"""A process that prepares batches of files for the index, and the handle that drives it.

``prepare.prepare_all`` starts these with ``subprocess`` rather than ``multiprocessing``:
a ``spawn`` pool also starts a resource-tracker process (12 MiB, measured), and its queues
add threads and locks this needs none of. The protocol is one pickle per message on the
worker's stdin and stdout, each preceded by its length (8 bytes, little-endian):

* parent -> worker: ``(classifier, key)`` once, then one batch of files per message
  (``batching.ToPrepare``: mostly ``FileOnDisk``, which the worker reads itself); closing
  stdin ends the worker;
* worker -> parent: ``("ok", [PreparedDocument or Unreadable, ...])`` or
  ``("error", traceback)`` per batch, in the order the batches were sent.

The worker reads its stdin and writes its stdout on threads: the parent can always send the
next batch (two full pipes would otherwise wait for each other), and the worker goes on with
the next batch while the parent, busy writing the index, has not yet read the last result. Its real
stdout carries only messages: anything printed goes to stderr.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import gc
import os
import pickle
import queue
import subprocess
import sys
import threading
import traceback
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scopelens.core.index.sources import SourceClassifier
from scopelens.core.redaction_scan import RedactionKey

_HEADER = 8
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[3])
"""The directory ``scopelens`` is imported from here: the worker imports it from there too."""


class WorkerFailed(RuntimeError):
    """A preparing worker raised, or exited before answering."""


def send_message(fd: int, message: object) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(len(data).to_bytes(_HEADER, "little") + data)
    while view:
        view = view[os.write(fd, view) :]


def receive_message(fd: int) -> Any | None:
    """The next message on ``fd``; ``None`` at end of file (before a message begins)."""
    body = receive_pickle(fd)
    return None if body is None else pickle.loads(body)


def receive_pickle(fd: int) -> bytes | None:
    """The next message on ``fd``, still pickled; ``None`` at end of file (before a message begins)."""
    header = _read_exactly(fd, _HEADER)
    if header is None:
        return None
    body = _read_exactly(fd, int.from_bytes(header, "little"))
    if body is None:
        raise EOFError("a message was cut off")
    return body


def _read_exactly(fd: int, size: int) -> bytes | None:
    parts: list[bytes] = []
    left = size
    while left:
        part = os.read(fd, min(left, 1 << 20))
        if not part:
            if left == size:
                return None
            raise EOFError("a message was cut off")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


class PreparingWorker:
    """One worker process: batches go in with ``submit`` and come back, in order, by ``take``."""

    def __init__(self, classifier: SourceClassifier, key: RedactionKey) -> None:
        bootstrap = (
            f"import sys; sys.path.insert(0, {_PACKAGE_PARENT!r}); "
            "from scopelens.core.index.prepare_worker import serve; serve()"
        )
        # -P: the working directory is not put on sys.path (a workspace could shadow a module).
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-c", bootstrap], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._to_worker = self.process.stdin.fileno()
        self._from_worker = self.process.stdout.fileno()
        for fd in (self._to_worker, self._from_worker):
            widen_pipe(fd)
        self.in_flight = 0
        """Batches submitted and not taken yet."""
        self._read: deque[bytes | None] = deque()
        """Answers read ahead (``read_ahead``), still pickled; ``None`` where the worker had ended."""
        send_message(self._to_worker, (classifier, key))

    @property
    def answers(self) -> int:
        """The file descriptor the answers arrive on (for ``select``)."""
        return self._from_worker

    @property
    def unanswered(self) -> int:
        """Batches submitted whose answer has not been read yet."""
        return self.in_flight - len(self._read)

    def submit(self, batch: Sequence[object]) -> None:
        """Send a batch of files to prepare (``batching.ToPrepare`` items)."""
        try:
            send_message(self._to_worker, list(batch))
        except BrokenPipeError:
            raise WorkerFailed(f"a preparing worker process exited (code {self.process.wait()})") from None
        self.in_flight += 1

    def read_ahead(self) -> None:
        """Read the oldest unanswered batch's answer now, for ``take`` (``head_start``'s thread
        does, so that it can hand the worker its next batch). Waits for it."""
        self._read.append(self._receive())

    @property
    def answers_held(self) -> int:
        """Answers read ahead and not taken yet."""
        return len(self._read)

    def take(self) -> list[Any]:
        """The prepared documents of the oldest batch submitted (waits for them)."""
        if not self._read:
            self.read_ahead()
        return self.open_answer(self.take_read())

    def take_read(self) -> bytes | None:
        """The oldest answer read ahead, still pickled, for ``open_answer`` (counted as taken:
        a thread reading ahead sees the count and the answers change together when the
        caller holds the lock it reads them under)."""
        body = self._read.popleft()
        self.in_flight -= 1
        return body

    def open_answer(self, body: bytes | None) -> list[Any]:
        """The documents of an answer (``take_read``), or the worker's failure raised."""
        if body is None:
            raise WorkerFailed(f"a preparing worker process exited (code {self.process.wait()})")
        status, payload = pickle.loads(body)
        if status != "ok":
            raise WorkerFailed(f"preparing files failed in a worker process:\n{payload}")
        documents: list[Any] = payload
        return documents

    def _receive(self) -> bytes | None:
        try:
            return receive_pickle(self._from_worker)
        except EOFError:
            return None

    def close(self, *, wait: bool = True) -> None:
        """End the worker: let it finish (``wait``) or stop it now."""
        assert self.process.stdin is not None and self.process.stdout is not None
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        if not wait:
            self.process.kill()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()


def serve() -> None:
    """The worker's main loop (see the module doc)."""
    from scopelens.core.index.prepare import prepare_batch

    out = os.dup(1)
    os.dup2(2, 1)  # a stray print must not corrupt the messages
    setup = receive_message(0)
    if setup is None:
        return
    classifier, key = setup
    inbox: queue.SimpleQueue[list[Any] | None] = queue.SimpleQueue()

    def read_inbox() -> None:
        try:
            while (batch := receive_message(0)) is not None:
                inbox.put(batch)
        finally:
            inbox.put(None)

    outbox: queue.SimpleQueue[tuple[str, object] | None] = queue.SimpleQueue()

    def write_outbox() -> None:
        try:
            while (result := outbox.get()) is not None:
                send_message(out, result)
        except BrokenPipeError:  # the parent is gone
            os._exit(0)

    threading.Thread(target=read_inbox, daemon=True).start()
    writer = threading.Thread(target=write_outbox)
    writer.start()
    while (batch := inbox.get()) is not None:
        try:
            result: tuple[str, object] = ("ok", prepare_batch(batch, classifier, key))
        except Exception:  # noqa: BLE001  (the parent re-raises it, with this traceback)
            result = ("error", traceback.format_exc())
        outbox.put(result)
        del result
        release_free_heap()
    outbox.put(None)
    writer.join()
    # Every answer is written: exit without collecting this process's objects one by one (its
    # caches; 0.06-0.12 s), as the indexing process waits for the exit (``close``).
    gc.freeze()


PIPE_BYTES = 1 << 20
"""The pipes to and from a worker hold this much (Linux's default is 64 KiB, and the most an
unprivileged process may ask for is ``/proc/sys/fs/pipe-max-size``, 1 MiB by default)."""


def widen_pipe(fd: int) -> None:
    """Let the pipe ``fd`` is an end of hold a whole batch or most of a result. With 64 KiB, a
    message crossed in pieces of 64 KiB, each waiting for the other side's reading thread to
    get the GIL from the thread preparing files: the indexing process spent about 0.5 s of
    the standard library's run blocked in ``write`` (pyinstrument). Where the pipe cannot be
    widened (not Linux, or a lower limit), it stays as it is: only slower."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is None:
        return
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, set_size, PIPE_BYTES)


def release_free_heap() -> None:
    """Give the heap freed by a batch back to the system: glibc keeps it otherwise (about
    10 MiB a worker on the standard library, measured)."""
    with contextlib.suppress(AttributeError, OSError):  # not glibc: nothing to give back this way
        ctypes.CDLL(None).malloc_trim(0)
