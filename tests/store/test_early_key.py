"""``keys.early_key`` finds a SQLite store's key without SQLAlchemy (``scopelens index`` hands it
to its workers before loading the store's code): it must be the key the store uses."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from scopelens.core.store.engine import normalise_url
from scopelens.core.store.keys import KEY_FILE_ENV, early_key, key_path_for
from scopelens.core.store.store import Store


@pytest.mark.parametrize("name", ["s.db", "with space.db", "ü/s.db", "per%41cent.db", "hash#1.db"])
def test_the_early_key_is_the_key_the_store_then_uses(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    Path(name).parent.mkdir(exist_ok=True)
    key = early_key(name)  # a store that does not exist yet: the key is made beside it
    assert key is not None
    assert key_path_for(normalise_url(name)) == (tmp_path / name).with_name(Path(name).name + ".redaction-key")
    with Store.open(name, create=True) as store:
        assert store.redaction_key == key
    assert early_key(name) == key  # read back once the store exists


def test_the_key_file_named_by_the_environment_is_used_early_too(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_FILE_ENV, str(tmp_path / "elsewhere.key"))
    key = early_key(str(tmp_path / "s.db"))
    assert (tmp_path / "elsewhere.key").exists()
    with Store.open(str(tmp_path / "s.db"), create=True) as store:
        assert store.redaction_key == key


@pytest.mark.parametrize("name", ["s.db", "with space.db", "per%41cent.db", "hash#1.db"])
def test_a_plain_sqlite_url_gets_the_key_its_store_then_uses(tmp_path, monkeypatch, name):
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    url = f"sqlite:///{quote(str(tmp_path / name))}"
    key = early_key(url)
    assert key is not None
    assert (tmp_path / f"{name}.redaction-key").exists()
    with Store.open(url, create=True) as store:
        assert store.redaction_key == key
    assert early_key(url) == key


def test_an_existing_store_without_a_key_or_a_url_with_options_gets_no_early_key(tmp_path):
    with Store.open(str(tmp_path / "s.db"), create=True):
        pass
    (tmp_path / "s.db.redaction-key").unlink(missing_ok=True)
    assert early_key(str(tmp_path / "s.db")) is None
    assert early_key(f"sqlite:///{tmp_path / 'new.db'}?mode=rwc") is None
    assert early_key("postgresql://u@localhost/db") is None
