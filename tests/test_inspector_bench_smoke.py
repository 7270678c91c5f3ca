"""The inspector benchmark runs end to end on a tiny store.

Only the shape of the result is checked: timing never goes into unit tests (the figures
come from ``python -m bench.inspector_bench``; see docs/performance.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from bench import inspector_bench


def test_inspector_bench_measures_both_stores_in_pairs(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "figures.json"
    code = inspector_bench.main([
        "--snapshots", "12", "--snapshots-per-session", "2", "--candidates-per-snapshot", "12",
        "--repeats", "2", "--store", str(tmp_path / "stores"), "--verify", "--out", str(out),
    ])
    figures = json.loads(out.read_text())
    printed = capsys.readouterr().out
    assert code == (0 if figures["passed"] else 1)
    assert figures["counts"] == {"sessions": 6, "events": 18, "snapshots": 12, "snapshot_rows": 144}
    assert len(figures["empty"]) == len(figures["big"]) == 2
    for run in figures["big"]:
        assert run["rows_shown"] == 6 and run["candidate_rows_shown"] == 12
        assert run["first_paint_s"] > 0 and run["first_paint_cpu_s"] > 0
    assert all(run["rows_shown"] == 0 for run in figures["empty"])
    assert "verify_store: clean" in printed
    assert "| first paint | " in printed and "median of the back-to-back pairs' ratios" in printed
