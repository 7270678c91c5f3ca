"""Closing a SQLite store never stalls other writers: its closing checkpoint waits briefly for
older readers, not for the store's 60 s busy timeout (a full checkpoint holds off every new
writer while it waits)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from scopelens.core.store.store import Store
from scopelens.core.vocab import EventType


def test_closing_a_store_while_another_process_reads_does_not_stall_writers(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    writer = Store.open(str(path), create=True)
    session = writer.create_session(project="p", session_id="s", title="t")
    for n in range(20):
        writer.append_event(session.id, EventType.USER_MESSAGE, {"text": f"before {n}"})
    # A long read (a verify of a big store, say) holds a snapshot older than what follows.
    reader = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM events").fetchone()
    for n in range(20):
        writer.append_event(session.id, EventType.USER_MESSAGE, {"text": f"after {n}"})
    closed_in: list[float] = []

    def open_and_close() -> None:
        started = time.monotonic()
        Store.open(str(path)).close()  # its closing checkpoint cannot finish past the reader
        closed_in.append(time.monotonic() - started)

    closer = threading.Thread(target=open_and_close)
    closer.start()
    time.sleep(0.1)  # the closing checkpoint is waiting now (or has given up)
    started = time.monotonic()
    writer.append_event(session.id, EventType.USER_MESSAGE, {"text": "while a store closes"})
    appended_in = time.monotonic() - started
    closer.join(timeout=120)
    reader.execute("COMMIT")
    reader.close()
    assert appended_in < 5, f"an append waited {appended_in:.1f} s for another store's close"
    assert closed_in and closed_in[0] < 5
    # With no reader left, closing moves the WAL into the file: the file alone is whole.
    writer.close()
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as check:
        assert check.execute("SELECT count(*) FROM events WHERE session_id = 's'").fetchone()[0] >= 41
