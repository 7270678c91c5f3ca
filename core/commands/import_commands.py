"""``scopelens import``: agent sessions (SWE-agent, Claude Code, Codex, OpenHands) into the store."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from scopelens.core.errors import InvalidInputError
from scopelens.core.importers.detect import FORMATS
from scopelens.core.output import console, plain_row, print_json

if TYPE_CHECKING:
    from scopelens.core.importers.counterfactual import CounterfactualTurn


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    imports = subparsers.add_parser(
        "import", parents=[common],
        help="import agent sessions: what each model call had in its context, as observed snapshots",
    )
    imports.add_argument("paths", nargs="+", type=Path, metavar="FILE_OR_DIR",
                         help="a session file, or a directory of them (a Claude Code project directory)")
    imports.add_argument("--format", choices=FORMATS, help="the sessions' format (default: told from the content)")
    imports.add_argument("--workspace", type=Path, metavar="DIR",
                         help="the checkout the sessions worked on: their paths are read against it (drift)")
    imports.add_argument("--project", help="the project to file the sessions under (default: the workspace's name)")
    imports.add_argument("--branch", help="the branch the sessions worked on (default: the one a Claude Code or Codex "
                                           "session records)")
    imports.add_argument("--retrieve", action="store_true",
                         help="also run scoped retrieval at each imported call (the project must be indexed): "
                              "stored as counterfactual snapshots, never mixed with what the model saw")
    imports.add_argument("--instance", type=Path, metavar="FILE",
                         help="with --retrieve: a SWE-bench instance (JSON): its FAIL_TO_PASS tests join each intent, "
                              "and its gold files are ranked")
    imports.add_argument("--json", action="store_true", help="print JSON")
    imports.set_defaults(run=run_import)


def run_import(args: argparse.Namespace) -> int:
    from scopelens.core.importers.counterfactual import run_counterfactuals
    from scopelens.core.importers.instance import read_instance
    from scopelens.core.importers.store_import import import_paths, new_turns
    from scopelens.core.store.store import Store

    workspace: Path | None = args.workspace
    if workspace is not None and not workspace.is_dir():
        raise InvalidInputError(f"--workspace {workspace}: not a directory")
    project = args.project or (workspace.resolve().name if workspace is not None else "imported")
    if args.instance is not None and not args.retrieve:
        raise InvalidInputError("--instance goes with --retrieve (for why-not, pass it to why-not --session)")
    instance = read_instance(args.instance) if args.instance is not None else None
    counterfactuals: dict[str, list[CounterfactualTurn]] = {}
    with Store.open(args.db, create=True) as store:
        if args.retrieve:  # before anything is written: retrieval needs the project's index
            store.require_project(project)
        report = import_paths(store, list(args.paths), project=project, format=args.format, workspace=workspace,
                              branch=args.branch)
        if args.retrieve:
            for o in report.outcomes:
                if o.calls:
                    counterfactuals[o.session_id] = run_counterfactuals(
                        store, o.session_id, instance=instance, turns=new_turns(store, o.session_id, o.calls))
    if args.json:
        print_json("import", {"project": project, "sessions": [dataclasses.asdict(o) for o in report.outcomes],
                              "skipped": report.skipped,
                              "counterfactuals": {k: [dataclasses.asdict(t) for t in v] for k, v in counterfactuals.items()}})
        return 0
    out = console()
    table = Table("session", "status", "format", "calls", "items", "redacted", "source")
    for o in report.outcomes:
        plain_row(table, o.session_id, o.status, o.format, str(o.calls), str(o.items), str(o.redactions), o.source)
    out.print(table)
    for o in report.outcomes:
        if o.note:
            out.print(f"{o.source}: {o.note}", markup=False)
        if o.unknown:
            counted = ", ".join(f"{name} {n}" for name, n in sorted(o.unknown.items()))
            out.print(f"{o.source}: entries of types not read (counted, not fatal): {counted}", markup=False)
    for skipped in report.skipped:
        out.print(f"skipped: {skipped}", markup=False)
    for session_id, turns in counterfactuals.items():
        _print_counterfactuals(out, session_id, turns)
    out.print(f"project {project}: replay SESSION, why-not --session SESSION --path P, drift --session SESSION",
              markup=False)
    return 0


def _print_counterfactuals(out: Any, session_id: str, turns: list[CounterfactualTurn]) -> None:
    """Per turn, each gold or edited file: seen by the agent by then, and its rank in the
    counterfactual retrieval (✓: in its block)."""
    table = Table("turn", "counterfactual", "file", "agent had seen it", "rank in retrieval",
                  title=f"session {session_id}: what scoped retrieval would have given, turn by turn")
    for turn in turns:
        if not turn.files:  # no gold (--instance) and no edited file to rank: what it showed
            shown = f"{len(turn.shown)} shown, first {turn.shown[0]}" if turn.shown else "nothing in scope"
            plain_row(table, str(turn.turn), turn.snapshot_id, "(no gold or edited file)", "-", shown)
        for rank in turn.files:
            where = "-" if rank.rank is None else f"{rank.rank}{' ✓ shown' if rank.selected else ''}"
            marks = ", ".join(m for m, on in (("gold", rank.gold), ("edited", rank.edited)) if on)
            plain_row(table, str(turn.turn), turn.snapshot_id, f"{rank.path} ({marks})",
                      "yes" if rank.seen_by_agent else "no", where)
    out.print(table)
