"""The quality bench runs end to end on a tiny synthetic git repository with two tasks.

No network and no timing: the repository is made in a temp folder, cloned bare as the
"mirror", and the bench materialises, indexes and scores it. The BM25 ranking is known by
construction (the gold file of the first task is second), so its metrics are checked exactly;
scopelens' metrics are checked against the ranking its own snapshot recorded.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench import quality, quality_inject

FILES = {
    # Says the query's words most often: BM25 ranks it first.
    "pkg/decoy.py": (
        "def frobnicate_widget(widget):\n"
        '    """Frobnicate the widget: widget frobnication for every widget."""\n'
        "    return widget.frobnicate(widget, frobnicate=True)\n"
    ),
    # The gold file of task one: the words once each, beside other text.
    "pkg/gold.py": (
        "def render_report(rows, width):\n"
        '    """Render the rows of a report as text lines."""\n'
        "    lines = [str(row)[:width] for row in rows]\n"
        "    return lines  # a widget may frobnicate here\n"
    ),
    # The gold file of task two: shares no word with its question.
    "pkg/lonely.py": "def zq_alpha(n):\n    return n * 7\n",
    "README.md": "# demo\n\nA demo package.\n",
}
QUESTIONS = {
    "demo__one-1": ("frobnicate widget", "pkg/gold.py"),
    "demo__two-2": ("quarterly spreadsheet export crashes", "pkg/lonely.py"),
}


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def dev_set(tmp_path: Path) -> tuple[Path, Path]:
    work = tmp_path / "work"
    for rel, text in FILES.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text, encoding="utf-8")
    _git("init", "-q", "-b", "main", cwd=work)
    _git("add", ".", cwd=work)
    _git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "base", cwd=work)
    commit = _git("rev-parse", "HEAD", cwd=work)
    mirrors = tmp_path / "mirrors"
    mirrors.mkdir()
    _git("clone", "-q", "--bare", str(work), str(mirrors / "demo+demo" / "repo"), cwd=tmp_path)
    jsonl = tmp_path / "dev.jsonl"
    jsonl.write_text("".join(
        json.dumps({"instance_id": task_id, "repo": "demo/demo", "base_commit": commit, "problem_statement": question,
                    "gold_files": [gold]}) + "\n"
        for task_id, (question, gold) in QUESTIONS.items()
    ), encoding="utf-8")
    return jsonl, mirrors


def test_quality_bench_end_to_end(dev_set: tuple[Path, Path], tmp_path: Path) -> None:
    jsonl, mirrors = dev_set
    tasks = quality.load_dev(jsonl, [mirrors])
    cache = tmp_path / "cache"
    result = quality.run_bench(tasks, cache, log=lambda _m: None)

    rows = {row["task_id"]: row for row in result["tasks"]}
    one, two = rows["demo__one-1"], rows["demo__two-2"]
    # BM25 ranks the decoy first and the gold file second: Acc@1 0, Acc@5 1, MRR 1/2.
    assert one["bm25_rank"] == 2
    assert one["bm25"] == {"acc@1": 0.0, "acc@5": 1.0, "acc@10": 1.0, "mrr": 0.5}
    assert two["bm25_rank"] is None and two["bm25"] == {"acc@1": 0.0, "acc@5": 0.0, "acc@10": 0.0, "mrr": 0.0}
    assert two["stages"]["rank_stage"] == "not-recalled" and two["stages"]["block_stage"] == "not-recalled"
    for row in (one, two):
        assert row["scopelens"] == quality.metrics_of(row["scopelens_rank"])
        assert row["gold_indexed"]
    total = result["report"]["sets"]["dev"]["summary"]
    assert total["tasks"] == 2
    assert total["bm25"] == {"acc@1": 0.0, "acc@5": 0.5, "acc@10": 0.5, "mrr": 0.25}
    loro = result["report"]["sets"]["dev"]["loro"]
    assert set(loro["folds"]) == {"demo/demo"} and loro["folds"]["demo/demo"]["bm25"] == total["bm25"]
    assert "| dev | **all** | 2 | bm25 | 0.00 | 0.50 | 0.50 | 0.25 | — |" in quality.format_table(result)
    # A saved result reports again to the same summaries (``--report-from``).
    assert quality.rereport(json.loads(json.dumps(result)))["report"] == json.loads(json.dumps(result["report"]))
    # The tree and the store are cached: a second run indexes nothing and gives the same rows.
    again = quality.run_bench(tasks, cache, log=lambda _m: None)
    assert again["timings"]["index_s"] == {}
    assert [{k: v for k, v in r.items() if k != "retrieve_s"} for r in again["tasks"]] == \
        [{k: v for k, v in r.items() if k != "retrieve_s"} for r in result["tasks"]]


def test_metrics_and_helpers() -> None:
    files = quality.dedupe(["a.py", None, "a.py", "b.py", "c.py", "b.py"])
    assert files == ["a.py", "b.py", "c.py"]
    assert quality.first_gold_rank(files, ["c.py", "z.py"]) == 3
    assert quality.metrics_of(3) == {"acc@1": 0.0, "acc@5": 1.0, "acc@10": 1.0, "mrr": pytest.approx(1 / 3)}
    assert quality.metrics_of(None)["mrr"] == 0.0
    patch = "diff --git a/x/y.py b/x/y.py\n--- a/x/y.py\n+++ b/x/y.py\ndiff --git a/z.py b/z.py\n"
    assert quality.gold_files_of_patch(patch) == ("x/y.py", "z.py")


def test_quick_subset_is_fixed_and_covers_every_repository() -> None:
    workspace = quality.Workspace("w", lambda _dest: None)
    tasks = [quality.Task(f"{repo}-{i}", "dev", repo, "q", ("f.py",), workspace)
             for repo, n in (("big/big", 60), ("small/a", 3), ("small/b", 2)) for i in range(n)]
    picked = quality.quick_subset(tasks, n=10)
    assert [t.task_id for t in picked] == [t.task_id for t in quality.quick_subset(list(reversed(tasks)), n=10)]
    assert len(picked) == 10 and {t.repo for t in picked} == {"big/big", "small/a", "small/b"}


def test_mutation_sites_change_one_node_in_a_function() -> None:
    source = (
        "LIMIT = 3\n"
        "def clamp(value, low, high):\n"
        "    if value < low:\n"
        "        return max(low, value - 1)\n"
        "    return min(value, high, 0) if True else value\n"
    )
    sites = quality_inject.mutation_sites(source)
    assert {s.kind for s in sites} == set(quality_inject.KINDS)
    assert all(s.line > 1 for s in sites)  # module-level constants are never mutated
    for site in sites:
        mutated = quality_inject.apply(source, site)
        changed = [i for i, (a, b) in enumerate(zip(source.splitlines(), mutated.splitlines(), strict=True)) if a != b]
        assert changed == [site.line - 1]
    flip = next(s for s in sites if s.kind == "flip-comparison")
    assert (flip.original, flip.replacement) == ("value < low", "value <= low")
