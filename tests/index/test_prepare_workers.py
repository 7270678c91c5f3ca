"""Preparing in worker processes gives exactly what preparing in this process gives."""

from __future__ import annotations

import fcntl
import sysconfig
import time
from pathlib import Path

import numpy as np
import pytest

from scopelens.core.index import batching
from scopelens.core.index.batching import BATCH_BYTES, IN_FLIGHT_PER_WORKER, FileOnDisk
from scopelens.core.index.head_start import HeadStart
from scopelens.core.index.prepare import PreparedDocument, Unreadable, prepare_all
from scopelens.core.index.prepare_worker import PIPE_BYTES, PreparingWorker
from scopelens.core.index.sources import SourceClassifier
from scopelens.core.redact import RedactionKey

KEY = RedactionKey(bytes(range(32)))


def files() -> list[tuple[str, bytes]]:
    package = Path(sysconfig.get_paths()["stdlib"]) / "json"
    found = [(p.relative_to(package).as_posix(), p.read_bytes()) for p in sorted(package.glob("*.py"))]
    found.append(("notes/secret.md", b"# Notes\n\npassword = 'hunter2-very-secret-value'\n\n" + b"- item\n" * 200))
    found.append(("web/app.ts", b"export function f(a: number) {\n  return a + 1;\n}\n"))
    return found


def comparable(document: PreparedDocument) -> tuple[object, ...]:
    terms = document.terms
    return (
        document.path, document.content_hash, document.source, document.redactions, document.chunks,
        terms.terms, terms.bounds.tolist(), terms.term_ids.tolist(), terms.tfs.tolist(), terms.lengths.tolist(),
    )


def test_chunks_terms_and_hashes_do_not_depend_on_the_number_of_workers() -> None:
    given = files()
    in_process = [comparable(d) for d in prepare_all(given, classifier=SourceClassifier(), key=KEY, workers=0)]
    pooled = [comparable(d) for d in prepare_all(given, classifier=SourceClassifier(), key=KEY, workers=2)]
    assert [c[0] for c in in_process] == [path for path, _ in given]  # the order given
    assert pooled == in_process
    secret = next(d for d in in_process if d[0] == "notes/secret.md")
    assert b"hunter2" not in b"".join(chunk.text.encode() for chunk in secret[4])  # redacted in workers too


def test_this_process_and_the_workers_share_the_batches_and_keep_their_order(monkeypatch) -> None:
    """With many small batches, some are prepared here while a worker prepares others, and the
    documents still come out in the order given, the same as prepared here alone."""
    import scopelens.core.index.prepare as prepare
    from scopelens.core.index.prepare_worker import PreparingWorker

    given = files() * 3
    monkeypatch.setattr(batching, "BATCH_BYTES", 3_000)
    in_process = [comparable(d) for d in prepare_all(given, classifier=SourceClassifier(), key=KEY, workers=0)]
    taken: list[int] = []
    here: list[int] = []
    real_open, real_prepare = PreparingWorker.open_answer, prepare.prepare_batch
    monkeypatch.setattr(PreparingWorker, "open_answer", lambda self, body: taken.append(1) or real_open(self, body))
    monkeypatch.setattr(prepare, "prepare_batch", lambda *a: here.append(1) or real_prepare(*a))
    for workers in (1, 2):
        taken.clear()
        here.clear()
        pooled = [comparable(d) for d in prepare_all(given, classifier=SourceClassifier(), key=KEY, workers=workers)]
        assert pooled == in_process
        assert taken and here, (len(taken), len(here))


def test_a_failing_batch_in_a_worker_is_an_error_here() -> None:
    from scopelens.core.index.prepare_worker import PreparingWorker, WorkerFailed

    worker = PreparingWorker(SourceClassifier(), KEY)
    try:
        worker.submit([("a.py", "not bytes")])  # type: ignore[list-item]
        with pytest.raises(WorkerFailed, match=r"AttributeError|TypeError"):
            worker.take()
        worker.submit(files()[:1])  # the worker goes on after a failed batch
        assert [d.path for d in worker.take()] == [files()[0][0]]
    finally:
        worker.close()
    assert worker.process.returncode == 0


def test_small_inputs_are_prepared_without_a_pool(monkeypatch) -> None:
    import scopelens.core.index.prepare as prepare

    def no_pool(*args: object, **kwargs: object) -> None:
        raise AssertionError("a pool was started for a few small files")

    monkeypatch.setattr(prepare, "PreparingWorker", no_pool)
    documents = list(prepare_all(files()[:2], classifier=SourceClassifier(), key=KEY))
    assert len(documents) == 2 and all(np.all(d.terms.lengths > 0) for d in documents)


def test_preparing_leaves_no_reference_cycles() -> None:
    """The indexer pauses the cyclic collector while it runs (``indexer.gc_paused``): garbage
    in a cycle would stay until the run ends, and the calling process prepares batches too."""
    import gc

    from scopelens.core.index.prepare import prepare_batch

    given = [*files(), ("web/big.ts", b"class A {\n" + b"  m() {\n    return 1;\n  }\n" * 400 + b"}\n")]
    prepare_batch(given, SourceClassifier(), KEY)  # first-use caches
    gc.collect()
    gc.disable()
    try:
        prepare_batch(given, SourceClassifier(), KEY)
        assert gc.collect() == 0
    finally:
        gc.enable()


@pytest.mark.skipif(not hasattr(fcntl, "F_GETPIPE_SZ"), reason="pipe sizes are a Linux setting")
def test_the_pipes_to_and_from_a_worker_hold_a_whole_batch() -> None:
    """With the default 64 KiB, each batch and result crossed in 64 KiB pieces, every piece
    waiting for the other side's reading thread to get the GIL (the indexing process spent
    about 0.5 s of the standard library's run blocked in ``write``)."""
    worker = PreparingWorker(SourceClassifier(), KEY)
    try:
        sizes = [fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) for fd in (worker._to_worker, worker._from_worker)]
    finally:
        worker.close()
    assert sizes == [PIPE_BYTES, PIPE_BYTES]
    assert PIPE_BYTES >= BATCH_BYTES


@pytest.mark.parametrize("workers", [0, 1])
def test_files_on_disk_are_read_where_they_are_prepared(tmp_path: Path, workers: int) -> None:
    """A worker is sent paths, not bytes; a file gone by then comes back in its place as
    ``Unreadable``, and the others are what their bytes give."""
    given = files()
    on_disk: list[FileOnDisk] = []
    for path, data in given:
        location = tmp_path / path
        location.parent.mkdir(parents=True, exist_ok=True)
        location.write_bytes(data)
        on_disk.append(FileOnDisk(path, location, len(data)))
    gone = on_disk[1]
    gone.location.unlink()
    prepared = list(prepare_all(on_disk, classifier=SourceClassifier(), key=KEY, workers=workers))
    expected = [counted(d) for d in prepare_all(given, classifier=SourceClassifier(), key=KEY, workers=0)]
    assert isinstance(prepared[1], Unreadable) and prepared[1].path == gone.path
    assert "No such file" in prepared[1].message
    rest = [counted(d) for d in prepared if isinstance(d, PreparedDocument)]
    assert rest == expected[:1] + expected[2:]


def counted(document: PreparedDocument | Unreadable) -> tuple[object, ...]:
    """A document with its terms counted per chunk (the batch's shared term list differs when
    the batch holds other files)."""
    assert isinstance(document, PreparedDocument)
    terms = document.terms
    return (
        document.path, document.content_hash, document.source, document.redactions, document.chunks,
        [terms.unit(u) for u in range(len(document.chunks))], terms.lengths.tolist(),
    )


def _on_disk(tmp_path: Path) -> list[FileOnDisk]:
    found = []
    for path, data in files():
        location = tmp_path / path
        location.parent.mkdir(parents=True, exist_ok=True)
        location.write_bytes(data)
        found.append(FileOnDisk(path, location, len(data)))
    return found


def _counting_prepares(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the batches prepared in this process (a worker's are not)."""
    from scopelens.core.index import prepare

    here: list[int] = []
    real = prepare.prepare_batch
    monkeypatch.setattr(prepare, "prepare_batch", lambda batch, *a: here.append(len(batch)) or real(batch, *a))
    return here


def test_batches_handed_out_ahead_are_used_when_they_are_the_batches_due(tmp_path, monkeypatch) -> None:

    monkeypatch.setattr(batching, "BATCH_BYTES", 4_000)  # several batches of these files
    on_disk = _on_disk(tmp_path)
    expected = [counted(d) for d in prepare_all(on_disk, classifier=SourceClassifier(), key=KEY, workers=0)]
    batches = len(list(batching.cut_batches(on_disk)))
    assert batches > IN_FLIGHT_PER_WORKER
    here = _counting_prepares(monkeypatch)
    with HeadStart(on_disk, classifier=SourceClassifier(), key=KEY, workers=1, batches=batches) as started:
        _wait_until_answered(started, batches)
        got = [counted(d) for d in prepare_all(on_disk, classifier=SourceClassifier(), key=KEY, head_start=started)]
    assert got == expected
    assert here == []  # every batch was the worker's, handed out before prepare_all was called


def test_a_head_start_hands_out_a_few_batches_at_a_time_until_the_indexer_takes_over(tmp_path, monkeypatch) -> None:
    """The indexing process prepares batches too once it is ready, and cannot go on while the
    batch it must yield next waits behind a long queue in a worker: the head start's thread
    keeps each worker at ``IN_FLIGHT_PER_WORKER`` unanswered batches, handing out the next as
    an answer comes back, with no call from the indexer in between."""
    monkeypatch.setattr(batching, "BATCH_BYTES", 4_000)
    on_disk = _on_disk(tmp_path)
    batches = len(list(batching.cut_batches(on_disk)))
    assert batches > IN_FLIGHT_PER_WORKER + 1
    with HeadStart(on_disk, classifier=SourceClassifier(), key=KEY, workers=1, batches=batches) as started:
        assert len(started.ahead) <= IN_FLIGHT_PER_WORKER
        _wait_until_answered(started, batches)  # the thread handed out the rest by itself
        assert [batch for _, batch in started.ahead] == list(batching.cut_batches(on_disk))
        [worker] = started.pool
        assert worker.unanswered == 0 and worker.answers_held == batches  # read ahead, waiting for take
        got = [counted(d) for d in prepare_all(on_disk, classifier=SourceClassifier(), key=KEY, head_start=started)]
    expected = [counted(d) for d in prepare_all(on_disk, classifier=SourceClassifier(), key=KEY, workers=0)]
    assert got == expected
    assert worker.process.poll() is not None


def _wait_until_answered(started: HeadStart, batches: int) -> None:
    deadline = time.monotonic() + 60
    while len(started.ahead) < batches or any(worker.unanswered for worker in started.pool):
        assert time.monotonic() < deadline, "the head start's thread stopped handing out batches"
        time.sleep(0.01)


def test_batches_handed_out_ahead_that_are_not_due_are_thrown_away(tmp_path, monkeypatch) -> None:
    """The diff found other files than the stat check (one unchanged by its hash, say): from the
    first batch that differs, what was handed out ahead is dropped, and every file is prepared
    once, in order."""

    monkeypatch.setattr(batching, "BATCH_BYTES", 4_000)
    on_disk = _on_disk(tmp_path)
    due = on_disk[:2] + on_disk[3:]  # the third file turned out unchanged
    expected = [counted(d) for d in prepare_all(due, classifier=SourceClassifier(), key=KEY, workers=0)]
    with HeadStart(on_disk, classifier=SourceClassifier(), key=KEY, workers=1, batches=6) as started:
        workers = list(started.pool)
        got = [counted(d) for d in prepare_all(due, classifier=SourceClassifier(), key=KEY, head_start=started)]
    assert got == expected
    assert all(worker.process.poll() is not None for worker in workers)  # every answer read, then ended


def test_a_head_start_made_with_another_key_is_not_used(tmp_path, monkeypatch) -> None:
    on_disk = _on_disk(tmp_path)
    expected = [counted(d) for d in prepare_all(on_disk, classifier=SourceClassifier(), key=KEY, workers=0)]
    other = RedactionKey(bytes(32))
    with HeadStart(on_disk, classifier=SourceClassifier(), key=other, workers=1) as started:
        workers = list(started.pool)
        got = [counted(d) for d in prepare_all(on_disk, classifier=SourceClassifier(), key=KEY, workers=0,
                                               head_start=started)]
    assert got == expected  # the redaction records are hashed under KEY
    assert all(worker.process.wait(timeout=10) is not None for worker in workers)


def test_an_unused_head_start_stops_its_workers(tmp_path) -> None:
    with HeadStart(_on_disk(tmp_path), classifier=SourceClassifier(), key=KEY, workers=2) as started:
        workers = list(started.pool)
        assert len(workers) == 2
    assert all(worker.process.wait(timeout=10) is not None for worker in workers)


def test_a_worker_killed_during_a_head_start_fails_the_run_instead_of_hanging(tmp_path, monkeypatch) -> None:
    """The head start's thread reads the worker's answers; a worker that dies meanwhile is
    reported by ``prepare_all`` when it takes the answer due, as without a head start."""
    from scopelens.core.index.prepare_worker import WorkerFailed

    monkeypatch.setattr(batching, "BATCH_BYTES", 4_000)
    on_disk = _on_disk(tmp_path)
    with HeadStart(on_disk, classifier=SourceClassifier(), key=KEY, workers=1) as started:
        [worker] = started.pool
        worker.process.kill()
        worker.process.wait(timeout=10)
        time.sleep(0.2)  # the thread sees the pipe closed
        with pytest.raises(WorkerFailed, match="exited"):
            list(prepare_all(on_disk, classifier=SourceClassifier(), key=KEY, head_start=started))


def test_a_worker_is_fed_while_the_caller_is_away_writing(monkeypatch) -> None:
    """While the caller holds a document and does not ask for the next (the indexer writing a
    segment), the worker is handed new batches as it answers, up to the bound on answers held
    here: it does not stand idle after the ``IN_FLIGHT_PER_WORKER`` batches it had."""
    monkeypatch.setattr(batching, "BATCH_BYTES", 3_000)
    monkeypatch.setattr(batching, "HELD_PER_WORKER", 6)
    import scopelens.core.index.prepare as prepare

    monkeypatch.setattr(prepare, "HELD_PER_WORKER", 6)
    given = files() * 4
    expected = [comparable(d) for d in prepare_all(given, classifier=SourceClassifier(), key=KEY, workers=0)]
    submitted: list[int] = []
    real_submit = PreparingWorker.submit
    monkeypatch.setattr(PreparingWorker, "submit", lambda self, batch: submitted.append(1) or real_submit(self, batch))
    documents = prepare_all(given, classifier=SourceClassifier(), key=KEY, workers=1)
    first = next(documents)
    handed_before = len(submitted)
    deadline = time.monotonic() + 20
    while len(submitted) < IN_FLIGHT_PER_WORKER + 6 and time.monotonic() < deadline:
        time.sleep(0.05)  # the caller away; nothing asks for the next document
    assert len(submitted) >= IN_FLIGHT_PER_WORKER + 6 > handed_before
    time.sleep(0.3)
    # held answers bound it until some are taken (one more if the first document's batch was
    # a worker's: its answer was taken)
    assert len(submitted) <= IN_FLIGHT_PER_WORKER + 6 + 1
    assert [comparable(first), *map(comparable, documents)] == expected


def test_a_worker_killed_half_way_is_an_error_not_a_hang(monkeypatch) -> None:
    """The feeder thread reads a dead worker's end of file; the documents' reader gets a
    ``WorkerFailed`` (the indexer's run then fails and is cleaned up), never a wait for ever."""
    from scopelens.core.index.prepare_worker import WorkerFailed

    monkeypatch.setattr(batching, "BATCH_BYTES", 3_000)
    started: list[PreparingWorker] = []
    real_init = PreparingWorker.__init__

    def remember(self: PreparingWorker, *args: object) -> None:
        real_init(self, *args)  # type: ignore[arg-type]
        started.append(self)

    monkeypatch.setattr(PreparingWorker, "__init__", remember)
    documents = prepare_all(files() * 6, classifier=SourceClassifier(), key=KEY, workers=1)
    next(documents)
    [worker] = started
    worker.process.kill()
    began = time.monotonic()
    with pytest.raises(WorkerFailed, match="exited"):
        for _ in documents:
            assert time.monotonic() - began < 30
    assert worker.process.poll() is not None


def test_a_batch_for_a_dead_worker_is_a_worker_failure() -> None:
    from scopelens.core.index.prepare_worker import WorkerFailed

    worker = PreparingWorker(SourceClassifier(), KEY)
    worker.process.kill()
    worker.process.wait()
    with pytest.raises(WorkerFailed, match="exited"):
        for _ in range(100):  # the first writes may still fit in the pipe
            worker.submit(files())
    worker.close(wait=False)
