"""The bug-injection set of the quality bench: one injected bug in one standard-library function per task.

Each task is a mutant of one pure-Python, top-level standard-library module ``Lib/X.py`` that
has its own test module ``Lib/test/test_X.py``: one flipped comparison, off-by-one, wrong
constant or swapped argument in one function body, made with ``ast`` (one node on one line,
spliced back into the source so the rest of the file is byte-identical). The mutated module is
written to a temporary folder put first on ``PYTHONPATH`` and ``python -S -m unittest
test.test_X`` runs against it; a mutant whose tests do not fail (or hang) is discarded. The
query is that run's real output, with the machine-specific parts made fixed (the temporary
folder and the standard library's folder become ``/home/dev/cpython/Lib``; timings and
addresses are zeroed), cut to its first failures. The gold file is the mutated module.

Which modules and sites are tried is fixed by the seed and the Python version (both printed
and in the manifest); every test run's outcome is cached (``CACHE/inject/<python>-seed<seed>/
runs/``), so generation is incremental and resumable, and the chosen set is always the first
``count`` failing mutants in the seeded order, whatever was interrupted. ``tasks.jsonl`` and
``manifest.json`` (with the hash of the task file and of this generator) are written beside
them, never committed. Modules the interpreter imports at start-up (with ``-S``) cannot be
shadowed and are skipped; so are modules whose unmutated tests fail or take 5 s or more
(the issue's rule is 10 s; the first run's time is cached, so the choice does not depend on
a later run's load).

The workspace indexed for every task is a copy of the standard library's ``.py`` files (without
site-packages), unmutated: one index serves all tasks. A one-node mutation changes a file's
terms by at most one token, so this does not change what retrieval can find.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.index_bench import stdlib_files

GENERATOR_VERSION = 1
TEST_TIMEOUT_S = 10.0
"""The issue's rule: modules whose unmutated tests take 10 s or more are left out."""
BASELINE_MAX_S = 5.0
"""Stricter than the rule, to keep generation short on a shared machine (measured once, cached)."""
MUTANT_TIMEOUT_S = 20.0
"""A mutant's test run longer than min(this, 3 × its module's baseline + 5 s) is a hang: discarded."""
PER_MODULE_KEEP = 4
"""At most this many tasks from one module, so the set spreads over modules."""
PER_MODULE_TRIES = 10
QUERY_CHARS = 3000
FAKE_LIB = "/home/dev/cpython/Lib"
STDLIB_REPO = "python/cpython-Lib"
"""The inject set's one "repository" (the module is in each task id)."""
KINDS = ("flip-comparison", "off-by-one", "wrong-constant", "swap-arguments")

_FLIP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In,
}


def stdlib() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def python_tag() -> str:
    return "py" + ".".join(map(str, sys.version_info[:3]))


# --------------------------------------------------------------------------- mutation sites


@dataclass(frozen=True)
class Site:
    """One mutation: ``kind`` at a node spanning ``line`` cols [col, end_col), in ``function``."""

    kind: str
    function: str
    line: int
    col: int
    end_col: int
    replacement: str
    original: str

    @property
    def key(self) -> str:
        return f"{self.kind}@{self.line}:{self.col}-{self.end_col}"


class _Sites(ast.NodeVisitor):
    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.sites: list[Site] = []
        self.function: list[str] = []
        self.depth = 0

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.function.append(node.name)
        self.depth += 1
        for statement in node.body:  # the body only: not decorators, defaults or annotations
            self.visit(statement)
        self.depth -= 1
        self.function.pop()

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.function.append(node.name)
        for statement in node.body:
            self.visit(statement)
        self.function.pop()

    def _add(self, kind: str, node: ast.expr, new: ast.expr) -> None:
        if node.end_lineno != node.lineno or node.end_col_offset is None:
            return  # one line only: line numbers and the rest of the file stay as they are
        original = ast.get_source_segment(self.source, node)
        if original is None:
            return
        replacement = ast.unparse(new)
        if replacement == original or "\n" in replacement:
            return
        line = self.lines[node.lineno - 1]
        # ast columns are UTF-8 byte offsets; keep to ASCII lines so they are character offsets too
        if not line.isascii():
            return
        self.sites.append(Site(kind, ".".join(self.function), node.lineno, node.col_offset, node.end_col_offset,
                               replacement, original))

    def generic_visit(self, node: ast.AST) -> None:
        if self.depth:
            if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _FLIP:
                self._add("flip-comparison", node, ast.Compare(node.left, [_FLIP[type(node.ops[0])]()], node.comparators))
            elif (isinstance(node, ast.Call) and len(node.args) >= 2
                  and not any(isinstance(a, ast.Starred) for a in node.args[:2])):
                first, second = node.args[0], node.args[1]
                if ast.dump(first) != ast.dump(second):
                    self._add("swap-arguments", node, ast.Call(node.func, [second, first, *node.args[2:]], node.keywords))
            elif isinstance(node, ast.Constant) and type(node.value) is bool:
                self._add("wrong-constant", node, ast.Constant(not node.value))
            elif isinstance(node, ast.Constant) and type(node.value) is int and self._arithmetic(node):
                self._add("off-by-one", node, ast.Constant(node.value + 1))
            elif isinstance(node, ast.Constant) and type(node.value) is int and 1 < node.value < 1 << 16:
                self._add("wrong-constant", node, ast.Constant(node.value * 2))
        super().generic_visit(node)

    def _arithmetic(self, node: ast.Constant) -> bool:
        parent = getattr(node, "_parent", None)
        return isinstance(parent, ast.BinOp | ast.Slice | ast.Subscript | ast.Compare) or (
            isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "range")


def mutation_sites(source: str) -> list[Site]:
    """Every mutation site of the module's function bodies, in source order."""
    tree = ast.parse(source)
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            child._parent = parent  # type: ignore[attr-defined]
    finder = _Sites(source)
    finder.visit(tree)
    return sorted(set(finder.sites), key=lambda s: (s.line, s.col, s.kind, s.end_col))


def apply(source: str, site: Site) -> str:
    """The source with the one node replaced (it must still compile)."""
    lines = source.splitlines(keepends=True)
    line = lines[site.line - 1]
    if line[site.col : site.end_col] != site.original:
        raise ValueError(f"site {site.key} does not match the source")
    lines[site.line - 1] = line[: site.col] + site.replacement + line[site.end_col :]
    mutated = "".join(lines)
    compile(mutated, "<mutant>", "exec")
    return mutated


def ordered_sites(sites: list[Site], rng: random.Random) -> list[Site]:
    """Sites shuffled within each kind, then taken round-robin over the kinds (a mix of bugs)."""
    by_kind = {kind: [s for s in sites if s.kind == kind] for kind in KINDS}
    for kind in KINDS:
        rng.shuffle(by_kind[kind])
    out: list[Site] = []
    while any(by_kind.values()):
        for kind in KINDS:
            if by_kind[kind]:
                out.append(by_kind[kind].pop(0))
    return out


# --------------------------------------------------------------------------- running tests


@dataclass
class RunOutcome:
    returncode: int | None
    seconds: float
    output: str


def startup_modules() -> set[str]:
    """Modules ``python -S`` has imported before ``sys.path`` applies: they cannot be shadowed."""
    listed = subprocess.run([sys.executable, "-S", "-c", "import sys; print(' '.join(sys.modules))"], capture_output=True,
                            text=True, check=False, env=_env(None)).stdout.split()
    return set(listed)


def _env(pythonpath: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["LC_ALL"] = "C.UTF-8"
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return env


def run_tests(module: str, mutated: str | None, timeout: float) -> RunOutcome:
    """``python -S -m unittest test.test_<module>``, with ``mutated`` (if given) shadowing the module."""
    with tempfile.TemporaryDirectory(prefix="inject-") as tmp:
        folder = Path(tmp) / "lib"
        folder.mkdir()
        if mutated is not None:
            (folder / f"{module}.py").write_text(mutated, encoding="utf-8")
        start = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, "-S", "-m", "unittest", f"test.test_{module}"], capture_output=True,
                                  text=True, errors="replace", timeout=timeout, cwd=tmp, env=_env(folder), check=False)
        except subprocess.TimeoutExpired:
            return RunOutcome(None, time.perf_counter() - start, "")
        seconds = time.perf_counter() - start
        return RunOutcome(proc.returncode, seconds, normalise_output(proc.stdout + proc.stderr, folder))


_TIMING = re.compile(r"\b(Ran \d+ tests? in )\d+\.\d+s")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


def normalise_output(text: str, folder: Path) -> str:
    """The machine-specific parts made fixed: folders, timings, addresses."""
    for prefix in sorted({str(folder), str(folder.resolve()), str(stdlib()), str(stdlib().resolve())}, key=len, reverse=True):
        text = text.replace(prefix, FAKE_LIB)
    text = _TIMING.sub(r"\g<1>0.000s", text)
    return _ADDRESS.sub("0x0", text)


def failed_visibly(output: str) -> bool:
    """The run reported a failure in words (a crash with no report is no query)."""
    return "\n======" in output or "Traceback (most recent call last)" in output


def query_of(output: str, limit: int = QUERY_CHARS) -> str:
    """The failing run's output from its first failure block, cut to ``limit`` characters
    (the final ``FAILED (...)`` line kept)."""
    start = output.find("\n======")
    body = output[start + 1 :] if start >= 0 else output
    tail = next((line for line in reversed(output.splitlines()) if line.startswith("FAILED")), "")
    if len(body) > limit:
        body = body[:limit].rsplit("\n", 1)[0] + "\n[...]"
    return body.rstrip() + ("\n" + tail if tail and tail not in body[-200:] else "")


# --------------------------------------------------------------------------- the set


@dataclass
class InjectTask:
    task_id: str
    module: str
    gold_file: str
    kind: str
    function: str
    line: int
    original: str
    replacement: str
    query: str


def cache_dir(cache: Path, seed: int) -> Path:
    return cache / "inject" / f"{python_tag()}-seed{seed}"


def candidate_modules(root: Path) -> list[str]:
    """Top-level pure-Python modules with a one-file test module of their own, sorted."""
    files = set(stdlib_files(root))
    return sorted(
        rel[:-3] for rel in files
        if "/" not in rel and not rel.startswith("_") and f"test/test_{rel[:-3]}.py" in files
    )


def generator_hash() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


class _RunCache:
    """Outcomes of test runs, one JSON file each, keyed by module and site (or ``baseline``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def _path(self, module: str, key: str) -> Path:
        return self.folder / module / (re.sub(r"[^\w@:.-]", "_", key).replace(":", "_") + ".json")

    def get(self, module: str, key: str) -> dict[str, Any] | None:
        path = self._path(module, key)
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    def put(self, module: str, key: str, value: dict[str, Any]) -> None:
        path = self._path(module, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(value, sort_keys=True), encoding="utf-8")
        tmp.replace(path)


def generate(cache: Path, *, count: int, seed: int, log: Callable[[str], None] = print) -> Iterator[InjectTask]:
    """The first ``count`` failing mutants in the seeded order (runs cached, so resumable)."""
    root = stdlib()
    runs = _RunCache(cache_dir(cache, seed) / "runs")
    skip = startup_modules()
    modules = [m for m in candidate_modules(root) if m not in skip]
    random.Random(seed).shuffle(modules)
    made = 0
    for module in modules:
        if made >= count:
            return
        baseline = runs.get(module, "baseline")
        if baseline is None:
            outcome = run_tests(module, None, TEST_TIMEOUT_S)
            baseline = {"returncode": outcome.returncode, "seconds": round(outcome.seconds, 2)}
            runs.put(module, "baseline", baseline)
        if baseline["returncode"] != 0 or baseline["seconds"] >= min(TEST_TIMEOUT_S, BASELINE_MAX_S):
            continue
        timeout = min(MUTANT_TIMEOUT_S, 3 * baseline["seconds"] + 5)
        source = (root / f"{module}.py").read_text(encoding="utf-8")
        sites = ordered_sites(mutation_sites(source), random.Random(f"{seed}:{module}"))
        kept = 0
        for site in sites[:PER_MODULE_TRIES]:
            if kept >= PER_MODULE_KEEP or made >= count:
                break
            record = runs.get(module, site.key)
            if record is None:
                try:
                    mutated = apply(source, site)
                except (SyntaxError, ValueError):
                    record = {"returncode": "invalid"}
                else:
                    outcome = run_tests(module, mutated, timeout)
                    record = {"returncode": outcome.returncode, "seconds": round(outcome.seconds, 2),
                              "output": outcome.output if outcome.returncode not in (0, None) else ""}
                runs.put(module, site.key, record)
            if record["returncode"] in (0, None, "invalid") or not failed_visibly(record.get("output", "")):
                continue
            kept += 1
            made += 1
            log(f"inject [{made}/{count}] {module}.{site.function}: {site.kind} line {site.line}")
            yield InjectTask(
                task_id=f"inject-{module}-{site.kind}-{site.line}-{site.col}", module=module, gold_file=f"{module}.py",
                kind=site.kind, function=site.function, line=site.line, original=site.original,
                replacement=site.replacement, query=query_of(record["output"]),
            )


def build_set(cache: Path, *, count: int, seed: int, log: Callable[[str], None] = print,
              limit: int | None = None) -> tuple[list[InjectTask], dict[str, Any]]:
    """The cached set (regenerated when the Python, seed, count or generator changed)."""
    folder = cache_dir(cache, seed)
    wanted = min(count, limit) if limit else count
    manifest_path, tasks_path = folder / "manifest.json", folder / "tasks.jsonl"
    if manifest_path.is_file() and tasks_path.is_file():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        data = tasks_path.read_bytes()
        if (manifest.get("generator") == generator_hash() and manifest.get("python") == python_tag()
                and manifest.get("tasks_sha256") == hashlib.sha256(data).hexdigest() and manifest["count"] >= wanted):
            rows = [InjectTask(**json.loads(line)) for line in data.decode().splitlines()]
            return rows[:wanted], manifest
    log(f"generating the bug-injection set: {wanted} tasks, python {python_tag()}, seed {seed} (cached in {folder})")
    start = time.perf_counter()
    tasks = list(generate(cache, count=wanted, seed=seed, log=log))
    data = "".join(json.dumps(asdict(t), sort_keys=True) + "\n" for t in tasks).encode()
    manifest = {
        "python": python_tag(), "seed": seed, "count": len(tasks), "requested": wanted,
        "generator": generator_hash(), "generator_version": GENERATOR_VERSION,
        "tasks_sha256": hashlib.sha256(data).hexdigest(),
        "modules": len({t.module for t in tasks}),
        "kinds": {kind: sum(t.kind == kind for t in tasks) for kind in KINDS},
        "generate_s": round(time.perf_counter() - start, 1),
    }
    folder.mkdir(parents=True, exist_ok=True)
    tasks_path.write_bytes(data)
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return tasks, manifest


def build_stdlib_tree(dest: Path) -> None:
    """The workspace: the standard library's ``.py`` files (no site-packages), unmutated."""
    root = stdlib()
    for rel in stdlib_files(root):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, target)


def load_tasks(cache: Path, *, count: int, seed: int, log: Callable[[str], None] = print,
               limit: int | None = None) -> tuple[list[Any], dict[str, Any]]:
    """The set as bench tasks (``bench.quality.Task``), and its manifest."""
    from bench.quality import Task, Workspace

    rows, manifest = build_set(cache, count=count, seed=seed, log=log, limit=limit)
    log(f"bug-injection set: {len(rows)} tasks, python {manifest['python']}, seed {manifest['seed']}, "
        f"tasks sha256 {manifest['tasks_sha256'][:16]}")
    workspace = Workspace(f"stdlib-{python_tag()}", build_stdlib_tree)
    return [Task(r.task_id, "inject", STDLIB_REPO, r.query, (r.gold_file,), workspace) for r in rows], manifest
