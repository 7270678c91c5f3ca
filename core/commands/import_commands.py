"""``scopelens import``: agent sessions (SWE-agent, Claude Code, Codex, OpenHands) into the store."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from rich.table import Table

from scopelens.core.errors import InvalidInputError
from scopelens.core.output import console, plain_row, print_json

FORMAT_NAMES = ("swe-agent", "claude-code", "codex", "openhands")


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    imports = subparsers.add_parser(
        "import", parents=[common],
        help="import agent sessions: what each model call had in its context, as observed snapshots",
    )
    imports.add_argument("paths", nargs="+", type=Path, metavar="FILE_OR_DIR",
                         help="a session file, or a directory of them (a Claude Code project directory)")
    imports.add_argument("--format", choices=FORMAT_NAMES, help="the sessions' format (default: told from the content)")
    imports.add_argument("--workspace", type=Path, metavar="DIR",
                         help="the checkout the sessions worked on: their paths are read against it (drift)")
    imports.add_argument("--project", help="the project to file the sessions under (default: the workspace's name)")
    imports.add_argument("--branch", help="the branch the sessions worked on")
    imports.add_argument("--json", action="store_true", help="print JSON")
    imports.set_defaults(run=run_import)


def run_import(args: argparse.Namespace) -> int:
    from scopelens.core.importers.store_import import import_paths
    from scopelens.core.store.store import Store

    workspace: Path | None = args.workspace
    if workspace is not None and not workspace.is_dir():
        raise InvalidInputError(f"--workspace {workspace}: not a directory")
    project = args.project or (workspace.resolve().name if workspace is not None else "imported")
    with Store.open(args.db, create=True) as store:
        report = import_paths(store, list(args.paths), project=project, format=args.format, workspace=workspace,
                              branch=args.branch)
    if args.json:
        print_json("import", {"project": project, "sessions": [dataclasses.asdict(o) for o in report.outcomes],
                              "skipped": report.skipped})
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
    out.print(f"project {project}: replay SESSION, why-not --session SESSION --path P, drift --session SESSION",
              markup=False)
    return 0
