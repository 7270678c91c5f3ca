"""Store.batch: the events a batch writes are the ones append_event writes, link for link,
and a batch that fails writes nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scopelens.core.contracts import SessionHeader
from scopelens.core.errors import InvalidInputError
from scopelens.core.store.store import Store
from scopelens.core.store.verify import verify_store
from scopelens.core.vocab import EventType

START = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
MESSAGES = ["first", "second", "third"]


def test_a_batch_chains_events_exactly_as_appending_them_one_by_one(tmp_path, store_url):
    with Store.open(str(tmp_path / "one-by-one.db"), create=True) as store:
        store.create_session(project="p", session_id="s-1", created_at=START)
        for n, text in enumerate(MESSAGES, start=1):
            store.append_event("s-1", EventType.USER_MESSAGE, {"text": text}, turn=n, created_at=START + timedelta(n))
        expected = [(e.seq, e.store_seq, e.turn, e.prev_hash) for e in store.events("s-1")]
        expected_head = store.store_head()
    with Store.open(store_url, create=True) as store:
        with store.batch() as batch:
            batch.create_session(SessionHeader(id="s-1", project="p", created_at=START))
            for n, text in enumerate(MESSAGES, start=1):
                batch.append("s-1", EventType.USER_MESSAGE, {"text": text}, turn=n, created_at=START + timedelta(n))
        assert [(e.seq, e.store_seq, e.turn, e.prev_hash) for e in store.events("s-1")] == expected
        assert store.store_head() == expected_head
        [summary] = store.list_sessions()
        assert (summary.turns, summary.events) == (3, 4)
        # a batch appending to a session that exists continues its chain
        with store.batch() as batch:
            batch.append("s-1", EventType.USER_MESSAGE, {"text": "fourth"}, turn=4, created_at=START + timedelta(4))
        assert [e.seq for e in store.events("s-1")] == [0, 1, 2, 3, 4]
        assert verify_store(store).clean


def test_a_batch_that_fails_writes_nothing(store_url):
    with Store.open(store_url, create=True) as store:
        head = store.store_head()
        with pytest.raises(InvalidInputError, match=r"user\.message payload"), store.batch() as batch:
            batch.create_session(SessionHeader(id="s-1", project="p", created_at=START))
            batch.append("s-1", EventType.USER_MESSAGE, {"text": "fine"}, turn=1, created_at=START)
            batch.append("s-1", EventType.USER_MESSAGE, {"words": "no such field"}, turn=2, created_at=START)
        assert store.list_sessions() == [] and store.store_head() == head
        assert verify_store(store).clean
