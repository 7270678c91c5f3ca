"""The real GPT-4 SWE-agent run on pydicom, over the real pydicom 2.2.0 it worked on.

The sdists of pydicom 2.2.0 and 2.2.2 come from the package index (``pip download``, cached
under ``$SCOPELENS_TEST_CACHE`` or the temp directory; never committed). In CI, which has the
index, a failed download fails the test; elsewhere it is skipped with why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from scopelens.core.cli import main
from tests.support.pydicom_checkout import GOLD, INSTANCE, PYDICOM

pytestmark = pytest.mark.network
CACHE = Path(os.environ.get("SCOPELENS_TEST_CACHE", Path(tempfile.gettempdir()) / "scopelens-test-cache"))


def pydicom_sdist(version: str, into: Path) -> Path:
    """pydicom ``version``'s source tree, unpacked under ``into`` (the sdist cached)."""
    archive = CACHE / f"pydicom-{version}.tar.gz"
    if not archive.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", f"pydicom=={version}",
             "-d", str(CACHE), "-q"], capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0 or not archive.exists():
            reason = f"cannot download pydicom {version} from the package index: {done.stderr.strip()[-300:]}"
            if os.environ.get("CI", "").lower() in {"true", "1", "yes"}:
                pytest.fail(reason)
            pytest.skip(reason)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / f"pydicom-{version}"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_the_pydicom_run_over_its_real_checkout_then_over_2_2_2(capsys, tmp_path):
    old, new = pydicom_sdist("2.2.0", tmp_path / "a"), pydicom_sdist("2.2.2", tmp_path / "b")
    checkout = tmp_path / "pydicom"
    shutil.copytree(old, checkout)
    db = str(tmp_path / "s.db")
    run(capsys, "index", str(checkout), "--project", "pydicom", "--db", db)
    imported = json.loads(run(capsys, "import", str(PYDICOM), "--project", "pydicom", "--workspace", str(checkout),
                              "--retrieve", "--instance", str(INSTANCE), "--db", db, "--json"))
    session = imported["sessions"][0]["session_id"]

    # the agent ran its script (a traceback naming the file), then opened it at line 293
    [gold] = json.loads(run(capsys, "why-not", "--session", session, "--instance", str(INSTANCE), "--db", db,
                            "--json"))["answers"]
    assert (gold["path"], gold["status"], gold["turn"]) == (GOLD, "seen", 6)
    assert (gold["reads"][0]["line_start"], gold["reads"][0]["line_end"]) == (273, 372)
    assert gold["first_named"]["turn"] == 4

    # what it saw at turn 6 is the 2.2.0 checkout's text, line for line
    drift = json.loads(run(capsys, "drift", "--session", session, "--turn", "6", "--db", db, "--json"))
    read = next(i for i in drift["items"] if i["source_ref"] == f"{GOLD}:273-372")
    assert read["drift_class"] == "unchanged"

    # retrieval at turn 4 (the traceback seen, the file not yet) already ranks the gold file
    by_turn = {t["turn"]: next(f for f in t["files"] if f["gold"]) for t in imported["counterfactuals"][session]}
    assert by_turn[4]["rank"] is not None and not by_turn[4]["seen_by_agent"]

    # the project moves to 2.2.2 (which fixed the issue): re-indexed, the read has changed
    shutil.rmtree(checkout)
    shutil.copytree(new, checkout)
    run(capsys, "index", str(checkout), "--project", "pydicom", "--db", db)
    drift = json.loads(run(capsys, "drift", "--session", session, "--turn", "6", "--db", db, "--json"))
    read = next(i for i in drift["items"] if i["path"] == GOLD)
    assert read["drift_class"] == "content-changed" and "PixelRepresentation" in read["diff"]
    assert run(capsys, "verify", "--db", db).strip().endswith("clean")
