"""``scopelens sessions``, ``show ID``, ``verify``, ``checkpoint`` and ``migrate``: reading the audit store."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from rich.table import Table

from scopelens.core.clock import when
from scopelens.core.errors import IntegrityError, InvalidInputError, UnknownIdError
from scopelens.core.output import console, literal, plain_row, print_json
from scopelens.core.store.checkpoint import (
    KEY_ENV,
    load_private_key,
    load_public_key,
    new_signing_key,
    parse_checkpoint,
    sign_checkpoint,
)
from scopelens.core.store.store import Store, event_summary
from scopelens.core.store.verify import make_checkpoint, verify_store
from scopelens.core.textsafety import short


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    sessions = subparsers.add_parser("sessions", parents=[common], help="list recorded sessions")
    sessions.add_argument("--project", help="only sessions of this project")
    sessions.add_argument("--json", action="store_true", help="print JSON")
    sessions.set_defaults(run=run_sessions)

    show = subparsers.add_parser("show", parents=[common], help="show a session or a snapshot by id")
    show.add_argument("id", help="a session id or a snapshot id")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(run=run_show)

    verify = subparsers.add_parser(
        "verify", parents=[common], help="re-derive every hash and link; exit 0 only when clean"
    )
    verify.add_argument("--json", action="store_true", help="print JSON")
    verify.add_argument(
        "--checkpoint", metavar="SIZE:HASH|LINE",
        help="also check that the first SIZE events are the ones a checkpoint pinned (its line, or SIZE:HASH)",
    )
    verify.add_argument(
        "--public-key", type=Path, metavar="FILE", help="check the checkpoint's signature with this Ed25519 key"
    )
    verify.set_defaults(run=run_verify)

    checkpoint = subparsers.add_parser(
        "checkpoint", parents=[common],
        help="verify the store, then print its head as one line to keep elsewhere (signed with --key)",
    )
    checkpoint.add_argument(
        "--key", type=Path, metavar="FILE", help=f"sign with this Ed25519 private key (default: ${KEY_ENV} if set)"
    )
    checkpoint.add_argument(
        "--new-key", type=Path, metavar="FILE", help="make a signing key pair (FILE and FILE.pub) and exit"
    )
    checkpoint.add_argument("--json", action="store_true", help="print JSON")
    checkpoint.set_defaults(run=run_checkpoint)

    migrate = subparsers.add_parser("migrate", parents=[common], help="bring a store to this version's schema")
    migrate.set_defaults(run=run_migrate)


def run_sessions(args: argparse.Namespace) -> int:
    with Store.open(args.db, read_only=True) as store:
        summaries = store.list_sessions(project=args.project)
    if args.json:
        print_json(
            "sessions",
            {
                "sessions": [
                    {
                        **s.header.model_dump(mode="json"),
                        "events": s.events,
                        "turns": s.turns,
                        "snapshots": s.snapshots,
                        "head_hash": s.head_hash,
                    }
                    for s in summaries
                ]
            },
        )
        return 0
    out = console()
    if not summaries:
        out.print("No sessions in this store yet. Record one with `scopelens record` or try `scopelens demo`.")
        return 0
    table = Table("session", "project", "branch", "started (UTC)", "turns", "events", "snapshots", "head")
    for s in summaries:
        plain_row(
            table,
            s.header.id,
            s.header.project,
            s.header.branch or "-",
            when(s.header.created_at),
            str(s.turns),
            str(s.events),
            str(s.snapshots),
            short(s.head_hash),
        )
    out.print(table)
    return 0


def run_show(args: argparse.Namespace) -> int:
    with Store.open(args.db, read_only=True) as store:
        try:
            header = store.get_session(args.id)
        except UnknownIdError:
            header = None
        if header is None:
            try:
                stored = store.get_snapshot(args.id)
            except UnknownIdError:
                raise UnknownIdError(f"no session or snapshot with id {args.id!r} in this store") from None
            return _show_snapshot(args, stored)
        events = store.events(args.id)
    if args.json:
        print_json(
            "session",
            {"session": header.model_dump(mode="json"), "events": [e.model_dump(mode="json") for e in events]},
        )
        return 0
    out = console()
    out.print(
        f"[bold]{literal(header.id)}[/] project={literal(header.project)} branch={literal(header.branch or '-')} "
        f"{literal(header.title)}"
    )
    table = Table("#", "turn", "type", "at (UTC)", "summary")
    for event in events:
        plain_row(
            table,
            str(event.seq), str(event.turn), event.type.value, when(event.created_at), event_summary(event)
        )
    out.print(table)
    return 0


def _show_snapshot(args: argparse.Namespace, stored: Any) -> int:
    snapshot = stored.snapshot
    if args.json:
        print_json("snapshot", {"content_hash": stored.content_hash, "snapshot": snapshot.model_dump(mode="json")})
        return 0
    out = console()
    out.print(
        f"[bold]{literal(snapshot.id)}[/] session={literal(snapshot.session_id)} turn={snapshot.turn} "
        f"hash={short(stored.content_hash)} selected={len(snapshot.selected)} rejected={len(snapshot.rejected)}"
    )
    table = Table("cite", "source_ref", "kind", "final", "reason")
    for item in snapshot.selected:
        plain_row(
            table,
            item.citation_id, item.source_ref, item.evidence_kind.value, f"{item.scores.final:.3f}", item.selected_reason
        )
    out.print(table)
    return 0


def run_verify(args: argparse.Namespace) -> int:
    pinned = parse_checkpoint(args.checkpoint) if args.checkpoint else None
    if args.public_key and pinned is None:
        raise InvalidInputError("--public-key checks a checkpoint's signature: give --checkpoint too")
    key = load_public_key(args.public_key) if args.public_key else None
    with Store.open(args.db, read_only=True) as store:
        report = verify_store(store, checkpoint=pinned, checkpoint_key=key)
    if args.json:
        print_json("verify", {**report.model_dump(mode="json"), "clean": report.clean})
    else:
        out = console()
        out.print(
            f"store head: {report.store_head}  ({report.sessions} sessions, {report.events} events, "
            f"{report.snapshots} snapshots, {report.blobs} blobs, {report.memory_versions} memory versions)"
        )
        for problem in report.problems:
            out.print(f"[red]{problem.kind}[/]: {literal(problem.record)}: {literal(problem.detail)}")
        for note in report.interrupted:
            out.print(f"[yellow]interrupted[/] (not damage): {literal(note.record)}: {literal(note.detail)}")
        if report.checkpoint is not None and report.checkpoint.holds:
            signature = (
                "signature valid" if report.checkpoint.signature_checked
                else "signed, signature not checked (give --public-key)" if report.checkpoint.signed
                else "unsigned"
            )
            out.print(f"checkpoint holds: the first {report.checkpoint.size} events are the ones it pinned ({signature})")
            if report.checkpoint.appended_since:
                sessions = ", ".join(report.checkpoint.appended_sessions)
                out.print(f"{report.checkpoint.appended_since} event(s) appended since, to: {literal(sessions)}")
        out.print("[green]clean[/]" if report.clean else f"[red]{len(report.problems)} problem(s)[/]")
    if not report.clean:
        raise IntegrityError(f"verify found {len(report.problems)} problem(s)") if not args.json else _QuietFail()
    return 0


def run_checkpoint(args: argparse.Namespace) -> int:
    if args.new_key:
        key_id = new_signing_key(args.new_key)
        console().print(f"key {key_id}: private {args.new_key} (keep it secret), public {args.new_key}.pub", markup=False)
        return 0
    key_path = args.key or (Path(os.environ[KEY_ENV]) if os.environ.get(KEY_ENV) else None)
    key = load_private_key(key_path) if key_path else None
    with Store.open(args.db, read_only=True) as store:
        checkpoint = make_checkpoint(store, verify_store(store))
    if key is not None:
        checkpoint = sign_checkpoint(checkpoint, key)
    if args.json:
        print_json(
            "checkpoint",
            {
                "line": checkpoint.line(), "origin": checkpoint.origin, "size": checkpoint.size,
                "head": checkpoint.head, "key_id": checkpoint.key_id,
            },
        )
    else:
        print(checkpoint.line())
    return 0


class _QuietFail(IntegrityError):
    """Exit non-zero after ``--json`` output without an extra line on stdout."""

    def __init__(self) -> None:
        super().__init__("verify found problems (see JSON)")


def run_migrate(args: argparse.Namespace) -> int:
    with Store.open(args.db, create=False) as store:
        del store  # opening a writable store applies pending migrations
    console().print(f"store {args.db} is at the current schema", markup=False)
    return 0
