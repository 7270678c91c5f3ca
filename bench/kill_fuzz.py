"""Crash safety: processes killed inside the store's writes ([9/9] item 2).

Two kinds of kill, on SQLite and PostgreSQL:

* **At each fault-injection point** (``core/store/faults.py``): a forked process runs one
  workload (a retrieval into a new session or a shared one, an event append, an import, an
  index run) with ``SCOPELENS_KILL_AT`` naming a point inside its write transaction, and dies
  there by SIGKILL. Then the store must open and verify clean, hold exactly what it held before
  (the killed transaction left nothing; an index run left no visible version), and the same
  workload, run again, must succeed.
* **At random moments**: a forked process loops over the workloads and says "ready" once its
  store is open; the parent waits a random time (seeded) and SIGKILLs it. Then: verify clean,
  every snapshot and event the process had reported committed is in the store (0 lost), and
  the next index run cleans up an interrupted one.

``python -m bench.kill_fuzz --kills 50`` runs every point and ``--kills`` random kills on each
backend; CI runs every point on SQLite, a few on PostgreSQL, and a few random kills
(``tests/store/test_crash_safety.py``).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROJECT = "crash"
IMPORT_FILE = REPO / "tests" / "fixtures" / "sessions" / "claude-code" / "sample_session.jsonl"
FORK = multiprocessing.get_context("fork")
FILES = {
    f"src/module_{i}.py": "".join(
        f"def handler_{i}_{j}(request, session):\n    \"\"\"Handle request {j} of module {i}.\"\"\"\n"
        f"    return session.lookup(request.user_id, {j})\n\n"
        for j in range(12)
    )
    for i in range(12)
}


@dataclass(frozen=True)
class Lab:
    """A store with an indexed workspace and one shared session."""

    url: str
    root: Path
    session_id: str


def prepare(url: str, root: Path) -> Lab:
    from scopelens.core.index.indexer import index_workspace
    from scopelens.core.store.store import Store
    from scopelens.core.vocab import EventType

    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    with Store.open(url, create=True) as store:
        index_workspace(store, root, project=PROJECT)
        session = store.create_session(project=PROJECT, session_id="s-shared")
        store.append_event(session.id, EventType.USER_MESSAGE, {"text": "where are requests handled?"})
    return Lab(url, root, session.id)


# ---------------------------------------------------------------------------- workloads
# Each runs one write against an open store and returns what it committed (ids), for the
# random-kill loop's "0 lost" check.


def retrieve_new(store: Any, lab: Lab, n: int) -> list[str]:
    observation = _retriever(store, lab).retrieve(_intent(n), project=PROJECT)
    return [f"snapshot {observation.snapshot_id}", f"session {observation.session_id}"]


def retrieve_shared(store: Any, lab: Lab, n: int) -> list[str]:
    observation = _retriever(store, lab).retrieve(_intent(n), project=PROJECT, session_id=lab.session_id)
    return [f"snapshot {observation.snapshot_id}"]


def append(store: Any, lab: Lab, n: int) -> list[str]:
    from scopelens.core.vocab import EventType

    event = store.append_event(lab.session_id, EventType.USER_MESSAGE, {"text": f"message {n}"})
    return [f"event {event.session_id}#{event.seq}"]


def import_session(store: Any, lab: Lab, n: int) -> list[str]:
    from scopelens.core.importers.store_import import import_paths

    report = import_paths(store, [IMPORT_FILE], project=f"{PROJECT}-import-{n}")
    return [f"session {outcome.session_id}" for outcome in report.outcomes if outcome.session_id]


def index(store: Any, lab: Lab, n: int) -> list[str]:
    from scopelens.core.index.indexer import index_workspace

    (lab.root / "src" / "changing.py").write_text(f"def changed_{n}():\n    return {n}\n", encoding="utf-8")
    report = index_workspace(store, lab.root, project=PROJECT)
    return [f"index run {report.run_id}"] if report.run_id else []


WORKLOADS: dict[str, Callable[[Any, Lab, int], list[str]]] = {
    "retrieve-new": retrieve_new,
    "retrieve-shared": retrieve_shared,
    "append": append,
    "import": import_session,
    "index": index,
}
KILLS_AT = {
    # point -> the workloads that reach it inside their write transaction
    "write.begun": ("retrieve-shared", "import"),
    "write.before_commit": ("retrieve-new", "append", "import"),
    "session.row_written": ("retrieve-new",),
    "snapshot.content_written": ("retrieve-new", "retrieve-shared"),
    "snapshot.row_written": ("retrieve-shared",),
    "append.heads_locked": ("retrieve-new", "append"),
    "append.linked": ("retrieve-shared", "append"),
    "batch.rows_written": ("import",),
    "index.segment_committed": ("index",),
    "index.before_final_commit": ("index",),
}

SQLITE_ONLY = {("append.heads_locked", "append"), ("append.linked", "append")}
"""On PostgreSQL an event appended alone is one statement (``core/store/pg_append.py``): there is
no point inside it to die at; a snapshot's event still goes through both points."""


def _retriever(store: Any, lab: Lab) -> Any:
    from scopelens.core.pipeline.retriever import Retriever

    return Retriever(store, workspace_root=lab.root)


def _intent(n: int) -> Any:
    from scopelens.core.contracts import RetrievalIntent

    return RetrievalIntent(question=("which handler looks up the user", "module 3 request", "session lookup")[n % 3])


# ---------------------------------------------------------------------------- state and checks


def state(url: str) -> dict[str, Any]:
    """What a reader sees: sessions with their heads, snapshots, the live index version."""
    from sqlalchemy import text

    from scopelens.core.store.store import Store

    with Store.open(url, read_only=True) as store, store.read() as conn:
        def rows(sql: str) -> list[tuple[Any, ...]]:
            return [tuple(r) for r in conn.execute(text(sql))]

        return {
            "store head": rows("SELECT store_seq, head_hash FROM store_head"),
            "session heads": rows("SELECT session_id, head_seq, head_hash FROM session_heads ORDER BY session_id"),
            "snapshots": rows("SELECT id, hash FROM snapshots ORDER BY id"),
            "snapshot rows": rows("SELECT count(*) FROM snapshot_rows"),
            "live index runs": rows("SELECT id FROM index_runs WHERE finished_at IS NOT NULL ORDER BY id"),
            "memories": rows("SELECT count(*) FROM memory_versions"),
        }


def verify_problems(url: str) -> list[str]:
    from scopelens.core.store.store import Store
    from scopelens.core.store.verify import verify_store

    with Store.open(url) as store:  # opening for writing, as the next command would
        report = verify_store(store)
    return [f"{p.kind}: {p.record}: {p.detail}" for p in report.problems]


def present(url: str, committed: list[str]) -> list[str]:
    """The reported ids that are not in the store."""
    from scopelens.core.errors import UnknownIdError
    from scopelens.core.store.store import Store

    missing = []
    with Store.open(url, read_only=True) as store:
        runs = {r[0] for r in state(url)["live index runs"]}
        for item in committed:
            kind, _, ident = item.rpartition(" ")
            try:
                if kind == "snapshot":
                    store.get_snapshot(ident)
                elif kind == "session":
                    store.get_session(ident)
                elif kind == "event":
                    session_id, _, seq = ident.rpartition("#")
                    if len(store.events(session_id)) <= int(seq):
                        missing.append(item)
                elif kind == "index run" and int(ident) not in runs:
                    missing.append(item)
            except UnknownIdError:
                missing.append(item)
    return missing


# ---------------------------------------------------------------------------- killing


def _run_once(lab: Lab, workload: str, point: str) -> None:
    from scopelens.core.store.faults import KILL_AT_ENV
    from scopelens.core.store.store import Store

    os.environ[KILL_AT_ENV] = point
    with Store.open(lab.url) as store:
        WORKLOADS[workload](store, lab, 0)
    os._exit(0)  # the point was not reached


def kill_at(lab: Lab, workload: str, point: str) -> int | None:
    """Run ``workload`` in a forked process set to die at ``point``; its exit code."""
    process = FORK.Process(target=_run_once, args=(lab, workload, point))
    process.start()
    process.join(120)
    return process.exitcode


def _loop(lab: Lab, ready: Connection, report: Connection, seed: int) -> None:
    from scopelens.core.store.store import Store

    chooser = random.Random(seed)
    names = sorted(WORKLOADS)
    with Store.open(lab.url) as store:
        ready.send("ready")
        n = 0
        while True:
            for item in WORKLOADS[chooser.choice(names)](store, lab, n):
                report.send(item)  # only once committed
            n += 1


def kill_randomly(lab: Lab, rng: random.Random, *, max_delay: float = 1.5) -> tuple[list[str], float]:
    """Start the loop, wait for its "ready", kill it after a random delay; what it had
    reported committed, and the delay."""
    ready_out, ready_in = FORK.Pipe(duplex=False)
    report_out, report_in = FORK.Pipe(duplex=False)
    process = FORK.Process(target=_loop, args=(lab, ready_in, report_in, rng.randrange(1 << 30)))
    process.start()
    if not ready_out.poll(60):
        process.kill()
        raise RuntimeError("the killed process never said it was ready")
    ready_out.recv()
    delay = rng.uniform(0.0, max_delay)
    time.sleep(delay)
    os.kill(process.pid or 0, signal.SIGKILL)
    process.join(60)
    committed = []
    while report_out.poll(0):
        committed.append(report_out.recv())
    return committed, delay


def point_matrix(backend: str = "sqlite", *, subset: bool = False) -> list[tuple[str, str]]:
    """Every (point, workload) pair the backend reaches, or the first of each point's."""
    pairs = [(point, w) for point, workloads in KILLS_AT.items() for w in workloads
             if backend == "sqlite" or (point, w) not in SQLITE_ONLY]
    if not subset:
        return pairs
    first: dict[str, str] = {}
    for point, workload in pairs:
        first.setdefault(point, workload)
    return list(first.items())


def check_point(lab: Lab, point: str, workload: str) -> list[str]:
    """Kill ``workload`` at ``point``; the broken promises (empty: all held)."""
    before = state(lab.url)
    code = kill_at(lab, workload, point)
    if code != -signal.SIGKILL:
        return [f"{workload} at {point}: exit code {code}, not killed (the point was not reached)"]
    problems = [f"{workload} at {point}: after the kill: {p}" for p in verify_problems(lab.url)]
    after = state(lab.url)
    problems += [f"{workload} at {point}: {key} changed by a killed transaction"
                 for key in before if before[key] != after[key]]
    from scopelens.core.store.store import Store

    with Store.open(lab.url) as store:  # the same work again: the store still takes writes
        WORKLOADS[workload](store, lab, 1)
    problems += [f"{workload} at {point}: after a rerun: {p}" for p in verify_problems(lab.url)]
    return problems


def check_random(lab: Lab, rng: random.Random) -> tuple[list[str], int, float]:
    committed, delay = kill_randomly(lab, rng)
    problems = [f"random kill after {delay:.2f} s: {p}" for p in verify_problems(lab.url)]
    problems += [f"random kill after {delay:.2f} s: lost {item}" for item in present(lab.url, committed)]
    return problems, len(committed), delay


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=50, help="random kills per backend")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--port", type=int, default=55435)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from tests.support.postgres import PostgresServer

    failures = 0
    with tempfile.TemporaryDirectory() as tmp, PostgresServer(port=args.port) as server:
        for backend in ("sqlite", "postgresql") if args.backend == "both" else (args.backend,):
            url = f"sqlite:///{tmp}/{backend}.db" if backend == "sqlite" else server.create_database("kills")
            lab = prepare(url, Path(tmp) / f"ws-{backend}")
            started = time.perf_counter()
            pairs = point_matrix(backend)
            problems = [p for point, workload in pairs for p in check_point(lab, point, workload)]
            print(f"{backend}: {len(pairs)} kills at {len(KILLS_AT)} fault-injection points: "
                  f"{len(problems)} problem(s) ({time.perf_counter() - started:.0f} s)", flush=True)
            rng = random.Random(args.seed)
            started, committed = time.perf_counter(), 0
            random_problems = []
            for _ in range(args.kills):
                found, count, _delay = check_random(lab, rng)
                random_problems += found
                committed += count
            print(f"{backend}: {args.kills} random kills (seed {args.seed}), {committed} writes reported committed "
                  f"before them: {len(random_problems)} problem(s) ({time.perf_counter() - started:.0f} s)", flush=True)
            for problem in problems + random_problems:
                print(f"  PROBLEM: {problem}")
            failures += len(problems) + len(random_problems)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
