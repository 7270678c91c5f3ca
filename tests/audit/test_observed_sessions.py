"""The audit questions on an imported session, from the store only: replay per call, why-not
--session (seen, mentioned, never; gold files), and drift of its file reads against a workspace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scopelens.core.audit.observed import read_observed, sighting
from scopelens.core.audit.observed_drift import drift_observed, shown_lines
from scopelens.core.cli import main
from scopelens.core.importers.store_import import import_paths
from scopelens.core.store.store import Store
from scopelens.core.vocab import DriftClass

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sessions"
PYDICOM = FIXTURES / "swe-agent" / "pydicom__pydicom-1458.traj"
INSTANCE = FIXTURES / "swe-agent" / "pydicom__pydicom-1458.instance.json"
GOLD = "pydicom/pixel_data_handlers/numpy_handler.py"


@pytest.fixture
def pydicom_store(tmp_path: Path) -> tuple[str, str]:
    db = str(tmp_path / "s.db")
    with Store.open(db, create=True) as store:
        outcome = import_paths(store, [PYDICOM], project="pydicom").outcomes[0]
    return db, outcome.session_id


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_why_not_session_says_when_the_gold_file_was_seen_and_named(capsys, pydicom_store):
    db, session = pydicom_store
    answer = json.loads(run(capsys, "why-not", "--session", session, "--instance", str(INSTANCE), "--db", db, "--json"))
    [gold] = answer["answers"]
    assert gold["path"] == GOLD and gold["gold"] and gold["status"] == "seen"
    first = gold["reads"][0]
    # the agent ran its script (a traceback naming the file), then opened the file at line 293
    assert (first["turn"], first["line_start"], first["line_end"], first["tool"]) == (6, 273, 372, "open")
    assert gold["first_named"]["turn"] == 4 and gold["first_named"]["kind"] == "command-output"
    text = run(capsys, "why-not", "--session", session, "--path", "pydicom/dataset.py", "--db", db)
    assert text.startswith("pydicom/dataset.py: mentioned, never seen: first named at turn 4")
    text = run(capsys, "why-not", "--session", session, "--path", "setup.py", "--db", db)
    assert "never seen or named" in text


def test_a_path_is_found_however_the_agent_wrote_it(pydicom_store):
    db, session_id = pydicom_store
    with Store.open(db, read_only=True) as store:
        session = read_observed(store, session_id)
    absolute = sighting(session, "/pydicom__pydicom/" + GOLD)
    assert absolute.status == "seen" and absolute.turn == 6


def test_why_not_session_refuses_what_it_cannot_answer_in_one_line(capsys, pydicom_store, tmp_path):
    db, session = pydicom_store
    assert main(["why-not", "--session", session, "--symbol", "f", "--db", db]) != 0
    assert "use --path" in capsys.readouterr().err
    assert main(["why-not", "--session", "s-nope", "--path", "x.py", "--db", db]) != 0
    assert "no session" in capsys.readouterr().err
    with Store.open(str(tmp_path / "other.db"), create=True) as store:
        plain = store.create_session(project="p").id
    assert main(["why-not", "--session", plain, "--path", "x.py", "--db", str(tmp_path / "other.db")]) != 0
    err = capsys.readouterr().err
    assert "has no observed snapshots" in err and len(err.strip().splitlines()) == 1


def test_replay_of_one_call_lists_everything_it_had_seen(capsys, pydicom_store):
    db, session = pydicom_store
    replayed = json.loads(run(capsys, "replay", session, "--turn", "6", "--db", db, "--json"))
    [turn] = replayed["turns"]
    [snapshot] = turn["snapshots"]
    assert snapshot["snapshot_kind"] == "observed" and replayed["ok"]
    visible = snapshot["observed"]["visible"]
    assert [v["position"] for v in visible] == list(range(snapshot["observed"]["visible_from"],
                                                         snapshot["observed"]["visible_to"]))
    assert {v["turn"] for v in visible} == set(range(1, 7))
    assert [v["source_ref"] for v in visible if v["turn"] == 6][-1] == f"{GOLD}:273-372"


def _workspace_from_the_read(tmp_path: Path, db: str, session_id: str) -> tuple[Path, list[str]]:
    """A checkout whose numpy_handler.py holds, at lines 273-372, what the agent saw there."""
    with Store.open(db, read_only=True) as store:
        session = read_observed(store, session_id)
    first = sighting(session, GOLD).reads[0].item
    lines = shown_lines(first.visible_text, 273, 372)
    assert lines is not None and lines[287 - 273] == "    required_elements = ["
    root = tmp_path / "checkout"
    (root / GOLD).parent.mkdir(parents=True)
    (root / GOLD).write_text("\n".join([f"# line {n}" for n in range(1, 273)] + lines) + "\n", encoding="utf-8")
    return root, lines


def test_drift_tells_unchanged_shifted_content_changed_and_removed(tmp_path, pydicom_store):
    db, session_id = pydicom_store
    root, _ = _workspace_from_the_read(tmp_path, db, session_id)
    with Store.open(db, read_only=True) as store:
        session = read_observed(store, session_id)

    def gold_class() -> tuple[DriftClass, str | None]:
        found = drift_observed(session, root, turn=6)
        item = next(i for i in found.items if i.frozen_source_ref == f"{GOLD}:273-372"
                    or i.source_ref == f"{GOLD}:273-372")
        return item.drift_class, item.diff

    assert gold_class() == (DriftClass.UNCHANGED, None)
    file = root / GOLD
    file.write_text("# a new first line\n" + file.read_text(encoding="utf-8"), encoding="utf-8")
    assert gold_class()[0] == DriftClass.SHIFTED
    file.write_text(file.read_text(encoding="utf-8").replace("'SamplesPerPixel'", "'SamplesPerPixels'"), encoding="utf-8")
    changed, diff = gold_class()
    assert changed == DriftClass.CONTENT_CHANGED and diff is not None and "+        'SamplesPerPixels'" in diff
    file.unlink()
    assert gold_class()[0] == DriftClass.REMOVED


def test_drift_session_on_the_command_line_needs_a_workspace(capsys, tmp_path, pydicom_store):
    db, session = pydicom_store
    assert main(["drift", "--session", session, "--db", db]) != 0
    assert "pass drift --workspace DIR" in capsys.readouterr().err
    root, _ = _workspace_from_the_read(tmp_path, db, session)
    report = json.loads(run(capsys, "drift", "--session", session, "--workspace", str(root), "--db", db, "--json"))
    assert report["counts"]["unchanged"] == 1  # the agent's first look; later reads are of its own edits
    assert report["counts"]["removed"] == 2  # the script it wrote is not in the checkout


def test_shown_lines_reads_numbered_and_plain_views():
    assert shown_lines("[File: a.py (3 lines total)]\n1:x\n2: y\n3:z", 2, 3) == [" y", "z"]
    assert shown_lines("     7→alpha\n     8→beta", 7, 8) == ["alpha", "beta"]
    assert shown_lines("alpha\nbeta", 7, 8) == ["alpha", "beta"]
    assert shown_lines("alpha\nbeta\ngamma", 7, 8) is None
