"""A derandomized sample of ``python -m bench.tamper_fuzz`` (which makes 1,000 and more):
random single-byte changes to column values of every audited table, each reported by verify,
naming the row, on SQLite and on PostgreSQL."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bench.tamper_fuzz import build_store, caught, draw_change, run

SEED = 20261203
CHANGES = 60
PG_CHANGES = 25


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("tamper"))


def test_every_single_byte_change_is_reported_naming_its_row(pristine: Path, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    made, missed = 0, []
    tables = set()
    while made < CHANGES:
        change = draw_change(pristine, rng)
        outcome = caught(pristine, change, tmp_path / "scratch.db")
        if outcome is None:  # the database refused it (a unique key)
            continue
        made += 1
        tables.add(change.table)
        if not outcome[0]:
            missed.append(f"{change.describe()}: {outcome[1] or 'no problem'}")
    assert missed == []
    assert len(tables) >= 7  # the sample reaches most audited tables


def test_every_single_byte_change_on_postgresql_is_reported_naming_its_row(postgres_url: str, tmp_path: Path) -> None:
    made, found, missed = run(PG_CHANGES, SEED, tmp_path, postgres_url)  # also checks each change was put back
    assert missed == []
    assert sum(made.values()) == sum(found.values()) == PG_CHANGES
    assert len(made) >= 6
