"""An index run streams, on both backends: it writes a segment per batch of files in short
transactions and is invisible until its final commit. Splitting a run into segments changes
no search result; a run interrupted after some segments (an exception, or SIGKILL) leaves
nothing visible and the next run removes what it wrote; a retrieval during a run does not wait
for it."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func
from sqlmodel import col, select

from scopelens.core.index import indexer
from scopelens.core.index.indexer import index_workspace, live_documents
from scopelens.core.index.run_writer import RunWriter
from scopelens.core.index.scorer import RecallFilter, Scorer
from scopelens.core.index.tokenizer import unique_terms
from scopelens.core.store.store import Store
from scopelens.core.store.tables import IndexChunkRow, IndexDocumentRow, IndexRunRow, IndexSegmentRow
from scopelens.core.store.verify import verify_store
from tests.pipeline.test_seed_seven import FIX_TEST
from tests.support.workspaces import AUTH_FILES, Lab, write

WAIT_S = 120
QUERIES = ("session role admin mock", "handler request module", "createUserMock", "rate limit bucket refill")


def _workspace(version: int) -> dict[str, str]:
    files = dict(AUTH_FILES)
    for n in range(12):
        files[f"src/handlers/module_{n:02d}.py"] = (
            f"def handler_{n}(request):\n    return {{'module': {n}, 'version': {version}}}\n\n\n"
            f"class RateLimit{n}:\n    bucket = {n * version}\n\n    def refill(self):\n        return self.bucket\n"
        )
    return files


def _hits(store: Store, project: str = "alpha") -> dict[str, list[tuple[int, float]]]:
    scorer = Scorer(store)
    try:
        return {
            query: [(hit.chunk_id, round(hit.score, 9)) for hit in scorer.search(
                [(term, 1.0) for term in unique_terms(query)], RecallFilter(project=project), top_k=20
            )]
            for query in QUERIES
        }
    finally:
        scorer.close()


@pytest.fixture
def one_file_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(indexer, "SEGMENT_BYTES", 1)


def test_segments_change_no_search_result(tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same workspace indexed as one segment (SQLite), as a segment per file (the backend
    under test) and as a segment per file merged after each run, then changed and indexed
    again: same chunks, same hits, same scores."""
    whole = Store.open(str(tmp_path / "whole.db"), create=True)
    split = Store.open(store_url, create=True)
    merged = Store.open(str(tmp_path / "merged.db"), create=True)
    try:
        root = tmp_path / "ws"
        for version in (1, 2):
            write(root, _workspace(version))
            index_workspace(whole, root, project="alpha", workers=0)
            with monkeypatch.context() as patch:
                patch.setattr(indexer, "SEGMENT_BYTES", 1)
                index_workspace(split, root, project="alpha", workers=0, compact=False)
                index_workspace(merged, root, project="alpha", workers=0)
            assert split.count(IndexSegmentRow) > 2 * whole.count(IndexSegmentRow)
            assert merged.count(IndexSegmentRow) < split.count(IndexSegmentRow)
            assert _hits(split) == _hits(whole) == _hits(merged)
            assert all(_hits(whole).values())
    finally:
        whole.close()
        split.close()
        merged.close()


class _Interrupted(Exception):
    pass


def _changed_workspace(lab: Lab) -> tuple[Path, dict[str, Any]]:
    """Version 1 indexed, version 2 on disk; what is visible before the next run."""
    root = lab.workspace("ws", _workspace(1))
    lab.index(root, "alpha")
    write(root, _workspace(2))
    return root, _visible(lab.store, root)


def _visible(store: Store, root: Path) -> dict[str, Any]:
    return {
        "live": live_documents(store, project="alpha", branch="", root=str(root.resolve())),
        "hits": _hits(store),
        "runs": store.count(IndexRunRow),
    }


def _check_interrupted_then_cleaned(lab: Lab, root: Path, before: dict[str, Any]) -> None:
    store = lab.store
    unfinished_runs = select(col(IndexRunRow.id)).where(col(IndexRunRow.finished_at).is_(None))
    with store.read() as conn:
        unfinished = conn.execute(unfinished_runs).scalars().all()
        written = conn.execute(
            select(func.count()).select_from(IndexSegmentRow).where(col(IndexSegmentRow.run_id).in_(unfinished))
        ).scalar_one()
    assert len(unfinished) == 1 and written >= 1, "the run should have left segments behind"
    # Nothing of it is visible: the live versions, recall, the index version a retrieval pins.
    assert {key: value for key, value in _visible(store, root).items() if key != "runs"} == {
        key: value for key, value in before.items() if key != "runs"
    }
    assert lab.retriever().retrieve(FIX_TEST, project="alpha").snapshot.pins.index_version == "alpha@-#1"
    assert verify_store(store).clean

    report = index_workspace(store, root, project="alpha", clock=lab.clock)
    assert report.index_version == "alpha@-#2" and len(report.changed) == 12
    # Nothing of the interrupted run is left (its id may be taken again on SQLite): every
    # run finished, every chunk has its document, the segments cover exactly the chunks.
    with store.read() as conn:
        assert conn.execute(unfinished_runs).first() is None
        chunks = conn.execute(select(func.count()).select_from(IndexChunkRow)).scalar_one()
        documented = IndexChunkRow.__table__.join(
            IndexDocumentRow.__table__, col(IndexDocumentRow.id) == col(IndexChunkRow.document_id)
        )
        with_document = conn.execute(select(func.count()).select_from(documented)).scalar_one()
        span = col(IndexSegmentRow.chunk_hi) - col(IndexSegmentRow.chunk_lo)
        covered = conn.execute(select(func.sum(span))).scalar_one()
    assert chunks == with_document == covered
    assert _hits(store) != before["hits"]
    assert "version': 2" in "".join(_texts(store, "src/handlers/module_03.py"))


def _texts(store: Store, path: str) -> Iterator[str]:
    scorer = Scorer(store)
    try:
        hits = scorer.search([(term, 1.0) for term in unique_terms("handler_3 request module")], RecallFilter(project="alpha"))
    finally:
        scorer.close()
    from scopelens.core.index.chunks import fetch_chunks

    for chunk in fetch_chunks(store, [hit.chunk_id for hit in hits]).values():
        if chunk.source_ref.startswith(path):
            yield chunk.text


def test_a_run_that_fails_after_some_segments_leaves_nothing_visible(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch, one_file_segments: None
) -> None:
    lab = Lab(tmp_path, store_url)
    try:
        root, before = _changed_workspace(lab)
        real = RunWriter.write_segment
        written: list[int] = []

        def failing(self: RunWriter, documents: Any) -> None:
            if len(written) == 3:
                raise _Interrupted("disk full")
            real(self, documents)
            written.append(len(documents))

        with monkeypatch.context() as patch:
            patch.setattr(RunWriter, "write_segment", failing)
            with pytest.raises(_Interrupted):
                index_workspace(lab.store, root, project="alpha", clock=lab.clock, workers=0)
        _check_interrupted_then_cleaned(lab, root, before)
    finally:
        lab.close()


def _index_until_killed(url: str, root: str, ready: Any) -> None:
    """A run that reports each segment it wrote, then hangs after the second (to be killed)."""
    indexer.SEGMENT_BYTES = 1
    real = RunWriter.write_segment
    count = [0]

    def reporting(self: RunWriter, documents: Any) -> None:
        real(self, documents)
        count[0] += 1
        if count[0] == 2:
            ready.put("written")
            time.sleep(WAIT_S)

    RunWriter.write_segment = reporting  # type: ignore[method-assign]
    with Store.open(url) as store:
        index_workspace(store, Path(root), project="alpha", workers=0)


def test_a_run_killed_after_some_segments_leaves_nothing_visible(tmp_path: Path, store_url: str) -> None:
    lab = Lab(tmp_path, store_url)
    try:
        root, before = _changed_workspace(lab)
        context = multiprocessing.get_context("spawn")
        ready = context.Queue()
        child = context.Process(target=_index_until_killed, args=(store_url, str(root), ready))
        child.start()
        try:
            assert ready.get(timeout=WAIT_S) == "written"
        finally:
            assert child.pid is not None
            os.kill(child.pid, signal.SIGKILL)
            child.join(timeout=WAIT_S)
        assert child.exitcode == -signal.SIGKILL
        _check_interrupted_then_cleaned(lab, root, before)
    finally:
        lab.close()


def test_a_retrieval_during_an_index_run_does_not_wait_for_it(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch, one_file_segments: None
) -> None:
    """An index run holds the index-run lock between its segments for as long as it takes; a
    retrieval meanwhile (which appends a snapshot) completes within 1 s and pins the version
    that was live."""
    lab = Lab(tmp_path, store_url)
    try:
        root, _before = _changed_workspace(lab)
        retriever = lab.retriever()
        retriever.retrieve(FIX_TEST, project="alpha")  # warm: arrays loaded, modules imported
        paused, resume = threading.Event(), threading.Event()
        real = RunWriter.write_segment

        def pausing(self: RunWriter, documents: Any) -> None:
            real(self, documents)
            if not paused.is_set():
                paused.set()
                assert resume.wait(WAIT_S)

        monkeypatch.setattr(RunWriter, "write_segment", pausing)
        outcome: dict[str, Any] = {}

        def run() -> None:
            outcome["report"] = index_workspace(lab.store, root, project="alpha", clock=lab.clock, workers=0)

        runner = threading.Thread(target=run)
        runner.start()
        try:
            assert paused.wait(WAIT_S)
            started = time.monotonic()
            observation = retriever.retrieve(FIX_TEST, project="alpha")
            took = time.monotonic() - started
        finally:
            resume.set()
            runner.join(WAIT_S)
        assert took < 1.0, f"the retrieval took {took:.2f} s during an index run"
        assert observation.snapshot.pins.index_version == "alpha@-#1"
        assert outcome["report"].index_version == "alpha@-#2"
        assert retriever.retrieve(FIX_TEST, project="alpha").snapshot.pins.index_version == "alpha@-#2"
    finally:
        lab.close()


@pytest.mark.parametrize("workers", [0, 1])
def test_a_file_removed_between_the_diff_and_its_preparation_is_skipped(tmp_path: Path, workers: int) -> None:
    """Files are read again where they are prepared (a worker reads its own): one gone by then
    is reported as skipped, is not written, and leaves the added list."""
    root = tmp_path / "ws"
    write(root, _workspace(1))
    doomed = root / "src/handlers/module_03.py"
    last = sorted(_workspace(1))[-1]

    def progress(done: int, total: int, path: str) -> None:
        if path == last:  # every earlier file has been diffed by now
            doomed.unlink()

    with Store.open(str(tmp_path / "s.db"), create=True) as store:
        report = index_workspace(store, root, project="alpha", workers=workers, progress=progress)
        live = live_documents(store, project="alpha", branch="", root=str(root.resolve()))
    assert [(s.rel_path, s.reason) for s in report.skipped] == [("src/handlers/module_03.py", "unreadable")]
    assert "src/handlers/module_03.py" not in report.added
    assert "src/handlers/module_03.py" not in live
    assert len(live) == len(_workspace(1)) - 1
