"""Whether a workspace changed since it was last seen indexed, from a few thousand ``stat`` calls.

``stat_check`` answers the same for any process (a walk with the ignore rules, and a read of
the store): about 60 ms for 1,790 files here. A server that asks before every call keeps what
it saw instead: the size and modification time of every file the walk kept and of every
directory it entered. If none of them changed, nothing the index reads did: a file added or
removed changes its directory's time, an edited file its own, and an ignore file is a file.

Times too recent to trust (within ``TRUST_AFTER_NS`` of the moment they were read: a second
write in the same tick may keep them) make the record unusable, as in ``stat_check``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from scopelens.core.index.walker import walk_workspace

TRUST_AFTER_NS = 2_000_000_000


@dataclass(frozen=True)
class WorkspaceStats:
    """The stats of a workspace's walked files and directories at one moment."""

    paths: tuple[str, ...]
    stats: tuple[tuple[int, int], ...]
    """``(size, mtime_ns)`` per path; ``(-1, -1)`` for one that could not be read."""

    @classmethod
    def record(cls, root: Path, *, max_bytes: int) -> WorkspaceStats | None:
        """Walk ``root`` (ignore rules included) and record it; ``None`` when a time is too
        recent to be trusted."""
        walked = walk_workspace(root, max_bytes=max_bytes)
        paths = tuple([str(root / rel) for rel in walked.directories] + [str(f.abs_path) for f in walked.files])
        recorded = cls(paths, _stats(paths))
        newest = max((mtime for _, mtime in recorded.stats), default=0)
        return None if newest > time.time_ns() - TRUST_AFTER_NS else recorded

    def unchanged(self) -> bool:
        """Whether every recorded path has the size and time it had."""
        return _stats(self.paths) == self.stats


def _stats(paths: tuple[str, ...]) -> tuple[tuple[int, int], ...]:
    found = []
    for path in paths:
        try:
            stat = os.stat(path)
        except OSError:
            found.append((-1, -1))
        else:
            found.append((stat.st_size, stat.st_mtime_ns))
    return tuple(found)
