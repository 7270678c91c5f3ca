"""Fault-injection points: places inside write transactions where a test may kill this process.

``SCOPELENS_KILL_AT=NAME`` (or ``NAME:N``) sends SIGKILL to the process the first (N-th) time
it reaches the point ``NAME``: the crash-safety tests set it on a subprocess, and check that
the store opens, verifies and holds no partial record afterwards (docs/reliability.md). Only
tests set it; unset, a point is one comparison. The points and where they sit are listed in
``POINTS`` (a test checks each is reached by some command).
"""

from __future__ import annotations

import os
import signal

KILL_AT_ENV = "SCOPELENS_KILL_AT"
POINTS = (
    "write.begun",  # any write transaction, once it holds the write lock
    "write.before_commit",  # any write transaction, all written, not committed
    "session.row_written",  # a new session's rows, before its session.started event
    "snapshot.content_written",  # a snapshot's blobs and candidate rows, before the head lock
    "snapshot.row_written",  # its row, before its event
    "append.heads_locked",  # an event's chain heads read under the lock, nothing linked
    "append.linked",  # an event and both heads written, before the commit
    "batch.rows_written",  # an import's rows, before its heads move
    "index.segment_committed",  # an index run's segment committed, the run not yet live
    "index.before_final_commit",  # the run's final transaction written, not committed
)


_reached: dict[str, int] = {}


def fault_point(name: str) -> None:
    """Die here (SIGKILL, no clean-up of any kind) if ``SCOPELENS_KILL_AT`` names this point.

    The variable is read at each point (a dictionary lookup), so a forked test process can set
    it after the modules are imported."""
    target, _, nth = os.environ.get(KILL_AT_ENV, "").partition(":")
    if target != name:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] == (int(nth) if nth.isdigit() and int(nth) > 0 else 1):
        os.kill(os.getpid(), signal.SIGKILL)
