"""Recognising what a tool output shows: a file's lines, search hits, traceback frames.

Agents show files in a few shapes; these are the ones the supported formats use:

* SWE-agent's windowed editor: a ``[File: /repo/pkg/mod.py (372 lines total)]`` header, then
  numbered lines ``273:    code`` (and ``(272 more lines above)`` markers);
* ``cat -n`` form, as Claude Code's Read tool returns it: ``   293→    code`` (``→`` may be
  mojibake'd as ``â†’`` in re-serialised files) or ``   293\t    code``;
* search output: a path per line, or ``path:line:text`` hits (grep, ripgrep, SWE-agent's
  ``search_dir``/``search_file`` with ``Line 12:`` entries under a file);
* Python traceback frames: ``File "/repo/pkg/mod.py", line 17, in f``.

Paths are made relative to the session's working directory (``relative_to``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scopelens.core.errors import UnreadableFileError
from scopelens.core.importers.model import Mention

_SWE_FILE_HEADER = re.compile(r"^\[File: (?P<path>.+?) \((?P<total>\d+) lines total\)\]\s*$", re.M)
_SWE_NUMBERED = re.compile(r"^(\d+):", re.M)
_CAT_N = re.compile(r"^\s*(\d+)(?:→|â†’|\t)", re.M)
_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+)')
_HIT = re.compile(r"^(?P<path>[^\s:]+\.[A-Za-z0-9_]+):(?P<line>\d+)(?::|$)", re.M)
_INLINE = re.compile(r"(?<![\w/.:-])(?P<path>(?:[\w.-]+/)+[\w-]+\.[A-Za-z][A-Za-z0-9]{0,5})(?::(?P<line>\d+))?(?![\w/])")
"""A path named in prose (``in src/billing/totals.py:41``): a folder and a file with an
extension, not part of a URL."""
_PATH_LINE = re.compile(r"^(?P<path>/?[\w.\-]+(?:/[\w.\-]+)+)\s*$", re.M)
_LINE_ENTRY = re.compile(r"^Line (?P<line>\d+):", re.M)


@dataclass(frozen=True)
class FileView:
    """Lines of one file shown in a tool output."""

    path: str
    first: int
    last: int


def relative_to(path: str, cwd: str | None) -> str:
    """``path`` relative to ``cwd`` when it lies under it (``/repo/a/b.py`` -> ``a/b.py``);
    otherwise as given, without a leading ``./``."""
    path = path.strip().strip("\"'").replace("\\", "/")
    if path.startswith("/"):
        path = posixpath.normpath(path)
    if cwd:
        root = cwd.replace("\\", "/").rstrip("/")
        if path == root:
            return "."
        if path.startswith(root + "/"):
            return path[len(root) + 1 :]
    return path[2:] if path.startswith("./") else path


def swe_file_view(text: str, cwd: str | None) -> FileView | None:
    """The file and line range a SWE-agent editor window shows (``None``: not a window)."""
    header = _SWE_FILE_HEADER.search(text)
    if header is None:
        return None
    numbers = [int(n) for n in _SWE_NUMBERED.findall(text, header.end())]
    if not numbers:
        return None
    return FileView(relative_to(header.group("path"), cwd), min(numbers), max(numbers))


def cat_n_range(text: str) -> tuple[int, int] | None:
    """The first and last line number of ``cat -n`` style output (``None``: not that form)."""
    numbers = [int(n) for n in _CAT_N.findall(text)]
    if not numbers:
        return None
    return min(numbers), max(numbers)


def mentions_in(text: str, cwd: str | None, *, exclude: Iterable[str] = ()) -> tuple[Mention, ...]:
    """Files named in ``text``: traceback frames, ``path:line`` hits, one path per line
    (search output), paths named in prose (a folder and a file), and the ``Line N:`` entries
    SWE-agent's ``search_file`` lists under a file. In order of first appearance, each (path, line) once; ``exclude`` leaves out
    paths already shown as content."""
    skipped = set(exclude)
    found: dict[tuple[str, int | None], None] = {}

    def add(path: str, line: int | None) -> None:
        relative = relative_to(path, cwd)
        if relative not in skipped and relative != "." and not relative.startswith(("-", "(")):
            found.setdefault((relative, line), None)

    for frame in _FRAME.finditer(text):
        add(frame.group("path"), int(frame.group("line")))
    for hit in _HIT.finditer(text):
        add(hit.group("path"), int(hit.group("line")))
    for named in _INLINE.finditer(text):
        add(named.group("path"), int(named.group("line")) if named.group("line") else None)
    current: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        path_only = _PATH_LINE.match(stripped)
        if path_only is not None and ("/" in stripped or "." in stripped):
            current = path_only.group("path")
            add(current, None)
            continue
        entry = _LINE_ENTRY.match(stripped)
        if entry is not None and current is not None:
            add(current, int(entry.group("line")))
    return tuple(Mention(path, line) for path, line in found)


def parse_timestamp(value: object) -> datetime | None:
    """An ISO-8601 / RFC 3339 time (``Z`` or an offset) as aware UTC; ``None`` when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


def json_object(value: object) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (fields of unknown shape)."""
    return value if isinstance(value, dict) else {}


def json_list(value: object) -> list[Any]:
    """``value`` if it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def string(value: object) -> str:
    """``value`` if it is a string, else ``""`` (a field of unknown shape)."""
    return value if isinstance(value, str) else ""


def read_text_file(path: Path) -> str:
    """A session or instance file's text; one line naming the file when it cannot be read."""
    return decoded(path, read_file_bytes(path))


def read_file_bytes(path: Path) -> bytes:
    """A file's bytes; one line naming the file when it cannot be read."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise UnreadableFileError(f"{path}: no such file") from None
    except OSError as exc:
        raise UnreadableFileError(f"{path}: cannot be read ({exc})") from None


def decoded(path: Path, data: bytes) -> str:
    """A file's bytes as UTF-8 text; one line naming the file when they are not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableFileError(f"{path}: cannot be read ({exc})") from None
