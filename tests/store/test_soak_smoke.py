"""The soak bench's smoke run: every process works without an error on both backends
([9/9] item 7; the 10-minute run is ``python -m bench.soak``)."""

from __future__ import annotations

from bench.soak import ROLES, run_soak


def test_retrieve_drift_and_verify_together_make_no_error(store_url, tmp_path):
    figures = run_soak(store_url, tmp_path / "ws", seconds=4.0, files=30)
    assert sorted(f.role for f in figures) == sorted(ROLES)
    assert [f.first_error for f in figures if f.errors] == []
    assert all(f.operations > 0 for f in figures), [(f.role, f.operations) for f in figures]
    assert all(f.rss_end_mib > 0 for f in figures)
