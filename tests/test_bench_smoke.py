"""The index benchmark runs end to end on a tiny corpus.

Only the shape of the result is checked: timing never goes into unit tests (the figures
themselves come from ``python -m bench.index_bench``; see docs/performance.md).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench import index_bench

FILES = {
    "mail/__init__.py": '"""A small mail package."""\n\nVERSION = "1.0"\n',
    "mail/header.py": (
        "def parse_header_value(value):\n"
        '    """Parse one header value into its parts and return them as a list of strings."""\n'
        "    if not value:\n"
        '        raise ValueError("empty header value is not allowed in a message")\n'
        '    return [part.strip() for part in value.split(";")]\n'
        "\n\n"
        "class HeaderRegistry:\n"
        '    """Keeps the parser registered for every known header name of a message."""\n'
        "\n"
        "    def register_parser(self, name, parser):\n"
        "        if not callable(parser):\n"
        '            raise TypeError(f"expected a callable parser, not {type(parser).__name__}")\n'
        "        self.parsers[name] = parser\n"
    ),
    "net/client.py": (
        "def open_connection(host, port):\n"
        '    """Open a connection to the host and port and return the stream pair for it."""\n'
        "    if port <= 0:\n"
        '        raise ValueError("port must be a positive number of the service")\n'
        "    return host, port\n"
    ),
    "net/retry.py": (
        "def retry_with_backoff(call, attempts=3):\n"
        '    """Call the function again after a failure, waiting longer between each attempt."""\n'
        "    for attempt in range(attempts):\n"
        "        try:\n"
        "            return call()\n"
        "        except OSError:\n"
        "            continue\n"
        '    raise RuntimeError("all attempts of the call have failed, giving up now")\n'
    ),
    "setup_helpers.py": "def read_version_file(path):\n    return open(path).read().strip()\n",
}


@pytest.mark.parametrize("use_bm25s", [False, True], ids=["fts5-and-ours", "with-bm25s"])
def test_bench_figures_on_a_tiny_corpus(tmp_path: Path, use_bm25s: bool) -> None:
    if use_bm25s:
        assert index_bench.bm25s is not None, "bm25s is a test dependency: pip install -e '.[test]'"
    source = tmp_path / "source"
    for rel, text in FILES.items():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_text(text, encoding="utf-8")
    settings = index_bench.Settings(
        reps=1, e2e_reps=1, query_passes=1, identifiers=3, errors=3, issues=2,
        fts5_budget_s=5.0, fts5_timeout_s=5.0, use_bm25s=use_bm25s,
    )

    result = index_bench.run_bench(source, sorted(FILES), tmp_path / "work", settings)

    corpus = result["corpus"]
    assert corpus["files"] == len(FILES)
    assert corpus["chunks"] > 0 and corpus["postings"] > 0 and corpus["tokens"] > 0
    assert corpus["fts5_vocabulary"] == corpus["vocabulary"]  # FTS5 sees our tokens as they are
    assert corpus["scope_package"] in {"mail", "net"}
    figures = result["figures"]
    assert set(figures) == {"full_build", "incremental", "recall"}
    full, incremental = figures["full_build"], figures["incremental"]
    for value in (full["ours_write_run_s"], full["fts5_bulk_insert_s"], full["ratio"]):
        assert value > 0
    assert (full["bm25s_index_s"] is not None) == use_bm25s
    for value in (incremental["ours_incremental_s"], incremental["ours_full_s"], incremental["ratio"]):
        assert value > 0
    assert incremental["files_changed"] == [1]
    assert set(figures["recall"]) == set(index_bench.QUERY_SETS)
    engines = ["ours", "ours_scoped", "ours_cold", "fts5", "fts5_scoped"]
    if use_bm25s:
        engines += ["bm25s", "bm25s_masked"]
    for row in figures["recall"].values():
        assert row["queries"] > 0
        for engine in engines:
            assert row[engine]["p50_ms"] > 0 and not math.isnan(row[engine]["p95_ms"])
        assert ("bm25s" in row) == use_bm25s
    rows = result["table"]
    assert len(rows) == (2 + 2 * len(index_bench.QUERY_SETS) if use_bm25s else 2)
    assert all({"figure", "ours", "baseline", "ratio", "target", "pass"} <= set(row) for row in rows)
    report = index_bench.format_report(result)
    assert "| figure | ours | baseline | ratio | target | pass |" in report
