"""A full index build on PostgreSQL against the same build on SQLite, in one run:
``python -m bench.pg_build`` ([6/9] item 4: PostgreSQL full build ≤ 2× SQLite's).

It copies the running Python's standard library (``--quick``: 150 files) into a temporary
workspace, indexes it into a fresh SQLite store and into a fresh PostgreSQL database (a
throw-away cluster started from the machine's ``initdb``/``pg_ctl``, as the tests do), each
``--reps`` times, alternating, and prints the median wall of each and the ratio
PostgreSQL / SQLite. Rows go to PostgreSQL through ``COPY`` (core/index/run_writer.py,
``_copy_rows``). Timing never goes into unit tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.retrieve_latency import build_workspace

REPO = Path(__file__).resolve().parent.parent


def build_once(url: str, root: Path) -> float:
    from scopelens.core.index.indexer import index_workspace
    from scopelens.core.store.store import Store

    with Store.open(url, create=True) as store:
        start = time.perf_counter()
        index_workspace(store, root, project="stdlib")
        return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="150 files instead of the whole standard library")
    parser.add_argument("--reps", type=int, default=3, help="builds per backend (alternating)")
    parser.add_argument("--port", type=int, default=55433, help="port of the throw-away PostgreSQL cluster")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from tests.support.postgres import PostgresServer

    sqlite_s: list[float] = []
    postgres_s: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, PostgresServer(port=args.port) as server:
        root = Path(tmp) / "ws"
        files = build_workspace(root, args.quick)
        for rep in range(args.reps):
            sqlite_s.append(build_once(f"sqlite:///{tmp}/store-{rep}.db", root))
            postgres_s.append(build_once(server.create_database(f"build{rep}"), root))
            print(f"  rep {rep + 1}/{args.reps}: sqlite {sqlite_s[-1]:.2f} s, postgresql {postgres_s[-1]:.2f} s", flush=True)
    sqlite, postgres = statistics.median(sqlite_s), statistics.median(postgres_s)
    print(f"python -m bench.pg_build{' --quick' if args.quick else ''} ({files} files, {args.reps} builds each)")
    print("| backend | full build (median) |")
    print("|---|---:|")
    print(f"| SQLite (baseline) | {sqlite:.2f} s |")
    print(f"| PostgreSQL | {postgres:.2f} s |")
    ratio = postgres / sqlite
    print(f"ratio PostgreSQL / SQLite: {ratio:.2f}x (target <= 2x: {'pass' if ratio <= 2 else 'FAIL'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
