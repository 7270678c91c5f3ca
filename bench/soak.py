"""Soak: retrieve, drift and verify from several processes for minutes, on both backends
([9/9] item 7).

``python -m bench.soak --minutes 10`` runs, on SQLite and then on PostgreSQL, two processes
retrieving into shared sessions (and re-indexing a changed file every 50 retrievals, so drift
has something to find), one running drift on the latest snapshots and one running verify, all
at once for ``--minutes``. Each reports its operations, errors (any exception: the target is
0) and its resident memory after a warm-up (a fifth of the run) and at the end (target: end
≤ 1.1× warm-up). CI runs a few seconds of it (``tests/store/test_soak_smoke.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

from bench.concurrency import PROJECT, QUESTIONS, REPO, SPAWN, prepare_store

REINDEX_EVERY = 50
RSS_TARGET = 1.1


@dataclass(frozen=True)
class WorkerFigures:
    role: str
    operations: int
    errors: int
    first_error: str
    seconds: float
    rss_warm_mib: float
    rss_end_mib: float

    @property
    def rss_growth(self) -> float:
        return self.rss_end_mib / self.rss_warm_mib if self.rss_warm_mib else 0.0


def rss_mib() -> float:
    """This process's resident set size (``/proc/self/statm``), in MiB."""
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def worker(role: str, url: str, root: str, session_ids: list[str], seconds: float, number: int, out: Queue) -> None:
    from scopelens.core.audit.drift import compute_drift
    from scopelens.core.contracts import RetrievalIntent
    from scopelens.core.index.indexer import index_workspace
    from scopelens.core.pipeline.retriever import Retriever
    from scopelens.core.store.store import Store
    from scopelens.core.store.verify import verify_store

    operations = errors = 0
    first_error = ""
    warm = 0.0
    started = time.perf_counter()
    with Store.open(url) as store:
        retriever = Retriever(store, workspace_root=Path(root))
        while (elapsed := time.perf_counter() - started) < seconds:
            if not warm and elapsed >= seconds / 5:
                warm = rss_mib()
            try:
                if role == "retrieve":
                    session_id = session_ids[(operations + number) % len(session_ids)]
                    question = QUESTIONS[(operations * 3 + number) % len(QUESTIONS)]
                    retriever.retrieve(RetrievalIntent(question=question), project=PROJECT, session_id=session_id)
                    if number == 0 and operations % REINDEX_EVERY == REINDEX_EVERY - 1:
                        changed = Path(root) / "soak_changing.py"
                        changed.write_text(f"def soak_{operations}():\n    return {operations}\n", encoding="utf-8")
                        index_workspace(store, Path(root), project=PROJECT)
                elif role == "drift":
                    latest = _latest_snapshot(store, session_ids[operations % len(session_ids)])
                    if latest:
                        compute_drift(store, latest)
                    else:
                        time.sleep(0.05)
                elif role == "verify":
                    with Store.open(url, read_only=True) as reader:
                        report = verify_store(reader)
                    if not report.clean:
                        raise AssertionError(f"verify: {report.problems[0]}")
                operations += 1
            except Exception:  # noqa: BLE001 - counted and reported: the target is none
                errors += 1
                first_error = first_error or traceback.format_exc(limit=3)
    out.put(WorkerFigures(role, operations, errors, first_error, time.perf_counter() - started, warm or rss_mib(),
                          rss_mib()))


def _latest_snapshot(store: Any, session_id: str) -> str | None:
    """The id of a session's latest snapshot, read alone (``snapshots_of`` parses every one:
    thousands of documents by the end of a soak, and the drift process's memory with them)."""
    from sqlalchemy import text

    with store.read() as conn:
        return conn.execute(text("SELECT id FROM snapshots WHERE session_id = :s ORDER BY turn DESC LIMIT 1"),
                            {"s": session_id}).scalar()


ROLES = ("retrieve", "retrieve", "drift", "verify")


def run_soak(url: str, root: Path, seconds: float, sessions: int = 2, files: int = 150) -> list[WorkerFigures]:
    session_ids = prepare_store(url, root, sessions, files=files)
    out: Queue = SPAWN.Queue()
    numbers = dict.fromkeys(ROLES, 0)
    processes = []
    for role in ROLES:
        processes.append(SPAWN.Process(target=worker, args=(role, url, str(root), session_ids, seconds, numbers[role], out)))
        numbers[role] += 1
    for process in processes:
        process.start()
    figures = [out.get(timeout=seconds + 600) for _ in processes]
    for process in processes:
        process.join()
    return figures


def format_figures(backend: str, figures: list[WorkerFigures]) -> list[str]:
    lines = [f"{backend}:", "| process | operations | per second | errors | RSS after warm-up | RSS at the end | end / warm-up |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for f in figures:
        lines.append(f"| {f.role} | {f.operations} | {f.operations / f.seconds:.1f} | {f.errors} | "
                     f"{f.rss_warm_mib:.0f} MiB | {f.rss_end_mib:.0f} MiB | {f.rss_growth:.2f}x |")
    for f in figures:
        if f.first_error:
            lines.append(f"first error of {f.role}:\n{f.first_error}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--port", type=int, default=55436)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from tests.support.postgres import PostgresServer

    failed = False
    with tempfile.TemporaryDirectory() as tmp, PostgresServer(port=args.port) as server:
        for backend in ("sqlite", "postgresql") if args.backend == "both" else (args.backend,):
            url = f"sqlite:///{tmp}/soak.db" if backend == "sqlite" else server.create_database("soak")
            figures = run_soak(url, Path(tmp) / f"ws-{backend}", args.minutes * 60)
            print("\n".join(format_figures(backend, figures)), flush=True)
            failed |= any(f.errors or f.rss_growth > RSS_TARGET for f in figures)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
