"""The end-to-end index bench measures what it says (figures themselves: ``python -m
bench.index_bench --e2e``, never a timed unit test)."""

from __future__ import annotations

import sys
from pathlib import Path

from bench import index_e2e


def test_peak_tree_rss_counts_child_processes() -> None:
    # A parent that starts a child holding 80 MiB: the tree's peak must include the child.
    child = "import time; b = bytearray(80 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); time.sleep(0.5)"
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}], check=True)"
    figures = index_e2e.run_measured([sys.executable, "-c", parent])
    assert figures.returncode == 0
    assert figures.peak_tree_mib >= 80
    assert figures.wall_s >= 0.5 and figures.cpu_s > 0


def test_the_tree_from_children_files_is_the_tree_from_a_scan() -> None:
    # a parent with a child that has a child of its own (threads' children files included)
    script = (
        "import subprocess, sys, threading; "
        "inner = 'import subprocess, sys; subprocess.run([sys.executable, \"-c\", \"import time; time.sleep(3)\"])'; "
        "t = threading.Thread(target=subprocess.run, args=([sys.executable, '-c', inner],)); t.start(); t.join()"
    )
    import subprocess
    import time

    process = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 10
        while len(index_e2e._tree_by_scan(process.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(index_e2e._tree_by_scan(process.pid)) == 3
        assert index_e2e._tree(process.pid) == index_e2e._tree_by_scan(process.pid)
    finally:
        process.wait()


def test_rows_compare_against_the_targets() -> None:
    def corpus(ours: float, fts5: float, noop: float, peak: float) -> dict[str, object]:
        def fig(wall: float, mib: float) -> dict[str, float]:
            return {"wall_s": wall, "cpu_s": wall, "peak_tree_mib": mib, "returncode": 0}

        return {"files": 3, "mb": 0.1, "ours": fig(ours, peak), "fts5": fig(fts5, 20), "noop": fig(noop, 60)}

    one = corpus(ours=5.0, fts5=1.0, noop=0.6, peak=150)
    many = corpus(ours=60.0, fts5=9.0, noop=0.7, peak=180)
    rows = {row["figure"]: row for row in index_e2e.e2e_rows(one, many, copies=10)}
    assert rows["scopelens index vs FTS5 script, wall (1x)"]["pass"] is True  # 5x <= 6x
    assert rows["peak tree RSS, MiB (1x)"]["pass"] is True
    assert rows["wall, 10x vs 1x"]["pass"] is False  # 12x > 11x
    assert rows["no-op re-index vs full, wall (1x)"]["pass"] is True  # 0.6 <= 0.5 + 0.25
    text = index_e2e.format_e2e({"copies": 10, "one": one, "many": many, "rows": list(rows.values())})
    assert "FAIL" in text and "| 10x | ours | 60.00 |" in text


def test_the_measured_runs_find_scopelens_compiled_as_after_an_install(tmp_path, monkeypatch) -> None:
    """A sandbox's PYTHONDONTWRITEBYTECODE would make every measured run compile scopelens
    from source (about 0.4 s), which no installed copy does: the bench removes it and warms up."""
    import importlib.util

    from scopelens.core.index import prepare_worker

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = index_e2e.user_environment()
    assert "PYTHONDONTWRITEBYTECODE" not in env and env["SCOPELENS_DB"] == ""
    cached = Path(importlib.util.cache_from_source(prepare_worker.__file__))
    cached.unlink(missing_ok=True)
    index_e2e.warm_up(tmp_path, env)
    assert cached.is_file()
