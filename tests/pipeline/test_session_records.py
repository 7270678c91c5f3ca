"""Session records give recall and the probe what scoring a freshly read pool gives.

``SessionRecords`` reads each event once and scores a scope's own session (recall) or the
withheld sessions (the probe) with masks over postings; the reference (``_old_pool``) reads
the sessions' events one by one, judges each as recall and the probe did before, and scores
the pool with ``bm25_scores``. On
many stores (sessions, branches, roots, artifacts under and outside path prefixes, events
across time) and scopes, both give the same rejections, in the same order, with the same
reasons; events appended after a first probe are seen by the next.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

import pytest

from scopelens.core.contracts import (
    ArtifactRef,
    RejectedItem,
    RetrievalScope,
    SubQuery,
    TimeBoundary,
    ToolFinishedPayload,
    WeightedTerm,
)
from scopelens.core.hashing import text_hash
from scopelens.core.index.scorer import Scorer
from scopelens.core.index.small_bm25 import bm25_scores
from scopelens.core.pipeline.policy import Policy
from scopelens.core.pipeline.recall import Recall, TimeWindow, time_window
from scopelens.core.pipeline.session_evidence import (
    RECALLED_EVENT_TYPES,
    artifact_refs,
    artifact_windows,
    artifact_withheld,
    event_text,
    project_sessions,
    session_withheld,
)
from scopelens.core.pipeline.session_records import session_records
from scopelens.core.vocab import EventType, EvidenceKind, Source, Stage, SubQueryIntent
from tests.support.workspaces import T0, Lab

WORDS = (
    "admin", "role", "mock", "session", "token", "expired", "refresh", "retry", "cache", "parser", "failed",
    "expected", "received", "undefined",
)
SESSION_SOURCES = frozenset({Source.SESSION_EVENT, Source.ARTIFACT})


@dataclass(frozen=True)
class _Entry:
    candidate_id: str
    source: Source
    text: str
    reason: str | None
    source_ref: str
    source_version: str
    path: str | None = None
    line_start: int | None = None
    line_end: int | None = None


def _old_pool(lab: Lab, scope: RetrievalScope, window: TimeWindow, *, withheld: bool) -> list[_Entry]:
    """The pool as recall and the probe built it before the records: every event of the
    sessions concerned, read and judged one by one, in store order."""
    sessions = project_sessions(lab.store, scope.project)
    reasons = {s.id: session_withheld(s, scope) for s in sessions}
    to_read = [sid for sid, reason in reasons.items() if (reason is not None) == withheld or scope.path_prefixes]
    events = sorted(
        (e for sid in to_read for e in lab.store.events(sid) if e.type in RECALLED_EVENT_TYPES),
        key=lambda e: e.store_seq,
    )
    pool: list[_Entry] = []
    for event in events:
        if not window.admits(event.created_at):
            continue
        session_reason = reasons[event.session_id]
        refs = artifact_refs(event)
        artifact_reasons = [session_reason or artifact_withheld(ref.name, scope) for ref in refs]
        text = event_text(event)
        previewed = next((f"previews artifact {ref.name}: {reason}" for ref, reason in zip(refs, artifact_reasons, strict=True)
                          if reason is not None), None)
        reason = session_reason or previewed
        if text and (reason is not None) == withheld:
            pool.append(_Entry(f"event:{event.session_id}#{event.seq}", Source.SESSION_EVENT, text, reason,
                               f"{event.session_id}#{event.seq}", text_hash(text)))
        for ref, ref_reason in zip(refs, artifact_reasons, strict=True):
            if (ref_reason is not None) == withheld:
                for first, last, window_text in artifact_windows(lab.store.get_blob(ref.blob).decode("utf-8", "replace")):
                    pool.append(_Entry(f"artifact:{ref.blob[:16]}:{first}-{last}", Source.ARTIFACT, window_text, ref_reason,
                                       f"{ref.name}:{first}-{last}", ref.blob, ref.name, first, last))
    return pool


def _ranked(
    pool: list[_Entry], sources: frozenset[Source], terms: list[tuple[str, float]], top_k: int
) -> list[tuple[_Entry, float]]:
    entries = [entry for entry in pool if entry.source in sources]
    scores = bm25_scores(terms, [entry.text for entry in entries])
    ranked = sorted(((s, e) for s, e in zip(scores, entries, strict=True) if s > 0), key=lambda t: (-t[0], t[1].candidate_id))
    return [(entry, score) for score, entry in ranked[:top_k]]


def _reference(lab: Lab, scope: RetrievalScope, window: TimeWindow, sources: frozenset[Source],
               terms: list[tuple[str, float]]) -> list[RejectedItem]:
    return [
        RejectedItem(candidate_id=e.candidate_id, source=e.source, source_ref=e.source_ref, source_version=e.source_version,
                     path=e.path, line_start=e.line_start, line_end=e.line_end, stage=Stage.OUT_OF_SCOPE,
                     reason=e.reason, from_probe=True)
        for e, _score in _ranked(_old_pool(lab, scope, window, withheld=True), sources, terms, 3)
    ]


def _fill(lab: Lab, rng: random.Random, sessions: list[str], events: int) -> None:
    for n in range(events):
        session = rng.choice(sessions)
        text = " ".join(rng.choices(WORDS, k=rng.randint(0, 9)))
        if rng.random() < 0.3:
            names = rng.sample(["test-output.log", "ops/deploy.log", "src/auth/run.log", "logs/ci.txt"], rng.randint(1, 2))
            refs = []
            for name in names:
                data = "\n".join(" ".join(rng.choices(WORDS, k=5)) for _ in range(rng.randint(1, 70))).encode()
                refs.append(ArtifactRef(blob=lab.store.put_blob(data), name=name, size=len(data),
                                        evidence_kind=EvidenceKind.TEST_LOG))
            payload = ToolFinishedPayload(call_id=f"c{n}", tool="pytest", exit_code=1, output_preview=text,
                                          artifacts=tuple(refs))
            lab.store.append_event(session, EventType.TOOL_FINISHED, payload)
        else:
            kind = rng.choice([EventType.USER_MESSAGE, EventType.MODEL_RESPONSE])
            lab.store.append_event(session, kind, {"text": text})


@pytest.mark.parametrize("seed", range(4))
def test_records_match_a_freshly_scored_pool(tmp_path, seed: int) -> None:
    rng = random.Random(seed)
    lab = Lab(tmp_path)
    try:
        sessions = []
        for k in range(5):
            header = lab.store.create_session(
                project=rng.choice(["auth", "auth", "billing"]), branch=rng.choice([None, "main", "dev"]),
                workspace_root=rng.choice([None, "/ws/a", "/ws/b"]), session_id=f"s{k}", title=f"s{k}",
            )
            sessions.append(header.id)
        scorer = Scorer(lab.store)
        records = session_records(lab.store, scorer)
        found: list[RejectedItem] = []
        recalled_any = 0
        for round_ in range(2):  # the second round appends events after a first probe
            _fill(lab, rng, sessions, 40)
            for _ in range(12):
                as_of = rng.choice([None, T0 + timedelta(minutes=rng.randint(0, 120))])
                scope = RetrievalScope(
                    project=rng.choice(["auth", "billing", "nobody"]),
                    session_id=rng.choice([None, *sessions]),
                    branch=rng.choice([None, "main"]),
                    workspace_root=rng.choice([None, "/ws/a"]),
                    path_prefixes=rng.choice([(), ("src",), ("ops", "logs")]),
                    time_boundary=TimeBoundary(as_of=as_of),
                )
                window = time_window(scope, lab.clock.now())
                withheld = records.withheld(scope, window)
                for sources in (SESSION_SOURCES, frozenset({Source.ARTIFACT}), frozenset({Source.SESSION_EVENT})):
                    terms = [(t, rng.choice([1.0, 2.0, 0.5])) for t in rng.sample(WORDS, rng.randint(1, 4))]
                    hits = withheld.hits(sources, terms, 3)
                    assert hits == _reference(lab, scope, window, sources, terms), round_
                    found += hits
                    sub_query = SubQuery(id="q1", intent=SubQueryIntent.FIND_ERROR, query_text="t", sources=tuple(sources),
                                         terms=tuple(WeightedTerm(term=t, weight=w) for t, w in terms), top_k=5)
                    recalled = Recall(lab.store, scorer, Policy())._session_candidates(sub_query, scope, window, terms)
                    expected = _ranked(_old_pool(lab, scope, window, withheld=False), sources, terms, 5)
                    assert [(c.id, c.text, c.source_ref, c.source_version, c.scores.lexical) for c in recalled] == [
                        (e.candidate_id, e.text, e.source_ref, e.source_version, score) for e, score in expected
                    ]
                    recalled_any += bool(recalled)
        # the comparisons were not vacuous: withheld events and artifacts, for both kinds of reason
        assert {item.source for item in found} == SESSION_SOURCES
        assert any("outside the scope (session" in item.reason for item in found)
        assert any("prefixes" in item.reason for item in found)
        assert recalled_any
        scorer.close()
    finally:
        lab.close()
