"""``stat_check.unchanged_by_stat``: a no-op re-index answered from sizes and times through the
standard library's sqlite3. It says "unchanged" only where the indexer would, with the same
report, and defers to the indexer in every other case."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from scopelens.core.index.indexer import index_workspace
from scopelens.core.index.sources import SourceClassifier
from scopelens.core.index.stat_check import SCHEMA_STEPS, unchanged_by_stat
from scopelens.core.store.migrations import MIGRATIONS
from scopelens.core.store.store import Store
from tests.support.workspaces import write

FILES = {
    "pkg/module_a.py": "def handler(request):\n    return request\n",
    "docs/conventions/naming.md": "# Naming\n\nUse snake_case.\n",
    "README.md": "# Demo\n",
}
HOUR_NS = 3600 * 1_000_000_000


def _age(root: Path) -> None:
    moment = time.time_ns() - HOUR_NS
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, ns=(moment, moment))


@pytest.fixture
def indexed(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "ws"
    write(root, FILES)
    (root / ".gitignore").write_text("*.tmp\n", encoding="utf-8")
    (root / "scratch.tmp").write_text("ignored\n", encoding="utf-8")
    _age(root)
    db = tmp_path / "s.db"
    with Store.open(str(db), create=True) as store:
        index_workspace(store, root, project="p", branch="main", workers=0)
    return root, db


def _check(db: Path | str, root: Path, classifier: SourceClassifier | None = None, **where: str):  # type: ignore[no-untyped-def]
    place = {"project": "p", "branch": "main", **where}
    return unchanged_by_stat(
        str(db), root, classifier=classifier or SourceClassifier(), max_bytes=1_000_000, **place  # type: ignore[arg-type]
    )


def test_it_gives_the_report_the_indexer_gives_for_a_run_with_nothing_to_do(indexed: tuple[Path, Path]) -> None:
    root, db = indexed
    quick = _check(db, root)
    assert quick is not None
    with Store.open(str(db)) as store:
        full = index_workspace(store, root, project="p", branch="main", workers=0)
    assert full.nothing_changed
    assert dataclasses.asdict(quick) == dataclasses.asdict(full)
    assert _check(db, root, project="p") is not None and _check(db, root, branch="main") is not None
    assert _check(f"sqlite:///{db}", root) is not None


def test_it_reads_a_store_named_by_a_percent_encoded_url(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write(root, FILES)
    _age(root)
    db = tmp_path / "my store#1.db"
    url = f"sqlite:///{quote(str(db))}"  # as engine.normalise_url writes a path
    with Store.open(url, create=True) as store:
        index_workspace(store, root, project="p", branch="main", workers=0)
    assert _check(url, root) is not None
    assert not (tmp_path / "my%20store%231.db").exists()


@pytest.mark.parametrize(
    "change",
    ["added", "removed", "touched", "same-size-rewrite-now", "reclassified", "other-project", "other-branch"],
)
def test_it_defers_to_the_indexer_whenever_a_file_may_differ(indexed: tuple[Path, Path], change: str) -> None:
    root, db = indexed
    classifier = None
    where: dict[str, str] = {}
    if change == "added":
        (root / "pkg" / "new.py").write_text("N = 1\n", encoding="utf-8")
        _age(root)
    elif change == "removed":
        (root / "README.md").unlink()
    elif change == "touched":
        os.utime(root / "README.md")  # same bytes, a new time: the indexer reads it
    elif change == "same-size-rewrite-now":
        (root / "README.md").write_text("# Dema\n", encoding="utf-8")
    elif change == "reclassified":
        classifier = SourceClassifier().with_globs(("docs/conventions/*",), ())
    elif change == "other-project":
        where = {"project": "q"}
    else:
        where = {"branch": "dev"}
    assert _check(db, root, classifier, **where) is None


def test_it_defers_for_stores_it_cannot_read_as_this_code_writes_them(indexed: tuple[Path, Path], tmp_path: Path) -> None:
    root, db = indexed
    assert _check(tmp_path / "missing.db", root) is None
    assert unchanged_by_stat("postgresql://localhost/x", root, project="p", branch="main",
                             classifier=SourceClassifier(), max_bytes=1_000_000) is None
    foreign = tmp_path / "foreign.db"
    foreign.write_bytes(b"not a database at all" * 100)
    assert _check(foreign, root) is None
    import sqlite3

    with sqlite3.connect(db) as conn:  # as if a newer scopelens had migrated it
        conn.execute("INSERT INTO scopelens_migrations (ordinal, name, applied_at) VALUES (999, 'zzzz', 'x')")
    assert _check(db, root) is None


def test_schema_steps_is_the_number_of_migrations() -> None:
    assert len(MIGRATIONS) == SCHEMA_STEPS


def test_a_no_op_index_command_loads_no_sql_library_and_no_numpy(indexed: tuple[Path, Path], tmp_path: Path) -> None:
    root, db = indexed
    code = (
        "import sys\n"
        "from scopelens.core.cli import main\n"
        f"main(['index', {str(root)!r}, '--project', 'p', '--branch', 'main', '--db', {str(db)!r}, '--json'])\n"
        "print('loaded:' + ','.join(sorted(n for n in sys.modules if n.split('.')[0] in ('sqlalchemy', 'sqlmodel', 'numpy'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    *document, loaded = result.stdout.strip().splitlines()
    assert loaded == "loaded:"
    report = json.loads("\n".join(document))
    assert report["nothing_changed"] and report["unchanged"] == len(FILES) + 1  # .gitignore is indexed too
    assert report["ignored"] == 1 and report["index_version"] == "p@main#1"
