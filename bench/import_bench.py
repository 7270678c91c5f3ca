"""How long reading a long agent session takes: ``python -m bench.import_bench``.

Issue [7/9] asks that a 5,000-event session import in at most 10 s on the CI machine. This
bench writes one session of ``--events`` entries in each format (Claude Code, Codex,
SWE-agent, OpenHands), shaped like the fixtures (tool calls reading file ranges, searches,
command output with tracebacks, a compaction every 1,000 entries where the format has one),
and times reading each into the importers' model (``core/importers``) and importing it
whole (``import_paths``: read, redact, one observed snapshot per call, one transaction) into
a fresh SQLite store, best of ``--reps``, against a named baseline measured in the same run:
parsing the same file with ``json`` alone (``json.loads`` of the document, or of every line).
The target is on the import. ``--quick`` is the smoke run (500 events, one rep).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TARGET_S = 10.0
LINES = "\n".join(f"{n:>6}→    value_{n} = compute(value_{n - 1})  # step {n}" for n in range(1, 41))


def claude_code(events: int) -> str:
    out = []
    parent = None
    for n in range(0, events, 4):
        ids = [f"u{n}-{k}" for k in range(4)]
        tool = f"toolu_{n}"
        path = f"/home/dev/app/src/module_{n % 97}.py"
        out.append({"type": "user", "uuid": ids[0], "parentUuid": parent, "sessionId": "bench", "cwd": "/home/dev/app",
                    "timestamp": "2026-03-01T10:00:00Z", "message": {"role": "user", "content": f"step {n}: fix module {n}"}})
        out.append({"type": "assistant", "uuid": ids[1], "parentUuid": ids[0], "sessionId": "bench",
                    "timestamp": "2026-03-01T10:00:01Z",
                    "message": {"id": f"msg_{n}", "role": "assistant", "model": "claude-sonnet-4-5",
                                "content": [{"type": "tool_use", "id": tool, "name": "Read", "input": {"file_path": path}}]}})
        out.append({"type": "user", "uuid": ids[2], "parentUuid": ids[1], "sessionId": "bench",
                    "timestamp": "2026-03-01T10:00:02Z",
                    "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool, "content": LINES}]},
                    "toolUseResult": {"type": "text", "file": {"filePath": path, "numLines": 40, "startLine": 1}}})
        if n and n % 1000 == 0:
            out.append({"type": "system", "subtype": "compact_boundary", "uuid": ids[3], "parentUuid": None,
                        "logicalParentUuid": ids[2], "sessionId": "bench", "content": "Conversation compacted"})
        else:
            out.append({"type": "assistant", "uuid": ids[3], "parentUuid": ids[2], "sessionId": "bench",
                        "timestamp": "2026-03-01T10:00:03Z",
                        "message": {"id": f"msg_{n}b", "role": "assistant", "content": [{"type": "text", "text": f"done {n}"}]}})
        parent = ids[3]
    return "\n".join(json.dumps(entry) for entry in out) + "\n"


def codex(events: int) -> str:
    meta = {"id": "bench", "cwd": "/home/dev/app", "base_instructions": {"text": "You are Codex."}}
    out: list[dict[str, Any]] = [{"timestamp": "2026-03-01T10:00:00Z", "type": "session_meta", "payload": meta}]
    for n in range(0, events, 3):
        call = f"call_{n}"
        out.append({"timestamp": "2026-03-01T10:00:01Z", "type": "response_item",
                    "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"step {n}"}]}})
        out.append({"timestamp": "2026-03-01T10:00:02Z", "type": "response_item",
                    "payload": {"type": "function_call", "name": "exec_command", "call_id": call,
                                "arguments": json.dumps({"cmd": f"rg -n value_{n} src"})}})
        out.append({"timestamp": "2026-03-01T10:00:03Z", "type": "response_item",
                    "payload": {"type": "function_call_output", "call_id": call,
                                "output": "\n".join(f"src/module_{k}.py:{k + 1}:value_{n}" for k in range(20))}})
        if n and n % 999 == 0:
            out.append({"timestamp": "2026-03-01T10:00:04Z", "type": "compacted", "payload": {"message": f"summary {n}"}})
    return "\n".join(json.dumps(entry) for entry in out) + "\n"


def swe_agent(events: int) -> str:
    history: list[dict[str, Any]] = [{"role": "system", "content": "SETTING: you are an autonomous programmer"},
                                     {"role": "user", "content": "ISSUE:\nvalue is wrong"}]
    for n in range(0, events, 2):
        history.append({"role": "assistant", "content": f"open it {n}", "action": f"open src/module_{n % 97}.py {n % 300}"})
        window = "\n".join(f"{k}:    line {k}" for k in range(n % 300, n % 300 + 100))
        history.append({"role": "user", "content": f"[File: /repo/src/module_{n % 97}.py (400 lines total)]\n{window}"})
    return json.dumps({"environment": "swe_main", "trajectory": [{"state": '{"working_dir": "/repo"}'}],
                       "history": history, "info": {}})


def openhands(events: int) -> str:
    out: list[dict[str, Any]] = [{"id": 0, "source": "user", "action": "message", "args": {"content": "fix it"}}]
    for n in range(1, events, 2):
        out.append({"id": n, "source": "agent", "action": "run", "args": {"command": f"pytest -q tests/test_{n}.py",
                                                                          "thought": f"run {n}"}})
        out.append({"id": n + 1, "source": "agent", "observation": "run", "cause": n,
                    "content": f'Traceback (most recent call last):\n  File "/workspace/src/m{n % 97}.py", line 3, in f\nError'})
    return json.dumps(out)


def _json_only(path: Path) -> object:
    """The baseline: the file parsed with ``json`` and nothing else."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


WRITERS: dict[str, tuple[str, Callable[[int], str]]] = {
    "claude-code": (".jsonl", claude_code),
    "codex": (".jsonl", codex),
    "swe-agent": (".traj", swe_agent),
    "openhands": (".json", openhands),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.reps = 500, 1
    from scopelens.core.importers.detect import read_session_file
    from scopelens.core.importers.store_import import import_paths
    from scopelens.core.store.store import Store

    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="scopelens-import-") as tmp:
        for name, (suffix, write) in WRITERS.items():
            path = Path(tmp) / f"session{suffix}"
            path.write_text(write(args.events), encoding="utf-8")
            times, baseline, imports = [], [], []
            for rep in range(args.reps):
                start = time.perf_counter()
                session = read_session_file(path)
                times.append(time.perf_counter() - start)
                start = time.perf_counter()
                _json_only(path)
                baseline.append(time.perf_counter() - start)
                start = time.perf_counter()
                with Store.open(str(Path(tmp) / f"{name}-{rep}.db"), create=True) as store:
                    import_paths(store, [path], project="bench")
                imports.append(time.perf_counter() - start)
            assert session.format == name, (session.format, name)
            figures[name] = {"mb": round(path.stat().st_size / 1e6, 2), "read_s": round(min(times), 3),
                             "import_s": round(min(imports), 3), "json_s": round(min(baseline), 3),
                             "ratio": round(min(imports) / max(min(baseline), 1e-9), 1),
                             "calls": len(session.calls), "items": len(session.items)}
            print(f"{name:12} {args.events} events, {figures[name]['mb']} MB: imported in {figures[name]['import_s']} s "
                  f"(read {figures[name]['read_s']} s), json alone {figures[name]['json_s']} s "
                  f"({figures[name]['ratio']}x); {figures[name]['calls']} calls, {figures[name]['items']} items")
    slowest = max(f["import_s"] for f in figures.values())
    verdict = "PASS" if slowest <= TARGET_S else "FAIL"
    print(f"slowest import {slowest} s of the {TARGET_S:.0f} s an import may take: {verdict}")
    if args.json:
        args.json.write_text(json.dumps({"events": args.events, "formats": figures, "target_s": TARGET_S}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
