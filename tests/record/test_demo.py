"""`scopelens demo`: builds the sample store in the data directory once, then reuses it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from scopelens.core.cli import main
from scopelens.core.record.demo import DEMO_DB, STAMP, data_dir


def test_demo_no_ui_on_a_clean_home_builds_then_reuses(capsys):
    """First run builds into $XDG_DATA_HOME/scopelens; the second reuses it untouched."""
    directory = data_dir()
    assert str(directory).startswith(os.environ["HOME"])
    assert not (directory / DEMO_DB).exists()

    assert main(["demo", "--no-ui"]) == 0
    first = capsys.readouterr().out
    assert "built just now" in first
    for scenario in ("auth-role-mock", "billing-cents-time", "flags-budget-trim", "limiter-replay-drift"):
        assert scenario in first
    assert "store head:" in first and str(directory / DEMO_DB) in first
    assert "f on the sessions screen lists the findings" in first  # where to find them inside
    assert (directory / STAMP).is_file()
    # Nothing of the build is left beside the store: no lock file, no WAL under its old name.
    assert sorted(path.name for path in directory.iterdir()) == sorted([DEMO_DB, STAMP])
    built = (directory / DEMO_DB).stat().st_mtime_ns

    assert main(["demo", "--no-ui"]) == 0
    second = capsys.readouterr().out
    assert "reused" in second
    assert (directory / DEMO_DB).stat().st_mtime_ns == built
    assert first.splitlines()[1] == second.splitlines()[1]  # same store head

    assert main(["demo", "--no-ui", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["kind"] == "demo" and document["store"] == str(directory / DEMO_DB) and not document["rebuilt"]
    assert document["store_head"] in first and len(document["scenarios"]) == 4
    assert main(["demo", "--json"]) == 2  # JSON instead of the UI needs --no-ui


def test_demo_without_no_ui_opens_the_inspector_on_the_demo_store(capsys, monkeypatch, tmp_path):
    samples = tmp_path / "samples"
    source = Path(__file__).resolve().parents[2] / "sample_sessions" / "billing-cents-time"
    import shutil

    import scopelens.core.commands.inspect_commands as inspect_commands

    shutil.copytree(source, samples / "billing-cents-time")
    monkeypatch.setenv("SCOPELENS_SAMPLES", str(samples))
    opened: list[str] = []
    monkeypatch.setattr(inspect_commands, "open_inspector", lambda url, **_: opened.append(url) or 0)
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "billing-cents-time" in out
    assert opened == [str(data_dir() / DEMO_DB)]


def test_demo_rebuilds_when_the_samples_change(capsys, monkeypatch, tmp_path):
    samples = tmp_path / "samples"
    import shutil

    shutil.copytree(
        Path(__file__).resolve().parents[2] / "sample_sessions" / "billing-cents-time", samples / "billing-cents-time"
    )
    monkeypatch.setenv("SCOPELENS_SAMPLES", str(samples))
    assert main(["demo", "--no-ui"]) == 0
    capsys.readouterr()
    (samples / "billing-cents-time" / "workspace" / "docs" / "extra.md").write_text("# extra\n", encoding="utf-8")
    assert main(["demo", "--no-ui"]) == 0
    assert "the sample sessions changed" in capsys.readouterr().out
