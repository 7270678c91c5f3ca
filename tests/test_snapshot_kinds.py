"""The snapshot contract's ``kind``: retrievals keep every part, observed snapshots have none of
what a retrieval decides, and documents written before kinds read as retrievals."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import ValidationError

from scopelens.core.contracts import AuditSnapshot
from scopelens.core.errors import InvalidInputError
from scopelens.core.importers.model import ObservedKind as ReaderObservedKind
from scopelens.core.vocab import ObservedKind, SnapshotKind

OLD_STORE = Path(__file__).resolve().parent / "fixtures" / "stores" / "pre-2of9" / "store.db"


def old_document() -> dict[str, Any]:
    """A snapshot document written before kinds existed (the pre-[2/9] store fixture)."""
    with sqlite3.connect(f"file:{OLD_STORE}?mode=ro", uri=True) as conn:
        body = conn.execute("SELECT body FROM snapshots ORDER BY id LIMIT 1").fetchone()[0]
    document: dict[str, Any] = json.loads(body)
    return document


def observed_document() -> dict[str, Any]:
    document = old_document()
    for part in ("intent", "scope", "plan", "budget", "pins"):
        document.pop(part)
    item = {**document["selected"][0], "observed": {"kind": "file-read", "position": 3, "tool": "open", "ref": "history[7]"}}
    return document | {
        "kind": "observed",
        "selected": [item],
        "rejected": [],
        "ranked": [],
        "stats": {},
        "observed": {"format": "swe-agent", "source_file": "run.traj", "call": 2, "call_ref": "history[8]",
                     "visible_from": 0, "visible_to": 4},
    }


def test_a_document_written_before_kinds_reads_as_a_retrieval():
    document = old_document()
    assert "kind" not in document
    snapshot = AuditSnapshot.model_validate(document)
    assert snapshot.kind == SnapshotKind.RETRIEVED
    assert snapshot.retrieval.scope.project == document["scope"]["project"]


def test_an_observed_snapshot_has_no_retrieval_parts_and_says_so_in_one_line():
    snapshot = AuditSnapshot.model_validate(observed_document())
    assert snapshot.kind == SnapshotKind.OBSERVED and snapshot.scope is None and snapshot.pins is None
    assert snapshot.selected[0].observed is not None and snapshot.selected[0].observed.kind == ObservedKind.FILE_READ
    with pytest.raises(InvalidInputError, match=r"is observed: .* not a retrieval"):
        snapshot.retrieval  # noqa: B018


@pytest.mark.parametrize("part", ["intent", "scope", "plan", "budget", "pins"])
def test_a_retrieval_without_one_of_its_parts_is_refused(part):
    document = old_document()
    document.pop(part)
    with pytest.raises(ValidationError, match=f"needs {part}"):
        AuditSnapshot.model_validate(document)


def test_an_observed_snapshot_cannot_carry_rejections_or_lose_its_call():
    with_rejection = observed_document() | {"rejected": old_document()["rejected"][:1]}
    assert with_rejection["rejected"], "the fixture's snapshot has a rejection to borrow"
    with pytest.raises(ValidationError, match="no rejected or ranked rows"):
        AuditSnapshot.model_validate(with_rejection)
    without_call = observed_document()
    without_call.pop("observed")
    with pytest.raises(ValidationError, match="has its call"):
        AuditSnapshot.model_validate(without_call)


def test_a_retrieval_cannot_carry_observed_items():
    document = old_document()
    document["selected"][0]["observed"] = {"kind": "file-read", "position": 0, "ref": "x"}
    with pytest.raises(ValidationError, match="no observed call or items"):
        AuditSnapshot.model_validate(document)


def test_the_readers_kinds_are_the_vocabulary():
    assert set(get_args(ReaderObservedKind)) == {kind.value for kind in ObservedKind}
