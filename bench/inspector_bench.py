"""Inspector benchmark: first paint and peak memory on a big store against an empty store.

Run ``python -m bench.inspector_bench`` (10,000 snapshots x 100 candidate rows = 1,000,000
rows; building the store once takes a few minutes, it is cached under ``--store``) or
``python -m bench.inspector_bench --quick`` (200 snapshots, seconds). See
``docs/performance.md`` ("Inspector at scale") for what each figure means.

The big store is ``--sessions`` sessions x ``--snapshots-per-session`` snapshots, each
snapshot with 8 selected items and ``candidates - 8`` rejections (so ``candidates`` rows in
``snapshot_rows``). It is written through ``Store.create_session`` and
``Store.write_snapshot`` only (one transaction per snapshot, the real write path), so it
verifies clean; ``--verify`` runs ``verify_store`` on it.

Each measurement runs in a fresh subprocess (same imports, same interpreter state), for
the empty store (``Store.open(create=True)`` and nothing else) and for the big store,
``--repeats`` times each, as back-to-back pairs (empty then big, then big then empty, and so
on). Each store's figure is the
median of its runs; each ratio is the median of the pairs' ratios (see ``paired_ratio``):

* **first paint**: from ``make_app(...).run_test(size=(120, 40))`` entry until the sessions
  screen has shown its first page (the DataTable has its rows; for the empty store, the
  status line is written);
* **settled**: until every worker has finished (``workers.wait_for_complete`` +
  ``pilot.pause``, three rounds) -- this includes the per-session verify worker over the
  visible sessions, which is the part that grows with the data;
* **peak RSS**: ``ru_maxrss`` of the subprocess at first paint and when settled;
* **candidates tab** (big store, for information): from pushing a ``SnapshotScreen`` on the
  Candidates tab until the candidate table has its first page.

Timing never goes into unit tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

PROJECT_COUNT = 7
TARGET_RATIO = 1.5
SELECTED_PER_SNAPSHOT = 8
REJECT_STAGES = ("out-of-scope", "not-visible", "stale", "below-cutoff", "duplicate", "over-budget")


# --------------------------------------------------------------------------- building


def _snapshot(snapshot_id: str, session_id: str, turn: int, created_at: Any, candidates: int):  # type: ignore[no-untyped-def]
    """A valid snapshot with ``SELECTED_PER_SNAPSHOT`` items and the rest as rejections."""
    from scopelens.core.contracts import RejectedItem, ScoreBreakdown
    from scopelens.core.vocab import Source, Stage
    from tests.support.factories import make_snapshot

    selected = min(SELECTED_PER_SNAPSHOT, candidates)
    texts = tuple(f"def f{n}_{turn}():\n    return {n}" for n in range(1, selected + 1))
    snapshot, block = make_snapshot(snapshot_id, session_id, turn=turn, texts=texts)
    rejected = []
    stats: dict[Stage, int] = {Stage.SELECTED: selected}
    for n in range(candidates - selected):
        stage = Stage(REJECT_STAGES[n % len(REJECT_STAGES)])
        stats[stage] = stats.get(stage, 0) + 1
        probe = stage == Stage.OUT_OF_SCOPE
        rejected.append(
            RejectedItem(
                candidate_id=f"r{n}",
                source=Source.WORKSPACE_CODE,
                source_ref=f"pkg/mod{n % 97}.py:{n}-{n + 9}",
                source_version=f"{n:064x}"[-64:],
                path=f"pkg/mod{n % 97}.py",
                line_start=n,
                line_end=n + 9,
                stage=stage,
                reason=f"{stage.value}: candidate {n} of {snapshot_id}",
                from_probe=probe,
                scores=None
                if probe
                else ScoreBreakdown(lexical=round(0.3 + (n % 50) / 100, 3), final=round(0.2 + (n % 40) / 100, 3)),
            )
        )
    snapshot = type(snapshot).model_validate(
        {**snapshot.model_dump(), "created_at": created_at, "rejected": rejected, "stats": stats}
    )
    return snapshot, block


def build_store(path: Path, *, sessions: int, per_session: int, candidates: int) -> dict[str, Any]:
    """Write the big store through the public write path; returns build timings."""
    from scopelens.core.store.store import Store
    from tests.support.factories import FACTORY_POLICY, T0

    if path.exists():
        path.unlink()
    started = time.perf_counter()
    snapshot_time = 0.0
    with Store.open(str(path), create=True) as store:
        for s in range(sessions):
            at = T0 + timedelta(minutes=s)
            session_id = f"s{s:05d}"
            store.create_session(
                project=f"proj{s % PROJECT_COUNT}", branch="main" if s % 3 else f"feature/{s % 11}",
                title=f"bench session {s}", agent="bench", session_id=session_id, created_at=at,
            )
            for t in range(1, per_session + 1):
                snapshot, block = _snapshot(f"{session_id}-t{t:02d}", session_id, t, at + timedelta(seconds=t), candidates)
                t0 = time.perf_counter()
                store.write_snapshot(snapshot, block, blobs=[FACTORY_POLICY])
                snapshot_time += time.perf_counter() - t0
            if (s + 1) % 100 == 0:
                elapsed = time.perf_counter() - started
                print(f"  built {s + 1}/{sessions} sessions in {elapsed:.0f}s", file=sys.stderr, flush=True)
    return {"build_s": time.perf_counter() - started, "write_snapshot_s": snapshot_time}


def store_counts(path: Path) -> dict[str, int]:
    from scopelens.core.store.store import Store
    from scopelens.core.store.tables import EventRow, SessionRow, SnapshotCandidateRow, SnapshotRow

    with Store.open(str(path), read_only=True) as store:
        return {
            "sessions": store.count(SessionRow),
            "events": store.count(EventRow),
            "snapshots": store.count(SnapshotRow),
            "snapshot_rows": store.count(SnapshotCandidateRow),
        }


# --------------------------------------------------------------------------- measuring (child)


async def _measure(url: str, candidates_snapshot: str | None) -> dict[str, Any]:
    from textual.widgets import DataTable, Static

    from scopelens.inspector.app import make_app
    from scopelens.inspector.screens.sessions import SessionsScreen
    from scopelens.inspector.screens.snapshot import SnapshotScreen

    def rss_mb() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    result: dict[str, Any] = {"rss_start_mb": rss_mb()}
    started = time.perf_counter()
    cpu_started = time.process_time()
    app = make_app(url, cursor_blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        while True:
            screen = app.screen
            if isinstance(screen, SessionsScreen):
                status = str(screen.query_one("#sessions-status", Static).render())
                table = screen.query_one(DataTable)
                # Painted: rows in a table that is visible at its real size (a FittedTable stays
                # hidden until its columns are fitted), or the empty state.
                shown = table.row_count > 0 and table.visible and table.size.width > 0
                if status.strip() and (shown or "0 of 0" in status):
                    break
            await pilot.pause()
        result["first_paint_s"] = time.perf_counter() - started
        result["first_paint_cpu_s"] = time.process_time() - cpu_started
        result["rss_first_paint_mb"] = rss_mb()
        result["rows_shown"] = app.screen.query_one(DataTable).row_count
        for _ in range(3):
            await app.workers.wait_for_complete()
            await pilot.pause()
        result["settled_s"] = time.perf_counter() - started
        result["rss_settled_mb"] = rss_mb()
        if candidates_snapshot:
            t0 = time.perf_counter()
            snapshot_screen = SnapshotScreen(candidates_snapshot, tab="candidates")
            await app.push_screen(snapshot_screen)
            table = snapshot_screen.query_one("#candidate-table", DataTable)
            while table.row_count == 0:
                await pilot.pause()
            result["candidates_s"] = time.perf_counter() - t0
            result["candidate_rows_shown"] = table.row_count
            result["candidate_status"] = str(snapshot_screen.query_one("#candidate-status", Static).render())
            result["rss_candidates_mb"] = rss_mb()
    return result


def child_main(url: str, candidates_snapshot: str | None) -> None:
    # Import everything the app needs before timing, so the clock measures the app, not imports.
    import scopelens.inspector.app
    import scopelens.inspector.screens.snapshot
    import scopelens.inspector.screens.timeline  # noqa: F401

    print(json.dumps(asyncio.run(_measure(url, candidates_snapshot))))


def run_child(path: Path, candidates_snapshot: str | None) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.inspector_bench", "--child", str(path)]
    if candidates_snapshot:
        command += ["--child-snapshot", candidates_snapshot]
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(command, capture_output=True, text=True, cwd=root, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"measurement failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- report


def median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def paired_ratio(empty: list[dict[str, Any]], big: list[dict[str, Any]], key: str) -> float:
    """Median over runs of big / empty, each pair measured back to back.

    The machine's speed drifts between runs (a shared 2-core VM: the same empty-store run
    takes 0.14 s or 0.23 s); a pair shares that state, so its ratio is steadier than the
    ratio of two medians taken over different moments.
    """
    return statistics.median(b[key] / e[key] if e[key] else float("inf") for e, b in zip(empty, big, strict=True))


def report(empty: list[dict[str, Any]], big: list[dict[str, Any]], counts: dict[str, int]) -> tuple[str, bool]:
    rows = []
    passed = True
    for label, key, unit, targeted in (
        ("first paint", "first_paint_s", "s", True),
        ("first paint, CPU time", "first_paint_cpu_s", "s", False),
        ("peak RSS at first paint", "rss_first_paint_mb", "MB", True),
        ("settled (all workers, incl. verify)", "settled_s", "s", False),
        ("peak RSS settled", "rss_settled_mb", "MB", False),
    ):
        e, b = median(empty, key), median(big, key)
        ratio = paired_ratio(empty, big, key)
        ok = ratio <= TARGET_RATIO
        if targeted:
            passed = passed and ok
        fmt = "{:.3f} s" if unit == "s" else "{:.1f} MB"
        rows.append(
            f"| {label} | {fmt.format(e)} | {fmt.format(b)} | {ratio:.2f}x | "
            f"{'<= 1.5x' if targeted else '(info)'} | {('pass' if ok else 'FAIL') if targeted else ('ok' if ok else 'over')} |"
        )
    lines = [
        "| figure | empty store | big store | ratio | target | result |",
        "|---|---|---|---|---|---|",
        *rows,
    ]
    if "candidates_s" in big[0]:
        lines.append(
            f"| candidates tab, first page ({big[0]['candidate_rows_shown']} rows) | - | "
            f"{median(big, 'candidates_s'):.3f} s | - | (info) | - |"
        )
    lines += [
        "",
        f"big store: {counts['sessions']:,} sessions, {counts['snapshots']:,} snapshots, "
        f"{counts['snapshot_rows']:,} snapshot_rows, {counts['events']:,} events; "
        f"runs per store: {len(big)}; stores: medians; ratio: median of the back-to-back pairs' ratios",
    ]
    return "\n".join(lines), passed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshots", type=int, default=10_000, help="snapshots in the big store")
    parser.add_argument("--snapshots-per-session", type=int, default=10)
    parser.add_argument("--candidates-per-snapshot", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=7, help="back-to-back pairs of runs")
    parser.add_argument("--quick", action="store_true", help="200 snapshots, 2 repeats")
    parser.add_argument("--store", type=Path, default=None, help="directory to cache the stores in")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the big store even if cached")
    parser.add_argument("--verify", action="store_true", help="run verify_store on the big store")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    parser.add_argument("--child", type=str, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-snapshot", type=str, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        child_main(args.child, args.child_snapshot)
        return 0

    if args.quick:
        args.snapshots, args.repeats = 200, 2
        args.verify = True
    per_session = max(1, args.snapshots_per_session)
    sessions = max(1, args.snapshots // per_session)
    directory = args.store or Path(tempfile.gettempdir()) / "scopelens-inspector-bench"
    directory.mkdir(parents=True, exist_ok=True)
    name = f"big-{sessions}x{per_session}x{args.candidates_per_snapshot}.db"
    big_path, empty_path = directory / name, directory / "empty.db"
    marker = big_path.with_suffix(".done")

    from scopelens.core.store.store import Store

    if empty_path.exists():
        empty_path.unlink()
    Store.open(str(empty_path), create=True).close()

    if args.rebuild or not (big_path.exists() and marker.exists()):
        marker.unlink(missing_ok=True)
        print(f"building {big_path} ({sessions} sessions x {per_session} snapshots x "
              f"{args.candidates_per_snapshot} candidates) through Store.write_snapshot ...", flush=True)
        build = build_store(big_path, sessions=sessions, per_session=per_session, candidates=args.candidates_per_snapshot)
        marker.write_text(json.dumps(build))
        print(f"build: {build['build_s']:.1f}s total, {build['write_snapshot_s']:.1f}s in write_snapshot "
              f"({build['write_snapshot_s'] / (sessions * per_session) * 1000:.1f} ms/snapshot); not part of the figures")
    else:
        print(f"reusing {big_path} (built in {json.loads(marker.read_text())['build_s']:.1f}s)")
        Store.open(str(big_path)).close()  # a writable open applies migrations newer than the cache
    counts = store_counts(big_path)
    print(f"big store rows: {counts}; file {big_path.stat().st_size / 2**20:.0f} MiB")

    if args.verify:
        from scopelens.core.store.verify import verify_store

        t0 = time.perf_counter()
        with Store.open(str(big_path), read_only=True) as store:
            verified = verify_store(store)
        problems = list(verified.problems) if hasattr(verified, "problems") else []
        print(f"verify_store: {'clean' if not problems else f'{len(problems)} problems'} "
              f"({time.perf_counter() - t0:.1f}s)")
        if problems:
            print("\n".join(str(p) for p in problems[:10]))
            return 2

    middle = f"s{sessions // 2:05d}-t{max(1, per_session // 2):02d}"
    empty_runs, big_runs = [], []
    for n in range(args.repeats):
        # Alternate which store goes first, so neither always meets a colder machine.
        if n % 2:
            big_runs.append(run_child(big_path, middle))
            empty_runs.append(run_child(empty_path, None))
        else:
            empty_runs.append(run_child(empty_path, None))
            big_runs.append(run_child(big_path, middle))
        print(f"  run {n + 1}/{args.repeats}: empty {empty_runs[-1]['first_paint_s']:.3f}s / "
              f"big {big_runs[-1]['first_paint_s']:.3f}s first paint "
              f"({big_runs[-1]['first_paint_s'] / empty_runs[-1]['first_paint_s']:.2f}x), "
              f"big settled {big_runs[-1]['settled_s']:.3f}s", flush=True)
    table, passed = report(empty_runs, big_runs, counts)
    print()
    print(f"python -m bench.inspector_bench --snapshots {sessions * per_session} "
          f"--candidates-per-snapshot {args.candidates_per_snapshot}")
    print(table)
    print(f"\ntarget (first paint and its peak RSS <= {TARGET_RATIO}x the empty store): {'PASS' if passed else 'FAIL'}")
    if args.out:
        args.out.write_text(json.dumps({"counts": counts, "empty": empty_runs, "big": big_runs, "passed": passed}, indent=2))
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
