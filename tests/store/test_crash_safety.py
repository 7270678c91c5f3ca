"""A process killed inside a write leaves the store whole ([9/9] item 2).

Each fault-injection point (``core/store/faults.py``) is reached by a workload and killed there
by SIGKILL; random kills after a ready handshake; a session a writer left half-way is reported
as interrupted, not as damage. The full run is ``python -m bench.kill_fuzz``.
"""

from __future__ import annotations

import random

import pytest

from bench.kill_fuzz import KILLS_AT, check_point, check_random, point_matrix, prepare
from scopelens.core.cli import main
from scopelens.core.contracts import ToolStartedPayload
from scopelens.core.store.faults import POINTS
from scopelens.core.store.store import Store
from scopelens.core.store.verify import verify_store
from scopelens.core.vocab import EventType


def test_every_fault_point_is_in_the_kill_matrix():
    assert set(KILLS_AT) == set(POINTS)


def test_a_kill_at_every_point_leaves_the_store_as_it_was_and_writable(tmp_path):
    lab = prepare(f"sqlite:///{tmp_path}/store.db", tmp_path / "ws")
    problems = [p for point, workload in point_matrix() for p in check_point(lab, point, workload)]
    assert problems == []


def test_a_kill_at_every_point_on_postgresql(postgres_url, tmp_path):
    lab = prepare(postgres_url, tmp_path / "ws")
    problems = [p for point, workload in point_matrix("postgresql", subset=True) for p in check_point(lab, point, workload)]
    assert problems == []


@pytest.mark.parametrize("kills", [6])
def test_random_kills_lose_nothing_reported_committed(store_url, tmp_path, kills):
    lab = prepare(store_url, tmp_path / "ws")
    rng = random.Random(20261203)
    results = [check_random(lab, rng) for _ in range(kills)]
    assert [p for problems, _, _ in results for p in problems] == []
    assert sum(count for _, count, _ in results) > 0  # the kills landed among committed writes


def test_a_tool_call_left_open_is_reported_interrupted_not_corrupt(tmp_path, capsys):
    url = str(tmp_path / "store.db")
    with Store.open(url, create=True) as store:
        session = store.create_session(project="p", session_id="s-cut")
        store.create_session(project="p", session_id="s-empty")
        store.append_event(session.id, EventType.TOOL_STARTED, ToolStartedPayload(call_id="c-1", tool="bash"))
        report = verify_store(store)
    assert report.clean
    assert sorted((p.kind, p.record) for p in report.interrupted) == [
        ("interrupted", "event s-cut#1"), ("interrupted", "session s-empty")
    ]
    assert main(["verify", "--db", url]) == 0
    out = capsys.readouterr().out
    assert "interrupted (not damage): event s-cut#1: tool call c-1 started and its end was never written" in out
    assert "clean" in out
