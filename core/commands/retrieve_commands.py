"""``scopelens retrieve`` and ``scopelens memory …``: the pipeline and memory governance."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.table import Table

from scopelens.core.clock import when_stored
from scopelens.core.contracts import MemoryRecord, RetrievalIntent, RetrievalScope, load_input_file
from scopelens.core.memory import (
    deprecate,
    export_jsonl,
    import_memories,
    link_conflict,
    list_memories,
    memory_history,
    promote,
    read_jsonl,
)
from scopelens.core.output import console, plain_row, print_json
from scopelens.core.pipeline.policy import find_policy
from scopelens.core.pipeline.retriever import Retriever
from scopelens.core.store.store import Store
from scopelens.core.textsafety import clip
from scopelens.core.vocab import MemoryStatus


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    retrieve = subparsers.add_parser("retrieve", parents=[common], help="run a scoped retrieval and record its snapshot")
    retrieve.add_argument("--project", required=True, help="the project to retrieve from (it must be known to the store)")
    retrieve.add_argument("--intent", required=True, type=Path, help="intent JSON file")
    retrieve.add_argument("--scope", type=Path, help="scope JSON file (narrows or sets fields)")
    retrieve.add_argument("--session", help="append to this session (default: a new one)")
    retrieve.add_argument(
        "--branch",
        help="the branch to read (default: the session's, else the project's only indexed branch, "
        "else the workspace's git branch)",
    )
    retrieve.add_argument("--policy", type=Path, help="policy TOML (default: WORKSPACE/.scopelens/policy.toml)")
    retrieve.add_argument("--workspace", type=Path, help="workspace root (for its policy and as the scope's root)")
    retrieve.add_argument("--json", action="store_true", help="print JSON")
    retrieve.set_defaults(run=run_retrieve)

    memory = subparsers.add_parser("memory", parents=[common], help="governed memory records")
    actions = memory.add_subparsers(dest="memory_command", metavar="ACTION", required=True)
    imp = actions.add_parser("import", parents=[common], help="import records from JSONL")
    imp.add_argument("file", type=Path, help="a JSONL file of memory records (candidate or private)")
    imp.set_defaults(run=run_memory_import)
    exp = actions.add_parser("export", parents=[common], help="export records as JSONL")
    exp.add_argument("--project", help="only this project (default: every project)")
    exp.set_defaults(run=run_memory_export)
    lst = actions.add_parser("list", parents=[common], help="list records")
    lst.add_argument("--project", help="only this project (default: every project)")
    lst.add_argument("--status", choices=[s.value for s in MemoryStatus], help="only this status (default: every status)")
    lst.add_argument("--json", action="store_true", help="print JSON")
    lst.set_defaults(run=run_memory_list)
    for name, helptext in (("promote", "candidate -> verified"), ("deprecate", "mark as history")):
        action = actions.add_parser(name, parents=[common], help=helptext)
        action.add_argument("id", help="the memory id")
        action.set_defaults(run=run_memory_status, action=name)
    history = actions.add_parser(
        "history", parents=[common], help="every version of one record: its governance changes, oldest first"
    )
    history.add_argument("id", help="the memory id")
    history.add_argument("--json", action="store_true", help="print JSON")
    history.set_defaults(run=run_memory_history)
    link = actions.add_parser("link-conflict", parents=[common], help="mark two records as conflicting")
    link.add_argument("first", help="a memory id")
    link.add_argument("second", help="the memory id it conflicts with")
    link.set_defaults(run=run_memory_link)


def run_retrieve(args: argparse.Namespace) -> int:
    intent = load_input_file(RetrievalIntent, args.intent, what="intent")
    scope = load_input_file(RetrievalScope, args.scope, what="scope") if args.scope else None
    workspace = args.workspace.resolve() if args.workspace else None
    policy = find_policy(workspace, args.policy)
    # Not create=True: a retrieval needs a known project, which a new store cannot have.
    with Store.open(args.db) as store:
        observation = Retriever(store, policy=policy, workspace_root=workspace).retrieve(
            intent, scope, project=args.project, session_id=args.session, branch=args.branch
        )
    if args.json:
        json.dump(observation.to_json(), sys.stdout, ensure_ascii=False, indent=2)
        sys.stdout.write("\n")
        return 0
    sys.stdout.write(observation.context_block)
    funnel = observation.snapshot.funnel().line()
    print(f"\n-- session {observation.session_id} snapshot {observation.snapshot_id}: {funnel}", file=sys.stderr)
    return 0


def run_memory_import(args: argparse.Namespace) -> int:
    records = read_jsonl(args.file)
    with Store.open(args.db, create=True) as store:
        imported, redactions = import_memories(store, records)
    console().print(f"imported {imported} memory record(s); {redactions} secret(s) redacted")
    return 0


def run_memory_export(args: argparse.Namespace) -> int:
    with Store.open(args.db, read_only=True) as store:
        sys.stdout.write(export_jsonl(list_memories(store, project=args.project)))
    return 0


def run_memory_list(args: argparse.Namespace) -> int:
    with Store.open(args.db, read_only=True) as store:
        records = list_memories(store, project=args.project, status=MemoryStatus(args.status) if args.status else None)
    if args.json:
        print_json("memories", {"memories": [r.model_dump(mode="json") for r in records]})
        return 0
    table = Table("id", "project", "status", "content")
    for record in records:
        plain_row(
            table,
            record.id, record.project, record.status.value, clip(record.content, 80)
        )
    console().print(table)
    return 0


def run_memory_status(args: argparse.Namespace) -> int:
    with Store.open(args.db) as store:
        record = (promote if args.action == "promote" else deprecate)(store, args.id)
    console().print(f"memory {record.id} is now {record.status.value}", markup=False)
    return 0


def run_memory_history(args: argparse.Namespace) -> int:
    with Store.open(args.db, read_only=True) as store:
        versions = memory_history(store, args.id)
    records = [MemoryRecord.model_validate_json(v.body) for v in versions]
    if args.json:
        print_json("memory-history", {"memory_id": args.id, "versions": [
            {"version": v.version, "recorded_at": v.recorded_at, "change": v.change.value, "status": v.status,
             "content_hash": v.content_hash, "hash": v.hash, "record": r.model_dump(mode="json")}
            for v, r in zip(versions, records, strict=True)
        ]})
        return 0
    table = Table("version", "recorded (UTC)", "change", "status", "content")
    for version, record in zip(versions, records, strict=True):
        plain_row(
            table,
            str(version.version), when_stored(version.recorded_at), version.change.value, version.status,
            clip(record.content, 80),
        )
    console().print(table)
    return 0


def run_memory_link(args: argparse.Namespace) -> int:
    with Store.open(args.db) as store:
        first, second = link_conflict(store, args.first, args.second)
    console().print(f"memories {first.id} and {second.id} are now conflicted", markup=False)
    return 0
