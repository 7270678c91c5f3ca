"""Does retrieval slow down as a store's history grows? ``python -m bench.history_bench``.

Issue [6/9] asks that retrieval p50 after 5,000 session events and 200 small index runs stay
within 1.3x the p50 on a fresh store, and that the compaction an index run does at its end
take at most 10% of the run's wall time. This bench builds, from the same workspace (the
first ``--files`` .py files of the running Python's standard library, sorted):

* **fresh**: the workspace indexed once;
* **history**: the same, then ``--runs`` index runs that each change one file (timed, with
  the end-of-run compaction timed apart), ``--events`` events (user messages, model
  responses, tool results) in ``--sessions`` sessions of the project, and a second project
  (``OTHER``, 20 files).

Each store is then asked the same ``--questions`` (a symbol and some prose, as a bug report
reads), in a process of its own, in a session of the project (on the history store, one of
its sessions, holding ``--events / --sessions`` events of its own; so the session recallers
and the probe run), after ``--warmup`` questions; p50 and
p90 per store, and their ratio. On the history store the questions are asked twice: as they
are, and with the other project re-indexed (one file changed; not timed) before each
question, as on a shared store where other teams index (the scope probe looks at every
project). ``--quick`` is a smoke run for CI (small numbers; no target).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.retrieve_latency import PROJECT, build_workspace, questions

SEED = 20261202
OTHER = "other"
OTHER_FILES = 20
TARGET_P50_RATIO = 1.3
TARGET_COMPACTION_SHARE = 0.10
WORDS = (
    "test", "fails", "when", "cache", "is", "cold", "and", "retry", "returns", "a", "stale", "value", "from",
    "parser", "traceback", "error", "assertion", "timeout", "config", "path", "module", "handler", "request",
    "response", "session", "token",
)


def build_fresh(store_path: Path, root: Path) -> None:
    from scopelens.core.clock import SequentialIds, SteppingClock
    from scopelens.core.index.indexer import index_workspace
    from scopelens.core.store.store import Store

    clock = SteppingClock(datetime(2026, 1, 1, tzinfo=UTC), timedelta(seconds=1))
    with Store.open(str(store_path), create=True, clock=clock, ids=SequentialIds("h")) as store:
        index_workspace(store, root, project=PROJECT, clock=clock)


def add_history(store_path: Path, root: Path, runs: int, events: int, sessions: int, other: Path) -> dict[str, Any]:
    """Small index runs (each changes one file), session events and another project (``other``,
    indexed once), into an indexed store."""
    from scopelens.core.clock import SequentialIds, SteppingClock
    from scopelens.core.index.compaction import compact_line
    from scopelens.core.index.indexer import index_workspace
    from scopelens.core.store.store import Store
    from scopelens.core.vocab import EventType

    rng = random.Random(SEED)
    files = sorted(p for p in root.rglob("*.py") if p.is_file())
    clock = SteppingClock(datetime(2026, 2, 1, tzinfo=UTC), timedelta(seconds=1))
    run_s = compaction_s = 0.0
    with Store.open(str(store_path), clock=clock, ids=SequentialIds("h")) as store:
        for n in range(runs):
            path = files[rng.randrange(len(files))]
            with path.open("a", encoding="utf-8") as handle:
                handle.write(f"\n\ndef history_edit_{n}():\n    return {n}  # {' '.join(rng.sample(WORDS, 5))}\n")
            start = time.perf_counter()
            report = index_workspace(store, root, project=PROJECT, clock=clock, workers=0, compact=False)
            middle = time.perf_counter()
            with store.index_run_lock():
                compact_line(store, report.project, report.branch, report.root)
            end = time.perf_counter()
            run_s += end - start
            compaction_s += end - middle
        ids = [store.create_session(project=PROJECT, title=f"history {k}", agent="bench").id for k in range(sessions)]
        for n in range(events):
            session = ids[n % sessions]
            words = " ".join(rng.sample(WORDS, 12))
            kind = n % 3
            if kind == 0:
                store.append_event(session, EventType.USER_MESSAGE, {"text": f"question {n}: {words}"})
            elif kind == 1:
                store.append_event(session, EventType.MODEL_RESPONSE, {"text": f"answer {n}: {words}"})
            else:
                store.append_event(session, EventType.TOOL_FINISHED, {
                    "call_id": f"c{n}", "tool": "pytest", "exit_code": 1, "output_preview": f"FAILED test_{n}: {words}",
                })
        index_workspace(store, other, project=OTHER, clock=clock, workers=0)
    return {"runs": runs, "events": events, "sessions": sessions, "runs_s": round(run_s, 2),
            "compaction_s": round(compaction_s, 3), "compaction_share": round(compaction_s / max(run_s, 1e-9), 4)}


def worker(store_path: Path, asked: list[str], warmup: int, other: Path | None = None) -> dict[str, Any]:
    """Time each question's retrieve in a new session of the project (run in a subprocess);
    with ``other``, that project is re-indexed (one file changed) before each question."""
    from scopelens.core.clock import SequentialIds, SteppingClock
    from scopelens.core.contracts import RetrievalIntent
    from scopelens.core.index.indexer import index_workspace
    from scopelens.core.pipeline.retriever import Retriever
    from scopelens.core.store.store import Store
    from scopelens.core.vocab import Purpose

    clock = SteppingClock(datetime(2026, 6, 1, tzinfo=UTC), timedelta(0))
    with Store.open(str(store_path), clock=clock, ids=SequentialIds("w" if other is None else "c")) as store:
        # the history's first session (it holds events of its own), else a new one
        existing = sorted(summary.header.id for summary in store.list_sessions(project=PROJECT))
        session = existing[0] if existing else store.create_session(project=PROJECT, title="asking", agent="bench").id
        retriever = Retriever(store)
        intents = [RetrievalIntent(purpose=Purpose.FIX_TEST, question=q) for q in asked]
        for intent in intents[:warmup]:
            retriever.retrieve(intent, project=PROJECT, session_id=session)
        times = []
        other_files = sorted(other.rglob("*.py")) if other is not None else []
        for n, intent in enumerate(intents):
            if other is not None:
                with other_files[n % len(other_files)].open("a", encoding="utf-8") as handle:
                    handle.write(f"\n# edited {n}\n")
                index_workspace(store, other, project=OTHER, clock=clock, workers=0)
            start = time.perf_counter()
            retriever.retrieve(intent, project=PROJECT, session_id=session)
            times.append(time.perf_counter() - start)
    return {"p50_ms": round(statistics.median(times) * 1000, 2), "p90_ms": round(sorted(times)[int(len(times) * 0.9)] * 1000, 2)}


def _in_subprocess(store: Path, asked_file: Path, warmup: int, other: Path | None = None) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.history_bench", "--worker", str(store), str(asked_file), str(warmup),
         str(other or "")],
        capture_output=True, text=True,
    )
    if out.returncode:
        raise SystemExit(f"a measuring process failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=4, metavar=("STORE", "QUESTIONS", "WARMUP", "OTHER"), help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="a smoke run (no target)")
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args(argv)
    if args.worker:
        store, asked_file, warmup, other = args.worker
        asked = json.loads(Path(asked_file).read_text())
        print(json.dumps(worker(Path(store), asked, int(warmup), Path(other) if other else None)))
        return 0
    if args.quick:
        args.files, args.runs, args.events, args.sessions, args.questions, args.warmup = 40, 12, 120, 4, 6, 1
    with tempfile.TemporaryDirectory(prefix="scopelens-history-") as tmp:
        work = Path(tmp)
        source = work / "source"
        source.mkdir()
        build_workspace(source, quick=False, limit=args.files)
        fresh_root, history_root, other_root = work / "ws-fresh", work / "ws-history", work / "ws-other"
        shutil.copytree(source, fresh_root)
        shutil.copytree(source, history_root)
        for path in sorted(source.rglob("*.py"))[:OTHER_FILES]:
            target = other_root / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        fresh, history = work / "fresh.db", work / "history.db"
        build_fresh(fresh, fresh_root)
        build_fresh(history, history_root)
        added = add_history(history, history_root, args.runs, args.events, args.sessions, other_root)
        asked = questions(fresh, args.questions)
        asked_file = work / "questions.json"
        asked_file.write_text(json.dumps(asked))
        fresh_figures = _in_subprocess(fresh, asked_file, args.warmup)
        history_figures = _in_subprocess(history, asked_file, args.warmup)
        churn_figures = _in_subprocess(history, asked_file, args.warmup, other_root)
    ratio = history_figures["p50_ms"] / max(fresh_figures["p50_ms"], 1e-9)
    churn_ratio = churn_figures["p50_ms"] / max(fresh_figures["p50_ms"], 1e-9)
    result = {
        "files": args.files, "history": added, "fresh": fresh_figures, "after_history": history_figures,
        "other_project_reindexed": churn_figures, "p50_ratio": round(ratio, 3),
        "p50_ratio_other_reindexed": round(churn_ratio, 3),
        "targets": {"p50_ratio": TARGET_P50_RATIO, "compaction_share": TARGET_COMPACTION_SHARE},
    }
    print(f"workspace: {args.files} files; history: {added['runs']} one-file index runs, {added['events']} events "
          f"in {added['sessions']} sessions")
    print(f"retrieve p50: fresh {fresh_figures['p50_ms']} ms, after history {history_figures['p50_ms']} ms "
          f"-> {ratio:.2f}x (target <= {TARGET_P50_RATIO}x){'' if args.quick else ' ' + _verdict(ratio <= TARGET_P50_RATIO)}")
    print(f"retrieve p50 with another project re-indexed before each call: {churn_figures['p50_ms']} ms "
          f"-> {churn_ratio:.2f}x fresh (information: the issue measured 14 -> 127 ms, 9x)")
    print(f"end-of-run compaction: {added['compaction_s']} s of {added['runs_s']} s of index runs "
          f"= {added['compaction_share']:.1%} (target <= {TARGET_COMPACTION_SHARE:.0%})"
          f"{'' if args.quick else ' ' + _verdict(added['compaction_share'] <= TARGET_COMPACTION_SHARE)}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


if __name__ == "__main__":
    raise SystemExit(main())
