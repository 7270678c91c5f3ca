"""Retrieve latency against a baseline commit, in one run: ``python -m bench.retrieve_latency``.

Issue [4/9] allows a better ranking to cost at most twice today's ``retrieve`` p50 on a
50k-chunk workspace. This bench indexes the running Python's standard library (about 50k
chunks; ``--quick``: 150 files) once, then times ``Retriever.retrieve`` (purpose fix-test)
for the same questions under this checkout's engine and under ``--baseline REF`` (the commit
to compare with; default ``HEAD~1``), each in its own process on its own copy of the store,
alternating baseline and current ``--rounds`` times. It prints each round's p50, the medians,
and the ratio current / baseline.

The baseline's code comes from ``git worktree add --detach`` of REF, imported through a shim
folder on ``PYTHONPATH`` (``scopelens/core`` -> the worktree's ``core``); the store format must
be one both read (a store indexed by this checkout, migrated by each on open).

Questions: ``--questions N`` chunks with a symbol, picked with a fixed seed, each asked as
"<symbol> returns the wrong result" plus the first words of its chunk: a bug report's shape
(a name and some prose). Timing never goes into unit tests.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SEED = 20261201
PROJECT = "stdlib"
QUICK_FILES = 150


def build_workspace(dest: Path, quick: bool, limit: int | None = None) -> int:
    """Copy the standard library's .py files (no site-packages) into ``dest``: the first
    ``limit`` (sorted) if given, else ``QUICK_FILES`` with ``quick``, else all."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(
        p for p in stdlib.rglob("*.py")
        if "site-packages" not in p.parts and "__pycache__" not in p.parts and p.is_file()
    )
    if limit is not None or quick:
        files = files[: limit if limit is not None else QUICK_FILES]
    for path in files:
        target = dest / path.relative_to(stdlib)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return len(files)


def index(store_path: Path, root: Path) -> dict[str, Any]:
    from scopelens.core.clock import SequentialIds, SteppingClock
    from scopelens.core.index.indexer import index_workspace
    from scopelens.core.store.store import Store

    start = time.perf_counter()
    clock = SteppingClock(datetime(2026, 1, 1, tzinfo=UTC), timedelta(0))
    with Store.open(str(store_path), create=True, clock=clock, ids=SequentialIds("lat")) as store:
        index_workspace(store, root, project=PROJECT, clock=clock)
        with store.read() as conn:
            from sqlalchemy import func, select

            from scopelens.core.store.tables import IndexChunkRow

            chunks = int(conn.execute(select(func.count()).select_from(IndexChunkRow)).scalar_one())
    return {"chunks": chunks, "index_s": round(time.perf_counter() - start, 1)}


def questions(store_path: Path, count: int) -> list[str]:
    from sqlalchemy import select

    from scopelens.core.store.store import Store
    from scopelens.core.store.tables import IndexChunkRow

    with Store.open(str(store_path), read_only=True) as store, store.read() as conn:
        rows = conn.execute(
            select(IndexChunkRow.id, IndexChunkRow.symbol).where(IndexChunkRow.symbol.is_not(None))  # type: ignore[union-attr]
            .order_by(IndexChunkRow.id)
        ).all()
    rng = random.Random(SEED)
    picked = rng.sample(rows, min(count, len(rows)))
    words = ["fails", "when", "the", "input", "is", "empty", "and", "returns", "a", "wrong", "value", "after", "retry"]
    return [f"{symbol} returns the wrong result: " + " ".join(rng.sample(words, 6)) for _id, symbol in picked]


def worker(store_path: Path, asked: list[str], warmup: int) -> dict[str, Any]:
    """Time each question's retrieve on this process's engine (run in a subprocess)."""
    from scopelens.core.clock import SequentialIds, SteppingClock
    from scopelens.core.contracts import RetrievalIntent
    from scopelens.core.pipeline.retriever import Retriever
    from scopelens.core.store.store import Store
    from scopelens.core.vocab import Purpose

    clock = SteppingClock(datetime(2026, 6, 1, tzinfo=UTC), timedelta(0))
    with Store.open(str(store_path), clock=clock, ids=SequentialIds("w")) as store:
        retriever = Retriever(store)
        intents = [RetrievalIntent(purpose=Purpose.FIX_TEST, question=q) for q in asked]
        for intent in intents[:warmup]:
            retriever.retrieve(intent, project=PROJECT)
        times = []
        for intent in intents:
            start = time.perf_counter()
            retriever.retrieve(intent, project=PROJECT)
            times.append(time.perf_counter() - start)
    return {"p50_ms": round(statistics.median(times) * 1000, 2), "p90_ms": round(sorted(times)[int(len(times) * 0.9)] * 1000, 2)}


def baseline_shim(ref: str, into: Path) -> Path:
    """A worktree of ``ref`` and a folder that imports ``scopelens.core`` from it."""
    tree = into / "tree"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-f", str(tree), ref],
                   check=True, capture_output=True)
    shim = into / "shim" / "scopelens"
    shim.mkdir(parents=True)
    for name in ("core", "inspector", "sample_sessions"):
        if (tree / name).exists():
            (shim / name).symlink_to(tree / name)
    return shim.parent


def run_worker(store: Path, asked_file: Path, warmup: int, shim: Path | None, copy_to: Path) -> dict[str, Any]:
    shutil.copyfile(store, copy_to)
    env = dict(os.environ)
    if shim is not None:
        env["PYTHONPATH"] = str(shim)
    else:
        env.pop("PYTHONPATH", None)
    out = subprocess.run(
        [sys.executable, "-m", "bench.retrieve_latency", "--worker", str(copy_to), str(asked_file), str(warmup)],
        check=True, capture_output=True, text=True, env=env, cwd=str(shim) if shim is not None else str(REPO),
    )
    copy_to.unlink()
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieve_latency", description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="HEAD~1", help="the commit to compare with (default HEAD~1)")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_FILES} files instead of the whole standard library")
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write the figures as JSON")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        store, asked_file, warmup = args.worker
        asked = json.loads(Path(asked_file).read_text(encoding="utf-8"))
        print(json.dumps(worker(Path(store), asked, int(warmup))))
        return 0
    with tempfile.TemporaryDirectory(prefix="scopelens-latency-") as tmp_name:
        tmp = Path(tmp_name)
        files = build_workspace(tmp / "ws", args.quick)
        store = tmp / "store.db"
        built = index(store, tmp / "ws")
        asked = questions(store, args.questions)
        asked_file = tmp / "questions.json"
        asked_file.write_text(json.dumps(asked), encoding="utf-8")
        shim = baseline_shim(args.baseline, tmp / "baseline")
        # The shim imports the bench module itself from this checkout's bench/ folder.
        (shim / "bench").symlink_to(REPO / "bench")
        rounds = []
        try:
            for n in range(args.rounds):
                base = run_worker(store, asked_file, args.warmup, shim, tmp / f"b{n}.db")
                current = run_worker(store, asked_file, args.warmup, None, tmp / f"c{n}.db")
                rounds.append({"baseline": base, "current": current})
                print(f"round {n + 1}: baseline p50 {base['p50_ms']} ms, current p50 {current['p50_ms']} ms", file=sys.stderr)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tmp / "baseline" / "tree")],
                           check=False, capture_output=True)
    base_p50 = statistics.median(r["baseline"]["p50_ms"] for r in rounds)
    cur_p50 = statistics.median(r["current"]["p50_ms"] for r in rounds)
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"), "python": sys.version.split()[0],
        "cpus": os.cpu_count(), "files": files, **built, "questions": len(asked), "baseline": args.baseline,
        "rounds": rounds, "baseline_p50_ms": base_p50, "current_p50_ms": cur_p50,
        "ratio": round(cur_p50 / base_p50, 2) if base_p50 else None,
    }
    print(f"{files} files, {built['chunks']} chunks, {len(asked)} questions, {args.rounds} rounds")
    print(f"retrieve p50: baseline ({args.baseline}) {base_p50} ms, current {cur_p50} ms: "
          f"{result['ratio']}x (target <= 2.0x)")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
