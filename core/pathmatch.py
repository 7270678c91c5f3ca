"""Path prefixes, one definition: a path is under a prefix when it equals it or lies inside it.

Prefixes are workspace-relative and compared as whole path segments (``src/a`` holds
``src/a/x.py`` but not ``src/ab.py``). Leading and trailing slashes are ignored, and an empty
prefix holds every path.
"""

from __future__ import annotations

from collections.abc import Iterable


def normalise_prefix(prefix: str) -> str:
    """``prefix`` without leading or trailing slashes (empty means the whole workspace)."""
    return prefix.strip("/")


def under_prefix(path: str, prefix: str) -> bool:
    wanted = normalise_prefix(prefix)
    return not wanted or path == wanted or path.startswith(wanted + "/")


def under_any(path: str, prefixes: Iterable[str]) -> bool:
    return any(under_prefix(path, prefix) for prefix in prefixes)
