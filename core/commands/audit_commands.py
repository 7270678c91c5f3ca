"""``scopelens replay``, ``drift`` and ``why-not``: reading the past, and comparing it with today."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from scopelens.core.audit.drift import DriftOutcome, compute_drift, drift_session, list_drift_runs
from scopelens.core.audit.observed import (
    NotImportedError,
    ObservedSession,
    SeenItem,
    Sighting,
    observed_session,
    read_observed,
    same_path,
    sighting,
)
from scopelens.core.audit.observed_drift import ObservedDrift, drift_observed
from scopelens.core.audit.rebuild import rebuild_store
from scopelens.core.audit.replay import ReplayedTurn, replay_session
from scopelens.core.audit.whynot import QUERY_KINDS, QueryKind, why_not
from scopelens.core.clock import stored_time, when_stored
from scopelens.core.contracts import ObservedCall
from scopelens.core.errors import IntegrityError, InvalidInputError
from scopelens.core.output import console, literal, plain_row, print_json, progress_console, shows_progress
from scopelens.core.store.store import Store, event_summary
from scopelens.core.textsafety import short
from scopelens.core.vocab import EventType, SnapshotKind


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    replay = subparsers.add_parser("replay", parents=[common], help="what the model was shown, turn by turn")
    replay.add_argument("session", help="the session id")
    replay.add_argument("--turn", type=int, help="only this turn (default: every turn)")
    replay.add_argument("--json", action="store_true", help="print JSON")
    replay.set_defaults(run=run_replay)

    drift = subparsers.add_parser("drift", parents=[common], help="a snapshot against today's index")
    drift.add_argument("snapshot", nargs="?", help="snapshot id")
    drift.add_argument("--session", help="drift every snapshot of this session (an imported one: its file reads)")
    drift.add_argument("--workspace", type=Path, metavar="DIR",
                       help="an imported session: the checkout to compare its file reads with (default: its import's)")
    drift.add_argument("--turn", type=int, help="an imported session: only the reads the call at this turn had in context")
    drift.add_argument("--list", action="store_true", help="list past drift runs instead of running one")
    drift.add_argument("--json", action="store_true", help="print JSON")
    drift.set_defaults(run=run_drift)

    whynot = subparsers.add_parser(
        "why-not", parents=[common], help="where a path, symbol, text or source_ref dropped out, per chunk"
    )
    whynot.add_argument("snapshot", nargs="?", help="the snapshot id (or --session for an imported session)")
    whynot.add_argument("--session", help="an imported session: did its model ever see or name --path, and when")
    whynot.add_argument("--instance", type=Path, metavar="FILE",
                        help="with --session: a SWE-bench instance (JSON); its gold files are marked (and asked of)")
    target = whynot.add_mutually_exclusive_group()
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
        snapshots = [s.snapshot for t in replayed.turns for s in t.snapshots]
        observed: ObservedSession | None = None
        if any(s.kind == SnapshotKind.OBSERVED for s in snapshots):
            # every turn replayed: its snapshots are the session's; one turn sees earlier ones too
            observed = observed_session(replayed.header, snapshots) if args.turn is None else read_observed(store, args.session)
    if args.json:
        print_json("replay", {"session": replayed.header.model_dump(mode="json"), "ok": replayed.ok,
                              "turns": [_turn_json(t, observed, detail=args.turn is not None) for t in replayed.turns]})
    else:
        out = console()
        header = replayed.header
        out.print(f"[bold]session {literal(header.id)}[/] project {literal(header.project)} {literal(header.title)}")
        if observed is not None:
            out.print("an imported session: each turn is one model call; its snapshot holds the context new at "
                      "that call, and the call saw the items listed with it", markup=False)
        for turn in replayed.turns:
            _print_turn(out, turn, observed, detail=args.turn is not None)
        out.print("[green]all hashes verify[/]" if replayed.ok else "[red]some hashes do not verify[/]")
    if not replayed.ok:
        raise IntegrityError("replay found hashes that do not verify")
    return 0


def _seen_json(seen: SeenItem) -> dict[str, Any]:
    return {"position": seen.position, "turn": seen.turn, "snapshot_id": seen.snapshot_id,
            "citation_id": seen.item.citation_id, "source_ref": seen.item.source_ref, "kind": seen.observed.kind.value,
            "tool": seen.observed.tool, "visible_text_hash": seen.item.visible_text_hash}


def _turn_json(turn: ReplayedTurn, observed: ObservedSession | None, *, detail: bool) -> dict[str, Any]:
    """A turn as ``replay --json`` prints it; an imported call's visible items only with
    ``--turn`` (every call of a long session would list the whole context again)."""
    seen: dict[str, Any] = {}
    for s in turn.snapshots:
        call = s.snapshot.observed
        if observed is not None and call is not None:
            seen[s.snapshot.id] = {"kind": "observed", "call": call.call, "visible_from": call.visible_from,
                                   "visible_to": call.visible_to, "replaced": call.replaced,
                                   "not_recorded": list(call.not_recorded), "tool_calls": list(call.tool_calls)}
            if detail:
                seen[s.snapshot.id]["visible"] = [_seen_json(v) for v in observed.visible(s.snapshot.turn)]
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
                # only for other kinds: a retrieval's replay stays byte-identical to what it always was
                **({"snapshot_kind": s.snapshot.kind.value} if s.snapshot.kind != SnapshotKind.RETRIEVED else {}),
                **({"observed": seen[s.snapshot.id]} if s.snapshot.id in seen else {}),
            }
            for s in turn.snapshots
        ],
        "checks": [{"what": c.what, "recorded": c.recorded, "derived": c.derived, "ok": c.ok} for c in turn.checks],
    }


def _print_turn(out: Any, turn: ReplayedTurn, observed: ObservedSession | None, *, detail: bool) -> None:
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
        kind = replayed.snapshot.kind
        what = {SnapshotKind.RETRIEVED: "snapshot", SnapshotKind.OBSERVED: "observed snapshot",
                SnapshotKind.COUNTERFACTUAL: "counterfactual snapshot (never shown to this model)"}[kind]
        out.print(f"{mark} {what} {literal(replayed.snapshot.id)} hash {short(replayed.content_hash)} "
                  f"({len(replayed.snapshot.selected)} items)")
        call = replayed.snapshot.observed
        if observed is not None and call is not None:
            _print_seen(out, observed, replayed.snapshot.turn, call, detail=detail)
        out.print(replayed.context_block, markup=False, highlight=False)
        for check in bad:
            out.print(f"[red]✗ {check.what}: recorded {short(check.recorded)} derived {short(check.derived)}[/]")
    for check in turn.checks:
        out.print(f"{'[green]✓' if check.ok else '[red]✗'}[/] {check.what} {short(check.recorded)}")


def _print_seen(out: Any, observed: ObservedSession, turn: int, call: ObservedCall, *, detail: bool) -> None:
    visible = observed.visible(turn)
    earlier = [v for v in visible if v.turn < turn]
    out.print(f"call {call.call} saw {len(visible)} items (positions {call.visible_from + 1}-{call.visible_to}): "
              f"{len(earlier)} from earlier calls, {len(visible) - len(earlier)} new below", markup=False)
    if call.replaced is not None:
        out.print(f"a compaction before it replaced positions {call.replaced[0] + 1}-{call.replaced[1]}", markup=False)
    if call.not_recorded:
        out.print(f"the {call.format} log does not record: {'; '.join(call.not_recorded)}", markup=False)
    if detail:
        for v in earlier:
            out.print(f"  {v.item.citation_id:<12} {v.item.source_ref} · {v.how()} · first seen at turn {v.turn}",
                      markup=False)


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
    observed = _observed_drift(args)
    if observed is not None:
        if args.json:
            print_json("drift-observed", _observed_drift_json(observed))
        else:
            _print_observed_drift(observed)
        return 0
    if args.workspace is not None or args.turn is not None:
        raise InvalidInputError("--workspace and --turn are for imported sessions; a retrieval drifts against its index")
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


def _observed_drift(args: argparse.Namespace) -> ObservedDrift | None:
    """Drift of an imported session (or of one of its observed snapshots), else None."""
    with Store.open(args.db, read_only=True) as store:
        if args.snapshot:
            snapshot = store.get_snapshot(args.snapshot).snapshot
            if snapshot.kind != SnapshotKind.OBSERVED:
                return None
            session_id, turn = snapshot.session_id, snapshot.turn
        else:
            session_id, turn = args.session, args.turn
        try:
            session = read_observed(store, session_id)
        except NotImportedError:
            return None  # a session of retrievals: drift re-runs them
    root = args.workspace or (Path(session.header.workspace_root) if session.header.workspace_root else None)
    if root is None:
        raise InvalidInputError(f"session {session_id} was imported without --workspace: pass drift --workspace DIR")
    if not root.is_dir():
        raise InvalidInputError(f"workspace {root}: not a directory")
    return drift_observed(session, root, turn=turn)


def _observed_drift_json(drift: ObservedDrift) -> dict[str, Any]:
    return {"session_id": drift.session_id, "workspace_root": drift.workspace_root, "counts": drift.counts(),
            "items": [i.model_dump(mode="json") for i in drift.items],
            "not_compared": [{"source_ref": ref, "why": why} for ref, why in drift.not_compared],
            "summary": drift.summary()}


def _print_observed_drift(drift: ObservedDrift) -> None:
    out = console()
    out.print(f"[bold]drift of imported session {literal(drift.session_id)}[/]: each file read the model saw, "
              f"against {literal(drift.workspace_root)} today (not recorded: nothing is re-run)")
    table = Table("class", "source_ref", "seen as", "note")
    for item in drift.items:
        plain_row(table, item.drift_class.value, item.source_ref, item.frozen_citation or "-", item.reason or "")
    for ref, why in drift.not_compared:
        plain_row(table, "not compared", ref, "-", why)
    out.print(table)
    for item in drift.items:
        if item.diff:
            out.print(item.diff, markup=False, highlight=False)
    out.print(drift.summary(), markup=False)


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
    if args.session is not None or args.instance is not None:
        return run_session_why_not(args)
    if args.snapshot is None:
        raise InvalidInputError("why-not needs a SNAPSHOT_ID (or --session S for an imported session)")
    given = [k for k in QUERY_KINDS if getattr(args, k) is not None]
    if not given:
        raise InvalidInputError("why-not needs one of --path, --symbol or --text")
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


def run_session_why_not(args: argparse.Namespace) -> int:
    """``why-not --session S --path P [--instance F]``: whether an imported session's model saw P."""
    from scopelens.core.importers.instance import read_instance

    if args.session is None or args.snapshot is not None:
        raise InvalidInputError("why-not --session S asks of an imported session: give the session, not a snapshot id")
    if args.symbol is not None or args.text is not None:
        raise InvalidInputError("why-not --session answers for files: use --path (and --instance for the gold files)")
    instance = read_instance(args.instance) if args.instance is not None else None
    gold = instance.gold_files if instance is not None else ()
    paths = [args.path] if args.path is not None else list(gold)
    if not paths:
        raise InvalidInputError("why-not --session needs --path P, or --instance F to ask of its gold files")
    with Store.open(args.db, read_only=True) as store:
        session = read_observed(store, args.session)
    answers = [sighting(session, path, gold=any(same_path(g, path) for g in gold)) for path in paths]
    if args.json:
        print_json("why-not-session", {
            "session_id": args.session,
            "instance_id": instance.instance_id if instance is not None else None,
            "answers": [_sighting_json(a) for a in answers],
        })
        return 0
    out = console()
    for answer in answers:
        out.print(answer.summary(), markup=False)
        for n, read in enumerate(answer.reads):
            if n:  # the first is in the summary
                out.print(f"  also read at turn {read.turn}: {read.item.source_ref} by {read.how()}", markup=False)
    if instance is not None and instance.fail_to_pass:
        out.print(f"the instance's failing tests: {', '.join(instance.fail_to_pass)}", markup=False)
    return 0


def _sighting_json(answer: Sighting) -> dict[str, Any]:
    def seen(s: SeenItem) -> dict[str, Any]:
        return {"turn": s.turn, "snapshot_id": s.snapshot_id, "citation_id": s.item.citation_id,
                "source_ref": s.item.source_ref, "kind": s.observed.kind.value, "tool": s.observed.tool,
                "ref": s.observed.ref, "line_start": s.item.line_start, "line_end": s.item.line_end}

    return {"path": answer.path, "status": answer.status, "gold": answer.gold, "turn": answer.turn,
            "summary": answer.summary(), "reads": [seen(r) for r in answer.reads],
            "first_named": seen(answer.first_named) if answer.first_named else None}


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
