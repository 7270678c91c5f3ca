"""The generated docs (vocabularies, JSON Schemas) match the code that defines them."""

from __future__ import annotations

import json
from pathlib import Path

from scopelens.core.docs_export import generated_files
from scopelens.core.vocab import DriftClass, Stage

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_generated_docs_are_current():
    stale = [
        name
        for name, content in generated_files().items()
        if not (DOCS / name).exists() or (DOCS / name).read_text(encoding="utf-8") != content
    ]
    assert stale == [], "run `python -m scopelens.core.docs_export` and commit the result"


def test_stage_vocabulary_is_listed_in_pipeline_order():
    text = (DOCS / "vocabulary.md").read_text(encoding="utf-8")
    positions = [text.index(f"`{stage.value}`") for stage in Stage]
    assert positions == sorted(positions)


def test_input_schemas_forbid_nothing_at_read_but_name_every_field():
    schema = json.loads((DOCS / "schema" / "retrieval-intent.schema.json").read_text())
    assert {"purpose", "question", "anchors", "required_evidence", "schema_version"} <= set(schema["properties"])


def test_every_drift_class_is_defined_in_the_vocabulary():
    text = (DOCS / "vocabulary.md").read_text(encoding="utf-8")
    section = text[text.index("## DriftClass") : text.index("## RedactionKind")]
    for drift_class in DriftClass:
        line = next((ln for ln in section.splitlines() if ln.startswith(f"- `{drift_class.value}`")), "")
        assert line.startswith(f"- `{drift_class.value}`: ") and len(line) > 40, drift_class
