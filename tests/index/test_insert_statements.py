"""The SQLite writer runs multi-row INSERTs of a few fixed sizes only.

sqlite3 keeps every distinct statement it ran prepared (up to 128 per connection), and an
INSERT of a few hundred rows holds a few hundred KiB; when the last, odd-sized batch of every
segment made a new statement, the indexing process grew by about 14 MiB on the standard
library, more on a bigger corpus.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scopelens.core.index import indexer, run_writer
from scopelens.core.index.run_writer import ROWS_PER_INSERT, _statement_sizes
from tests.support.workspaces import Lab


@pytest.mark.parametrize("full", [ROWS_PER_INSERT, 76, 1])
def test_statement_sizes_add_up_to_the_rows_from_a_fixed_set(full: int) -> None:
    allowed = {full} | {1 << bit for bit in range(full.bit_length()) if 1 << bit < full}
    for rows in range(1, 2 * full + 1):
        sizes = _statement_sizes(rows, full)
        assert sum(sizes) == rows
        assert sizes == [rows] if rows >= full else set(sizes) <= allowed


def test_a_run_of_many_segments_prepares_few_distinct_statements(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # One file per segment, file k with k functions: every segment writes a different
    # number of chunk rows (and of posting rows).
    files = {
        f"mod_{k:02d}.py": "\n\n".join(f"def f_{k}_{i}(x):\n    return x + {i}\n" for i in range(k)) for k in range(1, 41)
    }
    monkeypatch.setattr(indexer, "SEGMENT_BYTES", 1)
    sizes: dict[str, set[int]] = {}
    real = run_writer._insert_sql

    def recording(table: str, columns: list[str], rows: int = 1) -> str:
        sizes.setdefault(table, set()).add(rows)
        return real(table, columns, rows)

    monkeypatch.setattr(run_writer, "_insert_sql", recording)
    lab = Lab(tmp_path)
    try:
        indexer.index_workspace(lab.store, lab.workspace("w", files), project="p", workers=0, compact=False)
    finally:
        lab.close()
    assert any("chunk" in table for table in sizes) and any("posting" in table for table in sizes)
    for table, rows in sizes.items():
        assert len(rows) <= ROWS_PER_INSERT.bit_length() + 1, (table, sorted(rows))


def test_chunk_rows_filled_a_column_at_a_time_equal_the_rows_one_chunk_at_a_time() -> None:
    """SQLite's chunk INSERTs take their values a column at a time; PostgreSQL's COPY takes a
    tuple per chunk: both give each chunk the same id, document, ordinal, fields and length."""
    from itertools import chain

    from scopelens.core.index.prepare import prepare_batch
    from scopelens.core.index.run_writer import _chunk_rows, _chunk_value_batches
    from scopelens.core.index.sources import SourceClassifier
    from scopelens.core.redaction_scan import RedactionKey

    files = [
        ("a.py", b"import os\n\n\ndef f(x):\n    return x + 1\n\n\nclass K:\n    def m(self):\n        pass\n"),
        ("empty.md", b""),
        ("b.md", b"# Title\n\nSome prose about getHTTPResponse.\n" * 30),
    ]
    documents = prepare_batch(files, SourceClassifier(), RedactionKey(bytes(32)))
    ids = [11, 12, 13]
    expected = list(chain.from_iterable(_chunk_rows(documents, ids, 5, 100)))
    for rows in (1, 2, 500):
        batches = list(_chunk_value_batches(documents, ids, 5, 100, rows))
        assert [value for batch in batches for value in batch] == expected
        assert all(len(batch) <= rows * 11 for batch in batches)
    assert expected[:4] == [100, 5, 11, 0] and expected.count(5) >= 3
