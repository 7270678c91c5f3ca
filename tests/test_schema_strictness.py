"""The JSON Schemas of documents users write say what the CLI enforces: unknown keys at any
depth are an error (`additionalProperties: false`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scopelens.core.contracts import RetrievalIntent, RetrievalScope, parse_input
from scopelens.core.docs_export import STRICT_INPUTS
from scopelens.core.errors import InvalidInputError

SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "schema"


def _objects(schema):
    if isinstance(schema, dict):
        if "properties" in schema:
            yield schema
        for value in schema.values():
            yield from _objects(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _objects(item)


@pytest.mark.parametrize("name", sorted(STRICT_INPUTS))
def test_every_object_of_a_user_document_is_closed(name):
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))
    objects = list(_objects(schema))
    assert objects and all(o.get("additionalProperties") is False for o in objects)


def test_the_cli_parser_rejects_what_the_schema_closes():
    with pytest.raises(InvalidInputError, match=r"anchors\.colour: Extra inputs"):
        parse_input(RetrievalIntent, {"purpose": "fix-test", "question": "q", "anchors": {"colour": "red"}}, what="intent")
    with pytest.raises(InvalidInputError):
        parse_input(RetrievalScope, {"project": "p", "budget": {"max_tokens": 10, "tokens": 5}}, what="scope")
