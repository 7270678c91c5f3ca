"""The import bench runs end to end at smoke size (shapes only: figures come from
``python -m bench.import_bench``; timing never goes into unit tests)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import import_bench


def test_import_bench_quick(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "import.json"
    assert import_bench.main(["--quick", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert set(figures["formats"]) == {"claude-code", "codex", "swe-agent", "openhands"}
    assert all(f["calls"] > 100 and f["read_s"] > 0 and f["import_s"] >= f["read_s"] for f in figures["formats"].values())
    assert "slowest import" in capsys.readouterr().out
