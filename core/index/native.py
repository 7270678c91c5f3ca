"""The indexer's compiled part (``_compiled.c``: term counting and postings packing), or
``None`` where the install did not build it (no C compiler): then the Python code, which is
its specification, does the same work, several times slower."""

from __future__ import annotations

__all__ = ["compiled"]

try:
    from scopelens.core.index import _compiled as compiled
except ImportError:  # pragma: no cover - CI builds it, and a test requires that there
    compiled = None  # type: ignore[assignment]  # the module or None, as the doc says
