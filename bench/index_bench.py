"""Index benchmark: scopelens' store-backed BM25 against SQLite FTS5 and bm25s, in one run.

Run ``python -m bench.index_bench`` (full standard library, a few minutes) or
``python -m bench.index_bench --quick`` (150 files, seconds). ``--out FILE`` writes the
figures as JSON. See ``docs/performance.md`` for what each figure means.

The corpus is the ``.py`` files of the running Python's standard library
(``sysconfig.get_paths()["stdlib"]``) without ``site-packages`` and ``__pycache__``, copied into
a temporary workspace so that the incremental edits never touch the real library. Walking,
decoding, redacting, chunking and tokenizing (``prepare_document``) is done and timed once;
all three engines then consume exactly the same chunks and tokens:

* **ours**: ``write_run`` into a fresh SQLite store, ``Scorer.search`` for recall;
* **FTS5**: one ``fts5`` table, each chunk's tokens joined by spaces under a ``unicode61``
  tokenizer whose token characters include ``. _ / - :`` (so each of our tokens is one FTS5
  token), rowid = our chunk id, ranked by ``bm25()``; scoping uses a separate
  ``meta(id, pkg)`` table in a ``rowid IN (SELECT ...)`` filter;
* **bm25s** (optional, ``pip install -e ".[bench]"``): ``BM25(method="lucene", k1=1.2,
  b=0.75, backend="numpy")`` indexed from the token lists, ``retrieve(k=10)``.

Timing never goes into unit tests: ``tests/test_bench_smoke.py`` only checks the shape of
the result on a tiny corpus.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import re
import shutil
import sqlite3
import statistics
import sys
import sysconfig
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import text as sql_text

from bench import index_e2e
from scopelens.core.index.indexer import IndexReport, PreparedDocument, gc_paused, index_workspace, prepare_document, write_run
from scopelens.core.index.prepare import chunk_tokens
from scopelens.core.index.scorer import RecallFilter, Scorer
from scopelens.core.index.sources import SourceClassifier
from scopelens.core.index.tokenizer import unique_terms
from scopelens.core.index.walker import walk_workspace
from scopelens.core.redact import RedactionKey
from scopelens.core.store.store import Store

BENCH_KEY = RedactionKey(bytes(32))
"""Preparation outside a store still hashes redaction records under some key."""
PROJECT = "bench"
SEED = 20260301
TOP_K = 10
QUICK_FILES = 150
SCOPE_SHARE = 0.05
QUERY_SETS = ("identifier", "error-message", "issue-length")
FTS5_TOKENIZER = "unicode61 remove_diacritics 0 tokenchars '._/-:'"
NOW = datetime(2026, 3, 1, tzinfo=UTC)

try:  # bench-only extra; the FTS5 and scopelens parts run without it
    import bm25s  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the environment
    bm25s = None


# --------------------------------------------------------------------------- corpus


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_files(root: Path) -> list[str]:
    """The ``.py`` files of the standard library at ``root``, minus site-packages, sorted."""
    out = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if rel.parts[0] in ("site-packages", "dist-packages") or "__pycache__" in rel.parts:
            continue
        if path.is_file() and not path.is_symlink():
            out.append(rel.as_posix())
    return sorted(out)


def quick_subset(files: Sequence[str], n: int, seed: int = SEED) -> list[str]:
    """A deterministic sample of ``n`` files."""
    if len(files) <= n:
        return list(files)
    return sorted(random.Random(seed).sample(list(files), n))


def make_workspace(source: Path, files: Sequence[str], dest: Path) -> Path:
    """Copy ``files`` (relative to ``source``) into ``dest``; returns the resolved root."""
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / rel, target)
    return dest.resolve()


def package_of(path: str) -> str:
    """Top-level directory of a path ("" for files at the root)."""
    head, sep, _ = path.partition("/")
    return head if sep else ""


@dataclass
class Corpus:
    """The prepared workspace: every chunk in chunk-id order (sorted by path, as write_run does)."""

    root: Path
    documents: list[PreparedDocument]
    paths: list[str]
    packages: list[str]
    texts: list[str]
    symbols: list[str | None]
    kinds: list[str]
    tokens: list[list[str]]
    prepare_seconds: float

    @property
    def n_chunks(self) -> int:
        return len(self.tokens)


def prepare_corpus(root: Path) -> Corpus:
    """Walk, read, decode, redact, chunk and tokenize the workspace once (timed)."""
    classifier = SourceClassifier()
    start = time.perf_counter()
    with gc_paused():  # as index_workspace does
        walked = walk_workspace(root)
        documents = [
            prepare_document(entry.rel_path, entry.abs_path.read_bytes(), classifier=classifier, replaces=None, key=BENCH_KEY)
            for entry in walked.files
        ]
    seconds = time.perf_counter() - start
    documents.sort(key=lambda d: d.path)
    corpus = Corpus(root, documents, [], [], [], [], [], [], seconds)
    for document in documents:
        for chunk in document.chunks:
            tokens = chunk_tokens(chunk)  # FTS5 and bm25s index token lists
            corpus.paths.append(chunk.path)
            corpus.packages.append(package_of(chunk.path))
            corpus.texts.append(chunk.text)
            corpus.symbols.append(chunk.symbol)
            corpus.kinds.append(chunk.kind)
            corpus.tokens.append(tokens)
    return corpus


def pick_package(corpus: Corpus, share: float = SCOPE_SHARE) -> tuple[str, float]:
    """The top-level package whose share of chunks is closest to ``share`` (ties: by name)."""
    counts = Counter(p for p in corpus.packages if p)
    if not counts:
        return "", 1.0
    total = corpus.n_chunks
    name = min(counts, key=lambda p: (abs(counts[p] / total - share), p))
    return name, counts[name] / total


# --------------------------------------------------------------------------- queries

_RAISE = re.compile(r"""raise\s+([A-Z]\w*(?:Error|Exception|Warning))\(\s*f?(["'])([^"'\\\n]{12,120})\2""")
_PLACEHOLDER = re.compile(r"\{[^{}]*\}|%[-#0 +]*\d*(?:\.\d+)?[sdrfx]")
_DOCSTRING = re.compile(r'"""(.+?)"""', re.S)
_WORDS = re.compile(r"\S+")


def build_queries(
    corpus: Corpus,
    *,
    seed: int = SEED,
    identifiers: int = 50,
    errors: int = 50,
    issues: int = 30,
) -> dict[str, list[str]]:
    """Deterministic query texts drawn from the corpus itself.

    * identifier: names of functions and methods (``Class.method`` -> ``method``);
    * error-message: ``XError: message`` from ``raise XError("...")`` statements, with
      format placeholders filled in;
    * issue-length: 80-150 words, "Calling f() fails with XError: ..." followed by
      sentences from docstrings, the way a pasted issue reads.
    """
    rng = random.Random(seed)
    names = sorted(
        {
            symbol.rsplit(".", 1)[-1]
            for symbol, kind in zip(corpus.symbols, corpus.kinds, strict=True)
            if symbol and kind in ("function", "method") and len(symbol.rsplit(".", 1)[-1].strip("_")) >= 5
        }
    )
    messages = sorted(
        {
            f"{exc}: {_PLACEHOLDER.sub('x', message).strip()}"
            for text in corpus.texts
            for exc, _quote, message in _RAISE.findall(text)
        }
    )
    docs = sorted(
        {
            " ".join(_WORDS.findall(doc))
            for text, kind in zip(corpus.texts, corpus.kinds, strict=True)
            if kind in ("function", "method", "class")
            for doc in _DOCSTRING.findall(text)[:1]
            if len(_WORDS.findall(doc)) >= 8
        }
    )
    picked_names = _sample(rng, names, identifiers)
    picked_errors = _sample(rng, messages, errors)
    issue_texts = []
    for _ in range(issues if docs else 0):
        words = ["Calling", f"{rng.choice(names) if names else 'it'}()", "fails", "with"]
        words += (rng.choice(messages) if messages else "an error").split()
        words += ["Expected", "behaviour:"]
        target = rng.randint(80, 150)
        while len(words) < target:
            words += rng.choice(docs).split()
        issue_texts.append(" ".join(words[:target]))
    return {"identifier": picked_names, "error-message": picked_errors, "issue-length": issue_texts}


def _sample(rng: random.Random, items: list[str], n: int) -> list[str]:
    if not items:
        return []
    if len(items) >= n:
        return rng.sample(items, n)
    return [rng.choice(items) for _ in range(n)]


# --------------------------------------------------------------------------- engines


def fresh_store(directory: Path, name: str) -> Store:
    path = directory / f"{name}.db"
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return Store.open(str(path), create=True)


def ours_write_run(corpus: Corpus, store: Store) -> float:
    """Seconds for ``write_run`` of every prepared document into ``store`` (fresh)."""
    report = IndexReport(run_id=0, project=PROJECT, branch="", root=str(corpus.root))
    report.added = [d.path for d in corpus.documents]
    start = time.perf_counter()
    write_run(store, report, corpus.documents, {}, NOW)
    return time.perf_counter() - start


def fts5_build(corpus: Corpus, path: Path) -> tuple[sqlite3.Connection, float]:
    """A fresh FTS5 database at ``path``; seconds for the bulk insert (one transaction)."""
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"CREATE VIRTUAL TABLE fts USING fts5(body, tokenize = \"{FTS5_TOKENIZER}\")")
    rows = [(i + 1, " ".join(tokens)) for i, tokens in enumerate(corpus.tokens)]
    with gc_paused():  # write_run pauses the collector too
        start = time.perf_counter()
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO fts (rowid, body) VALUES (?, ?)", rows)
        conn.execute("COMMIT")
        seconds = time.perf_counter() - start
    # The scope table is built outside the timed insert (a stricter baseline).
    conn.execute("CREATE TABLE meta (id INTEGER PRIMARY KEY, pkg TEXT NOT NULL)")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO meta VALUES (?, ?)", [(i + 1, p) for i, p in enumerate(corpus.packages)])
    conn.execute("CREATE INDEX meta_pkg ON meta (pkg)")
    conn.execute("COMMIT")
    return conn, seconds


def fts5_vocabulary_size(conn: sqlite3.Connection) -> int:
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_vocab USING fts5vocab(main, fts, 'row')")
    return int(conn.execute("SELECT count(*) FROM temp.fts_vocab").fetchone()[0])


def fts5_match(terms: Sequence[str]) -> str:
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def fts5_search(
    conn: sqlite3.Connection, terms: Sequence[str], package: str | None, k: int, timeout_s: float | None = None
) -> list[int] | None:
    """FTS5's top ``k`` rowids by ``bm25()``; ``None`` when the query ran past ``timeout_s``."""
    if not terms:
        return []
    if timeout_s is not None:
        deadline = time.perf_counter() + timeout_s
        conn.set_progress_handler(lambda: int(time.perf_counter() > deadline), 10_000)
        try:
            return fts5_search(conn, terms, package, k)
        except sqlite3.OperationalError as exc:
            if "interrupted" not in str(exc):
                raise
            return None
        finally:
            conn.set_progress_handler(None, 0)
    if package is None:
        sql = "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?"
        args: tuple[Any, ...] = (fts5_match(terms), k)
    else:
        sql = (
            "SELECT rowid FROM fts WHERE fts MATCH ? AND rowid IN (SELECT id FROM meta WHERE pkg = ?) "
            "ORDER BY bm25(fts) LIMIT ?"
        )
        args = (fts5_match(terms), package, k)
    return [int(r[0]) for r in conn.execute(sql, args)]


def bm25s_build(corpus: Corpus) -> tuple[Any, float]:
    assert bm25s is not None
    retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene", backend="numpy")
    with gc_paused():  # write_run pauses the collector too
        start = time.perf_counter()
        retriever.index(corpus.tokens, show_progress=False)
        seconds = time.perf_counter() - start
    return retriever, seconds


def bm25s_search(retriever: Any, terms: list[str], k: int, mask: np.ndarray | None = None) -> list[int]:
    docs, scores = retriever.retrieve(
        [terms], k=k, show_progress=False, n_threads=0, return_as="tuple", weight_mask=mask
    )
    return [int(d) + 1 for d, s in zip(docs[0], scores[0], strict=True) if s > 0]


# --------------------------------------------------------------------------- measuring


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def _percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else float("nan")


def time_queries(
    engines: dict[str, Callable[[list[str]], object]],
    queries: Sequence[list[str]],
    *,
    passes: int,
    warmup: bool = True,
    budget_s: float | None = None,
    seed: int = SEED,
) -> dict[str, dict[str, float]]:
    """p50/p95 in milliseconds of each engine over ``passes`` passes of every query.

    Engines take turns on each query, in an order shuffled per query with a fixed seed, so a
    burst of load on the machine, or one engine evicting the CPU caches, hits all of them
    alike; with ``warmup``, one untimed pass goes first. ``budget_s`` caps the timed part.
    """
    if warmup:
        for terms in queries:
            for run in engines.values():
                run(terms)
    samples: dict[str, list[float]] = {name: [] for name in engines}
    turns = list(engines.items())
    shuffle = random.Random(seed).shuffle
    deadline = None if budget_s is None else time.perf_counter() + budget_s
    clock = time.perf_counter
    for _ in range(passes):
        for terms in queries:
            shuffle(turns)
            for name, run in turns:
                start = clock()
                run(terms)
                samples[name].append((clock() - start) * 1000.0)
            if deadline is not None and clock() > deadline:
                break
        if deadline is not None and clock() > deadline:
            break
    return {
        name: {"p50_ms": _median(values), "p95_ms": _percentile(values, 95), "n": len(values)}
        for name, values in samples.items()
    }


def _overlap(a: list[list[int]], b: list[list[int]]) -> float:
    """Mean |A ∩ B| / max(|A|, |B|) over query pairs (1.0 when both are empty)."""
    fractions = []
    for x, y in zip(a, b, strict=True):
        size = max(len(x), len(y))
        fractions.append(1.0 if size == 0 else len(set(x) & set(y)) / size)
    return float(np.mean(fractions)) if fractions else float("nan")


def modify_files(root: Path, files: Sequence[str], tag: str) -> None:
    """Append a small function to each file (an edit, as a developer would make)."""
    for i, rel in enumerate(files):
        with open(root / rel, "a", encoding="utf-8") as handle:
            handle.write(f"\n\ndef _bench_edit_{tag}_{i}(value):\n    return value + {i}\n")


@dataclass
class Settings:
    reps: int = 3
    query_passes: int = 3
    identifiers: int = 50
    errors: int = 50
    issues: int = 30
    fts5_budget_s: float = 60.0
    """Time budget per FTS5 row of the recall table (checked between queries)."""
    fts5_timeout_s: float = 10.0
    """A single FTS5 query is stopped after this long (counted as a timeout at this time)."""
    e2e_reps: int = 3
    """Repetitions of the end-to-end index_workspace runs (full and 1% incremental)."""
    use_bm25s: bool = True
    seed: int = SEED
    log: Callable[[str], None] = lambda message: None


def run_bench(source: Path, files: Sequence[str], workdir: Path, settings: Settings | None = None) -> dict[str, Any]:
    """Every figure, measured in one run over ``files`` (relative to ``source``)."""
    s = settings or Settings()
    log = s.log
    use_bm25s = s.use_bm25s and bm25s is not None
    root = make_workspace(source, files, workdir / "ws")
    log(f"workspace: {len(files)} files copied to {root}")

    corpus = prepare_corpus(root)
    package, share = pick_package(corpus)
    log(f"prepared {len(corpus.documents)} files, {corpus.n_chunks} chunks in {corpus.prepare_seconds:.2f} s")

    # ---- full build: write_run vs FTS5 bulk insert (and bm25s index, for information).
    # The engines take turns in each repetition, so drifting load on the machine hits all alike.
    ours_build: list[float] = []
    fts_build: list[float] = []
    bm_build: list[float] = []
    store: Store | None = None
    fts: sqlite3.Connection | None = None
    retriever = None
    for rep in range(s.reps):
        if store is not None:
            store.close()
        store = fresh_store(workdir, "ours")
        gc.collect()
        ours_build.append(ours_write_run(corpus, store))
        if fts is not None:
            fts.close()
        gc.collect()
        fts, seconds = fts5_build(corpus, workdir / "fts5.db")
        fts_build.append(seconds)
        line = f"  rep {rep + 1}: write_run {ours_build[-1]:.3f} s, FTS5 insert {seconds:.3f} s"
        if use_bm25s:
            retriever = None
            gc.collect()
            retriever, seconds = bm25s_build(corpus)
            bm_build.append(seconds)
            line += f", bm25s index {seconds:.3f} s"
        log(line)
    assert store is not None and fts is not None

    with store.read() as conn:
        postings = int(conn.execute(sql_text("SELECT count(*) FROM index_postings")).scalar_one())
    vocabulary = len({t for tokens in corpus.tokens for t in tokens})
    fts_vocabulary = fts5_vocabulary_size(fts)

    # ---- recall
    texts = build_queries(corpus, seed=s.seed, identifiers=s.identifiers, errors=s.errors, issues=s.issues)
    queries = {name: [unique_terms(q) for q in texts[name]] for name in QUERY_SETS}
    k = min(TOP_K, corpus.n_chunks)
    scorer = Scorer(store)
    base = {"project": PROJECT, "branch": "", "workspace_root": str(root)}
    unscoped_filter = RecallFilter(**base)
    scoped_filter = RecallFilter(**base, path_prefixes=(package,))

    def ours(flt: RecallFilter) -> Callable[[list[str]], list[int]]:
        return lambda terms: [h.chunk_id for h in scorer.search([(t, 1.0) for t in terms], flt, top_k=k)]

    ours_unscoped, ours_scoped = ours(unscoped_filter), ours(scoped_filter)
    scorer.search([], unscoped_filter)  # loads the view: a one-off per store, not per query
    cold = {name: time_queries({"ours": ours_unscoped}, queries[name], passes=1, warmup=False)["ours"] for name in QUERY_SETS}
    mask = np.asarray([p == package for p in corpus.packages], dtype=np.float32)
    recall: dict[str, dict[str, Any]] = {}
    for name in QUERY_SETS:
        qs = queries[name]
        row: dict[str, Any] = {"queries": len(qs), "mean_terms": float(np.mean([len(q) for q in qs])) if qs else 0.0}
        row["ours_cold"] = cold[name]
        engines: dict[str, Callable[[list[str]], object]] = {"ours": ours_unscoped, "ours_scoped": ours_scoped}
        if retriever is not None:
            engines["bm25s"] = lambda t: bm25s_search(retriever, t, k)
        row.update(time_queries(engines, qs, passes=s.query_passes, seed=s.seed))
        if retriever is not None:  # for information; timed apart (it allocates a mask-sized array per query)
            row.update(
                time_queries(
                    {"bm25s_masked": lambda t: bm25s_search(retriever, t, k, mask)}, qs, passes=s.query_passes
                )
            )
        for label, scope in (("fts5", None), ("fts5_scoped", package)):
            timeouts = [0]

            def fts_run(terms: list[str], scope: str | None = scope, timeouts: list[int] = timeouts) -> None:
                if fts5_search(fts, terms, scope, k, s.fts5_timeout_s) is None:
                    timeouts[0] += 1

            row.update(time_queries({label: fts_run}, qs, passes=1, warmup=False, budget_s=s.fts5_budget_s))
            row[label]["timeouts"] = timeouts[0]
        if retriever is not None:
            ours_ids = [ours_unscoped(q) for q in qs]
            row["top10_overlap_ours_bm25s"] = _overlap(ours_ids, [bm25s_search(retriever, q, k) for q in qs])
            row["top10_overlap_scoped_ours_bm25s_masked"] = _overlap(
                [ours_scoped(q) for q in qs], [bm25s_search(retriever, q, k, mask) for q in qs]
            )
            row["top10_overlap_ours_fts5"] = _overlap(ours_ids, [fts5_search(fts, q, None, k) for q in qs])
        recall[name] = row
        log(f"  recall {name}: ours p50 {row['ours']['p50_ms']:.3f} ms, scoped {row['ours_scoped']['p50_ms']:.3f} ms")
    fts.close()
    scorer.close()  # and its read-only connection to the store
    store.close()

    # ---- end to end: full index_workspace on fresh stores, then 1% incremental re-indexes
    full_e2e, incremental = [], []
    e2e_store = None
    for rep in range(s.e2e_reps):
        if e2e_store is not None:
            e2e_store.close()
        e2e_store = fresh_store(workdir, "e2e")
        gc.collect()
        start = time.perf_counter()
        index_workspace(e2e_store, root, project=PROJECT, clock=None)
        full_e2e.append(time.perf_counter() - start)
        log(f"  index_workspace (full) rep {rep + 1}: {full_e2e[-1]:.3f} s")
    assert e2e_store is not None
    rng = random.Random(s.seed + 1)
    n_edit = max(1, round(0.01 * len(corpus.documents)))
    edited: list[int] = []
    for rep in range(s.e2e_reps):
        batch = sorted(rng.sample([d.path for d in corpus.documents], n_edit))
        modify_files(root, batch, str(rep))
        gc.collect()
        start = time.perf_counter()
        report = index_workspace(e2e_store, root, project=PROJECT)
        incremental.append(time.perf_counter() - start)
        edited.append(len(report.changed))
        log(f"  index_workspace (1% changed: {len(report.changed)} files) rep {rep + 1}: {incremental[-1]:.3f} s")
    e2e_store.close()

    figures: dict[str, Any] = {
        "full_build": {
            "ours_write_run_s": _median(ours_build),
            "fts5_bulk_insert_s": _median(fts_build),
            "bm25s_index_s": _median(bm_build) if bm_build else None,
            "ratio": _median(ours_build) / _median(fts_build),
            "target": 1.5,
            "samples": {"ours": ours_build, "fts5": fts_build, "bm25s": bm_build},
        },
        "incremental": {
            "ours_incremental_s": _median(incremental),
            "ours_full_s": _median(full_e2e),
            "ratio": _median(incremental) / _median(full_e2e),
            "target": 0.05,
            "files_changed": edited,
            "samples": {"incremental": incremental, "full": full_e2e},
        },
        "recall": recall,
    }
    return {
        "meta": {
            "python": sys.version.split()[0],
            "implementation": platform.python_implementation(),
            "sqlite": sqlite3.sqlite_version,
            "numpy": np.__version__,
            "bm25s": getattr(bm25s, "__version__", None) if use_bm25s else None,
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "seed": s.seed,
            "reps": s.reps,
            "e2e_reps": s.e2e_reps,
            "query_passes": s.query_passes,
            "top_k": k,
        },
        "corpus": {
            "source": str(source),
            "files": len(corpus.documents),
            "bytes": sum(d.size for d in corpus.documents),
            "chunks": corpus.n_chunks,
            "tokens": sum(len(t) for t in corpus.tokens),
            "vocabulary": vocabulary,
            "fts5_vocabulary": fts_vocabulary,
            "postings": postings,
            "prepare_s": corpus.prepare_seconds,
            "scope_package": package,
            "scope_share": share,
        },
        "figures": figures,
        "table": table_rows(figures, use_bm25s),
    }


# --------------------------------------------------------------------------- reporting


def table_rows(figures: dict[str, Any], with_bm25s: bool) -> list[dict[str, Any]]:
    """The decision table: figure, ours, baseline, ratio, target, pass."""
    full, incr, recall = figures["full_build"], figures["incremental"], figures["recall"]
    rows = [
        _row("full build (write_run vs FTS5 bulk insert)", full["ours_write_run_s"], full["fts5_bulk_insert_s"], "s", 1.5),
        _row("1% incremental re-index (vs full index_workspace)", incr["ours_incremental_s"], incr["ours_full_s"], "s", 0.05),
    ]
    if with_bm25s:
        for name in QUERY_SETS:
            if "bm25s" in recall[name]:
                rows.append(
                    _row(
                        f"recall p50 unscoped, {name} (vs bm25s)",
                        recall[name]["ours"]["p50_ms"],
                        recall[name]["bm25s"]["p50_ms"],
                        "ms",
                        1.0,
                    )
                )
        for name in QUERY_SETS:
            if "bm25s" in recall[name]:
                rows.append(
                    _row(
                        f"recall p50 scoped, {name} (vs bm25s unscoped)",
                        recall[name]["ours_scoped"]["p50_ms"],
                        recall[name]["bm25s"]["p50_ms"],
                        "ms",
                        0.5,
                    )
                )
    return rows


def _row(figure: str, ours: float, baseline: float, unit: str, target: float) -> dict[str, Any]:
    ratio = ours / baseline if baseline else float("inf")
    return {
        "figure": figure,
        "ours": ours,
        "baseline": baseline,
        "unit": unit,
        "ratio": ratio,
        "target": target,
        "pass": bool(ratio <= target),
    }


def _fmt(value: float, unit: str) -> str:
    if unit == "ms":
        return f"{value:.3f} ms"
    return f"{value:.3f} s"


def format_report(result: dict[str, Any]) -> str:
    meta, corpus, figures = result["meta"], result["corpus"], result["figures"]
    lines = [
        f"Python {meta['python']} ({meta['implementation']}), SQLite {meta['sqlite']}, numpy {meta['numpy']}, "
        f"bm25s {meta['bm25s'] or 'not installed'}; {meta['platform']}, {meta['cpu_count']} CPUs; seed {meta['seed']}",
        f"Corpus: {corpus['files']} files, {corpus['bytes'] / 1e6:.1f} MB, {corpus['chunks']} chunks, "
        f"{corpus['tokens']} tokens, {corpus['vocabulary']} terms (FTS5 sees {corpus['fts5_vocabulary']}), "
        f"{corpus['postings']} posting rows",
        f"Shared preparation (walk, decode, redact, chunk, tokenize): {corpus['prepare_s']:.2f} s",
        f"Scope: {corpus['scope_package']}/ = {corpus['scope_share']:.1%} of chunks",
        "",
        "| figure | ours | baseline | ratio | target | pass |",
        "|---|---:|---:|---:|---:|:---:|",
    ]
    for row in result["table"]:
        lines.append(
            f"| {row['figure']} | {_fmt(row['ours'], row['unit'])} | {_fmt(row['baseline'], row['unit'])} | "
            f"{row['ratio']:.3f}x | <= {row['target']}x | {'pass' if row['pass'] else 'FAIL'} |"
        )
    full = figures["full_build"]
    lines += ["", "For information:"]
    if full["bm25s_index_s"] is not None:
        lines.append(f"- bm25s index build: {full['bm25s_index_s']:.3f} s")
    incr = figures["incremental"]
    lines.append(f"- files changed per incremental run: {incr['files_changed']}")
    lines += [
        "",
        "| query set | n | terms | ours p50/p95 (cold p50) | ours scoped p50/p95 | bm25s p50/p95 | bm25s masked p50 | FTS5 p50/p95 | FTS5 scoped p50/p95 | top-10 overlap ours/bm25s, scoped, ours/FTS5 |",  # noqa: E501 - data, kept whole
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in figures["recall"].items():
        def pp(key: str, row: dict[str, Any] = row) -> str:
            if key not in row:
                return "-"
            return f"{row[key]['p50_ms']:.3f} / {row[key]['p95_ms']:.3f}"

        masked = f"{row['bm25s_masked']['p50_ms']:.3f}" if "bm25s_masked" in row else "-"
        overlap = (
            f"{row['top10_overlap_ours_bm25s']:.2f}, {row['top10_overlap_scoped_ours_bm25s_masked']:.2f}, "
            f"{row['top10_overlap_ours_fts5']:.2f}"
            if "top10_overlap_ours_bm25s" in row
            else "-"
        )
        lines.append(
            f"| {name} | {row['queries']} | {row['mean_terms']:.0f} | {pp('ours')} ({row['ours_cold']['p50_ms']:.3f}) | "
            f"{pp('ours_scoped')} | {pp('bm25s')} | {masked} | {pp('fts5')} | {pp('fts5_scoped')} | {overlap} |"
        )
    lines.append("(milliseconds; FTS5 rows are one pass, capped by a time budget: see n in the JSON)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.index_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"a {QUICK_FILES}-file subset, for a smoke run")
    parser.add_argument("--out", type=Path, help="write the figures as JSON to this file")
    parser.add_argument("--reps", type=int, help="repetitions of each bulk build (default 5, quick 2)")
    parser.add_argument("--no-bm25s", action="store_true", help="skip bm25s even if it is installed")
    parser.add_argument("--keep", action="store_true", help="keep the temporary workspace and databases")
    parser.add_argument("--e2e", action="store_true",
                        help="end to end: `scopelens index` as a subprocess against an FTS5 script (bench/index_e2e.py)")
    args = parser.parse_args(argv)
    if args.e2e:
        return _main_e2e(args)
    if bm25s is None and not args.no_bm25s:
        print("note: bm25s is not installed (pip install -e '.[bench]'); its figures are skipped", file=sys.stderr)
    source = stdlib_root()
    files = stdlib_files(source)
    if args.quick:
        files = quick_subset(files, QUICK_FILES)
    settings = Settings(
        reps=args.reps or (2 if args.quick else 5),
        e2e_reps=2 if args.quick else 3,
        query_passes=2 if args.quick else 5,
        fts5_budget_s=2.0 if args.quick else 30.0,
        fts5_timeout_s=1.0 if args.quick else 10.0,
        use_bm25s=not args.no_bm25s,
        log=lambda message: print(message, file=sys.stderr, flush=True),
    )
    workdir = Path(tempfile.mkdtemp(prefix="scopelens-bench-"))
    try:
        result = run_bench(source, files, workdir, settings)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    result["meta"]["quick"] = bool(args.quick)
    print(format_report(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    return 0


def _main_e2e(args: argparse.Namespace) -> int:
    source = stdlib_root()
    files = stdlib_files(source)
    if args.quick:
        files = quick_subset(files, QUICK_FILES)
    workdir = Path(tempfile.mkdtemp(prefix="scopelens-e2e-"))
    try:
        return index_e2e.main_e2e(
            source, files, workdir, quick=args.quick, reps=args.reps, out=args.out,
            log=lambda message: print(message, file=sys.stderr, flush=True),
        )
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
