"""The CLI skeleton: store selection, --json documents, and one-line errors for user mistakes."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from scopelens.core.cli import main
from scopelens.core.store.store import Store
from scopelens.core.vocab import EventType


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "s.db"
    with Store.open(str(path), create=True) as store:
        session = store.create_session(project="demo", session_id="s-1", title="fix the test")
        store.append_event(session.id, EventType.USER_MESSAGE, {"text": "the test fails"})
    return path


def test_sessions_json_has_schema_version(capsys, store_path):
    code, out, _ = run(capsys, "sessions", "--db", str(store_path), "--json")
    document = json.loads(out)
    assert code == 0
    assert document["schema_version"] == 1
    assert [s["id"] for s in document["sessions"]] == ["s-1"]
    assert document["sessions"][0]["turns"] == 1


def test_show_session_and_json(capsys, store_path):
    code, out, _ = run(capsys, "show", "s-1", "--db", str(store_path), "--json")
    document = json.loads(out)
    assert code == 0 and document["schema_version"] == 1
    assert [e["type"] for e in document["events"]] == ["session.started", "user.message"]
    code, out, _ = run(capsys, "show", "s-1", "--db", str(store_path))
    assert code == 0 and "the test fails" in out


def test_verify_prints_the_store_head_and_exits_zero(capsys, store_path):
    code, out, _ = run(capsys, "verify", "--db", str(store_path))
    with Store.open(str(store_path), read_only=True) as store:
        _, head = store.store_head()
    assert code == 0
    assert head in out and "clean" in out
    code, out, _ = run(capsys, "verify", "--db", str(store_path), "--json")
    assert json.loads(out)["store_head"] == head


def test_store_selection_precedence(capsys, tmp_path, store_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # Default: ./.scopelens/scopelens.db, which does not exist here.
    code, _, err = run(capsys, "sessions")
    assert code == 2 and ".scopelens/scopelens.db" in err
    monkeypatch.setenv("SCOPELENS_DB", str(store_path))
    code, out, _ = run(capsys, "sessions", "--json")
    assert code == 0 and json.loads(out)["sessions"][0]["id"] == "s-1"
    code, _, err = run(capsys, "sessions", "--db", str(tmp_path / "other.db"))
    assert code == 2 and "other.db" in err


@pytest.mark.parametrize(
    "make_bad, expected",
    [
        (lambda p: p.write_text("not a database at all"), "not a SQLite database"),
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: _foreign_sqlite(p), "not a scopelens store"),
        (lambda p: None, "no store at"),
    ],
    ids=["text-file", "directory", "foreign-sqlite", "missing"],
)
def test_bad_stores_give_one_line_errors(capsys, tmp_path, make_bad, expected):
    path = tmp_path / "bad.db"
    make_bad(path)
    before = _snapshot_dir(tmp_path)
    for command in (["sessions"], ["show", "x"], ["verify"]):
        code, _out, err = run(capsys, *command, "--db", str(path))
        assert code == 2
        assert err.startswith("error: ") and expected in err
        assert err.count("\n") == 1 and "Traceback" not in err
    assert _snapshot_dir(tmp_path) == before, "a failed open must not change anything"


def test_unknown_id_is_one_line(capsys, store_path):
    code, _, err = run(capsys, "show", "no-such-id", "--db", str(store_path))
    assert code == 2 and err == "error: no session or snapshot with id 'no-such-id' in this store\n"


def test_newer_schema_is_refused(capsys, store_path):
    with sqlite3.connect(store_path) as conn:
        conn.execute("INSERT INTO scopelens_migrations VALUES (99, '0099_from_the_future', 'x')")
    code, _, err = run(capsys, "sessions", "--db", str(store_path))
    assert code == 2 and "newer scopelens" in err and "0099_from_the_future" in err


def test_debug_shows_the_traceback(store_path):
    from scopelens.core.errors import UnknownIdError

    with pytest.raises(UnknownIdError):
        main(["show", "nope", "--db", str(store_path), "--debug"])


def test_tampered_store_verify_exits_nonzero(capsys, store_path):
    with sqlite3.connect(store_path) as conn:
        conn.execute("DROP TRIGGER events_no_delete")
        conn.execute("DELETE FROM events WHERE seq = 1")
    code, out, err = run(capsys, "verify", "--db", str(store_path))
    assert code == 3
    assert "deleted" in out and "event s-1#1" in out
    assert err.startswith("error: verify found")


def _foreign_sqlite(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")


def _snapshot_dir(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_index_workers_flag(capsys, tmp_path):
    """``--workers 0`` prepares in the indexing process and indexes the same; a bad count is
    one line on stderr and exit code 2, with nothing written."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.py").write_text("def handler(request):\n    return request\n", encoding="utf-8")
    db = tmp_path / "w.db"
    code, out, _ = run(capsys, "index", str(root), "--project", "p", "--db", str(db), "--workers", "0", "--json")
    assert code == 0 and json.loads(out)["added"] == ["a.py"]
    for bad in ("-1", "many", "9999"):
        with pytest.raises(SystemExit) as exited:
            main(["index", str(root), "--project", "q", "--db", str(tmp_path / "x.db"), "--workers", bad])
        _, err = capsys.readouterr()
        assert exited.value.code == 2 and "--workers" in err and "Traceback" not in err
        assert not (tmp_path / "x.db").exists()


def _chunks_and_redactions(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT c.path, c.ordinal, c.start_line, c.end_line, c.symbol, c.token_count, c.text, d.redactions "
            "FROM index_chunks c JOIN index_documents d ON d.id = c.document_id ORDER BY c.path, c.ordinal"
        ).fetchall()


_WORKERS_STARTED = """
import sys
from scopelens.core.index import batching, head_start

batching.POOL_MIN_BYTES = 0
real_init = head_start.HeadStart.__init__
def spy(self, files, **kwargs):
    heavy = sorted({name.split(".")[0] for name in sys.modules} & {"numpy", "sqlalchemy", "sqlmodel", "pydantic", "rich"})
    print("loaded when the workers started:", heavy, file=sys.stderr)
    real_init(self, files, **kwargs)
head_start.HeadStart.__init__ = spy
from scopelens.core.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_index_starts_its_workers_before_loading_numpy_sqlalchemy_pydantic_or_rich(tmp_path):
    """They take about a second to import on the machine CI runs on; the workers prepare files
    meanwhile (a policy file, when there is one, still loads pydantic first)."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "m.py").write_text("def f(x):\n    return x\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", _WORKERS_STARTED, "index", str(root), "--project", "p", "--db", str(tmp_path / "s.db"),
         "--json"],
        capture_output=True, text=True, timeout=120, env=dict(os.environ, SCOPELENS_DB=""),
    )
    assert done.returncode == 0, done.stderr
    assert "loaded when the workers started: []" in done.stderr
    assert len(json.loads(done.stdout)["added"]) == 1


def test_index_hands_files_to_workers_before_the_diff_and_indexes_the_same(capsys, tmp_path, monkeypatch):
    """With enough to prepare, ``scopelens index`` starts its workers on the files its stat check
    found, before loading the indexer; the index it writes (redaction records, hashed under the
    store's key, included) is what preparing everything in one process writes. A store that
    exists without a key gets no head start (no key is made before the store is opened)."""
    from scopelens.core.index import batching, head_start

    root = tmp_path / "ws"
    root.mkdir()
    for n in range(8):
        (root / f"m{n}.py").write_text(f"API_KEY = 'sk-live-{n:02d}abcdefghijklmnopqrstuv'\n\ndef f{n}(x):\n    return x\n",
                                       encoding="utf-8")
    monkeypatch.setattr(batching, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(batching, "BATCH_BYTES", 1)  # a batch per file
    made: list[head_start.HeadStart] = []
    real_init = head_start.HeadStart.__init__

    def spy(self, files, **kwargs):  # type: ignore[no-untyped-def]
        real_init(self, files, **kwargs)
        made.append(self)

    monkeypatch.setattr(head_start.HeadStart, "__init__", spy)
    ahead, alone = tmp_path / "ahead.db", tmp_path / "alone.db"
    code, out, _ = run(capsys, "index", str(root), "--project", "p", "--db", str(ahead), "--json")
    assert code == 0 and len(json.loads(out)["added"]) == 8
    assert len(made) == 1 and 1 <= len(made[0].ahead) <= 8
    # The same key (the first run made it beside its new store), no workers: the same index.
    (tmp_path / "alone.db.redaction-key").write_bytes((tmp_path / "ahead.db.redaction-key").read_bytes())
    code, _, _ = run(capsys, "index", str(root), "--project", "p", "--db", str(alone), "--workers", "0", "--json")
    assert code == 0 and len(made) == 1
    indexed = _chunks_and_redactions(ahead)
    assert len(indexed) == 16 and all(b"hmac" in row[7] for row in indexed)  # two chunks a file
    assert _chunks_and_redactions(alone) == indexed
    # An existing store without a key file: no head start, and the run still indexes.
    keyless = tmp_path / "keyless.db"
    with Store.open(str(keyless), create=True):
        pass
    (tmp_path / "keyless.db.redaction-key").unlink(missing_ok=True)
    code, out, _ = run(capsys, "index", str(root), "--project", "p", "--db", str(keyless), "--json")
    assert code == 0 and len(json.loads(out)["added"]) == 8 and len(made) == 1
