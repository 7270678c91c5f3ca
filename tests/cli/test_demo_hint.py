"""After `scopelens demo`, the next command a user types reaches the demo store or says exactly
how ([3/9], CLI a new user can find their way in)."""

from __future__ import annotations

from scopelens.core.cli import main
from scopelens.core.record.demo import DEMO_DB, data_dir


def test_a_missing_default_store_points_at_the_demo_store(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCOPELENS_DB", raising=False)
    assert main(["sessions"]) == 2
    assert "demo store" not in capsys.readouterr().err  # no demo yet: nothing to point at
    demo = data_dir() / DEMO_DB
    demo.parent.mkdir(parents=True, exist_ok=True)
    demo.write_bytes(b"")  # only its existence matters to the hint
    assert main(["sessions"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"export SCOPELENS_DB={demo}" in err and f"--db {demo}" in err
    assert main(["sessions", "--db", str(tmp_path / "elsewhere.db")]) == 2
    assert "demo store" not in capsys.readouterr().err  # an explicit --db is never second-guessed
