"""Reads see one consistent snapshot while others write, and never stall a writer: verify stays
clean under concurrent appends on both backends; SQLite stores use WAL; store paths with URL
characters (#, ?, %20) open the file they name."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest
from sqlalchemy import text

from scopelens.core.cli import main
from scopelens.core.store.store import Store
from scopelens.core.store.verify import verify_store
from scopelens.core.vocab import EventType

WRITERS = 2


def _writer(url: str, session_id: str, stop: threading.Event, errors: list[BaseException]) -> None:
    try:
        with Store.open(url) as store:
            n = 0
            while not stop.is_set():
                store.append_event(session_id, EventType.USER_MESSAGE, {"text": f"{session_id} {n}"})
                n += 1
    except BaseException as exc:  # noqa: BLE001 - reported by the test thread
        errors.append(exc)


def test_verify_is_clean_while_others_write(store_url):
    with Store.open(store_url, create=True) as store:
        sessions = [store.create_session(project="p", session_id=f"s-{w}").id for w in range(WRITERS)]
    stop, errors = threading.Event(), []
    threads = [threading.Thread(target=_writer, args=(store_url, s, stop, errors)) for s in sessions]
    for thread in threads:
        thread.start()
    try:
        reports = []
        with Store.open(store_url, read_only=True) as reader:
            for _ in range(6):
                reports.append(verify_store(reader))
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert errors == []
    assert all(r.clean for r in reports), next(r.problems for r in reports if not r.clean)
    assert reports[-1].events > reports[0].events >= WRITERS  # the writers did write meanwhile


def test_a_long_read_does_not_block_a_writer(tmp_path):
    url = str(tmp_path / "s.db")
    with Store.open(url, create=True) as store:
        session = store.create_session(project="p", session_id="s-1").id
    assert sqlite3.connect(tmp_path / "s.db").execute("PRAGMA journal_mode").fetchone() == ("wal",)
    with Store.open(url, read_only=True) as reader, Store.open(url) as writer:
        with reader.read() as conn:
            before = len(reader.events(session))
            conn.execute(text("SELECT count(*) FROM events")).scalar_one()  # the snapshot is taken
            started = time.monotonic()
            writer.append_event(session, EventType.USER_MESSAGE, {"text": "while a read is open"})
            assert time.monotonic() - started < 5  # not the 60 s busy timeout
            inside = conn.execute(text("SELECT count(*) FROM events")).scalar_one()
        assert inside == before  # the open read kept its snapshot
        assert len(reader.events(session)) == before + 1


@pytest.mark.parametrize("directory", ["p#1", "a%20b", "q?x", "spaced dir"])
def test_a_store_path_with_url_characters_opens_that_file(capsys, tmp_path, directory):
    folder = tmp_path / directory
    folder.mkdir()
    db = folder / "s.db"
    with Store.open(str(db), create=True) as store:
        store.create_session(project="p", session_id="s-1")
    assert db.is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [directory]  # nothing made beside it
    assert main(["sessions", "--db", str(db), "--json"]) == 0
    assert '"s-1"' in capsys.readouterr().out


def test_a_read_only_open_of_a_store_in_use_creates_nothing(tmp_path):
    """With a writer holding the store open (its -wal and -shm exist), a reader joins the WAL."""
    url = str(tmp_path / "s.db")
    with Store.open(url, create=True) as writer:
        session = writer.create_session(project="p", session_id="s-1").id
        with writer.write() as conn:  # keep -wal/-shm in place for the reader
            del conn
        holder = sqlite3.connect(tmp_path / "s.db")
        holder.execute("SELECT 1 FROM events").fetchall()
        before = sorted(p.name for p in tmp_path.iterdir())
        writer.append_event(session, EventType.USER_MESSAGE, {"text": "in the WAL"})
        with Store.open(url, read_only=True) as reader:
            assert [e.payload.get("text") for e in reader.events(session)][-1] == "in the WAL"
        assert sorted(p.name for p in tmp_path.iterdir()) == before
        holder.close()
