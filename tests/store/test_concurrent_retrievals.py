"""Concurrent retrievals into shared sessions: nothing lost, no turn given twice, verify clean
while they run ([9/9] item 1; the full volume is ``python -m bench.concurrency``)."""

from __future__ import annotations

from bench.concurrency import prepare_store, run_volume
from scopelens.core.contracts import RetrievalIntent
from scopelens.core.pipeline.retriever import Retriever
from scopelens.core.store.store import Store
from scopelens.core.vocab import EventType

PROCESSES = 4
RETRIEVALS_EACH = 6


def test_concurrent_retrievals_into_shared_sessions_get_distinct_ordered_turns(store_url, tmp_path):
    root = tmp_path / "ws"
    sessions = prepare_store(store_url, root, 2, files=30)
    result = run_volume(store_url, root, sessions, PROCESSES, RETRIEVALS_EACH)
    assert result.problems == []
    assert result.returned == result.stored == PROCESSES * RETRIEVALS_EACH
    assert (result.lost, result.duplicated_turns, result.out_of_order) == (0, 0, 0)
    assert result.verify_runs_during >= 1
    assert result.verify_clean_after


def test_a_retrieval_without_a_turn_answers_the_open_turn_once_then_opens_the_next(tmp_path):
    root = tmp_path / "ws"
    url = str(tmp_path / "store.db")
    (session_id,) = prepare_store(url, root, 1, files=10)
    with Store.open(url) as store:
        retriever = Retriever(store, workspace_root=root)

        def retrieve() -> int:
            observation = retriever.retrieve(RetrievalIntent(question="json decoder"), project="conc", session_id=session_id)
            return observation.snapshot.turn

        first, second = retrieve(), retrieve()
        store.append_event(session_id, EventType.USER_MESSAGE, {"text": "and now?"})
        after_message = retrieve()
        turns = {s.snapshot.id: s.snapshot.turn for s in store.snapshots_of(session_id)}
        stored = {e.payload["snapshot_id"]: e.turn for e in store.events(session_id)
                  if e.type == EventType.RETRIEVAL_SNAPSHOT_CREATED}
    # The session had no user message: the first retrieval is turn 1, the next opens turn 2;
    # a user message opens turn 3, which the retrieval after it answers.
    assert (first, second, after_message) == (1, 2, 3)
    assert sorted(turns.values()) == [1, 2, 3]
    assert stored == turns
