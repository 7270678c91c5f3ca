"""A checkout for the real pydicom SWE-agent run: at lines 273-372 of the gold file, what the
agent saw there (from its trajectory), and a few other files for retrieval to choose from."""

from __future__ import annotations

from pathlib import Path

from scopelens.core.audit.observed import read_observed, sighting
from scopelens.core.audit.observed_drift import shown_lines
from scopelens.core.importers.store_import import import_paths
from scopelens.core.store.store import Store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "swe-agent"
PYDICOM = FIXTURES / "pydicom__pydicom-1458.traj"
INSTANCE = FIXTURES / "pydicom__pydicom-1458.instance.json"
GOLD = "pydicom/pixel_data_handlers/numpy_handler.py"
DECOYS = {
    "pydicom/dataset.py": (
        "class Dataset:\n    \"\"\"A collection of data elements.\"\"\"\n\n    def walk(self):\n        return iter(())\n"
    ),
    "pydicom/filereader.py": "def dcmread(fp):\n    \"\"\"Read a DICOM file.\"\"\"\n    return open(fp, 'rb')\n",
    "README.md": "# pydicom\n\nRead, modify and write DICOM files with Python.\n",
}


def write_checkout(tmp_path: Path) -> Path:
    """A checkout holding, at lines 273-372 of the gold file, what the agent saw there, and
    a few other files: enough for retrieval to have something to choose from."""
    scratch = tmp_path / "scratch.db"
    with Store.open(str(scratch), create=True) as store:
        session_id = import_paths(store, [PYDICOM], project="scratch").outcomes[0].session_id
        read = sighting(read_observed(store, session_id), GOLD).reads[0].item
    lines = shown_lines(read.visible_text, 273, 372)
    assert lines is not None
    root = tmp_path / "pydicom-2.2.0"
    for path, text in {**DECOYS, GOLD: "\n".join([f"# line {n}" for n in range(1, 273)] + lines) + "\n"}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    return root
