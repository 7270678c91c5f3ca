"""Did the agent ever see the file it had to fix? The pydicom run against its SWE-bench
instance: the gold file was named at call 4 and its lines seen at call 6, through `open`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scopelens.core.errors import InvalidInputError, UnreadableFileError
from scopelens.core.importers.detect import read_session_file
from scopelens.core.importers.instance import read_instance
from scopelens.core.importers.model import sighting

SHARED = Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "swe-agent"


def test_the_gold_file_of_the_pydicom_run() -> None:
    instance = read_instance(SHARED / "pydicom__pydicom-1458.instance.json")
    assert instance.instance_id == "pydicom__pydicom-1458" and instance.repo == "pydicom/pydicom"
    assert instance.gold_files == ("pydicom/pixel_data_handlers/numpy_handler.py",)
    assert instance.fail_to_pass and all(t.startswith("pydicom/tests/test_numpy_pixel_data.py::") for t in instance.fail_to_pass)
    session = read_session_file(SHARED / "pydicom__pydicom-1458.traj")
    gold = sighting(session, instance.gold_files[0])
    assert (gold.status, gold.call, gold.mentioned_at) == ("seen", 6, 4)
    assert gold.item is not None and (gold.item.tool, gold.item.line_start, gold.item.line_end) == ("open", 273, 372)
    listed = sighting(session, "pydicom/overlays/numpy_handler.py")
    assert (listed.status, listed.call) == ("mentioned", 5)  # the find_file list, seen by call 5
    assert listed.item is not None and listed.item.tool == "find_file"
    assert sighting(session, "pydicom/config.py").status == "never"


def test_bad_instance_files(tmp_path: Path) -> None:
    broken = tmp_path / "i.json"
    broken.write_text('{"instance_id": ')
    with pytest.raises(UnreadableFileError, match=r"i\.json:1: not valid JSON"):
        read_instance(broken)
    broken.write_text(json.dumps({"repo": "x"}))
    with pytest.raises(InvalidInputError, match=r"i\.json: not a SWE-bench instance"):
        read_instance(broken)
