"""``location.sqlite_file`` names the file the store opens, without SQLAlchemy: the stat check and
the early key read the store ``scopelens index`` then writes."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import pytest

from scopelens.core.store.engine import normalise_url, sqlite_path_of
from scopelens.core.store.location import sqlite_file

NAMES = ["s.db", "with space.db", "ü/s.db", "per%41cent.db", "hash#1.db", "sub/../t.db"]


def _given(tmp_path: Path, name: str) -> list[str]:
    absolute = str(tmp_path / name)
    return [
        name, absolute, f"sqlite:///{name}", f"sqlite:///{quote(name)}", f"sqlite:///{quote(absolute)}",
        f"sqlite:///{absolute}" if "%" not in name and "#" not in name else f"sqlite:///{quote(absolute)}",
        f"sqlite:///file:{quote(name)}",
    ]


@pytest.mark.parametrize("name", NAMES)
def test_it_names_the_file_sqlalchemy_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.chdir(tmp_path)
    for db in _given(tmp_path, name):
        opened = sqlite_path_of(normalise_url(db))
        assert opened is not None
        assert sqlite_file(db) == Path(os.path.abspath(opened)), db


def test_a_url_naming_a_symlink_gets_its_key_beside_the_link_as_the_store_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scopelens.core.store.keys import KEY_FILE_ENV, early_key, key_path_for
    from scopelens.core.store.store import Store

    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    (tmp_path / "real").mkdir()
    (tmp_path / "link.db").symlink_to(tmp_path / "real" / "s.db")
    url = f"sqlite:///{tmp_path / 'link.db'}"
    key = early_key(url)
    assert key_path_for(url) == tmp_path / "link.db.redaction-key"
    assert (tmp_path / "link.db.redaction-key").exists()
    with Store.open(url, create=True) as store:
        assert store.redaction_key == key


@pytest.mark.parametrize("db", ["", "sqlite://", "sqlite:///", "sqlite:///:memory:", "sqlite:///s.db?mode=ro",
                                "sqlite:///file:s.db?uri=true", "postgresql://u@h/db", "mysql:///s.db"])
def test_anything_else_is_left_to_the_store(db: str) -> None:
    assert sqlite_file(db) is None
