"""Index rows reach PostgreSQL through COPY ([6/9] item 4) and are the rows SQLite gets (the
build's speed is measured by ``python -m bench.pg_build``; timing never goes into unit tests)."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import col, select

from scopelens.core.index import run_writer
from scopelens.core.index.indexer import index_workspace
from scopelens.core.store.store import Store
from scopelens.core.store.tables import IndexChunkRow, IndexPostingRow


def rows(url: str) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    with Store.open(url) as store, store.read() as conn:
        chunks = [(c.path, c.start_line, c.end_line, c.symbol, c.text)
                  for c in conn.exec(select(IndexChunkRow).order_by(col(IndexChunkRow.id)))]
        postings = sorted((p.term, bytes(p.chunk_ids), bytes(p.tfs)) for p in conn.exec(select(IndexPostingRow)))
    return chunks, postings


def test_rows_copied_into_postgresql_equal_the_rows_inserted_into_sqlite(tmp_path: Path, postgres_url: str,
                                                                         monkeypatch) -> None:  # type: ignore[no-untyped-def]
    copied: list[str] = []
    real_copy = run_writer._copy_rows

    def counting_copy(connection, table, columns, data):  # type: ignore[no-untyped-def]
        done = real_copy(connection, table, columns, data)
        if done:
            copied.append(table.name)
        return done

    monkeypatch.setattr(run_writer, "_copy_rows", counting_copy)
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "limits.py").write_text(
        'def rate_limit(bucket, cost=None):\n    """Take cost tokens; None means one."""\n    return bucket - (cost or 1)\n',
        encoding="utf-8",
    )
    (root / "README.md").write_text("# Limits\n\nÉtat: the bucket refills every second; tabs\there \\N.\n", encoding="utf-8")
    sqlite_url = f"sqlite:///{tmp_path / 'store.db'}"
    for url in (sqlite_url, postgres_url):
        with Store.open(url, create=True) as store:
            index_workspace(store, root, project="alpha")
    assert sorted(copied) == ["index_chunks", "index_documents", "index_postings"]  # PostgreSQL only: SQLite has its own path
    assert rows(postgres_url) == rows(sqlite_url)  # tabs, accents, a literal \N, NULL symbols, binary postings
