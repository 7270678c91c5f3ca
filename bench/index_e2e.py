"""End-to-end index benchmark: ``scopelens index`` as a user runs it, against a plain FTS5 script.

Run ``python -m bench.index_bench --e2e`` (the standard library and a 10x corpus, a few
minutes) or ``python -m bench.index_bench --e2e --quick`` (150 files and a 3x corpus, for a
smoke run). Both sides are whole processes started the same way (interpreter start and
imports count), in the same run, on the same copy of the corpus:

* **ours**: ``python -m scopelens.core.cli index ROOT --project bench --db FRESH.db``;
* **FTS5 script**: walk the root (sorted), read and decode every file, insert
  ``(path, body)`` into one ``fts5`` table (default ``unicode61`` tokenizer) in one
  transaction (``FTS5_SCRIPT`` below, written to a file and run by the same interpreter).

For each: wall time (median of ``--reps``), CPU time (user + system of the process and the
processes it waited for) and the peak of the summed RSS of the process tree (the process
and every descendant, sampled from ``/proc`` every ``SAMPLE_S`` seconds). The no-op figure
is a second ``scopelens index`` of the unchanged root into the same store. Both run as a
user's shell would run them: Python's bytecode caches written and used (``warm_up``, one
untimed run first). Targets are the ones of docs/performance.md ("End to end").
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SAMPLE_S = 0.01
FTS5_SCRIPT = """\
import os, sqlite3, sys
root, db = sys.argv[1], sys.argv[2]
conn = sqlite3.connect(db)
conn.execute("CREATE VIRTUAL TABLE docs USING fts5(path, body, tokenize='unicode61')")
with conn:
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            with open(path, "rb") as handle:
                data = handle.read()
            conn.execute("INSERT INTO docs(path, body) VALUES (?, ?)",
                         (os.path.relpath(path, root), data.decode("utf-8", "replace")))
conn.close()
"""
TARGETS = {
    "e2e_vs_fts5": 6.0,
    "peak_mib": 200.0,
    "peak_10x_vs_1x": 1.3,
    "wall_10x_vs_1x": 11.0,
    "noop_s_plus_share": (0.5, 0.05),
}


@dataclass(frozen=True)
class ProcessFigures:
    """One run of one command."""

    wall_s: float
    cpu_s: float
    peak_tree_mib: float
    returncode: int


def _tree_rss_kib(root_pid: int) -> int:
    """Summed VmRSS of ``root_pid`` and its descendants (0 for processes already gone)."""
    total = 0
    for pid in _tree(root_pid):
        try:
            with open(f"/proc/{pid}/status", "rb") as handle:
                for line in handle:
                    if line.startswith(b"VmRSS:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            continue
    return total


def _tree(root_pid: int) -> set[int]:
    """``root_pid`` and its descendants, from each thread's ``/proc/PID/task/TID/children``: a
    few small reads per sample, where scanning every process of ``/proc`` (the fallback, for
    kernels without that file) cost the sampler a tenth of a core at 100 samples a second,
    taken from the measured command's CPU."""
    tree, frontier = {root_pid}, [root_pid]
    while frontier:
        pid = frontier.pop()
        children = _children(pid)
        if children is None:
            return _tree_by_scan(root_pid)
        for child in children:
            if child not in tree:
                tree.add(child)
                frontier.append(child)
    return tree


def _children(pid: int) -> list[int] | None:
    """The children of ``pid`` (``[]`` when it is gone); ``None`` when the kernel has no
    ``children`` files."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as handle:
                found += [int(child) for child in handle.read().split()]
        except FileNotFoundError:
            if os.path.exists(f"/proc/{pid}/task/{tid}"):
                return None
        except OSError:
            continue
    return found


def _tree_by_scan(root_pid: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: fields follow the last ")".
        parents[int(entry)] = int(stat[stat.rindex(b")") + 2 :].split()[1])
    tree, frontier = {root_pid}, [root_pid]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in tree:
                tree.add(child)
                frontier.append(child)
    return tree


def run_measured(argv: Sequence[str], *, env: dict[str, str] | None = None) -> ProcessFigures:
    """Run ``argv`` to completion; wall, CPU and peak tree RSS (stdout and stderr discarded)."""
    start = time.perf_counter()
    process = subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss_kib(process.pid))
            done.wait(SAMPLE_S)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert process.stderr is not None
    errors = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        sys.stderr.write(errors.decode("utf-8", "replace")[-2000:])
    return ProcessFigures(wall, usage.ru_utime + usage.ru_stime, peak / 1024, process.returncode)


def corpus_copies(source: Path, files: Sequence[str], dest: Path, copies: int) -> Path:
    """``copies`` copies of ``files`` under ``dest/copy<i>/``; the root to index.

    The copies get the modification time an hour ago, as the files of a real repository mostly
    have: freshly written ones are never trusted by the index's stat check (a time within 2 s
    of a run may not change with the next write), so the no-op re-index would read them all."""
    past = time.time_ns() - 3600 * 1_000_000_000
    for i in range(copies):
        for rel in files:
            target = dest / f"copy{i}" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / rel, target)
            os.utime(target, ns=(past, past))
    return dest.resolve()


def measure_corpus(root: Path, workdir: Path, reps: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Median figures of ours and the FTS5 script on one corpus, plus our no-op re-index."""
    script = workdir / "fts5_script.py"
    script.write_text(FTS5_SCRIPT, encoding="utf-8")
    env = user_environment()
    warm_up(workdir, env)
    ours: list[ProcessFigures] = []
    fts5: list[ProcessFigures] = []
    noop: list[ProcessFigures] = []
    for rep in range(reps):
        fts_db = workdir / f"fts5-{rep}.db"
        fts_db.unlink(missing_ok=True)
        fts5.append(run_measured([sys.executable, str(script), str(root), str(fts_db)], env=env))
        db = workdir / f"ours-{rep}.db"
        db.unlink(missing_ok=True)
        index = [sys.executable, "-m", "scopelens.core.cli", "index", str(root), "--project", "bench", "--db", str(db)]
        ours.append(run_measured(index, env=env))
        noop.append(run_measured(index, env=env))
        log(f"  rep {rep + 1}/{reps}: ours {ours[-1].wall_s:.2f} s, FTS5 {fts5[-1].wall_s:.2f} s, "
            f"no-op {noop[-1].wall_s:.2f} s, peak {ours[-1].peak_tree_mib:.0f} MiB")
        for figures in (ours[-1], fts5[-1], noop[-1]):
            if figures.returncode:
                raise SystemExit(f"a measured command failed with exit code {figures.returncode}")
    files = sum(1 for path in root.rglob("*") if path.is_file())
    size = sum(path.stat().st_size for path in root.rglob("*") if path.is_file())
    return {
        "files": files,
        "mb": round(size / 1e6, 1),
        "ours": asdict(_median_of(ours)),
        "fts5": asdict(_median_of(fts5)),
        "noop": asdict(_median_of(noop)),
    }


def user_environment() -> dict[str, str]:
    """This environment as a user's shell has it: no ``SCOPELENS_DB``, and Python writing its
    bytecode caches. A sandbox that sets ``PYTHONDONTWRITEBYTECODE`` makes every run compile
    scopelens' modules from source again (about 0.3 s of the indexing process and 0.1 s of a
    worker, measured), which no installed copy does (pip compiles on install; an editable one
    compiles on its first run)."""
    env = dict(os.environ, SCOPELENS_DB="")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def warm_up(workdir: Path, env: dict[str, str]) -> None:
    """One untimed ``scopelens index`` of two small files with a worker, so the measured runs
    find scopelens' bytecode compiled, as after an install (the FTS5 script imports only the
    standard library, compiled already)."""
    root = workdir / "warm-up"
    root.mkdir(exist_ok=True)
    (root / "a.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    (root / "b.md").write_text("# notes\n", encoding="utf-8")
    db = workdir / "warm-up.db"
    argv = [sys.executable, "-m", "scopelens.core.cli", "index", str(root), "--project", "warm", "--db", str(db),
            "--workers", "1"]
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)


def _median_of(runs: list[ProcessFigures]) -> ProcessFigures:
    return ProcessFigures(
        statistics.median(r.wall_s for r in runs),
        statistics.median(r.cpu_s for r in runs),
        max(r.peak_tree_mib for r in runs),
        max(r.returncode for r in runs),
    )


def run_e2e(
    source: Path, files: Sequence[str], workdir: Path, *, copies: int, reps: int, log: Callable[[str], None]
) -> dict[str, Any]:
    """The 1x and ``copies``-x corpora, measured in one run."""
    log(f"e2e: 1x corpus ({len(files)} files)")
    one = measure_corpus(corpus_copies(source, files, workdir / "one", 1), workdir, reps, log)
    log(f"e2e: {copies}x corpus")
    many = measure_corpus(corpus_copies(source, files, workdir / "many", copies), workdir, 1, log)
    return {"copies": copies, "one": one, "many": many, "rows": e2e_rows(one, many, copies)}


def e2e_rows(one: dict[str, Any], many: dict[str, Any], copies: int) -> list[dict[str, Any]]:
    noop_fixed, noop_share = TARGETS["noop_s_plus_share"]
    noop_limit = noop_fixed + noop_share * one["ours"]["wall_s"]
    rows = [
        ("scopelens index vs FTS5 script, wall (1x)", one["ours"]["wall_s"], one["fts5"]["wall_s"],
         one["ours"]["wall_s"] / one["fts5"]["wall_s"], f"<= {TARGETS['e2e_vs_fts5']:g}x",
         one["ours"]["wall_s"] / one["fts5"]["wall_s"] <= TARGETS["e2e_vs_fts5"]),
        ("peak tree RSS, MiB (1x)", one["ours"]["peak_tree_mib"], one["fts5"]["peak_tree_mib"],
         one["ours"]["peak_tree_mib"] / max(one["fts5"]["peak_tree_mib"], 1e-9), f"<= {TARGETS['peak_mib']:g} MiB",
         one["ours"]["peak_tree_mib"] <= TARGETS["peak_mib"]),
        (f"peak tree RSS, {copies}x vs 1x", many["ours"]["peak_tree_mib"], one["ours"]["peak_tree_mib"],
         many["ours"]["peak_tree_mib"] / one["ours"]["peak_tree_mib"], f"<= {TARGETS['peak_10x_vs_1x']:g}x",
         many["ours"]["peak_tree_mib"] / one["ours"]["peak_tree_mib"] <= TARGETS["peak_10x_vs_1x"]),
        (f"wall, {copies}x vs 1x", many["ours"]["wall_s"], one["ours"]["wall_s"],
         many["ours"]["wall_s"] / one["ours"]["wall_s"], f"<= {TARGETS['wall_10x_vs_1x'] * copies / 10:g}x",
         many["ours"]["wall_s"] / one["ours"]["wall_s"] <= TARGETS["wall_10x_vs_1x"] * copies / 10),
        ("no-op re-index vs full, wall (1x)", one["noop"]["wall_s"], one["ours"]["wall_s"],
         one["noop"]["wall_s"] / one["ours"]["wall_s"], f"<= {noop_fixed:g} s + {noop_share:.0%}",
         one["noop"]["wall_s"] <= noop_limit),
        (f"scopelens index vs FTS5 script, wall ({copies}x)", many["ours"]["wall_s"], many["fts5"]["wall_s"],
         many["ours"]["wall_s"] / many["fts5"]["wall_s"], "(information)", None),
    ]
    return [
        {"figure": figure, "ours": round(ours, 3), "baseline": round(base, 3), "ratio": round(ratio, 3),
         "target": target, "pass": passed}
        for figure, ours, base, ratio, target, passed in rows
    ]


def format_e2e(result: dict[str, Any]) -> str:
    one, many = result["one"], result["many"]
    lines = [
        f"End to end: 1x = {one['files']} files, {one['mb']} MB; {result['copies']}x = {many['files']} files, "
        f"{many['mb']} MB",
        "",
        "| figure | ours | baseline | ratio | target | pass |",
        "|---|---:|---:|---:|---:|:---:|",
    ]
    for row in result["rows"]:
        verdict = "" if row["pass"] is None else ("pass" if row["pass"] else "FAIL")
        lines.append(f"| {row['figure']} | {row['ours']:.3f} | {row['baseline']:.3f} | {row['ratio']:.2f}x | "
                     f"{row['target']} | {verdict} |")
    lines += ["", "| corpus | command | wall s | CPU s | peak tree MiB |", "|---|---|---:|---:|---:|"]
    for name, corpus in (("1x", one), (f"{result['copies']}x", many)):
        for command in ("ours", "noop", "fts5"):
            figures = corpus[command]
            lines.append(f"| {name} | {command} | {figures['wall_s']:.2f} | {figures['cpu_s']:.2f} | "
                         f"{figures['peak_tree_mib']:.0f} |")
    return "\n".join(lines)


def main_e2e(source: Path, files: Sequence[str], workdir: Path, *, quick: bool, reps: int | None,
             out: Path | None, log: Callable[[str], None]) -> int:
    result = run_e2e(source, files, workdir, copies=3 if quick else 10, reps=reps or (1 if quick else 3), log=log)
    print(format_e2e(result))
    if out:
        out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0
