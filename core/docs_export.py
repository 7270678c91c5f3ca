"""Generate ``docs/vocabulary.md`` and ``docs/schema/*.json`` from the code that defines them.

Run ``python -m scopelens.core.docs_export`` after changing a vocabulary or a contract; a test fails
while the committed files differ from what this writes.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from scopelens.core.contracts import (
    AuditSnapshot,
    Event,
    MemoryRecord,
    RetrievalIntent,
    RetrievalScope,
    VerifyReport,
)
from scopelens.core.record.findings import Finding
from scopelens.core.vocab import ALL_VOCABULARIES, MEMBER_MEANINGS

SCHEMA_MODELS: dict[str, type[BaseModel]] = {
    "retrieval-intent": RetrievalIntent,
    "retrieval-scope": RetrievalScope,
    "audit-snapshot": AuditSnapshot,
    "event": Event,
    "memory-record": MemoryRecord,
    "verify-report": VerifyReport,
    "finding": Finding,
}


def vocabulary_markdown() -> str:
    lines = [
        "# Vocabularies",
        "",
        "Generated from `core/vocab.py` by `python -m scopelens.core.docs_export`; do not edit by hand.",
        "Each vocabulary is defined once. Pipeline stages are at once the funnel's steps, the",
        "rejection stages and why-not's answers.",
        "",
    ]
    for enum in ALL_VOCABULARIES:
        lines += [f"## {enum.__name__}", "", inspect.cleandoc(enum.__doc__ or ""), ""]
        meanings: Mapping[Any, str] = MEMBER_MEANINGS.get(enum, {})
        lines += [f"- `{member.value}`: {meanings[member]}" if member in meanings else f"- `{member.value}`" for member in enum]
        lines.append("")
    return "\n".join(lines)


STRICT_INPUTS = frozenset({"retrieval-intent", "retrieval-scope", "memory-record"})
"""Documents users write, which the CLI reads with ``parse_input``: unknown keys at any depth
are an error, and their schemas say so (``additionalProperties: false``)."""


def _closed(schema: Any) -> Any:
    """``schema`` with every object that lists its properties closed to others."""
    if isinstance(schema, dict):
        closed = {key: _closed(value) for key, value in schema.items()}
        if "properties" in closed and closed.get("type") == "object":
            closed["additionalProperties"] = False
        return closed
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    return schema


def schema_documents() -> dict[str, str]:
    documents = {}
    for name, model in SCHEMA_MODELS.items():
        schema = model.model_json_schema(mode="validation")
        if name in STRICT_INPUTS:
            schema = _closed(schema)
        documents[f"{name}.schema.json"] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return documents


def generated_files() -> dict[str, str]:
    files = {"vocabulary.md": vocabulary_markdown()}
    files.update({f"schema/{name}": text for name, text in schema_documents().items()})
    return files


def main(docs_dir: Path = Path("docs")) -> int:
    for relative, content in generated_files().items():
        target = docs_dir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
