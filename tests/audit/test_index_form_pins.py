"""The chunker's and the tokenizer's versions are part of the pinned engine config: a snapshot
made from chunks of one form is told apart by drift from today's, made another way."""

from __future__ import annotations

import pytest

from scopelens.core.audit.drift import compute_drift
from scopelens.core.index import chunker, tokenizer
from scopelens.core.pipeline import retriever
from tests.pipeline.test_seed_seven import FIX_TEST
from tests.support.workspaces import AUTH_FILES, Lab


@pytest.mark.parametrize("module, name", [(chunker, "CHUNKER_VERSION"), (tokenizer, "TOKENIZER_VERSION")])
def test_drift_tells_a_snapshot_of_another_chunker_or_tokenizer(tmp_path, monkeypatch, module, name) -> None:  # type: ignore[no-untyped-def]
    lab = Lab(tmp_path)
    try:
        lab.index(lab.workspace("ws", AUTH_FILES), "alpha")
        snapshot_id = lab.retriever().retrieve(FIX_TEST, project="alpha").snapshot_id
        assert not compute_drift(lab.store, snapshot_id).report.config_changed
        monkeypatch.setattr(retriever, name, getattr(module, name) + 1)  # as if today's code chunked anew
        assert retriever.engine_config()["index"] == {
            "chunker": retriever.CHUNKER_VERSION, "tokenizer": retriever.TOKENIZER_VERSION
        }
        assert compute_drift(lab.store, snapshot_id).report.config_changed
    finally:
        lab.close()
