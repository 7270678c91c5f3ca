"""One definition each: path prefixes, stored and displayed times, score names; and the errors
that used to be swallowed (a bad ignore line, a missing artifact, a failing drift) surface."""

from __future__ import annotations

import sqlite3
import unicodedata
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scopelens.core.clock import parse_stored_time, stored_time, when
from scopelens.core.contracts import (
    SCORE_COLUMNS,
    SCORE_COMPONENTS,
    ArtifactRef,
    RetrievalIntent,
    ScoreBreakdown,
    ToolFinishedPayload,
)
from scopelens.core.errors import IntegrityError
from scopelens.core.index.scorer import _prefix_ranges
from scopelens.core.index.tokenizer import tokenize
from scopelens.core.index.walker import walk_workspace
from scopelens.core.pathmatch import under_any, under_prefix
from scopelens.core.pipeline.planner import weighted_terms
from scopelens.core.pipeline.trim import estimate_tokens
from scopelens.core.vocab import EventType, Purpose
from tests.support.workspaces import AUTH_FILES, Lab

SEGMENTS = st.sampled_from(["a", "ab", "b", "a.py", "src", "x y", "é"])
PATHS = st.lists(SEGMENTS, min_size=1, max_size=3).map("/".join)
PREFIXES = st.one_of(PATHS, PATHS.map(lambda p: f"/{p}/"), st.sampled_from(["", "/"]))


@given(paths=st.lists(PATHS, unique=True, max_size=12), prefixes=st.lists(PREFIXES, min_size=1, max_size=3))
def test_the_scorers_prefix_ranges_select_exactly_the_paths_under_a_prefix(paths, prefixes):
    """The vectorised matcher (bisect over sorted paths) agrees with the one definition."""
    ordered = sorted(paths)
    chosen = {i for lo, hi in _prefix_ranges(ordered, prefixes) for i in range(lo, hi)}
    assert chosen == {i for i, path in enumerate(ordered) if under_any(path, prefixes)}


def test_under_prefix_matches_whole_segments_only():
    assert under_prefix("src/a/x.py", "src/a") and under_prefix("src/a", "/src/a/")
    assert not under_prefix("src/ab.py", "src/a")
    assert under_prefix("anything/at/all.py", "/") and under_prefix("x", "")


@given(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)))
def test_stored_times_round_trip_and_sort_as_text(moment):
    text = stored_time(moment)
    assert parse_stored_time(text) == moment
    later = stored_time(moment + timedelta(microseconds=1))
    assert len(text) == len(later) and text < later


def test_human_times_are_utc_to_the_second():
    moment = datetime(2026, 3, 1, 10, 0, 5, 123456, tzinfo=timezone(timedelta(hours=2)))
    assert when(moment) == "2026-03-01T08:00:05Z"


def test_score_names_come_from_the_contract():
    assert tuple(ScoreBreakdown.model_fields) == SCORE_COLUMNS
    assert SCORE_COLUMNS[-1] == "final" and SCORE_COLUMNS[:-1] == SCORE_COMPONENTS


def test_a_bad_ignore_pattern_is_reported_not_dropped_silently(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "keep.py").write_text("x = 1\n")
    (tmp_path / "src" / "drop.log").write_text("noise\n")
    (tmp_path / ".gitignore").write_text("*.log\n!\n")
    (tmp_path / "src" / ".gitignore").write_text("[z-a]\n")
    result = walk_workspace(tmp_path)
    assert [f.rel_path for f in result.files] == [".gitignore", "src/.gitignore", "src/keep.py"]
    problems = {s.rel_path: s for s in result.skipped}
    assert set(problems) == {".gitignore:2", "src/.gitignore:1"}
    assert all(s.reason == "bad-ignore-pattern" for s in problems.values())
    assert problems[".gitignore:2"].message.startswith("dropped a bad ignore pattern at .gitignore:2: '!'")


def test_a_missing_artifact_fails_the_retrieval_instead_of_being_skipped(tmp_path):
    lab = Lab(tmp_path)
    root = lab.workspace("ws", AUTH_FILES)
    lab.index(root, "auth")
    session = lab.store.create_session(project="auth", session_id="s-art", title="role mock")
    lab.store.append_event(session.id, EventType.USER_MESSAGE, {"text": "the admin mock has no role"})
    missing = ArtifactRef(blob="ab" * 32, name="pytest.log", size=10)
    lab.store.append_event(
        session.id, EventType.TOOL_FINISHED, ToolFinishedPayload(call_id="c1", tool="pytest", artifacts=(missing,))
    )
    intent = RetrievalIntent(purpose=Purpose.FIX_TEST, question="why does the admin mock have no role")
    with pytest.raises(IntegrityError, match=r"pytest\.log.*missing from the store"):
        lab.retriever(root=root).retrieve(intent, project="auth", session_id=session.id)
    lab.close()
    with sqlite3.connect(tmp_path / "lab.db") as conn:
        assert conn.execute("SELECT count(*) FROM snapshots").fetchone() == (0,)



CJK_NEIGHBOURHOODS = (
    (0x1000, 0x1300), (0x2E80, 0xA000), (0xA960, 0xA980), (0xAC00, 0xD800), (0xF900, 0xFB00), (0xFF00, 0xFFF0),
    (0x1B000, 0x1B170), (0x20000, 0x20080), (0x2A6D0, 0x2A720), (0x31340, 0x31360),
)
"""The CJK blocks and what borders them."""


def test_one_cjk_table_for_the_tokenizer_the_planner_and_the_token_estimate():
    """A character the tokenizer bigrams as CJK is one token to the trimmer's estimate and a
    word of its own to the planner, however short; any other character is neither."""
    disagree = []
    for code in (c for lo, hi in CJK_NEIGHBOURHOODS for c in range(lo, hi)):
        ch = chr(code)
        if unicodedata.normalize("NFKC", ch) != ch or not ch.isprintable():
            continue
        tokenized_as_cjk = tokenize(f"{ch}x") == [ch, "x"]  # a CJK run ends where a word starts
        estimated_as_cjk = estimate_tokens(ch * 4) == 4
        planned_as_cjk = bool(weighted_terms(RetrievalIntent(question=ch * 2)))
        if not tokenized_as_cjk == estimated_as_cjk == planned_as_cjk:
            disagree.append(f"U+{code:04X} {ch}: tokenizer {tokenized_as_cjk}, trim {estimated_as_cjk}, planner {planned_as_cjk}")
    assert disagree == []
