"""Random single-byte changes to an audit store, made through SQL with the triggers dropped:
``verify`` must report every one, naming the record.

Run ``python -m bench.tamper_fuzz [--changes 1000] [--seed 0] [--backend sqlite|postgresql]``.
On SQLite each change is made to a fresh copy of the store; on PostgreSQL (a throw-away
cluster) it is made with the triggers off (``session_replication_role = replica``, the
attacker's way past them), committed, verified by a separate connection, and put back. The store holds the
four sample sessions recorded (events, snapshots and their candidate rows, blobs, session
heads), a drift run of each of their first snapshots and a confirmation of it, and memory records with their version
chains. Each change is made to a fresh copy of it:

* a column value of one row of ``events``, ``snapshots``, ``snapshot_rows``, ``blobs``,
  ``session_heads``, ``sessions``, ``drift_runs``, ``drift_checks`` or ``memory_versions``, chosen
  at random (table, then row, then column);
* one byte of it changed: a byte of a BLOB, a character of TEXT (to another printable
  ASCII character), a digit of an INTEGER (its decimal form). NULLs and changes that leave
  the value equal are drawn again.

It prints, per table, how many changes were made and caught, and lists every one missed
(with the row and column). CI runs a derandomized sample (``tests/store/test_tamper_fuzz.py``).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from scopelens.core.audit.drift import compute_drift
from scopelens.core.contracts import MemoryRecord
from scopelens.core.memory import deprecate, import_memories, promote
from scopelens.core.record.recorder import record_scripts
from scopelens.core.store.store import Store
from scopelens.core.store.verify import verify_store

SAMPLES = Path(__file__).resolve().parents[1] / "sample_sessions"
TABLES = {
    # table: the columns that name a row in verify's report
    "events": ("session_id", "seq"),
    "snapshots": ("id",),
    "snapshot_rows": ("snapshot_id",),
    "blobs": ("sha256",),
    "session_heads": ("session_id",),
    "sessions": ("id",),
    "drift_runs": ("id", "snapshot_id"),
    "drift_checks": ("id", "run_id"),
    "memory_versions": ("memory_id",),
}


@dataclass(frozen=True)
class Change:
    table: str
    rowid: int | str
    """SQLite's rowid, or PostgreSQL's ctid."""
    column: str
    names: tuple[str, ...]
    """The row's identifying values (any of them in a problem counts as naming it)."""
    before: object
    after: object

    def describe(self) -> str:
        return f"{self.table} row {self.rowid} ({', '.join(self.names)}) column {self.column}"


def build_store(directory: Path) -> Path:
    """The fuzzed SQLite store: sample sessions, drift runs and memory version chains."""
    db = directory / "pristine.db"
    fill_store(str(db), directory)
    with sqlite3.connect(db) as conn:  # one file to copy: no write-ahead log beside it
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode = DELETE")
    return db


def fill_store(url: str, directory: Path) -> None:
    """Record the sample sessions into ``url``, drift their first snapshots twice, and write
    memory records with version chains."""
    (directory / "work").mkdir(parents=True, exist_ok=True)
    record_scripts(sorted(p.parent for p in SAMPLES.glob("*/script.json")), db=url, workdir=directory / "work")
    with Store.open(url) as store:
        for summary in store.list_sessions():
            snapshots = store.snapshots_of(summary.header.id)
            if snapshots:
                compute_drift(store, snapshots[0].snapshot.id)
                compute_drift(store, snapshots[0].snapshot.id)  # found again: a confirmation (drift_checks)
        now = store.clock.now()
        records = [MemoryRecord(id=f"fuzz-m{n}", project="billing-service", content=f"rounding note {n}: cents, not floats",
                                valid_from=now - timedelta(days=1)) for n in range(3)]
        import_memories(store, records)
        promote(store, "fuzz-m0")
        deprecate(store, "fuzz-m1")


@dataclass(frozen=True)
class _Addressing:
    """How one backend names a row and lists a table's columns, for ``_draw``."""

    row_ids: str
    """All rows' addresses, in a stable order (``{table}`` filled in)."""
    row: str
    """The condition picking one row by its address (one parameter)."""
    columns: str
    """The table's column names, first field of each row (``{table}`` filled in, or its parameter)."""


_SQLITE = _Addressing("SELECT rowid FROM {table} ORDER BY rowid", "rowid = ?", "SELECT name FROM pragma_table_info('{table}')")
_POSTGRES = _Addressing(
    "SELECT ctid::text FROM {table} ORDER BY ctid", "ctid = %s::tid",
    "SELECT column_name FROM information_schema.columns WHERE table_name = '{table}' ORDER BY ordinal_position",
)


def draw_change(db: Path, rng: random.Random) -> Change:
    """A random single-byte change to one column value of the SQLite store (not yet made)."""
    with sqlite3.connect(db) as conn:
        return _draw(conn, rng, _SQLITE)


def _draw(conn: Any, rng: random.Random, addressing: _Addressing) -> Change:
    """A table, then a row, then a column at random; a value one byte away (drawn again when
    there is none, or it is the same)."""
    while True:
        table = rng.choice(sorted(TABLES))
        addresses = [r[0] for r in conn.execute(addressing.row_ids.format(table=table))]
        if not addresses:
            continue
        address = rng.choice(addresses)
        column = rng.choice([r[0] for r in conn.execute(addressing.columns.format(table=table))])
        before = conn.execute(f'SELECT "{column}" FROM {table} WHERE {addressing.row}', (address,)).fetchone()[0]
        after = _one_byte_changed(before, rng)
        if after is None or after == before:
            continue
        names = conn.execute(f"SELECT {', '.join(TABLES[table])} FROM {table} WHERE {addressing.row}", (address,)).fetchone()
        return Change(table, address, column, tuple(str(n) for n in names), before, after)


def _one_byte_changed(value: object, rng: random.Random) -> object | None:
    if isinstance(value, bytes) and value:
        at = rng.randrange(len(value))
        return value[:at] + bytes([(value[at] + rng.randrange(1, 256)) % 256]) + value[at + 1 :]
    if isinstance(value, str) and value:
        at = rng.randrange(len(value))
        replacement = chr(rng.randrange(33, 127))
        return value[:at] + replacement + value[at + 1 :]
    if isinstance(value, int) and not isinstance(value, bool):
        digits = str(abs(value))
        at = rng.randrange(len(digits))
        changed = digits[:at] + str((int(digits[at]) + rng.randrange(1, 10)) % 10) + digits[at + 1 :]
        return -int(changed) if value < 0 else int(changed)
    return None


def caught(pristine: Path, change: Change, scratch: Path) -> tuple[bool, str] | None:
    """Make ``change`` on a copy (triggers dropped); whether verify names its row, and how.
    ``None`` when the database itself refuses the change (a unique key would repeat)."""
    shutil.copyfile(pristine, scratch)
    with sqlite3.connect(scratch) as conn:
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
            conn.execute(f'DROP TRIGGER "{name}"')
        try:
            conn.execute(f'UPDATE {change.table} SET "{change.column}" = ? WHERE rowid = ?',
                         (change.after, change.rowid))
        except sqlite3.IntegrityError:
            return None
    return verified(str(scratch), change)


def verified(url: str, change: Change) -> tuple[bool, str]:
    """Whether verify on the changed store reports a problem naming the changed row, and how."""
    try:
        with Store.open(url, read_only=True) as store:
            problems = verify_store(store).problems
    except Exception as exc:  # noqa: BLE001 (a store that no longer opens is caught, loudly)
        return True, f"refused to open: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    text = " ".join(f"{p.record} {p.detail}" for p in problems)
    # verify shows long ids (blob hashes) by their first 16 characters and an ellipsis
    named = [n for n in (*change.names, str(change.after)) if n and (n in text or f"{n[:16]}…" in text)]
    return bool(problems and named), "; ".join(f"{p.kind} {p.record}" for p in problems[:3])


# ---------------------------------------------------------------------------- PostgreSQL


def _pg_connect(url: str) -> Any:
    import psycopg

    from tests.support.postgres import libpq_url

    return psycopg.connect(libpq_url(url))


def draw_pg_change(url: str, rng: random.Random) -> Change:
    """``draw_change`` on PostgreSQL: the row is named by its ``ctid``."""
    with _pg_connect(url) as conn:
        return _draw(conn, rng, _POSTGRES)


def caught_pg(url: str, change: Change) -> tuple[bool, str] | None:
    """Make ``change`` with the triggers off and commit it; verify; put the value back.
    ``None`` when the database refuses the change (a unique key would repeat, a number overflow)."""
    import psycopg

    def update(ctid: str, value: object) -> str:
        with _pg_connect(url) as conn, conn.transaction():
            conn.execute("SET LOCAL session_replication_role = replica")
            row = conn.execute(f'UPDATE {change.table} SET "{change.column}" = %s WHERE ctid = %s::tid RETURNING ctid::text',
                               (value, ctid)).fetchone()
            return str(row[0])

    try:
        changed_at = update(str(change.rowid), change.after)
    except (psycopg.errors.IntegrityError, psycopg.errors.DataError):
        return None
    try:
        return verified(url, change)
    finally:
        update(changed_at, change.before)


def run(changes: int, seed: int, directory: Path, postgres_url: str | None = None
        ) -> tuple[Counter[str], Counter[str], list[str]]:
    """``changes`` changes to the SQLite store (or, given ``postgres_url``, a PostgreSQL one)."""
    url = postgres_url or str(build_store(directory))
    if postgres_url is not None:
        fill_store(postgres_url, directory)
    with Store.open(url, read_only=True) as store:
        assert not verify_store(store).problems, "the pristine store must verify clean"
    rng = random.Random(seed)
    made: Counter[str] = Counter()
    found: Counter[str] = Counter()
    missed: list[str] = []
    while sum(made.values()) < changes:
        if postgres_url is not None:
            change = draw_pg_change(postgres_url, rng)
            outcome = caught_pg(postgres_url, change)
        else:
            change = draw_change(Path(url), rng)
            outcome = caught(Path(url), change, directory / "scratch.db")
        if outcome is None:
            continue
        made[change.table] += 1
        ok, how = outcome
        if ok:
            found[change.table] += 1
        else:
            missed.append(f"{change.describe()}: {change.before!r:.60} -> {change.after!r:.60} ({how or 'no problem'})")
    with Store.open(url, read_only=True) as store:  # on PostgreSQL every change was put back
        assert not verify_store(store).problems, "the store must verify clean again after the run"
    return made, found, missed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--changes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--port", type=int, default=55436, help="port of the throw-away PostgreSQL cluster")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.backend == "sqlite":
            made, found, missed = run(args.changes, args.seed, Path(tmp))
        else:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
            from tests.support.postgres import PostgresServer

            with PostgresServer(port=args.port) as server:
                made, found, missed = run(args.changes, args.seed, Path(tmp), server.create_database("tamper"))
    print("| table | changes | reported, naming the row |")
    print("|---|---:|---:|")
    for table in sorted(made):
        print(f"| {table} | {made[table]} | {found[table]} |")
    print(f"| all | {sum(made.values())} | {sum(found.values())} |")
    for line in missed:
        print("MISSED", line)
    return 0 if not missed else 1


if __name__ == "__main__":
    sys.exit(main())
