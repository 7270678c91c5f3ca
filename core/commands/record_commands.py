"""``scopelens record SCRIPT...`` and ``scopelens demo``: recorded sessions from scripts."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from scopelens.core.errors import InvalidInputError
from scopelens.core.output import print_json
from scopelens.core.record.recorder import RecordResult
from scopelens.core.store.store import Store
from scopelens.core.textsafety import short
from scopelens.core.vocab import Outcome


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    record = subparsers.add_parser(
        "record", parents=[common], help="record session scripts through the engine (deterministic)"
    )
    record.add_argument("scripts", nargs="+", type=Path, metavar="SCRIPT", help="a script.json, or a scenario directory")
    record.add_argument("--json", action="store_true", help="print JSON")
    record.set_defaults(run=run_record)

    debug_only = argparse.ArgumentParser(add_help=False)
    debug_only.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    demo = subparsers.add_parser(
        "demo", parents=[debug_only], help="build the sample store in your data directory and open it"
    )
    demo.add_argument("--no-ui", action="store_true", help="build it and print a summary instead of opening the inspector")
    demo.add_argument("--rebuild", action="store_true", help="rebuild the store even if the samples did not change")
    demo.add_argument("--json", action="store_true", help="with --no-ui: print the store's path, head and findings as JSON")
    demo.set_defaults(run=run_demo)


# --------------------------------------------------------------------------- record


def run_record(args: argparse.Namespace) -> int:
    from scopelens.core.record.recorder import record_scripts

    results = record_scripts(list(args.scripts), db=args.db)
    with Store.open(args.db, read_only=True) as store:
        events, head = store.store_head()
    unmet = [(r.scenario, e.describe()) for r in results for e in r.unmet]
    if args.json:
        print_json("record", {"store_head": head, "events": events, "results": [r.to_json() for r in results]})
    else:
        for result in results:
            _print_result(result)
        print(f"store head: {head} ({events} events)")
    if unmet:
        listed = "; ".join(f"{scenario}: {what}" for scenario, what in unmet)
        print(f"error: {len(unmet)} expected finding(s) not produced: {listed}", file=sys.stderr)
        return 1
    return 0


def _print_result(result: RecordResult) -> None:
    # Plain print, not rich: explanations quote citation ids like [rule#1], which rich reads as markup.
    turns = max((s.turn for s in result.snapshots), default=0)
    print(
        f"recorded {result.scenario}: session {result.session_id}, {result.events} events, "
        f"{len(result.snapshots)} snapshot(s) up to turn {turns}"
    )
    for snap in result.snapshots:
        print(
            f"  {snap.snapshot_id}  turn {snap.turn}  {snap.selected} selected, {snap.rejected} rejected  "
            f"{short(snap.snapshot_hash)}"
        )
    print(f"  findings ({len(result.findings)}):")
    for finding in result.findings:
        print(f"    {finding.one_line()}")
    if result.expectations:
        met = len(result.expectations) - len(result.unmet)
        print(f"  expected findings: {met} of {len(result.expectations)} present")


# --------------------------------------------------------------------------- demo


def run_demo(args: argparse.Namespace) -> int:
    from scopelens.core.commands import inspect_commands
    from scopelens.core.record.demo import ensure_demo_store

    if args.json and not args.no_ui:
        raise InvalidInputError("demo --json prints instead of opening the inspector: give --no-ui too")
    demo = ensure_demo_store(rebuild=args.rebuild)
    if args.json:
        print_json("demo", {"store": str(demo.path), "rebuilt": demo.rebuilt, "reason": demo.reason, **{
            key: demo.stamp.get(key) for key in ("store_head", "events", "engine_version", "scenarios")
        }})
        return 0
    print_demo_summary(demo.path, demo.rebuilt, demo.reason, demo.stamp)
    if args.no_ui:
        return 0
    return inspect_commands.open_inspector(str(demo.path))


def print_demo_summary(path: Path, rebuilt: bool, reason: str, stamp: dict[str, Any]) -> None:
    scenarios = stamp.get("scenarios", [])
    state = f"built just now ({reason})" if rebuilt else f"reused ({reason})"
    print(f"demo store: {path} [{state}]")
    print(f"store head: {stamp.get('store_head')} ({stamp.get('events')} events)")
    print(f"{len(scenarios)} scenario(s), {len(scenarios)} session(s), "
          f"{sum(len(s['snapshots']) for s in scenarios)} snapshot(s)")
    for scenario in scenarios:
        findings = scenario["findings"]
        outcomes = Counter(f["outcome"] for f in findings)
        counts = ", ".join(f"{outcomes[o.value]} {o.value}" for o in Outcome if outcomes[o.value])
        print(
            f"  {scenario['scenario']:<24} session {scenario['session_id']:<28} "
            f"{len(scenario['snapshots'])} snapshot(s)  {len(findings)} finding(s){': ' + counts if counts else ''}"
        )
        kinds = Counter(f"{f['kind']} ({f['outcome']})" for f in findings)
        for kind, count in sorted(kinds.items()):
            print(f"      {kind}{f' x{count}' if count > 1 else ''}")
        for missing in scenario.get("unmet", []):
            print(f"      expected but not found: {missing['finding']}")
    if any(scenario["findings"] for scenario in scenarios):
        print("in the inspector, f on the sessions screen lists the findings; enter opens the turn each is about")
