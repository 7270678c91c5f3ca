"""The history bench runs end to end at smoke size (shapes only: figures come from
``python -m bench.history_bench``; timing never goes into unit tests)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import history_bench


def test_history_bench_quick(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "history.json"
    assert history_bench.main(["--quick", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "retrieve p50: fresh" in printed and "end-of-run compaction" in printed
    assert "another project re-indexed before each call" in printed
    result = json.loads(out.read_text())
    assert result["history"]["runs"] == 12 and result["history"]["events"] == 120
    assert result["fresh"]["p50_ms"] > 0 and result["after_history"]["p50_ms"] > 0
    assert result["other_project_reindexed"]["p50_ms"] > 0
    assert 0 <= result["history"]["compaction_share"] < 1
