"""``scopelens index PATH`` and ``scopelens search QUERY``: building and probing the index.

The store, the indexer and the scorer are imported by the commands that use them: a re-index
of an unchanged workspace is answered by ``stat_check`` before any of them is loaded. Until
``scopelens index`` has started its preparing workers, it loads nothing heavier than the
walker: not numpy, SQLAlchemy, pydantic or rich (``start_preparing``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scopelens.core.clock import utc
from scopelens.core.errors import InvalidInputError
from scopelens.core.index.report import IndexReport
from scopelens.core.index.sources import SourceClassifier
from scopelens.core.index.stat_check import StatCheck, check_by_stat
from scopelens.core.index.timeutil import to_micros
from scopelens.core.index.walker import git_branch, git_state
from scopelens.core.pipeline.policy_file import policy_file
from scopelens.core.textsafety import clip, short
from scopelens.core.vocab import Source

if TYPE_CHECKING:
    from scopelens.core.index.head_start import HeadStart
    from scopelens.core.index.walker import WalkedFile


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    index = subparsers.add_parser("index", parents=[common], help="index a workspace (incremental)")
    index.add_argument("path", type=Path, help="workspace root")
    index.add_argument("--project", required=True, help="project name the index belongs to")
    index.add_argument("--branch", help="branch name (default: the branch checked out in PATH, if it is a git work tree)")
    index.add_argument("--max-bytes", type=int, default=1_000_000,
                       help="skip files larger than this many bytes (default: %(default)s)")
    index.add_argument("--policy", type=Path, help="policy TOML for rule_globs/decision_globs "
                       "(default: PATH/.scopelens/policy.toml)")
    index.add_argument("--workers", type=_workers, default=None,
                       help="processes that prepare files (default: one per core when there is enough to "
                       "prepare; 0 prepares in this process)")
    index.add_argument("--rehash", action="store_true",
                       help="read and hash every file, even one whose size and modification time are those it was "
                       "indexed with (for trees copied by a tool that keeps both)")
    index.add_argument("--json", action="store_true", help="print JSON")
    index.set_defaults(run=run_index)

    compact = subparsers.add_parser(
        "compact", parents=[common], help="merge index segments by size tiers (recall reads fewer rows)"
    )
    compact.add_argument("--project", help="only this project's index (default: every project's)")
    compact.add_argument("--json", action="store_true", help="print JSON")
    compact.set_defaults(run=run_compact)

    search = subparsers.add_parser("search", parents=[common], help="raw scoped recall, for debugging")
    search.add_argument("query", help="free text; tokenized like the index")
    search.add_argument("--project", required=True, help="the project to search")
    search.add_argument("--branch", help="only this branch (default: every branch: raw recall, for debugging)")
    search.add_argument("--root", help="workspace root the chunks must come from")
    search.add_argument("--path-prefix", action="append", default=[], help="restrict to a path or directory")
    search.add_argument(
        "--source", action="append", default=[], choices=[s.value for s in Source],
        help="only these sources, repeatable (default: every source)",
    )
    search.add_argument("--as-of", help="ISO-8601 time: see the index as it was then")
    search.add_argument("--top-k", type=int, default=10, help="how many chunks to print (default: %(default)s)")
    search.add_argument("--json", action="store_true", help="print JSON")
    search.set_defaults(run=run_search)


def _workers(value: str) -> int:
    try:
        count = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of processes") from None
    if not 0 <= count <= 256:
        raise argparse.ArgumentTypeError(f"{count} is not between 0 and 256")
    return count


def parse_time(value: str | None, *, flag: str) -> datetime | None:
    """An ISO-8601 date or time (UTC when no zone is given), or a one-line error."""
    if value is None:
        return None
    try:
        return utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        raise InvalidInputError(f"{flag}: {value!r} is not an ISO-8601 date or time") from None


def run_index(args: argparse.Namespace) -> int:
    classifier = _classifier(args.path, args.policy)
    branch = args.branch if args.branch is not None else git_branch(args.path)
    checked = StatCheck(None, None) if args.rehash else check_by_stat(
        args.db, args.path, project=args.project, branch=branch or "", classifier=classifier, max_bytes=args.max_bytes
    )
    if checked.unchanged is not None:
        _print_index_report(checked.unchanged, as_json=args.json)
        return 0
    head_start = start_preparing(args.db, checked.to_read, classifier=classifier, workers=args.workers)
    git = git_state(args.path)  # while this process is small (index_workspace's ``git`` says why)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from scopelens.core.index.indexer import index_workspace
    from scopelens.core.output import progress_console, shows_progress
    from scopelens.core.store.store import Store

    def run(store: Store, progress: Callable[[int, int, str], None] | None) -> IndexReport:
        return index_workspace(
            store, args.path, project=args.project, branch=branch, max_bytes=args.max_bytes,
            progress=progress, classifier=classifier, workers=args.workers, rehash=args.rehash,
            head_start=head_start, git=git,
        )

    with head_start or nullcontext(), Store.open(args.db, create=True) as store:
        if args.json:
            report = run(store, None)
        else:
            with Progress(
                TextColumn("indexing"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                console=progress_console(), transient=True, disable=not shows_progress(),
            ) as bar:
                task = bar.add_task("", total=None)
                report = run(store, lambda done, total, path: bar.update(
                    task, completed=done, total=total, description=clip(path, 40, keep_end=True)))
    _print_index_report(report, as_json=args.json)
    return 0


def _classifier(workspace: Path, explicit: Path | None) -> SourceClassifier:
    """Files classified by the policy's rule and decision globs (retrieval reads the same file).
    The policy's model is loaded only when there is a policy file: the defaults add no globs."""
    path = policy_file(workspace, explicit)
    if path is None:
        return SourceClassifier()
    from scopelens.core.pipeline.policy import load_policy

    policy = load_policy(path)
    return SourceClassifier().with_globs(policy.rule_globs, policy.decision_globs)


def start_preparing(
    db: str, to_read: Sequence[WalkedFile] | None, *, classifier: SourceClassifier, workers: int | None
) -> HeadStart | None:
    """Workers preparing the first files the stat check found to read, while this process loads
    the indexer and diffs (``head_start.HeadStart``), when the files are enough for workers and
    the store's redaction key is known. A key is made here only for a store that does not
    exist yet (its first run makes it anyway); an existing store without one is opened first."""
    from scopelens.core.index.batching import POOL_MIN_BYTES, FileOnDisk, pool_size
    from scopelens.core.index.head_start import HeadStart
    from scopelens.core.store.keys import early_key

    total = sum(entry.size for entry in to_read) if to_read is not None else 0
    if to_read is None or workers == 0 or total < POOL_MIN_BYTES:
        return None
    count = workers if workers is not None else pool_size(total)
    key = early_key(db) if count >= 1 else None
    if key is None:
        return None
    files = [FileOnDisk(entry.rel_path, entry.abs_path, entry.size) for entry in to_read]
    return HeadStart(files, classifier=classifier, key=key, workers=count)


def _print_index_report(report: IndexReport, *, as_json: bool) -> None:
    from scopelens.core.output import console, literal, print_json

    if as_json:
        print_json(
            "index-run",
            {
                "run_id": report.run_id,
                "index_version": report.index_version,
                "nothing_changed": report.nothing_changed,
                "project": report.project,
                "branch": report.branch or None,
                "root": report.root,
                "added": report.added,
                "changed": report.changed,
                "reclassified": report.reclassified,
                "removed": report.removed,
                "unchanged": report.unchanged,
                "chunks": report.chunks,
                "redactions": report.redactions,
                "ignored": report.ignored,
                "skipped": [{"path": s.rel_path, "reason": s.reason, "message": s.message} for s in report.skipped],
                "git_commit": report.git_commit,
                "git_dirty": report.git_dirty,
            },
        )
        return
    out = console()
    for skipped in report.skipped:
        if skipped.reason in ("symlink", "outside-root", "unreadable"):
            out.print(f"[yellow]{literal(skipped.message)}[/]")
    git = f" git {short(report.git_commit)}{' (dirty)' if report.git_dirty else ''}" if report.git_commit else ""
    if report.nothing_changed:
        out.print(
            f"{report.index_version}: nothing changed ({report.unchanged} unchanged; no new version), "
            f"{len(report.skipped)} skipped, {report.ignored} ignored{git}"
        )
        return
    out.print(
        f"{report.index_version}: {len(report.added)} added, {len(report.changed)} changed"
        f"{f' ({len(report.reclassified)} by the policy)' if report.reclassified else ''}, "
        f"{len(report.removed)} removed, {report.unchanged} unchanged; {report.chunks} chunks written, "
        f"{report.redactions} secrets redacted, {len(report.skipped)} skipped, {report.ignored} ignored{git}"
    )


def run_compact(args: argparse.Namespace) -> int:
    """Merge the index segments of every line (project, branch, root), or of one project's.

    Index runs merge their own small segments as they finish; this also merges larger ones
    (up to ``compaction.COMMAND_MAX_CHUNKS`` chunks). Results of every query stay the same."""
    from scopelens.core.index.compaction import compact_store
    from scopelens.core.output import console, print_json
    from scopelens.core.store.store import Store

    with Store.open(args.db) as store:
        if args.project is not None:
            store.require_project(args.project)
        report = compact_store(store, project=args.project)
    if args.json:
        print_json(
            "compaction",
            {
                "project": args.project,
                "lines": [{"project": p, "branch": b or None, "root": r} for p, b, r in report.lines],
                "segments_before": report.segments_before,
                "segments_after": report.segments_after,
                "merges": report.merges,
                "postings_rewritten": report.postings_rewritten,
            },
        )
        return 0
    console().print(
        f"{report.segments_before} index segments in {len(report.lines)} line(s) -> {report.segments_after}"
        f" ({report.merges} merged, {report.postings_rewritten} posting rows rewritten)"
        if report.merges else
        f"{report.segments_before} index segments in {len(report.lines)} line(s): nothing to merge"
    )
    return 0


def run_search(args: argparse.Namespace) -> int:
    from rich.table import Table

    from scopelens.core.index.chunks import fetch_chunks
    from scopelens.core.index.scorer import RecallFilter, Scorer
    from scopelens.core.index.tokenizer import tokenize
    from scopelens.core.output import console, plain_row, print_json
    from scopelens.core.store.store import Store

    as_of = parse_time(args.as_of, flag="--as-of")
    terms = [(term, 1.0) for term in tokenize(args.query)]
    if not terms:
        raise InvalidInputError("the query has no searchable terms")
    flt = RecallFilter(
        project=args.project,
        branch=args.branch,
        workspace_root=str(Path(args.root).resolve()) if args.root else None,
        path_prefixes=tuple(args.path_prefix),
        sources=frozenset(Source(s) for s in args.source) or None,
        as_of_us=None if as_of is None else to_micros(as_of),
    )
    with Store.open(args.db, read_only=True) as store:
        store.require_project(args.project)
        hits = Scorer(store).search(terms, flt, top_k=args.top_k)
        chunks = fetch_chunks(store, [hit.chunk_id for hit in hits])
    results = [
        {
            "rank": rank,
            "score": round(hit.score, 6),
            "source_ref": chunks[hit.chunk_id].source_ref,
            "path": chunks[hit.chunk_id].path,
            "start_line": chunks[hit.chunk_id].start_line,
            "end_line": chunks[hit.chunk_id].end_line,
            "symbol": chunks[hit.chunk_id].symbol,
            "source": chunks[hit.chunk_id].source.value,
            "source_version": chunks[hit.chunk_id].content_hash,
            "chunk_id": hit.chunk_id,
        }
        for rank, hit in enumerate(hits, start=1)
    ]
    if args.json:
        print_json("search", {"query": args.query, "terms": [t for t, _ in terms], "results": results})
        return 0
    out = console()
    if not results:
        out.print("No results in this scope.")
        return 0
    table = Table("#", "score", "source_ref", "symbol", "source")
    for row in results:
        cells = (row["source_ref"], row["symbol"] or "", row["source"])
        plain_row(table, str(row["rank"]), f"{row['score']:.3f}", *(str(cell) for cell in cells))
    out.print(table)
    return 0
