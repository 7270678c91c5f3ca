"""Files to prepare for the index, and how they are cut into batches for worker processes.

This module imports nothing but the standard library, so ``scopelens index`` can start its
workers (``head_start.py``) before it loads numpy, SQLAlchemy and the rest of the indexer.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

POOL_MIN_BYTES = 4_000_000
"""Below this many bytes to prepare, a pool costs more to start than it saves."""
BATCH_BYTES = 250_000
"""Files are sent to workers in batches of about this many bytes."""
IN_FLIGHT_PER_WORKER = 3
"""Batches a worker holds (one being prepared, the others waiting): enough to keep it busy while the
caller writes or prepares, few enough that memory does not grow with the corpus."""
HELD_PER_WORKER = 40
"""At most this many answers of a worker are held by the indexing process, read and not yet
taken (pickled, about 0.6 MB each on the standard library): the worker is handed no more
batches until some are taken. A head start hands out as many (``HEAD_START_BATCHES`` is this):
with fewer held, the worker stood idle after a head start while the indexing process wrote
what it held."""


class FileOnDisk(NamedTuple):
    """A file to prepare, read by whichever process prepares it (a worker reads its own files:
    sending their bytes through a pipe cost the indexing process more than reading them)."""

    path: str
    """The path it is indexed under."""
    location: Path
    """Where to read it."""
    size: int
    """Its size when it was walked: only for cutting batches of about ``BATCH_BYTES``."""


ToPrepare = tuple[str, bytes] | FileOnDisk
"""A file's path and bytes, or a file to read."""


def pool_size(total_bytes: int) -> int:
    """Worker processes for ``total_bytes`` to prepare by default: one fewer than the cores (the
    indexing process prepares too), none below ``POOL_MIN_BYTES``."""
    return (os.cpu_count() or 1) - 1 if total_bytes >= POOL_MIN_BYTES else 0


def cut_batches(files: Iterable[ToPrepare]) -> Iterator[list[ToPrepare]]:
    """``files`` in order, in batches of about ``BATCH_BYTES`` (a file is never split)."""
    batch: list[ToPrepare] = []
    size = 0
    for item in files:
        batch.append(item)
        size += item_size(item)
        if size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def item_size(item: ToPrepare) -> int:
    return item.size if isinstance(item, FileOnDisk) else len(item[1])
