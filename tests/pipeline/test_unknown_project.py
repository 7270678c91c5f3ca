"""An unknown project is an error, on both backends: `search` and `retrieve` exit 2 with one line
naming the projects the store knows, and nothing is written. A project is known once the store
holds an index run, a session or a memory of it."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from scopelens.core.cli import main
from scopelens.core.contracts import MemoryRecord, RetrievalIntent
from scopelens.core.errors import UnknownIdError
from scopelens.core.store.store import Store
from scopelens.core.store.tables import SessionRow, SnapshotRow
from scopelens.core.vocab import MemoryStatus
from tests.pipeline.test_seed_seven import FIX_TEST
from tests.support.workspaces import AUTH_FILES, T0, Lab


@pytest.fixture
def lab(tmp_path, store_url):
    instance = Lab(tmp_path, store_url)
    instance.url = store_url
    yield instance
    instance.close()


def written(store: Store) -> tuple[int, int, tuple[int, str]]:
    return store.count(SessionRow), store.count(SnapshotRow), store.store_head()


def test_retrieve_of_an_unknown_project_raises_and_writes_nothing(lab):
    lab.index(lab.workspace("a", AUTH_FILES), "alpha")
    lab.index(lab.workspace("b", {"b.py": "B = 1\n"}), "beta")
    before = written(lab.store)
    with pytest.raises(UnknownIdError, match=r"no project 'Nope' in this store \(it has: alpha, beta\)"):
        lab.retriever().retrieve(FIX_TEST, project="Nope")
    assert written(lab.store) == before


@pytest.mark.parametrize("command", ["search", "retrieve"])
def test_the_cli_refuses_an_unknown_project_in_one_line(lab, capsys, command):
    lab.index(lab.workspace("a", AUTH_FILES), "alpha")
    intent = lab.tmp / "intent.json"
    intent.write_text(FIX_TEST.model_dump_json(), encoding="utf-8")
    before = written(lab.store)
    argv = ["search", "role admin"] if command == "search" else ["retrieve", "--intent", str(intent)]
    code = main([*argv, "--project", "Nope", "--db", lab.url])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == "error: no project 'Nope' in this store (it has: alpha)\n"
    assert written(lab.store) == before
    # The known project still works.
    assert main([*argv, "--project", "alpha", "--db", lab.url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)


def test_an_empty_store_says_it_has_no_project(lab, capsys):
    assert main(["search", "role", "--project", "Nope", "--db", lab.url]) == 2
    assert "no project 'Nope' in this store (it has none yet:" in capsys.readouterr().err
    assert written(lab.store) == (0, 0, (0, "0" * 64))


def test_retrieve_into_a_missing_store_creates_nothing(tmp_path, capsys):
    intent = tmp_path / "intent.json"
    intent.write_text(FIX_TEST.model_dump_json(), encoding="utf-8")
    db = tmp_path / "nothing-here.db"
    assert main(["retrieve", "--intent", str(intent), "--project", "alpha", "--db", str(db)]) == 2
    assert "no store at" in capsys.readouterr().err
    assert not db.exists()


def test_a_project_with_only_memories_or_only_sessions_is_known(lab):
    lab.remember(
        MemoryRecord(id="m-1", project="recalled", content="cache settings live in config/cache.toml",
                     status=MemoryStatus.VERIFIED, valid_from=T0 - timedelta(days=1))
    )
    session = lab.store.create_session(project="talked", title="a session before any index")
    retriever = lab.retriever()
    remembered = retriever.retrieve(RetrievalIntent(question="where are the cache settings"), project="recalled")
    assert [item.source_ref for item in remembered.snapshot.selected] == ["memory:m-1"]
    assert retriever.retrieve(RetrievalIntent(question="anything"), project="talked", session_id=session.id).snapshot_id
