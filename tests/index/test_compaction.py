"""Compaction merges index segments by size tiers and changes no search result: not the
current one, not one pinned to an earlier time, not one of another line; a scorer that cached
a view before a compaction sees the merged segments after it."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from scopelens.core.clock import SteppingClock
from scopelens.core.index.compaction import (
    AUTO_MAX_CHUNKS,
    MERGE_FACTOR,
    Segment,
    compact_store,
    plan_merges,
    tier,
)
from scopelens.core.index.indexer import index_workspace
from scopelens.core.index.scorer import RecallFilter, Scorer
from scopelens.core.index.timeutil import to_micros
from scopelens.core.index.tokenizer import unique_terms
from scopelens.core.store.store import Store
from scopelens.core.store.tables import IndexSegmentRow
from scopelens.core.store.verify import verify_store
from tests.support.workspaces import T0, write

QUERIES = ("session role admin", "handler request module version", "bucket refill", "note_3 edit")
NEW_QUERIES = ("ratelimit3 handler_2", "self return user")
"""Terms no search asked for before the compaction: read from the merged segments."""


def test_tiers_are_powers_of_the_merge_factor() -> None:
    assert [tier(n) for n in (0, 1, 7, 8, 63, 64, 511, 512)] == [0, 0, 0, 1, 1, 2, 2, 3]


def test_plan_merges_consecutive_segments_of_one_tier_only() -> None:
    small = [Segment(i, i, 10 * i, 10 * i + 10) for i in range(MERGE_FACTOR * MERGE_FACTOR + 3)]
    groups = plan_merges(small, max_chunks=10_000)
    merged_ids = [s.id for group in groups for s in group]
    assert merged_ids == sorted(merged_ids)  # consecutive, in order, each segment once
    for group in groups:
        assert [s.id for s in group] == list(range(group[0].id, group[-1].id + 1))
    # 67 segments of 10 chunks: 8x8 of them become one segment of 640; 3 are left as they are
    assert [len(group) for group in groups] == [MERGE_FACTOR * MERGE_FACTOR]
    assert plan_merges(small, max_chunks=10 * MERGE_FACTOR) == [
        small[k : k + MERGE_FACTOR] for k in range(0, MERGE_FACTOR * MERGE_FACTOR, MERGE_FACTOR)
    ]


def test_plan_never_merges_past_the_size_limit() -> None:
    big = Segment(0, 0, 0, 5_000)
    small = [Segment(i, i, 5_000 + i, 5_001 + i) for i in range(1, MERGE_FACTOR)]
    assert plan_merges([big, *small], max_chunks=AUTO_MAX_CHUNKS) == []
    assert plan_merges(small + small[:1], max_chunks=MERGE_FACTOR - 1) == []


def _files(version: int, edited: int) -> dict[str, str]:
    files = {
        f"src/handlers/module_{n:02d}.py": (
            f"def handler_{n}(request):\n    return {{'module': {n}, 'version': {version if n == edited else 0}}}\n\n\n"
            f"class RateLimit{n}:\n    bucket = {n}\n\n    def refill(self):\n        return self.bucket\n"
        )
        for n in range(6)
    }
    files["src/auth/session.py"] = "def session_role(user):\n    return 'admin' if user.admin else 'user'\n"
    files[f"notes/note_{version % 5}.md"] = f"# note_{version % 5} edit {version}\n\nsession role bucket\n"
    return files


def _hits(scorer: Scorer, flt: RecallFilter, queries: tuple[str, ...] = QUERIES) -> dict[str, list[tuple[int, float]]]:
    return {
        query: [(hit.chunk_id, hit.score) for hit in scorer.search([(t, 1.0) for t in unique_terms(query)], flt, top_k=15)]
        for query in queries
    }


def test_compaction_changes_no_result_now_or_at_any_earlier_time(tmp_path: Path, store_url: str) -> None:
    """Many one-file runs (auto-compaction off), searched now and as of several earlier runs,
    by a scorer that cached its views; then ``compact_store``: the same hits, scores equal to
    the bit, from far fewer segments."""
    clock = SteppingClock(T0, timedelta(minutes=1))
    store = Store.open(store_url, create=True, clock=clock)
    root, other = tmp_path / "ws", tmp_path / "other"
    moments: list[datetime] = []
    try:
        for version in range(1, 3 * MERGE_FACTOR + 2):
            write(root, _files(version, version % 6))
            index_workspace(store, root, project="alpha", clock=clock, workers=0, compact=False)
            if version % 2:  # another line of the same project, interleaved
                write(other, _files(version + 100, version % 6))
                index_workspace(store, other, project="alpha", branch="b", clock=clock, workers=0, compact=False)
            moments.append(clock.now())
        filters = [RecallFilter(project="alpha", workspace_root=str(root.resolve()))] + [
            RecallFilter(project="alpha", workspace_root=str(root.resolve()), as_of_us=to_micros(moment))
            for moment in moments[:: MERGE_FACTOR // 2]
        ] + [RecallFilter(project="alpha"), RecallFilter(project=None, all_versions=True)]
        scorer = Scorer(store)
        before = [_hits(scorer, flt) for flt in filters]
        assert all(any(hits.values()) for hits in before)
        segments_before = store.count(IndexSegmentRow)

        report = compact_store(store)

        assert report.merges >= 2 and report.segments_after < report.segments_before == segments_before
        assert store.count(IndexSegmentRow) == report.segments_after
        assert [_hits(scorer, flt) for flt in filters] == before  # the same scorer: its views were replaced
        fresh = Scorer(store)
        assert [_hits(fresh, flt) for flt in filters] == before
        after = [_hits(fresh, flt, NEW_QUERIES) for flt in filters]
        assert all(any(hits.values()) for hits in after)
        assert [_hits(scorer, flt, NEW_QUERIES) for flt in filters] == after
        assert verify_store(store).clean
        # a second compaction finds nothing more to merge
        assert compact_store(store).merges == 0
        scorer.close()
        fresh.close()
    finally:
        store.close()


def test_index_runs_keep_few_segments_and_find_what_they_wrote(tmp_path: Path) -> None:
    """With compaction after each run (the default), 70 one-file runs leave a number of
    segments logarithmic in the runs, and each run's edit is found."""
    clock = SteppingClock(T0, timedelta(minutes=1))
    store = Store.open(str(tmp_path / "s.db"), create=True, clock=clock)
    root = tmp_path / "ws"
    try:
        runs = 70
        merged = 0
        for version in range(1, runs + 1):
            write(root, _files(version, version % 6))
            report = index_workspace(store, root, project="alpha", clock=clock, workers=0)
            merged += report.segments_merged
        segments = store.count(IndexSegmentRow)
        assert merged > 0
        assert segments <= 2 * (MERGE_FACTOR - 1), segments
        scorer = Scorer(store)
        hits = scorer.search([("version", 1.0), (str(runs), 1.0)], RecallFilter(project="alpha"), top_k=3, with_places=True)
        assert hits and hits[0].path == f"src/handlers/module_{runs % 6:02d}.py"
        scorer.close()
    finally:
        store.close()


@pytest.mark.parametrize("project", ["alpha", None])
def test_compact_store_by_project(tmp_path: Path, project: str | None) -> None:
    clock = SteppingClock(T0, timedelta(minutes=1))
    store = Store.open(str(tmp_path / "s.db"), create=True, clock=clock)
    try:
        for name in ("alpha", "beta"):
            for version in range(1, MERGE_FACTOR + 2):
                write(tmp_path / name, _files(version, version % 6))
                index_workspace(store, tmp_path / name, project=name, clock=clock, workers=0, compact=False)
        report = compact_store(store, project=project)
        assert [line[0] for line in report.lines] == (["alpha"] if project else ["alpha", "beta"])
        assert report.merges == len(report.lines)
    finally:
        store.close()


def test_the_all_projects_view_is_composed_and_reloads_only_what_changed(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The probe's view of every project equals loading every chunk at once (same arrays, runs
    and parts); after another project's one-file run only that project's view is loaded."""
    import numpy as np

    from scopelens.core.index import scorer as scorer_module

    clock = SteppingClock(T0, timedelta(minutes=1))
    store = Store.open(str(tmp_path / "s.db"), create=True, clock=clock)
    try:
        for version in range(1, 4):  # runs of three projects, interleaved, some merged
            for name in ("alpha", "beta", "gamma"):
                write(tmp_path / name, _files(version, version % 6))
                index_workspace(store, tmp_path / name, project=name, clock=clock, workers=0)
        scorer = Scorer(store)
        composed = scorer._view(None)
        loaded = scorer._load_view(None, composed.key)
        for name in ("chunk_ids", "valid_from", "valid_to", "source", "length"):
            assert np.array_equal(getattr(composed, name), getattr(loaded, name)), name
        assert [(s.run_id, s.lo, s.local_start, s.paths, s.symbols) for s in composed.segments] == [
            (s.run_id, s.lo, s.local_start, s.paths, s.symbols) for s in loaded.segments
        ]
        assert composed.parts == loaded.parts
        everywhere = RecallFilter(project=None, all_versions=True)
        before = _hits(scorer, everywhere)

        loads: list[str | None] = []
        original = scorer_module.Scorer._load_view
        monkeypatch.setattr(scorer_module.Scorer, "_load_view",
                            lambda self, project, key: loads.append(project) or original(self, project, key))
        write(tmp_path / "beta", _files(9, 2))
        index_workspace(store, tmp_path / "beta", project="beta", clock=clock, workers=0)
        after = _hits(scorer, everywhere)
        assert loads == ["beta"]
        assert after == _hits(Scorer(store), everywhere)
        assert after != before  # beta's edit is seen
        scorer.close()
    finally:
        store.close()
