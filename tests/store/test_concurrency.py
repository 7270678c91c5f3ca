"""Four processes appending to the same session keep one intact chain, on both backends."""

from __future__ import annotations

import multiprocessing

from scopelens.core.store.store import Store
from scopelens.core.store.verify import verify_store
from scopelens.core.vocab import EventType

WRITERS = 4
EVENTS_EACH = 200


def _append_many(url: str, session_id: str, writer: int) -> None:
    with Store.open(url) as store:
        for n in range(EVENTS_EACH):
            store.append_event(session_id, EventType.USER_MESSAGE, {"text": f"w{writer}-{n}"})


def test_concurrent_appends_to_one_session_keep_the_chain(store_url):
    with Store.open(store_url, create=True) as store:
        session = store.create_session(project="p", session_id="s-shared")
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_append_many, args=(store_url, session.id, w)) for w in range(WRITERS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    assert [w.exitcode for w in workers] == [0] * WRITERS

    with Store.open(store_url, read_only=True) as store:
        events = store.events(session.id)
        report = verify_store(store)
    assert report.clean, report.problems
    assert len(events) == 1 + WRITERS * EVENTS_EACH
    assert [e.seq for e in events] == list(range(len(events)))
    # Each user message opened the next turn, however the writers interleaved.
    assert [e.turn for e in events] == list(range(len(events)))
    texts = sorted(e.payload["text"] for e in events[1:])
    assert texts == sorted(f"w{w}-{n}" for w in range(WRITERS) for n in range(EVENTS_EACH))
    # Each writer's own events stay in the order it wrote them.
    for w in range(WRITERS):
        mine = [int(e.payload["text"].split("-")[1]) for e in events[1:] if e.payload["text"].startswith(f"w{w}-")]
        assert mine == list(range(EVENTS_EACH))
