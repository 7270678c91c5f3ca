"""The as_of sweep bench runs end to end on a tiny store (shapes only: figures come from
``python -m bench.asof_sweep``; timing never goes into unit tests)."""

from __future__ import annotations

from pathlib import Path

from bench import asof_sweep
from bench.retrieve_latency import index


def test_asof_sweep_on_a_tiny_store(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "ws"
    (root / "net").mkdir(parents=True)
    (root / "net" / "socket_retry.py").write_text(
        "def connect_with_retry(timeout):\n    \"\"\"Retry the socket connection until the timeout.\"\"\"\n    return timeout\n",
        encoding="utf-8",
    )
    store = tmp_path / "store.db"
    assert index(store, root)["chunks"] >= 1
    for sweep in (False, True):
        figures = asof_sweep.worker(store, calls=3, sweep=sweep)
        assert set(figures) == {"rss_growth_mib", "peak_rss_mib", "ms_per_search"}
        assert figures["ms_per_search"] > 0
    assert asof_sweep.main(["--store", str(store), "--calls", "3"]) == 0
    assert "ratios sweep / baseline" in capsys.readouterr().out
