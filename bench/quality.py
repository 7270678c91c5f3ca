"""Retrieval-quality benchmark: scopelens ``retrieve`` against plain BM25, on real and generated bugs.

Run ``python -m bench.quality`` (see ``--help`` and docs/quality.md). For every task (an issue
text and the file(s) the fix changed), in one run:

* the repository is materialised at its base commit from a local bare git mirror
  (``git archive BASE | tar -x``) into the cache, and indexed into a scopelens store of its own
  (one store per repository and commit, cached under a key that includes a hash of the
  engine's indexing code, so a changed chunker or tokenizer re-indexes by itself);
* **scopelens**: ``Retriever.retrieve`` with the issue text as the question and purpose
  ``fix-test``, on a private copy of that store (so no task sees another task's snapshot),
  with a fixed clock and sequential ids. Files in rank order are the ``ranked`` entries with a
  path, first occurrence kept, from the top 100 entries;
* **bm25**: plain BM25 (bm25s, its own tokenizer and English stop words) over the same chunks
  scopelens indexed, read from the store's ``index_chunks``, ``.py`` files only; chunk -> file
  by first occurrence, files with a zero score left out;
* the metrics: Acc@1/5/10 (a gold file among the first k distinct files), MRR (reciprocal rank
  of the first gold file among the first 100 files, else 0), and for scopelens whether a gold
  file is in the selected block (what the model saw);
* where scopelens lost the gold file, read from the snapshot's candidate rows (the stages of
  ``core.vocab.Stage``): ``rank_stage`` for the ranking (``top-k``, ``ranked-below-k``, a
  boundary stage, ``not-recalled``) and ``block_stage`` for the block (``selected``,
  ``trimmed-away``, ``over-budget``, ``duplicate``, ``below-cutoff``, a boundary stage,
  ``not-recalled``).

Reports are per set, per repository, leave-one-repository-out (``loro``: a ``Fitter`` fits on
the other repositories and the held-out one is evaluated with what it returned; today nothing
is fitted, ``NoFit``, so each fold's figures are that repository's own), and totals.

The sets: ``dev`` (``/work/shared/bench/swebench-lite-dev.jsonl``, 101 SWE-bench Lite
instances), ``inject`` (bugs injected into the standard library, ``bench/quality_inject.py``)
and ``pydicom`` (the SWE-bench task recorded in ``fixtures/sessions``, over pydicom 2.2.0's
sdist). Timing never goes into unit tests: ``tests/test_quality_smoke.py`` runs the harness on
a tiny synthetic repository.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol
from unittest import mock

from sqlmodel import col, select

import scopelens.core.index as index_package
from scopelens.core import ENGINE_VERSION
from scopelens.core.clock import SequentialIds, SteppingClock
from scopelens.core.contracts import AuditSnapshot, RetrievalIntent
from scopelens.core.index import indexer as indexer_module
from scopelens.core.index.indexer import PreparedDocument, index_workspace
from scopelens.core.index.languages import language_of
from scopelens.core.index.sources import SourceClassifier
from scopelens.core.pipeline.retriever import Retriever
from scopelens.core.redact import RedactionKey
from scopelens.core.store.store import Store
from scopelens.core.store.tables import IndexChunkRow, IndexDocumentRow
from scopelens.core.vocab import Purpose, Stage

try:  # the test extra (and the bench extra) install it
    import bm25s  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the environment
    bm25s = None

_prepare_document = indexer_module.prepare_document
STORE_FORMAT = 2
"""Bumped when the bench changes how it builds stores (2: the fixed redaction key)."""
BENCH_KEY = RedactionKey(bytes(32))
"""A fixed redaction key: stores are reproducible, and prepared documents reusable across them."""
PROJECT = "bench"
BRANCH = "main"
SEED = 20260301
QUICK_TASKS = 40
TOP_FILES = 100
"""Files in rank order are taken from the first TOP_FILES ranked entries (and BM25's first files)."""
BM25_CHUNKS = 2000
"""Chunks BM25 retrieves before they are folded into files."""
KS = (1, 5, 10)
STAGE_K = 5
"""The k of ``rank_stage``: the target metric is Acc@5."""
INDEX_TIME = datetime(2026, 1, 1, tzinfo=UTC)
RETRIEVE_TIME = INDEX_TIME + timedelta(days=1)
SETS = ("dev", "inject", "pydicom")

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("SCOPELENS_SHARED", REPO_ROOT.parent / "shared"))
DEV_JSONL = SHARED / "bench" / "swebench-lite-dev.jsonl"
PYDICOM_INSTANCE = SHARED / "fixtures" / "sessions" / "swe-agent" / "pydicom__pydicom-1458.instance.json"
PYDICOM_VERSION = "2.2.0"
DEFAULT_CACHE = Path("~/.cache/scopelens-bench").expanduser()
DEFAULT_MIRROR_ROOTS = (DEFAULT_CACHE / "mirrors", Path("/work/.mirror"))

BOUNDARY_STAGES = (Stage.OUT_OF_SCOPE, Stage.DENIED_SOURCE, Stage.NOT_VISIBLE, Stage.STALE, Stage.MEMORY_STATUS)
_BLOCK_ORDER = (Stage.TRIMMED_AWAY, Stage.OVER_BUDGET, Stage.DUPLICATE, Stage.BELOW_CUTOFF, *BOUNDARY_STAGES)
"""Rejection stages, furthest towards the model first: a file's block stage is its best chunk's."""


class BenchError(Exception):
    """A problem with the bench's inputs (a missing mirror, commit or file): one line, exit 2."""


# --------------------------------------------------------------------------- tasks


@dataclass(frozen=True)
class Workspace:
    """A tree to index: ``key`` names its cached store; ``build(dest)`` writes the tree into ``dest``.

    Workspaces are indexed in ``order`` (then key): the commits of one repository oldest first,
    so that each shares most files with the one before (see ``PreparedMemo``)."""

    key: str
    build: Callable[[Path], None] = field(compare=False, repr=False)
    order: tuple[str, int] = ("", 0)


@dataclass(frozen=True)
class Task:
    task_id: str
    set: str
    repo: str
    question: str
    gold_files: tuple[str, ...]
    workspace: Workspace


def _safe(name: str) -> str:
    return name.replace("/", "+")


def find_mirror(repo: str, roots: Sequence[Path]) -> Path:
    """The bare git directory of ``repo`` (``owner/name``) under one of ``roots``.

    Accepts ``ROOT/owner+name`` (a bare repository, or a directory holding one, as the
    ``fetch`` tool leaves it: ``ROOT/owner+name/repo``), ``ROOT/owner/name(.git)`` and
    ``ROOT/name(.git)``.
    """
    owner, _, name = repo.partition("/")
    for root in roots:
        for base in (root / f"{owner}+{name}", root / owner / name, root / owner / f"{name}.git",
                     root / name, root / f"{name}.git"):
            for candidate in (base, base / "repo", base / ".git"):
                if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
                    return candidate
    raise BenchError(f"no git mirror of {repo} under {', '.join(map(str, roots))} (fetch it as owner+name)")


def git_tree_builder(mirror: Path, commit: str) -> Callable[[Path], None]:
    def build(dest: Path) -> None:
        archive = subprocess.run(["git", f"--git-dir={mirror}", "archive", "--format=tar", commit],
                                 capture_output=True, check=False)
        if archive.returncode != 0:
            raise BenchError(f"git archive {commit} in {mirror}: {archive.stderr.decode(errors='replace').strip()}")
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return build


def commit_time(mirror: Path, commit: str) -> int:
    shown = subprocess.run(["git", f"--git-dir={mirror}", "show", "-s", "--format=%ct", commit], capture_output=True,
                           text=True, check=False)
    if shown.returncode != 0:
        raise BenchError(f"commit {commit} not in {mirror}: {shown.stderr.strip()}")
    return int(shown.stdout.strip() or 0)


def load_dev(path: Path, mirror_roots: Sequence[Path]) -> list[Task]:
    """The SWE-bench-style JSONL set: one task per instance, its repository at its base commit."""
    if not path.is_file():
        raise BenchError(f"dev set not found: {path}")
    tasks = []
    mirrors: dict[str, Path] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        repo, commit = row["repo"], row["base_commit"]
        if repo not in mirrors:
            mirrors[repo] = find_mirror(repo, mirror_roots)
        workspace = Workspace(f"{_safe(repo)}@{commit[:12]}", git_tree_builder(mirrors[repo], commit),
                              (repo, commit_time(mirrors[repo], commit)))
        tasks.append(Task(row["instance_id"], "dev", repo, row["problem_statement"], tuple(row["gold_files"]), workspace))
    return tasks


def gold_files_of_patch(patch: str) -> tuple[str, ...]:
    """The files a unified diff changes (its ``diff --git a/X b/X`` lines), in order."""
    out: list[str] = []
    for line in patch.splitlines():
        if line.startswith("diff --git a/"):
            path = line.split(" b/", 1)[-1].strip()
            if path not in out:
                out.append(path)
    return tuple(out)


def load_pydicom(instance_path: Path, cache: Path) -> list[Task]:
    """The pydicom SWE-bench instance over pydicom 2.2.0's sdist (downloaded once with pip)."""
    if not instance_path.is_file():
        raise BenchError(f"pydicom instance not found: {instance_path}")
    data = json.loads(instance_path.read_text(encoding="utf-8"))
    row = data[0] if isinstance(data, list) else data
    sdist_dir = cache / "sdists"

    def build(dest: Path) -> None:
        sdist = sdist_dir / f"pydicom-{PYDICOM_VERSION}.tar.gz"
        if not sdist.is_file():
            sdist_dir.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, "-m", "pip", "download", f"pydicom=={PYDICOM_VERSION}", "--no-deps",
                            "--no-binary", ":all:", "-q", "-d", str(sdist_dir)], check=True)
        with tarfile.open(sdist) as archive:
            archive.extractall(dest, filter="data")
        top = dest / f"pydicom-{PYDICOM_VERSION}"
        for child in top.iterdir():  # the sdist's top folder becomes the workspace root
            child.rename(dest / child.name)
        top.rmdir()

    workspace = Workspace(f"pydicom-sdist-{PYDICOM_VERSION}", build)
    return [Task(row["instance_id"], "pydicom", row["repo"], row["problem_statement"], gold_files_of_patch(row["patch"]),
                 workspace)]


def quick_subset(tasks: Sequence[Task], n: int = QUICK_TASKS, seed: int = SEED) -> list[Task]:
    """A fixed subset: each repository's tasks shuffled with ``seed``, then taken round-robin
    over the repositories (sorted by name) until ``n``, so every repository is represented."""
    by_repo: dict[str, list[Task]] = defaultdict(list)
    for task in sorted(tasks, key=lambda t: (t.set, t.task_id)):
        by_repo[f"{task.set}:{task.repo}"].append(task)
    rng = random.Random(seed)
    queues = {}
    for key in sorted(by_repo):
        items = by_repo[key]
        rng.shuffle(items)
        queues[key] = items
    picked: list[Task] = []
    while len(picked) < n and any(queues.values()):
        for key in sorted(queues):
            if queues[key] and len(picked) < n:
                picked.append(queues[key].pop(0))
    return picked


# --------------------------------------------------------------------------- workspaces and stores


QUERY_SIDE_MODULES = frozenset({"scorer.py", "small_bm25.py", "chunks.py"})
"""Modules of ``core/index`` that only read or score an index: changing them does not change
what a store holds, so they stay out of the store's cache key (a ranking change must not cost
a re-index of every repository)."""


def index_code_hash() -> str:
    """A hash of the engine's index-writing code: a cached store is rebuilt when it changes."""
    digest = hashlib.sha256(f"{ENGINE_VERSION}:{STORE_FORMAT}".encode())
    for path in sorted(Path(index_package.__file__).resolve().parent.glob("*.py")):
        if path.name in QUERY_SIDE_MODULES:
            continue
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


def materialise(workspace: Workspace, cache: Path) -> Path:
    """The workspace's tree under ``cache/trees`` (built once, atomically)."""
    dest = cache / "trees" / workspace.key
    if dest.is_dir():
        return dest.resolve()
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{workspace.key}.", dir=dest.parent))
    try:
        workspace.build(partial)
        partial.rename(dest)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return dest.resolve()


class PreparedMemo:
    """``prepare_document`` remembered across the workspaces of one run.

    Preparing a file (decode, redact, chunk, tokenize) is a pure function of its path, its
    bytes, the source the classifier gives it and the redaction key (fixed here), and the
    commits of one repository share most files; so a document prepared for the workspace just
    indexed is reused for the next one instead of being prepared again. Only the last two
    workspaces' documents are kept (memory). The store written is the same either way.
    """

    def __init__(self) -> None:
        self.current: dict[tuple[str, bytes, str], PreparedDocument] = {}
        self.previous: dict[tuple[str, bytes, str], PreparedDocument] = {}
        self.hits = 0

    def __call__(self, path: str, data: bytes, *, classifier: SourceClassifier, replaces: int | None,
                 key: RedactionKey) -> PreparedDocument:
        if key is not BENCH_KEY:
            return _prepare_document(path, data, classifier=classifier, replaces=replaces, key=key)
        memo_key = (path, hashlib.sha256(data).digest(), classifier.source_of(path, language_of(path)).value)
        document = self.current.get(memo_key) or self.previous.get(memo_key)
        if document is None:
            document = _prepare_document(path, data, classifier=classifier, replaces=None, key=key)
        else:
            self.hits += 1
        self.current[memo_key] = document
        return document if document.replaces == replaces else replace(document, replaces=replaces)

    def next_workspace(self) -> None:
        self.previous, self.current = self.current, {}


PREPARED = PreparedMemo()


def indexed_store(workspace: Workspace, cache: Path, log: Callable[[str], None]) -> tuple[Path, Path, float]:
    """The cached store of the workspace (indexed once); returns (store path, tree, index seconds)."""
    tree = materialise(workspace, cache)
    path = cache / "stores" / f"{workspace.key}.{index_code_hash()}.db"
    if path.is_file():
        return path, tree, 0.0
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(f"{partial}{suffix}").unlink(missing_ok=True)
    log(f"indexing {workspace.key} ...")
    start = time.perf_counter()
    clock = SteppingClock(INDEX_TIME, timedelta(0))
    with Store.open(str(partial), create=True, clock=clock, ids=SequentialIds("index"), redaction_key=BENCH_KEY) as store, \
            mock.patch.object(indexer_module, "prepare_document", PREPARED):
        index_workspace(store, tree, project=PROJECT, branch=BRANCH, clock=clock)
    PREPARED.next_workspace()
    seconds = time.perf_counter() - start
    partial.rename(path)
    log(f"indexed {workspace.key} in {seconds:.1f}s")
    return path, tree, seconds


@contextmanager
def private_copy(store_path: Path) -> Iterator[Path]:
    """A throw-away copy of a cached store, so a retrieval's snapshot never reaches another task."""
    with tempfile.TemporaryDirectory(prefix="scopelens-quality-") as tmp:
        copy = Path(tmp) / "store.db"
        shutil.copyfile(store_path, copy)
        yield copy


def indexed_root(store: Store) -> str:
    with store.read() as conn:
        row = conn.exec(select(IndexDocumentRow.root).where(col(IndexDocumentRow.project) == PROJECT)).first()
    if row is None:
        raise BenchError("the workspace store holds no indexed document")
    return str(row)


def store_chunks(store: Store) -> list[tuple[str, str]]:
    """(path, text) of every live chunk, in chunk-id order."""
    with store.read() as conn:
        rows = conn.exec(
            select(IndexChunkRow.path, IndexChunkRow.text)
            .join(IndexDocumentRow, col(IndexDocumentRow.id) == col(IndexChunkRow.document_id))
            .where(col(IndexDocumentRow.valid_to).is_(None))
            .order_by(col(IndexChunkRow.id))
        ).all()
    return [(path, text) for path, text in rows]


# --------------------------------------------------------------------------- engines


def dedupe(paths: Iterable[str | None], limit: int = TOP_FILES) -> list[str]:
    """Distinct paths in first-occurrence order (None skipped), at most ``limit``."""
    seen: dict[str, None] = {}
    for path in paths:
        if path is not None and path not in seen:
            seen[path] = None
            if len(seen) >= limit:
                break
    return list(seen)


class BM25Baseline:
    """Plain BM25 (bm25s) over the ``.py`` chunks of one store; chunk -> file by first occurrence."""

    def __init__(self, chunks: Sequence[tuple[str, str]]) -> None:
        if bm25s is None:
            raise BenchError("bm25s is not installed: pip install -e '.[bench]'")
        code = [(path, text) for path, text in chunks if path.endswith(".py")]
        self.paths = [path for path, _ in code]
        self.model = bm25s.BM25()
        if code:
            tokens = bm25s.tokenize([text for _, text in code], stopwords="en", show_progress=False)
            self.model.index(tokens, show_progress=False)

    def rank_files(self, question: str) -> list[str]:
        if not self.paths:
            return []
        query = bm25s.tokenize([question], stopwords="en", return_ids=False, show_progress=False)
        if not query[0]:
            return []
        ids, scores = self.model.retrieve(query, k=min(BM25_CHUNKS, len(self.paths)), show_progress=False)
        return dedupe(self.paths[int(i)] for i, s in zip(ids[0], scores[0], strict=True) if s > 0)


@dataclass
class ScopelensRun:
    files: list[str]
    snapshot: AuditSnapshot
    seconds: float


def run_scopelens(store_path: Path, question: str) -> ScopelensRun:
    """``retrieve`` (purpose fix-test, the issue as the question) on a private copy of the store."""
    with private_copy(store_path) as copy, Store.open(
        str(copy), clock=SteppingClock(RETRIEVE_TIME, timedelta(0)), ids=SequentialIds("quality"), redaction_key=BENCH_KEY
    ) as store:
        retriever = Retriever(store, workspace_root=indexed_root(store))
        start = time.perf_counter()
        observation = retriever.retrieve(RetrievalIntent(purpose=Purpose.FIX_TEST, question=question),
                                         project=PROJECT, branch=BRANCH)
        seconds = time.perf_counter() - start
    snapshot = observation.snapshot
    files = dedupe(entry.path for entry in snapshot.ranked[:TOP_FILES])
    return ScopelensRun(files, snapshot, seconds)


# --------------------------------------------------------------------------- metrics


def first_gold_rank(files: Sequence[str], gold: Iterable[str]) -> int | None:
    """1-based rank of the first gold file among ``files`` (None: not there)."""
    wanted = set(gold)
    return next((rank for rank, path in enumerate(files, start=1) if path in wanted), None)


def metrics_of(rank: int | None) -> dict[str, float]:
    out = {f"acc@{k}": 1.0 if rank is not None and rank <= k else 0.0 for k in KS}
    out["mrr"] = 1.0 / rank if rank is not None else 0.0
    return out


def gold_stages(snapshot: AuditSnapshot, files: Sequence[str], gold: Iterable[str], k: int = STAGE_K) -> dict[str, Any]:
    """Where the gold file(s) stood in a snapshot: recalled, file rank, the rejection stages of
    its chunks, whether a chunk reached the block, and the two loss stages."""
    wanted = set(gold)
    ranked_rows = [e for e in snapshot.ranked if e.path in wanted]
    rejected = [r for r in snapshot.rejected if r.path in wanted and not r.from_probe]
    selected = any(item.path in wanted for item in snapshot.selected)
    stages = {r.stage for r in rejected}
    recalled = bool(ranked_rows or rejected)
    file_rank = first_gold_rank(dedupe((e.path for e in snapshot.ranked), limit=len(snapshot.ranked) or 1), wanted)
    if file_rank is not None and file_rank <= k:
        rank_stage = "top-k"
    elif ranked_rows:
        rank_stage = "ranked-below-k"
    elif recalled:
        rank_stage = next(s.value for s in BOUNDARY_STAGES if s in stages) if stages & set(BOUNDARY_STAGES) else "rejected"
    else:
        rank_stage = Stage.NOT_RECALLED.value
    if selected:
        block_stage = Stage.SELECTED.value
    elif recalled:
        block_stage = next((s.value for s in _BLOCK_ORDER if s in stages), "ranked-not-selected")
    else:
        block_stage = Stage.NOT_RECALLED.value
    return {
        "recalled": recalled,
        "file_rank": file_rank,
        "best_chunk_rank": min((e.rank for e in ranked_rows), default=None),
        "rejection_stages": sorted(s.value for s in stages),
        "selected": selected,
        "rank_stage": rank_stage,
        "block_stage": block_stage,
        "ranked_entries": len(snapshot.ranked),
        "ranked_files": len(files),
    }


@dataclass
class TaskResult:
    task_id: str
    set: str
    repo: str
    gold_files: list[str]
    scopelens: dict[str, float]
    bm25: dict[str, float]
    scopelens_rank: int | None
    bm25_rank: int | None
    in_block: bool
    stages: dict[str, Any]
    gold_indexed: bool
    scopelens_top5: list[str]
    bm25_top5: list[str]
    retrieve_s: float


def evaluate_task(task: Task, store_path: Path, baseline: BM25Baseline, indexed_paths: set[str]) -> TaskResult:
    run = run_scopelens(store_path, task.question)
    bm25_files = baseline.rank_files(task.question)
    ours = first_gold_rank(run.files, task.gold_files)
    theirs = first_gold_rank(bm25_files, task.gold_files)
    stages = gold_stages(run.snapshot, run.files, task.gold_files)
    return TaskResult(
        task_id=task.task_id, set=task.set, repo=task.repo, gold_files=list(task.gold_files),
        scopelens=metrics_of(ours), bm25=metrics_of(theirs), scopelens_rank=ours, bm25_rank=theirs,
        in_block=stages["selected"], stages=stages,
        gold_indexed=any(p in indexed_paths for p in task.gold_files),
        scopelens_top5=run.files[:5], bm25_top5=bm25_files[:5], retrieve_s=round(run.seconds, 3),
    )


# --------------------------------------------------------------------------- running


@dataclass
class Timings:
    index_s: dict[str, float] = field(default_factory=dict)
    baseline_s: dict[str, float] = field(default_factory=dict)
    tasks_s: float = 0.0
    total_s: float = 0.0


def evaluate(tasks: Sequence[Task], cache: Path, log: Callable[[str], None] = print,
             timings: Timings | None = None) -> list[TaskResult]:
    """Every task, grouped by workspace (one index and one BM25 model per workspace), in task order."""
    timings = timings or Timings()
    by_workspace: dict[str, list[Task]] = defaultdict(list)
    workspaces: dict[str, Workspace] = {}
    for task in tasks:
        by_workspace[task.workspace.key].append(task)
        workspaces[task.workspace.key] = task.workspace
    results: dict[str, TaskResult] = {}
    start = time.perf_counter()
    done = 0
    for key in sorted(by_workspace, key=lambda k: (workspaces[k].order, k)):
        group = by_workspace[key]
        store_path, _tree, seconds = indexed_store(workspaces[key], cache, log)
        if seconds:
            timings.index_s[key] = round(seconds, 2)
        with Store.open(str(store_path), read_only=True) as store:
            chunks = store_chunks(store)
        t0 = time.perf_counter()
        baseline = BM25Baseline(chunks)
        timings.baseline_s[key] = round(time.perf_counter() - t0, 2)
        indexed_paths = {path for path, _ in chunks}
        for task in group:
            result = evaluate_task(task, store_path, baseline, indexed_paths)
            results[task.task_id] = result
            done += 1
            log(f"[{done}/{len(tasks)}] {task.task_id}: scopelens rank {result.scopelens_rank}, "
                f"bm25 rank {result.bm25_rank}, {result.stages['rank_stage']} / {result.stages['block_stage']}")
    timings.tasks_s += time.perf_counter() - start
    return [results[t.task_id] for t in tasks]


def summarise(results: Sequence[TaskResult]) -> dict[str, Any]:
    """Mean metrics of both engines, the block share and the stage counts of a group of tasks."""
    n = len(results)
    if n == 0:
        return {"tasks": 0}
    out: dict[str, Any] = {"tasks": n}
    for engine in ("scopelens", "bm25"):
        out[engine] = {m: round(sum(getattr(r, engine)[m] for r in results) / n, 4) for m in (*[f"acc@{k}" for k in KS], "mrr")}
    out["in_block"] = round(sum(r.in_block for r in results) / n, 4)
    out["rank_stage"] = _counts(r.stages["rank_stage"] for r in results)
    out["block_stage"] = _counts(r.stages["block_stage"] for r in results)
    # Of the tasks scopelens lost at each rank stage, how many BM25 had in its first k files.
    out["rank_stage_bm25_top_k"] = _counts(r.stages["rank_stage"] for r in results if r.bm25[f"acc@{STAGE_K}"])
    out["mean_ranked_entries"] = round(sum(r.stages["ranked_entries"] for r in results) / n, 1)
    out["gold_not_indexed"] = sum(not r.gold_indexed for r in results)
    return out


def _counts(values: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for value in values:
        counts[value] += 1
    return dict(sorted(counts.items()))


class Fitter(Protocol):
    """Fits weights on training tasks; ``evaluate`` then runs the held-out tasks with them."""

    name: str

    def fit(self, train: Sequence[Task]) -> dict[str, Any]: ...


class NoFit:
    """Today's pipeline has no fitted weights: every fold runs the engine as it is."""

    name = "none"

    def fit(self, train: Sequence[Task]) -> dict[str, Any]:
        return {}


def leave_one_repo_out(
    tasks: Sequence[Task],
    fitter: Fitter,
    run_fold: Callable[[Sequence[Task], dict[str, Any]], Sequence[TaskResult]],
) -> dict[str, Any]:
    """For each repository of the set: fit on the others, evaluate the held-out one with the
    fitted parameters (``run_fold(held_out, params)``); the summary of each fold and their mean
    over folds (each repository weighs the same, unlike the totals where sympy dominates)."""
    repos = sorted({t.repo for t in tasks})
    folds = {}
    for repo in repos:
        train = [t for t in tasks if t.repo != repo]
        held_out = [t for t in tasks if t.repo == repo]
        params = fitter.fit(train)
        folds[repo] = {"params": params, "train_tasks": len(train), **summarise(run_fold(held_out, params))}
    macro: dict[str, Any] = {}
    for engine in ("scopelens", "bm25"):
        macro[engine] = {m: round(sum(f[engine][m] for f in folds.values()) / len(folds), 4)
                         for m in (*[f"acc@{k}" for k in KS], "mrr")} if folds else {}
    macro["in_block"] = round(sum(f["in_block"] for f in folds.values()) / len(folds), 4) if folds else 0.0
    return {"fitter": fitter.name, "folds": folds, "macro": macro}


def report(tasks: Sequence[Task], results: Sequence[TaskResult], fitter: Fitter | None = None) -> dict[str, Any]:
    """Totals, per set, per repository and leave-one-repository-out per set."""
    fitter = fitter or NoFit()
    by_id = {r.task_id: r for r in results}

    def reuse(held_out: Sequence[Task], params: dict[str, Any]) -> list[TaskResult]:
        if params:  # pragma: no cover - no fitter exists yet; a fitted one must re-run the held-out tasks
            raise NotImplementedError("a fitted fold needs run_fold to re-run retrieval with its params")
        return [by_id[t.task_id] for t in held_out]

    out: dict[str, Any] = {"total": summarise(results), "sets": {}}
    for name in SETS:
        set_tasks = [t for t in tasks if t.set == name]
        if not set_tasks:
            continue
        set_results = [by_id[t.task_id] for t in set_tasks]
        repos = {repo: summarise([r for r in set_results if r.repo == repo]) for repo in sorted({t.repo for t in set_tasks})}
        out["sets"][name] = {
            "summary": summarise(set_results),
            "repos": repos,
            "loro": leave_one_repo_out(set_tasks, fitter, reuse),
        }
    return out


# --------------------------------------------------------------------------- output


def _fmt(value: float) -> str:
    return f"{value:.2f}"


def format_table(result: dict[str, Any]) -> str:
    """Markdown tables: per set and repository, both engines; then the loss stages."""
    lines = ["| set | repository | tasks | engine | Acc@1 | Acc@5 | Acc@10 | MRR | in block |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|"]

    def rows(set_name: str, repo: str, summary: dict[str, Any]) -> None:
        for engine in ("scopelens", "bm25"):
            m = summary[engine]
            block = _fmt(summary["in_block"]) if engine == "scopelens" else "—"
            lines.append(f"| {set_name} | {repo} | {summary['tasks']} | {engine} | {_fmt(m['acc@1'])} | {_fmt(m['acc@5'])} | "
                         f"{_fmt(m['acc@10'])} | {_fmt(m['mrr'])} | {block} |")

    report_ = result["report"]
    for set_name, data in report_["sets"].items():
        if len(data["repos"]) > 1:
            for repo, summary in data["repos"].items():
                rows(set_name, repo, summary)
        rows(set_name, "**all**", data["summary"])
        if len(data["repos"]) > 1:
            macro = data["loro"]["macro"]
            for engine in ("scopelens", "bm25"):
                m = macro[engine]
                block = _fmt(macro["in_block"]) if engine == "scopelens" else "—"
                lines.append(f"| {set_name} | LORO mean of {len(data['repos'])} folds | — | {engine} | {_fmt(m['acc@1'])} | "
                             f"{_fmt(m['acc@5'])} | {_fmt(m['acc@10'])} | {_fmt(m['mrr'])} | {block} |")
    if len(report_["sets"]) > 1:
        rows("**total**", "", report_["total"])
    lines += ["", f"Where scopelens lost the gold file (rank stage at k={STAGE_K}; block stage at the default budget):", "",
              f"| set | rank stage | tasks | of which BM25 top-{STAGE_K} | | block stage | tasks |",
              "|---|---|---:|---:|---|---|---:|"]
    for set_name, data in report_["sets"].items():
        summary = data["summary"]
        rank = list(summary["rank_stage"].items())
        block = list(summary["block_stage"].items())
        for i in range(max(len(rank), len(block))):
            a = rank[i] if i < len(rank) else ("", "")
            b = block[i] if i < len(block) else ("", "")
            both = summary["rank_stage_bm25_top_k"].get(a[0], 0) if a[0] else ""
            lines.append(f"| {set_name if i == 0 else ''} | {a[0]} | {a[1]} | {both} | | {b[0]} | {b[1]} |")
        lines.append(f"| {set_name} | mean `ranked` entries per task: {summary['mean_ranked_entries']} | | | | | |")
    return "\n".join(lines)


def environment() -> dict[str, Any]:
    commit = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                            text=True, check=False).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, check=False).stdout.strip()
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "scopelens_commit": commit or None,
        "dirty": bool(dirty),
        "engine": ENGINE_VERSION,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "bm25s": getattr(bm25s, "__version__", None),
        "seed": SEED,
    }


def run_bench(tasks: Sequence[Task], cache: Path, log: Callable[[str], None] = print,
              extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Evaluate ``tasks`` and build the JSON document (environment, report, per-task rows, timings)."""
    timings = Timings()
    start = time.perf_counter()
    results = evaluate(tasks, cache, log, timings)
    timings.total_s = time.perf_counter() - start
    retrieve = sorted(r.retrieve_s for r in results)
    return {
        "environment": environment(),
        "settings": {"top_files": TOP_FILES, "bm25_chunks": BM25_CHUNKS, "stage_k": STAGE_K, "purpose": "fix-test",
                     **(extra or {})},
        "report": report(tasks, results),
        "tasks": [asdict(r) for r in results],
        "timings": {
            "index_s": timings.index_s, "baseline_index_s": timings.baseline_s,
            "tasks_s": round(timings.tasks_s, 1), "total_s": round(timings.total_s, 1),
            "retrieve_p50_s": retrieve[len(retrieve) // 2] if retrieve else None,
        },
    }


def rereport(previous: dict[str, Any]) -> dict[str, Any]:
    """A saved result (``--json``) reported again by this code: the per-task rows are kept, the
    summaries, folds and tables recomputed (no retrieval runs)."""
    results = [TaskResult(**row) for row in previous["tasks"]]
    placeholder = Workspace("-", lambda _dest: None)
    tasks = [Task(r.task_id, r.set, r.repo, "", tuple(r.gold_files), placeholder) for r in results]
    return {**previous, "report": report(tasks, results)}


def collect_tasks(args: argparse.Namespace, log: Callable[[str], None]) -> tuple[list[Task], dict[str, Any]]:
    wanted = SETS if args.set == "all" else (args.set,)
    tasks: list[Task] = []
    extra: dict[str, Any] = {"sets": list(wanted)}
    if "dev" in wanted:
        roots = [args.mirror_root] if args.mirror_root else list(DEFAULT_MIRROR_ROOTS)
        tasks += load_dev(args.dev, roots)
    if "inject" in wanted:
        from bench import quality_inject

        inject_tasks, manifest = quality_inject.load_tasks(args.cache, count=args.inject_count, seed=args.inject_seed,
                                                           log=log, limit=args.limit)
        tasks += inject_tasks
        extra["inject"] = manifest
    if "pydicom" in wanted:
        tasks += load_pydicom(args.pydicom, args.cache)
    if args.quick:
        tasks = quick_subset(tasks)
    if args.limit:
        tasks = tasks[: args.limit]
    extra["quick"] = bool(args.quick)
    extra["limit"] = args.limit
    return tasks, extra


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.quality", description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror-root", type=Path, help="folder of bare git mirrors (owner+name); default: "
                        + ", ".join(map(str, DEFAULT_MIRROR_ROOTS)))
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                        help=f"trees, stores, sdists, the inject set (default {DEFAULT_CACHE})")
    parser.add_argument("--quick", action="store_true", help=f"a fixed {QUICK_TASKS}-task subset (round-robin over repositories)")
    parser.add_argument("--set", choices=(*SETS, "all"), default="dev")
    parser.add_argument("--json", type=Path, help="write the full result (per task too) here")
    parser.add_argument("--limit", type=int, help="only the first N tasks (after --quick); also caps inject generation")
    parser.add_argument("--dev", type=Path, default=DEV_JSONL, help=f"the dev set (default {DEV_JSONL})")
    parser.add_argument("--pydicom", type=Path, default=PYDICOM_INSTANCE, help="the pydicom instance JSON")
    parser.add_argument("--inject-count", type=int, default=200, help="bug-injection tasks to generate (default 200)")
    parser.add_argument("--inject-seed", type=int, default=SEED)
    parser.add_argument("--report-from", type=Path, metavar="JSON",
                        help="print the tables of a saved --json result again (recomputed summaries; no retrieval)")
    args = parser.parse_args(argv)
    args.cache = args.cache.expanduser().resolve()

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if args.report_from:
        result = rereport(json.loads(args.report_from.read_text(encoding="utf-8")))
        print(format_table(result))
        if args.json:
            args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return 0
    try:
        tasks, extra = collect_tasks(args, log)
        if not tasks:
            raise BenchError("no tasks selected")
        log(f"{len(tasks)} tasks; cache {args.cache}; python {platform.python_version()}; seed {SEED}")
        result = run_bench(tasks, args.cache, log, extra)
    except BenchError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(format_table(result))
    t = result["timings"]
    print(f"\n{len(tasks)} tasks in {t['total_s']}s (index {sum(t['index_s'].values()):.0f}s over "
          f"{len(t['index_s'])} new stores; "
          f"retrieve p50 {t['retrieve_p50_s']}s)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
