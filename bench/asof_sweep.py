"""Recall when ``as_of`` moves with every request: ``python -m bench.asof_sweep``.

Issue [6/9] measured that a harness pinning ``as_of`` to each request's time made the scorer
keep one set of arrays per ``as_of`` (287 MB after 300 values). This bench indexes the
running Python's standard library once (``--quick``: 150 files; ``--store PATH`` reuses an
indexed store), then, each in its own subprocess on the same store, asks the same questions
``--calls`` times with:

* **baseline**: one fixed ``as_of`` for every call (what a cache keyed by ``as_of`` serves well);
* **sweep**: a new ``as_of`` on every call, one second apart, all after the last index run
  (the same live chunks, so the same answers).

It prints each run's peak RSS growth over the first call and its mean time per search, and
the ratios sweep / baseline. The target ([6/9] item 5): the sweep's memory does not grow with
the number of ``as_of`` values (ratio near 1), and its time stays near the baseline's.
Timing never goes into unit tests.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.retrieve_latency import PROJECT, build_workspace, index

QUESTIONS = ("parse header encoding error", "socket timeout retry connection", "decimal rounding context precision",
             "thread lock acquire release", "path join normalise separator")
AFTER_EVERYTHING = datetime(2030, 1, 1, tzinfo=UTC)


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(store_path: Path, calls: int, sweep: bool) -> dict[str, Any]:
    """Run in a subprocess: ``calls`` searches per question, ``as_of`` fixed or moving."""
    from scopelens.core.index.scorer import RecallFilter, Scorer
    from scopelens.core.index.timeutil import to_micros
    from scopelens.core.index.tokenizer import tokenize
    from scopelens.core.store.store import Store

    with Store.open(str(store_path), read_only=True) as store:
        scorer = Scorer(store)
        queries = [[(t, 1.0) for t in tokenize(q)] for q in QUESTIONS]
        for query in queries:  # warm: the view and each question's terms, at the first as_of
            scorer.search(query, RecallFilter(project=PROJECT, as_of_us=to_micros(AFTER_EVERYTHING)))
        start_rss, start = rss_mib(), time.perf_counter()
        for call in range(calls):
            moment = AFTER_EVERYTHING + timedelta(seconds=call if sweep else 0)
            for query in queries:
                scorer.search(query, RecallFilter(project=PROJECT, as_of_us=to_micros(moment)))
        elapsed = time.perf_counter() - start
    return {"rss_growth_mib": round(rss_mib() - start_rss, 1), "peak_rss_mib": round(rss_mib(), 1),
            "ms_per_search": round(elapsed / (calls * len(queries)) * 1000, 3)}


def run(store: Path, calls: int, sweep: bool) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.asof_sweep", "--worker", str(store), str(calls), "sweep" if sweep else "fixed"],
        check=True, capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="150 files instead of the whole standard library")
    parser.add_argument("--calls", type=int, default=300, help="requests, each with its own as_of in the sweep")
    parser.add_argument("--store", type=Path, help="an indexed store to reuse (project 'stdlib')")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--build", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        store, calls, mode = args.worker
        print(json.dumps(worker(Path(store), int(calls), mode == "sweep")))
        return 0
    if args.build:
        root, store = map(Path, args.build)
        files = build_workspace(root, args.quick)
        print(json.dumps({"files": files, **index(store, root)}))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        store = args.store
        if store is None:
            # In a subprocess: a child's peak RSS starts at its parent's, so this process stays small.
            root, store = Path(tmp) / "ws", Path(tmp) / "store.db"
            command = [sys.executable, "-m", "bench.asof_sweep", "--build", str(root), str(store)]
            out = subprocess.run(command + (["--quick"] if args.quick else []), check=True, capture_output=True,
                                 text=True, cwd=Path(__file__).resolve().parent.parent)
            built = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"indexed {built['files']} files, {built['chunks']} chunks in {built['index_s']} s")
        baseline, sweep = run(store, args.calls, False), run(store, args.calls, True)
    print(f"python -m bench.asof_sweep --calls {args.calls}{' --quick' if args.quick else ''}")
    print("| run | peak RSS growth | peak RSS | time per search |")
    print("|---|---:|---:|---:|")
    for name, figures in (("baseline: one as_of", baseline), (f"sweep: {args.calls} as_of values", sweep)):
        print(f"| {name} | {figures['rss_growth_mib']} MiB | {figures['peak_rss_mib']} MiB | {figures['ms_per_search']} ms |")
    print(f"ratios sweep / baseline: peak RSS {sweep['peak_rss_mib'] / baseline['peak_rss_mib']:.2f}x, "
          f"time per search {sweep['ms_per_search'] / max(baseline['ms_per_search'], 1e-9):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
