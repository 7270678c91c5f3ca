"""A store opened before ``os.fork()`` keeps working in both processes: the child never uses,
nor closes, a connection of its parent's (they would talk over one socket at once, or the
child's close would end the parent's session), nor pings one from its pool (the run that hung:
the parent waited for an answer the child's pre-ping had read)."""

from __future__ import annotations

import gc
import os

import pytest
from sqlalchemy import event

from scopelens.core.store.store import Store
from scopelens.core.store.verify import verify_store
from scopelens.core.vocab import EventType

APPENDS = 40


def _append(store: Store, session_id: str, tag: str) -> None:
    for n in range(APPENDS):
        store.append_event(session_id, EventType.USER_MESSAGE, {"text": f"{tag} {n}"})


def _idle_of_other_processes(store: Store) -> int:
    """Connections waiting in the store's pool that another process opened. (The pool's queue is
    SQLAlchemy's internal: its public API gives only their number.)"""
    idle = getattr(store.engine.pool, "_pool", None)
    records = list(idle.queue) if idle is not None else []
    return sum(record.info.get("pid") not in (None, os.getpid()) for record in records)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX")
def test_a_forked_child_appends_beside_its_parent_and_closes_without_harming_it(store_url) -> None:
    with Store.open(store_url, create=True) as store:
        parent_session = store.create_session(project="p", session_id="parent", title="parent")
        child_session = store.create_session(project="p", session_id="child", title="child")
        store.append_event(parent_session.id, EventType.USER_MESSAGE, {"text": "before the fork"})
        before = len(store.events(child_session.id))  # a pooled connection used before the fork, too
        parent_before = len(store.events(parent_session.id))
        connected_in: list[int] = []
        event.listen(store.engine, "connect", lambda *_: connected_in.append(os.getpid()))
        pid = os.fork()
        if pid == 0:  # the child: append, read, close; exit status says whether all went well
            code = 1
            try:
                _append(store, child_session.id, "child")
                gc.collect()  # the parent's append connection, forgotten here, must not come back
                if _idle_of_other_processes(store):  # a checkout would ping over the parent's socket
                    os._exit(4)
                code = 0 if len(store.events(child_session.id)) == before + APPENDS else 2
                if os.getpid() not in connected_in:  # it used a connection of its parent's
                    code = 3
                store.close()
            finally:
                os._exit(code)
        _append(store, parent_session.id, "parent")  # at the same time as the child
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        # The parent's connections survived the child's appends and its close.
        store.append_event(parent_session.id, EventType.USER_MESSAGE, {"text": "after the child"})
        assert len(store.events(parent_session.id)) == parent_before + APPENDS + 1
        assert len(store.events(child_session.id)) == before + APPENDS
        report = verify_store(store)
    assert report.clean, report.problems
