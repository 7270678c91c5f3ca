"""Two index runs at once on one store, on both backends: of the same project (the one that
runs second sees what the first committed and records no change), and of two projects (their
chunk ids do not collide). The runs start together (a barrier); the index-run lock makes one
wait for the other."""

from __future__ import annotations

import hashlib
import multiprocessing
import queue
import threading
import traceback
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func
from sqlmodel import col, select

from scopelens.core.clock import SteppingClock
from scopelens.core.errors import IndexChangedError
from scopelens.core.index.chunks import fetch_chunks
from scopelens.core.index.indexer import IndexReport, index_workspace, live_documents, prepare_document, write_run
from scopelens.core.index.scorer import RecallFilter, Scorer
from scopelens.core.index.sources import SourceClassifier
from scopelens.core.index.tokenizer import tokenize
from scopelens.core.store.store import Store
from scopelens.core.store.tables import IndexChunkRow, IndexDocumentRow, IndexRunRow
from scopelens.core.store.verify import verify_store
from tests.support.workspaces import write

FILES = 24
WAIT_S = 120
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _files(tag: str) -> dict[str, str]:
    return {
        f"src/{tag}/module_{n:02d}.py": (
            f"def handler_{n}(request):\n    return {{'module': {n}, 'tag': '{tag}'}}\n\n\n"
            f"class Widget{n}:\n    size = {n}\n"
        )
        for n in range(FILES)
    }


def _index_run(url: str, root: str, project: str, barrier: Any, results: Any) -> None:
    """One run, started when the other one starts."""
    try:
        with Store.open(url) as store:
            barrier.wait(timeout=WAIT_S)
            report = index_workspace(store, Path(root), project=project)
    except BaseException:
        results.put((project, "error", traceback.format_exc()))
        raise
    results.put(
        (project, "ok", (len(report.added), len(report.changed), len(report.removed), report.unchanged, report.chunks))
    )


def _run_both(url: str, runs: list[tuple[Path, str]]) -> list[tuple[str, str, Any]]:
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(len(runs)), context.Queue()
    workers = [
        context.Process(target=_index_run, args=(url, str(root), project, barrier, results)) for root, project in runs
    ]
    for worker in workers:
        worker.start()
    outcomes = []
    try:
        for _ in workers:
            outcomes.append(results.get(timeout=WAIT_S))
    except queue.Empty:
        pass
    for worker in workers:
        worker.join(timeout=WAIT_S)
    errors = [detail for _project, status, detail in outcomes if status == "error"]
    assert errors == [], "\n".join(errors)
    assert [w.exitcode for w in workers] == [0] * len(workers)
    return sorted(outcomes)


def _check_index(store: Store, expected: dict[tuple[str, str], set[str]]) -> None:
    """Runs own disjoint, ascending ranges of chunk ids holding exactly their chunks; each
    (project, root) has one live version per file of its workspace."""
    with store.read() as conn:
        runs = conn.execute(
            select(col(IndexRunRow.id), col(IndexRunRow.chunk_lo), col(IndexRunRow.chunk_hi)).order_by(
                col(IndexRunRow.id)
            )
        ).all()
        chunks = conn.execute(
            select(col(IndexChunkRow.id), col(IndexChunkRow.run_id)).order_by(col(IndexChunkRow.id))
        ).all()
        live = conn.execute(
            select(col(IndexDocumentRow.project), col(IndexDocumentRow.root), col(IndexDocumentRow.path)).where(
                col(IndexDocumentRow.valid_to).is_(None)
            )
        ).all()
        documents = int(conn.execute(select(func.count()).select_from(IndexDocumentRow)).scalar_one())
    ids = [chunk_id for chunk_id, _run in chunks]
    assert len(ids) == len(set(ids))
    next_lo = 1
    for run_id, lo, hi in runs:
        assert lo == next_lo, f"run {run_id}: chunk ids from {lo}, expected {next_lo}"
        assert [chunk_id for chunk_id, run in chunks if run == run_id] == list(range(lo, hi))
        next_lo = hi
    assert next_lo == len(ids) + 1
    found: dict[tuple[str, str], list[str]] = {}
    for project, root, path in live:
        found.setdefault((project, root), []).append(path)
    assert {key: sorted(paths) for key, paths in found.items()} == {key: sorted(paths) for key, paths in expected.items()}
    assert documents == sum(len(paths) for paths in expected.values())  # nothing written twice


def _check_recall(store: Store, project: str, tag: str) -> None:
    scorer = Scorer(store)
    hits = scorer.search([(t, 1.0) for t in tokenize("handler_7 request module")], RecallFilter(project=project))
    refs = [chunk.source_ref for chunk in fetch_chunks(store, [h.chunk_id for h in hits]).values()]
    assert refs and all(ref.startswith(f"src/{tag}/") for ref in refs)
    assert len(refs) == len(set(refs))
    scorer.close()


@pytest.mark.parametrize("scenario", ["same-project", "two-projects"])
def test_two_index_runs_at_once(store_url, tmp_path, scenario):
    with Store.open(store_url, create=True):
        pass
    if scenario == "same-project":
        root = tmp_path / "ws"
        write(root, _files("alpha"))
        runs = [(root, "alpha"), (root, "alpha")]
    else:
        runs = []
        for project in ("alpha", "beta"):
            write(tmp_path / project, _files(project))
            runs.append((tmp_path / project, project))

    outcomes = _run_both(store_url, runs)

    counts = [detail for _project, _status, detail in outcomes]
    if scenario == "same-project":
        # One run added every file; the other, serialised behind it, found them all unchanged.
        chunks = counts[1][4]
        assert chunks > 0
        assert counts == [(0, 0, 0, FILES, 0), (FILES, 0, 0, 0, chunks)]
    else:
        assert [c[:4] for c in counts] == [(FILES, 0, 0, 0)] * 2
    expected = {(project, str(root.resolve())): set(_files(project)) for root, project in runs}
    with Store.open(store_url, read_only=True) as store:
        _check_index(store, expected)
        for _root, project in set(runs):
            _check_recall(store, project, project)
        report = verify_store(store)
        with store.read() as conn:
            versions = conn.execute(select(col(IndexRunRow.project), col(IndexRunRow.version))).all()
    assert report.clean, report.problems
    # One version per project: the run that found nothing to write made none.
    assert sorted((project, version) for project, version in versions) == sorted({(p, 1) for _root, p in runs})

    # A further run of an unchanged workspace records nothing new.
    with Store.open(store_url) as store:
        again = index_workspace(store, runs[0][0], project=runs[0][1])
    assert (again.added, again.changed, again.removed, again.unchanged) == ([], [], [], FILES)


def test_a_run_that_waited_diffs_against_what_the_other_run_wrote(store_url, tmp_path):
    """Run W starts while run B reads its files; W waits for B's index-run lock, then diffs
    against B's versions: W records only what differs from what B wrote."""
    clock = SteppingClock(T0, timedelta(minutes=1))
    root = tmp_path / "ws"
    write(root, {"a.py": "A = 1\n", "gone.py": "G = 1\n", "z.py": "Z = 1\n"})
    with Store.open(store_url, create=True) as store:
        index_workspace(store, root, project="alpha", clock=clock)
    (root / "gone.py").unlink()
    write(root, {"a.py": "A = 2\n"})
    outcome: dict[str, Any] = {}

    def waiting_run() -> None:
        with Store.open(store_url) as other:
            outcome["w"] = index_workspace(other, root, project="alpha", clock=clock)

    waiter = threading.Thread(target=waiting_run)

    def meanwhile(done: int, total: int, _path: str) -> None:
        if done == total:  # B has read every file: W starts, and must wait for B
            waiter.start()
            waiter.join(timeout=1.0)
            assert waiter.is_alive(), "the second run did not wait for the first"
            write(root, {"new.py": "N = 1\n"})  # after B's walk: only W sees it

    with Store.open(store_url) as store:
        first = index_workspace(store, root, project="alpha", clock=clock, progress=meanwhile)
    waiter.join(timeout=WAIT_S)
    second = outcome["w"]
    assert (first.added, first.changed, first.removed, first.unchanged) == ([], ["a.py"], ["gone.py"], 1)
    assert (second.added, second.changed, second.removed, second.unchanged) == (["new.py"], [], [], 2)
    assert (first.version, second.version) == (2, 3)

    with Store.open(store_url, read_only=True) as store, store.read() as conn:
        rows = conn.execute(
            select(
                col(IndexDocumentRow.path),
                col(IndexDocumentRow.content_hash),
                col(IndexDocumentRow.valid_from),
                col(IndexDocumentRow.valid_to),
            ).order_by(col(IndexDocumentRow.id))
        ).all()
    live = {path: digest for path, digest, _from, to in rows if to is None}
    assert live == {path: hashlib.sha256((root / path).read_bytes()).hexdigest() for path in ("a.py", "new.py", "z.py")}
    # Versions are valid for ordered, non-empty spans; nothing was written twice.
    assert all(to is None or to > valid_from for _path, _digest, valid_from, to in rows)
    assert len(rows) == 5  # a.py twice, gone.py, z.py, new.py


def test_write_run_refuses_documents_prepared_against_a_stale_look(store_url, tmp_path):
    root = tmp_path / "ws"
    write(root, {"a.py": "A = 1\n"})
    with Store.open(store_url, create=True) as store:
        stale = live_documents(store, project="alpha", branch="", root=str(root.resolve()))
        index_workspace(store, root, project="alpha")
        document = prepare_document("a.py", b"A = 1\n", classifier=SourceClassifier(), replaces=None, key=store.redaction_key)
        report = IndexReport(run_id=0, project="alpha", branch="", root=str(root.resolve()), added=["a.py"])
        with pytest.raises(IndexChangedError):
            write_run(store, report, [document], stale, T0)
        assert store.count(IndexRunRow) == 1 and store.count(IndexDocumentRow) == 1
