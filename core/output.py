"""Printing for the CLI: versioned JSON documents, and rich tables for people."""

from __future__ import annotations

import json
import sys
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from scopelens.core.contracts import SCHEMA_VERSION


def plain_row(table: Table, *cells: str) -> None:
    """Add a row of data to a table: each cell as literal text, never read as rich markup
    (a title or a path with ``[/]`` in it would raise, and ``[red]`` would restyle the output)."""
    table.add_row(*(Text(cell) for cell in cells))


def literal(value: object) -> str:
    """Data put into a markup string, escaped so it prints as it is."""
    return escape(str(value))


def console() -> Console:
    """A console on stdout; wide and plain when stdout is not a terminal (pipes, files)."""
    if sys.stdout.isatty():
        return Console(highlight=False, soft_wrap=False)
    return Console(highlight=False, soft_wrap=False, width=200, color_system=None)


def progress_console() -> Console:
    """Where progress bars go: stderr, so stdout holds only the result (no stray blank line)."""
    return Console(stderr=True, highlight=False)


def shows_progress(as_json: bool = False) -> bool:
    """Progress is drawn only for a person watching a terminal, never beside JSON."""
    return not as_json and sys.stderr.isatty()


def print_json(kind: str, data: dict[str, Any]) -> None:
    """Print one JSON document with ``schema_version`` and ``kind`` first."""
    document = {"schema_version": SCHEMA_VERSION, "kind": kind, **data}
    json.dump(document, sys.stdout, ensure_ascii=False, indent=2, default=_default)
    sys.stdout.write("\n")


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if hasattr(value, "isoformat"):
        return value.isoformat().replace("+00:00", "Z")
    raise TypeError(f"cannot encode {type(value).__name__}")

