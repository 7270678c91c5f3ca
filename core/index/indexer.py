"""Index a workspace into the store: versioned documents, chunks and packed postings.

One call is one *run*. Files are compared with the live version of the same path by content
hash, so re-indexing is incremental: only added and changed files are read, redacted,
chunked and tokenized. A changed or removed file's old version gets ``valid_to`` and stays,
so ``as_of`` queries still see it. The run's chunks get contiguous ids, sorted by path, so
that a path-prefix scope is a range of ids inside each run (see ``scorer.py``).

Postings are built with numpy (one ``np.unique`` over term/chunk keys, no per-posting Python
loop) and stored one row per (run, term): chunk-id offsets from the run's first chunk as
little-endian uint32, term frequencies as uint16.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import func, update
from sqlmodel import Session, select

from core.clock import Clock, SystemClock
from core.errors import UnreadableFileError
from core.hashing import canonical_json
from core.index.chunker import Chunk, chunk_text, decode_source, language_of
from core.index.redact import redact
from core.index.sources import SourceClassifier
from core.index.timeutil import to_micros
from core.index.tokenizer import tokenize
from core.index.walker import SkippedPath, git_state, walk_workspace
from core.store.store import Store
from core.store.tables import IndexChunkRow, IndexDocumentRow, IndexPostingRow, IndexRunRow

TF_MAX = np.iinfo(np.uint16).max
Progress = Callable[[int, int, str], None]
"""``progress(done, total, path)`` while files are read."""


@dataclass(frozen=True)
class PreparedDocument:
    """A new or changed file, ready to be written: its redacted chunks and their tokens."""

    path: str
    language: str
    source: str
    content_hash: str
    size: int
    redactions: bytes
    chunks: tuple[Chunk, ...]
    tokens: tuple[list[str], ...]
    replaces: int | None
    """Id of the live version this one replaces (``None`` for an added file)."""


@dataclass
class IndexReport:
    """What a run did. ``index_version`` is what snapshots pin."""

    run_id: int
    project: str
    branch: str
    root: str
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    chunks: int = 0
    redactions: int = 0
    skipped: list[SkippedPath] = field(default_factory=list)
    ignored: int = 0
    git_commit: str | None = None
    git_dirty: bool | None = None

    @property
    def index_version(self) -> str:
        return index_version(self.project, self.branch, self.run_id)


def index_version(project: str, branch: str, run_id: int) -> str:
    return f"{project}@{branch or '-'}#{run_id}"


def chunk_tokens(chunk: Chunk) -> list[str]:
    """The terms a chunk is indexed under: its text, its path and its symbol."""
    tokens = tokenize(chunk.text)
    tokens += tokenize(chunk.path)
    if chunk.symbol:
        tokens += tokenize(chunk.symbol)
    return tokens


def prepare_document(
    path: str, data: bytes, *, classifier: SourceClassifier, replaces: int | None
) -> PreparedDocument:
    """Decode, redact, chunk and tokenize one file's bytes."""
    language = language_of(path)
    text, _had_errors = decode_source(data)
    redacted = redact(text)
    chunks = tuple(chunk_text(path, redacted.text))
    return PreparedDocument(
        path=path,
        language=language,
        source=classifier.source_of(path, language).value,
        content_hash=hashlib.sha256(data).hexdigest(),
        size=len(data),
        redactions=canonical_json([r.model_dump(mode="json") for r in redacted.redactions]),
        chunks=chunks,
        tokens=tuple(chunk_tokens(chunk) for chunk in chunks),
        replaces=replaces,
    )


def index_workspace(
    store: Store,
    root: Path,
    *,
    project: str,
    branch: str | None = None,
    classifier: SourceClassifier | None = None,
    clock: Clock | None = None,
    max_bytes: int = 1_000_000,
    progress: Progress | None = None,
) -> IndexReport:
    """Index ``root`` for ``project``/``branch``; only new and changed files are processed."""
    if not root.is_dir():
        raise UnreadableFileError(f"cannot index {root}: not a directory")
    root = root.resolve()
    classifier = classifier or SourceClassifier()
    now = (clock or SystemClock()).now()
    branch_key = branch or ""
    walked = walk_workspace(root, max_bytes=max_bytes)
    live = live_documents(store, project=project, branch=branch_key, root=str(root))

    report = IndexReport(run_id=0, project=project, branch=branch_key, root=str(root))
    report.skipped = walked.skipped
    report.ignored = walked.ignored_count
    report.git_commit, report.git_dirty = git_state(root)
    prepared: list[PreparedDocument] = []
    total = len(walked.files)
    for done, entry in enumerate(walked.files, start=1):
        if progress:
            progress(done, total, entry.rel_path)
        try:
            data = entry.abs_path.read_bytes()
        except OSError as exc:
            report.skipped.append(SkippedPath(entry.rel_path, "unreadable", exc.strerror or str(exc)))
            continue
        previous = live.get(entry.rel_path)
        digest = hashlib.sha256(data).hexdigest()
        if previous is not None and previous[1] == digest:
            report.unchanged += 1
            continue
        document = prepare_document(
            entry.rel_path, data, classifier=classifier, replaces=previous[0] if previous else None
        )
        (report.changed if previous else report.added).append(entry.rel_path)
        report.redactions += document.redactions.count(b'"kind"')
        prepared.append(document)
    seen = {entry.rel_path for entry in walked.files}
    report.removed = sorted(path for path in live if path not in seen)
    report.run_id = write_run(store, report, prepared, live, now)
    report.chunks = sum(len(d.chunks) for d in prepared)
    return report


def live_documents(store: Store, *, project: str, branch: str, root: str) -> dict[str, tuple[int, str]]:
    """``path -> (document id, content hash)`` of the live versions under one root."""
    with store.read() as conn:
        rows = conn.execute(
            select(IndexDocumentRow.path, IndexDocumentRow.id, IndexDocumentRow.content_hash).where(
                IndexDocumentRow.project == project,
                IndexDocumentRow.branch == branch,
                IndexDocumentRow.root == root,
                IndexDocumentRow.valid_to.is_(None),  # type: ignore[union-attr]
            )
        ).all()
    return {path: (int(doc_id), content_hash) for path, doc_id, content_hash in rows}


def write_run(
    store: Store,
    report: IndexReport,
    prepared: list[PreparedDocument],
    live: dict[str, tuple[int, str]],
    now: datetime,
) -> int:
    """Write one run in one transaction holding the write lock: versions, chunks, postings."""
    now_us = to_micros(now)
    prepared = sorted(prepared, key=lambda d: d.path)
    n_chunks = sum(len(d.chunks) for d in prepared)
    with store.write() as conn:
        chunk_lo = int(conn.execute(select(func.coalesce(func.max(IndexChunkRow.id), 0))).scalar_one()) + 1
        run = IndexRunRow(
            project=report.project,
            branch=report.branch,
            root=report.root,
            started_at=now_us,
            git_commit=report.git_commit,
            git_dirty=None if report.git_dirty is None else int(report.git_dirty),
            added=len(report.added),
            changed=len(report.changed),
            removed=len(report.removed),
            unchanged=report.unchanged,
            chunk_lo=chunk_lo,
            chunk_hi=chunk_lo + n_chunks,
        )
        conn.add(run)
        conn.flush()
        assert run.id is not None
        superseded = [d.replaces for d in prepared if d.replaces is not None]
        superseded += [live[path][0] for path in report.removed]
        if superseded:
            conn.execute(
                update(IndexDocumentRow).where(IndexDocumentRow.id.in_(superseded)).values(valid_to=now_us)  # type: ignore[union-attr]
            )
        chunk_rows, all_tokens = _insert_documents(conn, run.id, report, prepared, chunk_lo, now_us)
        if chunk_rows:
            conn.execute(IndexChunkRow.__table__.insert(), chunk_rows)
        postings = build_postings(all_tokens)
        if postings:
            conn.execute(
                IndexPostingRow.__table__.insert(),
                [{"run_id": run.id, "term": term, "chunk_ids": ids, "tfs": tfs} for term, ids, tfs in postings],
            )
        conn.execute(update(IndexRunRow).where(IndexRunRow.id == run.id).values(finished_at=now_us))
        return int(run.id)


def _insert_documents(
    conn: Session,
    run_id: int,
    report: IndexReport,
    prepared: list[PreparedDocument],
    chunk_lo: int,
    now_us: int,
) -> tuple[list[dict[str, Any]], list[list[str]]]:
    chunk_rows: list[dict[str, Any]] = []
    all_tokens: list[list[str]] = []
    for document in prepared:
        row = IndexDocumentRow(
            run_id=run_id,
            project=report.project,
            branch=report.branch,
            root=report.root,
            path=document.path,
            source=document.source,
            language=document.language,
            content_hash=document.content_hash,
            size=document.size,
            valid_from=now_us,
            redactions=document.redactions,
        )
        conn.add(row)
        conn.flush()
        for ordinal, (chunk, tokens) in enumerate(zip(document.chunks, document.tokens)):
            chunk_rows.append(
                {
                    "id": chunk_lo + len(chunk_rows),
                    "run_id": run_id,
                    "document_id": row.id,
                    "ordinal": ordinal,
                    "path": chunk.path,
                    "start_line": chunk.start_line,
                    "end_line": chunk.end_line,
                    "kind": chunk.kind,
                    "symbol": chunk.symbol,
                    "token_count": len(tokens),
                    "text": chunk.text,
                }
            )
            all_tokens.append(tokens)
    return chunk_rows, all_tokens


def build_postings(chunk_token_lists: list[list[str]]) -> list[tuple[str, bytes, bytes]]:
    """Postings of a run: ``(term, chunk offsets as uint32 bytes, tfs as uint16 bytes)``.

    Offsets are positions in ``chunk_token_lists`` (which is in chunk-id order), ascending.
    """
    vocabulary: dict[str, int] = {}
    lengths = np.fromiter((len(tokens) for tokens in chunk_token_lists), dtype=np.int64, count=len(chunk_token_lists))
    if not lengths.sum():
        return []
    setdefault = vocabulary.setdefault
    term_ids = np.fromiter(
        (setdefault(token, len(vocabulary)) for tokens in chunk_token_lists for token in tokens),
        dtype=np.int64,
        count=int(lengths.sum()),
    )
    chunk_of = np.repeat(np.arange(len(chunk_token_lists), dtype=np.int64), lengths)
    keys, counts = np.unique(term_ids * len(chunk_token_lists) + chunk_of, return_counts=True)
    terms = keys // len(chunk_token_lists)
    offsets = (keys % len(chunk_token_lists)).astype("<u4")
    tfs = np.minimum(counts, TF_MAX).astype("<u2")
    starts = np.concatenate(([0], np.flatnonzero(np.diff(terms)) + 1, [len(keys)]))
    names = list(vocabulary)
    return [
        (names[int(terms[lo])], offsets[lo:hi].tobytes(), tfs[lo:hi].tobytes())
        for lo, hi in zip(starts[:-1], starts[1:])
    ]
