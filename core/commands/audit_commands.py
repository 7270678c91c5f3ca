"""``scopelens replay``, ``drift`` and ``why-not``: reading the past, and comparing it with today."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from scopelens.core.audit.drift import DriftOutcome, compute_drift, drift_session, list_drift_runs
from scopelens.core.audit.rebuild import rebuild_store
from scopelens.core.audit.replay import ReplayedTurn, replay_session
from scopelens.core.audit.whynot import QUERY_KINDS, QueryKind, why_not
from scopelens.core.clock import stored_time, when_stored
from scopelens.core.errors import IntegrityError, InvalidInputError
from scopelens.core.output import console, literal, plain_row, print_json, progress_console, shows_progress
from scopelens.core.store.store import Store, event_summary
from scopelens.core.textsafety import short
from scopelens.core.vocab import EventType


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    replay = subparsers.add_parser("replay", parents=[common], help="what the model was shown, turn by turn")
    replay.add_argument("session", help="the session id")
    replay.add_argument("--turn", type=int, help="only this turn (default: every turn)")
    replay.add_argument("--json", action="store_true", help="print JSON")
    replay.set_defaults(run=run_replay)

    drift = subparsers.add_parser("drift", parents=[common], help="a snapshot against today's index")
    drift.add_argument("snapshot", nargs="?", help="snapshot id")
    drift.add_argument("--session", help="drift every snapshot of this session")
    drift.add_argument("--list", action="store_true", help="list past drift runs instead of running one")
    drift.add_argument("--json", action="store_true", help="print JSON")
    drift.set_defaults(run=run_drift)

    whynot = subparsers.add_parser(
        "why-not", parents=[common], help="where a path, symbol, text or source_ref dropped out, per chunk"
    )
    whynot.add_argument("snapshot", help="the snapshot id")
    target = whynot.add_mutually_exclusive_group(required=True)
    target.add_argument("--path", help="a path or folder, or any source_ref a screen shows (src/x.py:1-5, memory:m-1)")
    target.add_argument("--symbol", help="a symbol, qualified or not (DataTable.move_cursor)")
    target.add_argument("--text", help="text the model should have seen (case-insensitive, literal)")
    whynot.add_argument("--json", action="store_true", help="print JSON")
    whynot.set_defaults(run=run_why_not)

    rebuild = subparsers.add_parser(
        "rebuild", parents=[common],
        help="copy a store into a new, empty one (--db) with every detectable secret redacted; records its origin",
    )
    rebuild.add_argument("--from", dest="source", required=True, metavar="URL", help="the store to rebuild (read only)")
    rebuild.add_argument("--json", action="store_true", help="print JSON")
    rebuild.set_defaults(run=run_rebuild)


def run_replay(args: argparse.Namespace) -> int:
    with Store.open(args.db, read_only=True) as store:
        replayed = replay_session(store, args.session, turn=args.turn)
    if args.json:
        print_json("replay", {"session": replayed.header.model_dump(mode="json"), "ok": replayed.ok,
                              "turns": [_turn_json(t) for t in replayed.turns]})
    else:
        out = console()
        header = replayed.header
        out.print(f"[bold]session {literal(header.id)}[/] project {literal(header.project)} {literal(header.title)}")
        for turn in replayed.turns:
            _print_turn(out, turn)
        out.print("[green]all hashes verify[/]" if replayed.ok else "[red]some hashes do not verify[/]")
    if not replayed.ok:
        raise IntegrityError("replay found hashes that do not verify")
    return 0


def _turn_json(turn: ReplayedTurn) -> dict[str, Any]:
    return {
        "turn": turn.turn,
        "ok": turn.ok,
        "events": [e.model_dump(mode="json") for e in turn.events],
        "snapshots": [
            {
                "snapshot_id": s.snapshot.id,
                "content_hash": s.content_hash,
                "context_block": s.context_block,
                "items": [
                    {"citation_id": i.citation_id, "source_ref": i.source_ref, "visible_text": i.visible_text,
                     "visible_text_hash": i.visible_text_hash, "trim_ranges": [r.model_dump() for r in i.trim_ranges]}
                    for i in s.snapshot.selected
                ],
                "citations": {k: v.model_dump(mode="json") for k, v in s.snapshot.projection.citation_map.items()},
                "checks": [{"what": c.what, "recorded": c.recorded, "derived": c.derived, "ok": c.ok} for c in s.checks],
            }
            for s in turn.snapshots
        ],
        "checks": [{"what": c.what, "recorded": c.recorded, "derived": c.derived, "ok": c.ok} for c in turn.checks],
    }


def _print_turn(out: Any, turn: ReplayedTurn) -> None:
    out.rule(f"turn {turn.turn}")
    for event in turn.events:
        if event.type == EventType.RETRIEVAL_SNAPSHOT_CREATED:
            continue
        out.print(f"[dim]#{event.seq}[/] [bold]{event.type.value}[/] {literal(event_summary(event))}")
        if event.type == EventType.MODEL_RESPONSE and event.payload.get("cited_ids"):
            out.print(f"    cites: {', '.join(event.payload['cited_ids'])}", markup=False)
    for replayed in turn.snapshots:
        bad = [c for c in replayed.checks if not c.ok]
        mark = "[green]✓[/]" if not bad else "[red]✗[/]"
        out.print(f"{mark} snapshot {literal(replayed.snapshot.id)} hash {short(replayed.content_hash)} "
                  f"({len(replayed.snapshot.selected)} items)")
        out.print(replayed.context_block, markup=False, highlight=False)
        for check in bad:
            out.print(f"[red]✗ {check.what}: recorded {short(check.recorded)} derived {short(check.derived)}[/]")
    for check in turn.checks:
        out.print(f"{'[green]✓' if check.ok else '[red]✗'}[/] {check.what} {short(check.recorded)}")


def run_drift(args: argparse.Namespace) -> int:
    if args.list:
        with Store.open(args.db, read_only=True) as store:
            runs = list_drift_runs(store, args.snapshot)
        if args.json:
            print_json("drift-runs", {"runs": [r.__dict__ for r in runs]})
            return 0
        table = Table("run", "snapshot", "at (UTC)", "index", "summary", "checks", "last checked (UTC)")
        for r in runs:
            plain_row(table, r.id, r.snapshot_id, when_stored(r.created_at), r.index_version, r.summary, str(r.checks),
                      when_stored(r.last_checked_at) if r.last_checked_at else "-")
        console().print(table if runs else "No drift runs recorded yet.")
        return 0
    if bool(args.snapshot) == bool(args.session):
        raise InvalidInputError("drift needs a SNAPSHOT_ID or --session S (one of them)")
    with Store.open(args.db) as store:
        if args.snapshot:
            outcomes = [compute_drift(store, args.snapshot)]
        else:
            with Progress(TextColumn("drift"), BarColumn(), MofNCompleteColumn(), console=progress_console(),
                          transient=True, disable=not shows_progress(args.json)) as bar:
                task = bar.add_task("", total=None)
                outcomes = drift_session(store, args.session,
                                         progress=lambda done, total: bar.update(task, completed=done, total=total))
    if args.json:
        print_json("drift", {"reports": [_drift_json(o) for o in outcomes]})
        return 0
    for outcome in outcomes:
        _print_drift(outcome)
    return 0


def _drift_json(outcome: DriftOutcome) -> dict[str, Any]:
    """A drift report as ``--json`` prints it, with what this run recorded: ``recorded`` is
    ``new run``, ``confirmed`` (the report is the run it found again: ``confirmed_run_id``,
    checked at ``checked_at``) or ``not recorded``."""
    report = outcome.report
    return report.model_dump(mode="json") | {
        "counts": report.counts(),
        "recorded": outcome.recorded,
        "confirmed_run_id": outcome.confirmed_run_id,
        "checked_at": stored_time(outcome.checked_at) if outcome.checked_at else None,
    }


def _print_drift(outcome: DriftOutcome) -> None:
    out = console()
    report = outcome.report
    out.print(f"[bold]drift {literal(report.id)}[/] of snapshot {literal(report.snapshot_id)}: index "
              f"{literal(report.index_version_then)} -> {literal(report.index_version_now)}")
    if outcome.recorded == "confirmed":
        # No times here: the run's, and when it was last checked, are in `drift --list`'s columns.
        out.print(f"unchanged since run {literal(report.id)}: recorded as a confirmation of that run, "
                  "not as a new run")
    elif outcome.recorded == "not recorded":
        out.print("not recorded (read-only store)")
    out.print(f"engine {'changed' if report.engine_changed else 'unchanged'} ({report.engine_then} -> {report.engine_now}), "
              f"config {'changed' if report.config_changed else 'unchanged'}, "
              f"index {'changed' if report.index_changed else 'unchanged'}")
    # Items from several workspace roots (or branches) can share a source_ref: then say where.
    places = report.spans_places()
    table = Table("class", "source_ref", "rank then", "rank now", "note")
    for item in report.items:
        note = item.reason or ""
        if item.stage_today:
            note = f"{item.stage_today.value}: {note}"
        ref = f"{item.place()}:{item.source_ref}" if places and item.place() else item.source_ref
        plain_row(table, item.drift_class.value, ref, str(item.frozen_rank or "-"), str(item.today_rank or "-"), note)
    out.print(table)
    for item in report.items:
        if item.diff:  # set exactly when the visible text differs: content-changed, or the same text shown otherwise
            out.print(item.diff, markup=False, highlight=False)
    out.print(report.summary(), markup=False)


def run_why_not(args: argparse.Namespace) -> int:
    kind: QueryKind
    kind, value = next((k, getattr(args, k)) for k in QUERY_KINDS if getattr(args, k) is not None)
    with Store.open(args.db, read_only=True) as store:
        answer = why_not(store, args.snapshot, kind, value)
    if args.json:
        print_json("why-not", answer.model_dump(mode="json"))
        return 0
    out = console()
    out.print(answer.summary, markup=False)
    if len(answer.matches) > 1:
        for match in answer.matches:
            cited = f" [{match.citation_id}]" if match.citation_id else ""
            probe = " (probe)" if match.from_probe else ""
            row = f" (candidate #{match.ordinal + 1})" if match.ordinal is not None else ""
            out.print(f"  {match.stage.value:<13} {match.source_ref}{cited}{probe}{row}: {match.reason}", markup=False)
    for query in answer.sub_queries:
        rank = f", would rank {query.would_be_rank}" if query.would_be_rank else ""
        out.print(f"  ran {query.id} ({query.intent}, top {query.top_k}{rank})", markup=False)
    return 0


def run_rebuild(args: argparse.Namespace) -> int:
    with Store.open(args.source, read_only=True) as old, Store.open(args.db, create=True) as new:
        report = rebuild_store(old, new)
    if args.json:
        print_json("rebuild", dataclasses.asdict(report))
        return 0
    out = console()
    out.print(f"rebuilt from {report.rebuilt_from}", markup=False)
    out.print(
        f"{report.sessions} session(s), {report.events} event(s), {report.snapshots} snapshot(s) "
        f"({report.snapshots_changed} changed by redaction), {report.memories} memory record(s)"
    )
    out.print(f"new store head: {report.new_head}; the origin is recorded in session {report.record_session}", markup=False)
    out.print("not copied: the workspace index (re-index it) and drift runs (drift re-computes them)")
    return 0
