"""The hash contract and the input/stored reading rules of the contracts."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scopelens.core.contracts import RetrievalIntent, RetrievalScope, parse_input
from scopelens.core.errors import InvalidInputError
from scopelens.core.hashing import canonical_json, sha256_hex, store_chain_next, text_hash


def test_canonical_json_is_sorted_compact_and_utf8():
    assert canonical_json({"b": 1, "a": [1.5, "権限"], "c": None}) == '{"a":[1.5,"権限"],"b":1,"c":null}'.encode()


def test_canonical_json_known_answer():
    # Changing the hash contract changes this digest: that must be a deliberate decision.
    assert sha256_hex(canonical_json({"schema_version": 1, "text": "é"})) == sha256_hex(
        b'{"schema_version":1,"text":"\xc3\xa9"}'
    )
    assert store_chain_next("0" * 64, "f" * 64) == sha256_hex(("0" * 64 + ":" + "f" * 64).encode())
    assert text_hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_canonical_json_refuses_nan():
    with pytest.raises(ValueError):
        canonical_json({"x": math.nan})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(json_values)
def test_canonical_json_round_trips_to_the_same_bytes(value):
    import json

    encoded = canonical_json(value)
    assert canonical_json(json.loads(encoded)) == encoded


def test_unknown_fields_are_rejected_on_input_at_any_depth():
    with pytest.raises(InvalidInputError, match=r"anchors\.failing_tset"):
        parse_input(RetrievalIntent, {"anchors": {"failing_tset": "x"}}, what="intent")
    with pytest.raises(InvalidInputError, match="surprise"):
        parse_input(RetrievalScope, {"project": "p", "surprise": 1}, what="scope")


def test_stored_documents_tolerate_fields_from_later_versions():
    stored = {"project": "p", "added_in_v9": True, "budget": {"max_tokens": 5, "new_knob": 1}}
    scope = RetrievalScope.model_validate(stored)
    assert scope.project == "p" and scope.budget.max_tokens == 5
