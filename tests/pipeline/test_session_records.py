"""The probe's session records give what scoring a freshly read pool gives.

``SessionRecords`` reads each event once and scores withheld sessions with masks over
postings; the reference reads the withheld sessions' events, builds the pool with
``SessionPool.candidates`` and scores it with ``bm25_scores``, as the probe did before. On
many stores (sessions, branches, roots, artifacts under and outside path prefixes, events
across time) and scopes, both give the same rejections, in the same order, with the same
reasons; events appended after a first probe are seen by the next.
"""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from scopelens.core.contracts import ArtifactRef, RejectedItem, RetrievalScope, TimeBoundary, ToolFinishedPayload
from scopelens.core.index.scorer import Scorer
from scopelens.core.index.small_bm25 import bm25_scores
from scopelens.core.pipeline.policy import Policy
from scopelens.core.pipeline.recall import (
    SessionPool,
    TimeWindow,
    project_sessions,
    read_events,
    session_withheld,
    time_window,
)
from scopelens.core.pipeline.session_records import session_records
from scopelens.core.vocab import EventType, EvidenceKind, Source, Stage
from tests.support.workspaces import T0, Lab

WORDS = (
    "admin", "role", "mock", "session", "token", "expired", "refresh", "retry", "cache", "parser", "failed",
    "expected", "received", "undefined",
)
SESSION_SOURCES = frozenset({Source.SESSION_EVENT, Source.ARTIFACT})


def _reference(lab: Lab, scope: RetrievalScope, window: TimeWindow, sources: frozenset[Source],
               terms: list[tuple[str, float]]) -> list[RejectedItem]:
    sessions = project_sessions(lab.store, scope.project)
    reasons = {s.id: session_withheld(s, scope) for s in sessions}
    to_read = [sid for sid, reason in reasons.items() if reason is not None or scope.path_prefixes]
    withheld = {sid: reason for sid, reason in reasons.items() if reason is not None}
    pool = SessionPool(lab.store, Policy()).candidates(
        read_events(lab.store, to_read), SESSION_SOURCES, scope, window, withheld, withheld=True
    )
    entries = [(c, r) for c, r in pool if c.source in sources]
    scores = bm25_scores(terms, [c.text for c, _ in entries])
    ranked = sorted(((s, c, r) for s, (c, r) in zip(scores, entries, strict=True) if s > 0),
                    key=lambda t: (-t[0], t[1].id))[:3]
    return [
        RejectedItem(candidate_id=c.id, source=c.source, source_ref=c.source_ref, source_version=c.source_version,
                     path=c.path, line_start=c.line_start, line_end=c.line_end, stage=Stage.OUT_OF_SCOPE,
                     reason=r, from_probe=True)
        for _s, c, r in ranked if r is not None
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
        # the comparisons were not vacuous: withheld events and artifacts, for both kinds of reason
        assert {item.source for item in found} == SESSION_SOURCES
        assert any("outside the scope (session" in item.reason for item in found)
        assert any("prefixes" in item.reason for item in found)
        scorer.close()
    finally:
        lab.close()
