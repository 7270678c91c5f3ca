"""Concurrent retrievals into shared sessions, on SQLite and PostgreSQL ([9/9] item 1).

``python -m bench.concurrency`` runs two things on each backend, in one run:

* **Volume**: ``--processes`` (8) processes × ``--retrievals`` (250) retrievals into
  ``--sessions`` (4) shared sessions, while one more process runs ``verify`` in a loop. Then:
  every returned snapshot id is in the store (0 lost), no two snapshots of a session share a
  turn and each session's turns rise in the order its snapshots were appended (0 duplicated),
  every chain intact and ``verify`` clean (also each time it ran during the writes).
* **Scaling**: for 1, 4 and 8 writers, each retrieving (or, with ``--bare``, appending bare
  events) for ``--seconds``: appends per second, and on PostgreSQL the share of the writers'
  time spent waiting for a lock (sampled from ``pg_stat_activity`` every 5 ms: backends of the
  bench's database whose ``wait_event_type`` is ``Lock``, over writers × samples).

The same functions run a small version in CI (``tests/store/test_concurrent_retrievals.py``).
PostgreSQL is a throw-away cluster from the machine's ``initdb``/``pg_ctl`` (as the tests'),
with their settings (no fsync).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from multiprocessing.synchronize import Event as EventFlag
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROJECT = "conc"
QUESTIONS = (
    "how does json decode a string with escapes",
    "where is the default encoding of a text file chosen",
    "what raises when a zip archive is truncated",
    "how are abstract base classes registered",
    "parse command line arguments with subcommands",
    "base64 decoding of padded input",
    "how does the argument parser print usage errors",
    "where are calendar month names computed",
)
SPAWN = multiprocessing.get_context("spawn")
START_TIMEOUT_S = 300.0
"""How long writers wait for each other to be ready (imports on two busy cores)."""
VERIFY_PAUSE_S = 0.5
"""Between two verify runs during the writes: verify reads the whole store, and on two cores a
verifier that never paused would take a core from the writers."""


@dataclass(frozen=True)
class Returned:
    """What one retrieval returned to its caller."""

    snapshot_id: str
    session_id: str
    turn: int


@dataclass
class VolumeResult:
    """The volume run's counts; ``problems`` lists every broken promise (empty: all held)."""

    processes: int
    retrievals_each: int
    returned: int
    stored: int
    lost: int
    duplicated_turns: int
    out_of_order: int
    verify_runs_during: int
    verify_clean_after: bool
    seconds: float
    problems: list[str] = field(default_factory=list)


def prepare_store(url: str, root: Path, sessions: int, *, files: int = 150) -> list[str]:
    """Index ``files`` standard-library files under ``root`` into a new store; the shared
    sessions' ids."""
    from bench.retrieve_latency import build_workspace
    from scopelens.core.index.indexer import index_workspace
    from scopelens.core.store.store import Store

    build_workspace(root, quick=False, limit=files)
    with Store.open(url, create=True) as store:
        index_workspace(store, root, project=PROJECT)
        return [store.create_session(project=PROJECT, session_id=f"s-shared-{i}").id for i in range(sessions)]


def retrieval_worker(url: str, root: str, worker: int, session_ids: list[str], count: int, seconds: float,
                     start: Barrier, results: Queue) -> None:
    """Retrieve ``count`` times (or for ``seconds`` when ``count`` is 0), rotating over the
    shared sessions; put the list of what was returned (or a traceback) on ``results``."""
    try:
        from scopelens.core.contracts import RetrievalIntent
        from scopelens.core.pipeline.retriever import Retriever
        from scopelens.core.store.store import Store

        returned: list[Returned] = []
        with Store.open(url) as store:
            retriever = Retriever(store, workspace_root=Path(root))
            start.wait(timeout=START_TIMEOUT_S)
            began = time.perf_counter()
            n = 0
            while (n < count) if count else (time.perf_counter() - began < seconds):
                session_id = session_ids[(worker + n) % len(session_ids)]
                intent = RetrievalIntent(question=QUESTIONS[(worker * 3 + n) % len(QUESTIONS)])
                observation = retriever.retrieve(intent, project=PROJECT, session_id=session_id)
                returned.append(Returned(observation.snapshot_id, session_id, observation.snapshot.turn))
                n += 1
            results.put((returned, time.perf_counter() - began))
    except BaseException:  # noqa: BLE001  # the parent reports it: a worker must not die silently
        start.abort()  # nobody waits for a writer that will not come
        results.put(traceback.format_exc())


def append_worker(url: str, root: str, worker: int, session_ids: list[str], count: int, seconds: float,
                  start: Barrier, results: Queue) -> None:
    """``retrieval_worker`` with bare ``user.message`` appends: the store's write path alone."""
    try:
        from scopelens.core.store.store import Store
        from scopelens.core.vocab import EventType

        with Store.open(url) as store:
            start.wait(timeout=START_TIMEOUT_S)
            began = time.perf_counter()
            n = 0
            while (n < count) if count else (time.perf_counter() - began < seconds):
                store.append_event(session_ids[(worker + n) % len(session_ids)], EventType.USER_MESSAGE,
                                   {"text": f"writer {worker} message {n}"})
                n += 1
            results.put(([None] * n, time.perf_counter() - began))
    except BaseException:  # noqa: BLE001  # reported by the parent
        start.abort()
        results.put(traceback.format_exc())


def round_trip_worker(url: str, root: str, worker: int, session_ids: list[str], count: int, seconds: float,
                      start: Barrier, results: Queue) -> None:
    """The named baseline of the scaling runs: ``SELECT 1`` from a bare psycopg connection, no
    scopelens, no lock. How far this machine lets that many clients' round trips scale at all."""
    try:
        import psycopg

        from tests.support.postgres import libpq_url

        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            start.wait(timeout=START_TIMEOUT_S)
            began = time.perf_counter()
            n = 0
            while (n < count) if count else (time.perf_counter() - began < seconds):
                conn.execute("SELECT 1").fetchone()
                n += 1
            results.put(([None] * n, time.perf_counter() - began))
    except BaseException:  # noqa: BLE001  # reported by the parent
        start.abort()
        results.put(traceback.format_exc())


def verify_loop(url: str, stop: EventFlag, results: Queue, pause: float = VERIFY_PAUSE_S) -> None:
    """Run ``verify`` until ``stop`` is set; put (runs, problems seen)."""
    try:
        from scopelens.core.store.store import Store
        from scopelens.core.store.verify import verify_store

        runs, problems = 0, []
        while not stop.is_set():
            with Store.open(url, read_only=True) as store:
                report = verify_store(store)
            runs += 1
            problems += [f"verify during the writes: {p}" for p in report.problems]
            stop.wait(pause)
        results.put((runs, problems))
    except BaseException:  # noqa: BLE001  # reported by the parent
        results.put((0, [traceback.format_exc()]))


def run_writers(target: Any, url: str, root: Path, session_ids: list[str], processes: int, *, count: int = 0,
                seconds: float = 0.0, on_start: Callable[[], None] | None = None) -> tuple[list[Any], float]:
    """Start ``processes`` writers together, once every one has imported and opened the store
    (a barrier: a writer still importing would take CPU from the measured ones); what each
    returned, and the longest's time. ``on_start`` runs as they start."""
    results: Queue = SPAWN.Queue()
    start = SPAWN.Barrier(processes + 1)
    workers = [
        SPAWN.Process(target=target, args=(url, str(root), w, session_ids, count, seconds, start, results))
        for w in range(processes)
    ]
    for worker in workers:
        worker.start()
    with contextlib.suppress(threading.BrokenBarrierError):  # a writer failed: its traceback is queued
        start.wait(timeout=START_TIMEOUT_S)
    if on_start is not None:
        on_start()
    answers = [results.get() for _ in workers]
    for worker in workers:
        worker.join()
    failures = [a for a in answers if isinstance(a, str)]
    if failures:
        raise RuntimeError(f"a writer failed:\n{failures[0]}")
    return [item for items, _ in answers for item in items], max(elapsed for _, elapsed in answers)


def run_volume(url: str, root: Path, session_ids: list[str], processes: int, retrievals: int,
               verify_pause: float = VERIFY_PAUSE_S) -> VolumeResult:
    """The volume run: writers and a verifier together, then every check."""
    from scopelens.core.store.store import Store
    from scopelens.core.store.verify import verify_store

    stop, verified = SPAWN.Event(), SPAWN.Queue()
    verifier = SPAWN.Process(target=verify_loop, args=(url, stop, verified, verify_pause))
    verifier.start()
    began = time.perf_counter()
    try:
        returned, _ = run_writers(retrieval_worker, url, root, session_ids, processes, count=retrievals)
    finally:
        stop.set()
    seconds = time.perf_counter() - began
    verify_runs, problems = verified.get()
    verifier.join()
    with Store.open(url, read_only=True) as store:
        stored = {s.snapshot_id: s for sid in session_ids for s in _snapshots_in_append_order(store, sid)}
        report = verify_store(store)
        problems += [f"verify after the writes: {p}" for p in report.problems]
    lost = [r for r in returned if r.snapshot_id not in stored]
    problems += [f"lost: snapshot {r.snapshot_id} was returned but is not stored" for r in lost[:5]]
    duplicated = out_of_order = 0
    by_session: dict[str, list[Any]] = defaultdict(list)
    for snapshot in stored.values():
        by_session[snapshot.session_id].append(snapshot)
    for sid, snapshots in by_session.items():
        turns = [s.turn for s in snapshots]  # in append order
        duplicated += len(turns) - len(set(turns))
        out_of_order += sum(1 for a, b in pairwise(turns) if b <= a)
        if len(turns) != len(set(turns)):
            problems.append(f"session {sid}: {len(turns) - len(set(turns))} snapshot(s) share a turn")
    mismatched = [r for r in returned if r.snapshot_id in stored and stored[r.snapshot_id].turn != r.turn]
    problems += [f"snapshot {r.snapshot_id}: returned turn {r.turn}, stored {stored[r.snapshot_id].turn}"
                 for r in mismatched[:5]]
    if len(stored) != len(returned):
        problems.append(f"{len(returned)} retrievals returned, {len(stored)} snapshots stored")
    if out_of_order:
        problems.append(f"{out_of_order} snapshot(s) appended after one with a later turn")
    return VolumeResult(processes, retrievals, len(returned), len(stored), len(lost), duplicated, out_of_order,
                        verify_runs, report.clean, seconds, problems)


@dataclass(frozen=True)
class _StoredTurn:
    snapshot_id: str
    session_id: str
    turn: int


def _snapshots_in_append_order(store: Any, session_id: str) -> list[_StoredTurn]:
    """A session's snapshots as its ``retrieval.snapshot_created`` events list them (verify
    checks that each event's turn is its snapshot's)."""
    from scopelens.core.vocab import EventType

    return [
        _StoredTurn(e.payload["snapshot_id"], session_id, e.turn)
        for e in store.events(session_id)
        if e.type == EventType.RETRIEVAL_SNAPSHOT_CREATED
    ]


def lock_wait_sampler(conninfo: dict[str, str], database: str, stop: threading.Event, out: list[tuple[int, int]]) -> None:
    """Count, every 5 ms, the bench database's client backends waiting for a lock."""
    import psycopg

    query = ("SELECT count(*) FILTER (WHERE wait_event_type = 'Lock') FROM pg_stat_activity"
             " WHERE datname = %s AND backend_type = 'client backend' AND pid <> pg_backend_pid()")
    waiting = samples = 0
    with psycopg.connect(**conninfo, autocommit=True) as conn:
        while not stop.is_set():
            row = conn.execute(query, (database,)).fetchone()
            waiting += int(row[0]) if row else 0
            samples += 1
            time.sleep(0.005)
    out.append((waiting, samples))


def run_scaling(url: str, root: Path, session_ids: list[str], writers: list[int], seconds: float, *, target: Any,
                sample: tuple[dict[str, str], str] | None, rounds: int = 1) -> list[dict[str, Any]]:
    """Appends per second (and lock-wait share on PostgreSQL) for each number of writers
    running ``target`` (one of ``SCALING``'s workers).

    With ``rounds`` > 1 the writer counts run interleaved (1, 4, 8, 1, 4, 8, ...) and each
    figure is the median of its rounds: on a shared machine whose speed drifts by minutes,
    counts measured one after the other compare the machine's moods, not the store."""
    runs: dict[int, list[tuple[int, float, float | None]]] = {count: [] for count in writers}
    for _ in range(rounds):
        for count in writers:
            stop = threading.Event()
            out: list[tuple[int, int]] = []
            sampler = None
            if sample is not None:
                sampler = threading.Thread(target=lock_wait_sampler, args=(*sample, stop, out))
            try:
                done, elapsed = run_writers(target, url, root, session_ids, count, seconds=seconds,
                                            on_start=sampler.start if sampler is not None else None)
            finally:
                stop.set()
                if sampler is not None and sampler.is_alive():
                    sampler.join()
            share = (out[0][0] / (out[0][1] * count)) if out and out[0][1] else None
            runs[count].append((len(done), elapsed, share))
    rows = []
    for count, measured in runs.items():
        rates = [done / elapsed for done, elapsed, _ in measured]
        shares = [share for _, _, share in measured if share is not None]
        rows.append({"writers": count, "appends": sum(done for done, _, _ in measured), "per_s": statistics.median(rates),
                     "rates": rates, "lock_wait_share": statistics.median(shares) if shares else None})
    return rows


def _format_scaling(backend: str, what: str, rows: list[dict[str, Any]]) -> list[str]:
    base = rows[0]["per_s"]
    lines = [f"{backend}, {what} (median of {len(rows[0]['rates'])} interleaved rounds):",
             "| writers | appends | appends/s | vs one writer | lock wait share | each round's appends/s |",
             "|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        share = "n/a" if row["lock_wait_share"] is None else f"{row['lock_wait_share']:.1%}"
        each = ", ".join(f"{rate:.0f}" for rate in row["rates"])
        lines.append(f"| {row['writers']} | {row['appends']} | {row['per_s']:.1f} | {row['per_s'] / base:.2f}x | {share}"
                     f" | {each} |")
    return lines


SCALING: dict[str, tuple[Any, str]] = {
    "retrievals": (retrieval_worker, "retrievals (one snapshot append each)"),
    "bare": (append_worker, "bare event appends"),
    "round-trips": (round_trip_worker, "baseline: SELECT 1 from bare psycopg clients (no scopelens)"),
}
"""The scaling runs: a worker each, and what its table is of."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--retrievals", type=int, default=250, help="per process, in the volume run")
    parser.add_argument("--sessions", type=int, default=4, help="shared sessions the writers rotate over")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each scaling run")
    parser.add_argument("--writers", default="1,4,8", help="writer counts of the scaling runs")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the scaling runs (medians)")
    parser.add_argument("--only", help=f"the scaling runs to make, comma-separated, of {', '.join(SCALING)}")
    parser.add_argument("--skip-volume", action="store_true")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--verify-pause", type=float, default=VERIFY_PAUSE_S, help="seconds between verify runs")
    parser.add_argument("--port", type=int, default=55434, help="port of the throw-away PostgreSQL cluster")
    args = parser.parse_args(argv)
    unknown = set((args.only or "").split(",")) - set(SCALING) - {""}
    if unknown:
        parser.error(f"--only: no scaling run {', '.join(sorted(unknown))}; the runs are {', '.join(SCALING)}")
    sys.path.insert(0, str(REPO))
    from tests.support.postgres import PostgresServer

    writers = [int(w) for w in args.writers.split(",")]
    failed = False
    backends = ("sqlite", "postgresql") if args.backend == "both" else (args.backend,)
    with tempfile.TemporaryDirectory() as tmp, PostgresServer(port=args.port) as server:
        root = Path(tmp) / "ws"
        for backend in backends:
            def fresh(name: str, backend: str = backend) -> tuple[str, tuple[dict[str, str], str] | None]:
                if backend == "sqlite":
                    return f"sqlite:///{tmp}/{name}.db", None
                return server.create_database(name), (server.conninfo(), name)

            if not args.skip_volume:
                url, _ = fresh("volume")
                sessions = prepare_store(url, root, args.sessions)
                result = run_volume(url, root, sessions, args.processes, args.retrievals, args.verify_pause)
                print(f"{backend}, volume: {result.processes} processes x {result.retrievals_each} retrievals into "
                      f"{args.sessions} shared sessions in {result.seconds:.1f} s: returned {result.returned}, "
                      f"stored {result.stored}, lost {result.lost}, duplicated turns {result.duplicated_turns}, "
                      f"out of order {result.out_of_order}, verify runs during the writes {result.verify_runs_during}, "
                      f"verify clean after: {result.verify_clean_after}", flush=True)
                for problem in result.problems:
                    print(f"  PROBLEM: {problem}")
                failed |= bool(result.problems)
            kinds = [kind for kind in SCALING if args.only is None or kind in args.only.split(",")]
            scaled: dict[str, list[dict[str, Any]]] = {}
            for kind in () if args.skip_scaling else kinds:
                target, what = SCALING[kind]
                if target is round_trip_worker and backend != "postgresql":
                    continue
                url, sample = fresh(kind.replace("-", "_"))
                sessions = prepare_store(url, root, args.sessions)
                rows = run_scaling(url, root, sessions, writers, args.seconds, target=target, sample=sample,
                                   rounds=args.rounds)
                print("\n".join(_format_scaling(backend, what, rows)), flush=True)
                scaled[kind] = rows
            if "round-trips" in scaled:
                print("\n".join(_against_baseline(backend, scaled)), flush=True)
    return 1 if failed else 0


def _against_baseline(backend: str, scaled: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Each run's scaling (N writers' rate over one's) as a share of the baseline's."""
    def ratios(rows: list[dict[str, Any]]) -> dict[int, float]:
        return {row["writers"]: row["per_s"] / rows[0]["per_s"] for row in rows}

    baseline = ratios(scaled["round-trips"])
    lines = [f"{backend}, scaling against the baseline (SELECT 1) measured in this run:"]
    for kind, rows in scaled.items():
        if kind == "round-trips":
            continue
        lines += [f"  {kind}, {n} writers: {ratio:.2f}x against the baseline's {baseline[n]:.2f}x"
                  f" = {ratio / baseline[n]:.2f} of it" for n, ratio in ratios(rows).items() if n in baseline and n > 1]
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
