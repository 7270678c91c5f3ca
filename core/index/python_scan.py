"""The statement structure of Python source, without parsing it.

The chunker needs, for a block of lines, where each statement starts and ends and which
ones are ``def``/``class`` (with their decorators and names). A full parse (``ast.parse``)
gives that at about 60% of the cost of indexing a Python corpus; this scanner gives the same
answer for valid code from three facts per line, found with one regular expression over
strings and comments and a few numpy passes:

* a line *continues* a statement when it starts inside a string, inside brackets, or after
  a line ending in a backslash;
* a line that does not continue one is a *logical start*: blank, a comment, or code;
* a statement of a block is a code logical start at the block's indentation, and ends at
  its last line of content (code or a continued line) before the next one.

Lines are those of ``str.splitlines()`` (so a form feed or U+2028 outside a string makes a
blank line, where Python's tokenizer sees none; inside a string it is content). Invalid
code still gets an answer: statements are found the same way, with no error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

_STRINGS_AND_COMMENTS = re.compile(
    r"#[^\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]*"
    r'|"""(?:[^"\\]+|\\.|\\\Z|"(?!""))*+(?:"""|\Z)'
    r"|'''(?:[^'\\]+|\\.|\\\Z|'(?!''))*+(?:'''|\Z)"
    r'|"(?:[^"\\\r\n]+|\\.)*+"?'
    r"|'(?:[^'\\\r\n]+|\\.)*+'?",
    re.S,
)
"""A comment, a triple-quoted string or a one-line string (string prefixes need no
matching: ``r``, ``b`` and ``f`` do not change where a string ends). Every alternative
always matches once it has started, and its loops are possessive, so no text makes the
engine backtrack."""
_SPLIT_STRINGS_AND_COMMENTS = re.compile(f"({_STRINGS_AND_COMMENTS.pattern})", re.S)
_CLOSED_STRING = re.compile(
    r'"""(?:[^"\\]+|\\.|"(?!""))*+"""'
    r"|'''(?:[^'\\]+|\\.|'(?!''))*+'''"
    r'|"(?:[^"\\\r\n]+|\\.)*+"'
    r"|'(?:[^'\\\r\n]+|\\.)*+'",
    re.S,
)
"""Complete strings only (possessive: an unclosed one fails at once instead of backtracking)."""
_HEAD = re.compile(r"[ \t]*(?:(async[ \t]+def|def)|(class))[ \t]+([^\W\d]\w*)")
_BACKSLASH = ord("\\")
_BRACKETS = np.zeros(128, dtype=np.int8)
_BRACKETS[[ord(c) for c in "([{"]] = 1
_BRACKETS[[ord(c) for c in ")]}"]] = -1
_BRACKETS_U8 = np.zeros(256, dtype=np.int8)
_BRACKETS_U8[:128] = _BRACKETS
"""Depth change per ASCII character (indexed by the code point, clipped to 127: DEL; or by a
byte of ASCII text)."""


@dataclass(frozen=True)
class Statement:
    """One statement of a block (0-based line numbers, inclusive)."""

    first: int
    """The first line: the first decorator of a decorated definition."""
    last: int
    """The last line with content (comments and blank lines after it are not counted)."""
    head: int
    """The ``def`` or ``class`` line (``first`` for other statements)."""
    kind: str | None = None
    """``"def"``, ``"class"`` or ``None``."""
    name: str | None = None


class PythonLines:
    """Per-line facts about one Python text, for finding the statements of its blocks."""

    def __init__(
        self, text: str, lines: list[str], lengths: np.ndarray | None = None, stripped: np.ndarray | None = None
    ) -> None:
        """``lines`` are ``text.splitlines()``; ``lengths``, their lengths, and ``stripped``, those
        without leading whitespace, when the caller has them already (the chunker does)."""
        self.lines = lines
        n = len(lines)
        if lengths is None:
            lengths = np.fromiter(map(len, lines), dtype=np.int64, count=n)
        if stripped is None:
            stripped = np.fromiter(map(len, map(str.lstrip, lines)), dtype=np.int64, count=n)
        starts = np.zeros(n, dtype=np.int64)
        np.cumsum(_with_breaks(text, lines, lengths)[:-1], out=starts[1:])
        content_ends = starts + lengths
        codes = _codes(text)
        strings = _Covered(text)
        # A line continues a statement when the character ending the previous line is inside
        # a string (a comment never spans a line break), when brackets are open at its
        # start, or when the previous line's last character is a backslash outside a string.
        continued = np.zeros(n, dtype=bool)
        continued[1:] = strings.covers(starts[1:] - 1)
        # Brackets outside strings and comments, and the depth after each.
        at = np.flatnonzero(_BRACKETS[np.minimum(codes, 127)] if codes.dtype != np.uint8 else _BRACKETS_U8[codes])
        at = at[~strings.covers(at)]
        depth_after = np.cumsum(_BRACKETS[np.minimum(codes[at], 127)], dtype=np.int64)
        final_depth = int(depth_after[-1]) if len(depth_after) else 0
        self.balanced = bool(not strings.unterminated and final_depth == 0 and int(depth_after.min(initial=0)) >= 0)
        """Every bracket closed in order and every string ended: what valid code has (the
        chunker treats other text as not Python)."""
        depth_before = np.zeros(len(at) + 1, dtype=np.int64)  # after 0, 1, 2... brackets
        depth_before[1:] = depth_after
        continued[1:] |= depth_before[np.searchsorted(at, starts[1:])] > 0
        last_chars = content_ends[:-1] - 1
        has_char = last_chars >= starts[:-1]
        safe = np.where(has_char, last_chars, 0)
        continued[1:] |= has_char & (codes[safe] == _BACKSLASH) & ~strings.covers(safe)
        # Leading whitespace as str.isspace() counts it (what str.lstrip() removes).
        blank = stripped == 0
        self.indent = np.where(blank, 0, content_ends - starts - stripped)
        first = np.minimum(content_ends - stripped, max(len(codes) - 1, 0))
        first_char = codes[first] if len(codes) else np.zeros(n, dtype=np.uint8)  # (blank lines: any)
        logical = ~continued & ~blank
        self.code = logical & (first_char != ord("#"))
        self.top_level = self.code & (self.indent == 0)
        self._content = np.flatnonzero(continued | self.code)

    def statements(self, lo: int, hi: int) -> list[Statement]:
        """The statements of the block whose lines are ``lo..hi-1``, at the indentation of its
        first code line (the whole text is the block ``0, len(lines)``)."""
        if lo == 0 and hi == len(self.lines):
            heads = np.flatnonzero(self.top_level).tolist()
        else:
            candidates = np.flatnonzero(self.code[lo:hi]) + lo
            if not len(candidates):
                return []
            indents = self.indent[candidates]
            heads = candidates[indents == indents[0]].tolist()
        if not heads:
            return []
        # The last line of content before the next head (or before hi), for every head.
        content = self._content
        ends = np.searchsorted(content, np.append(np.asarray(heads[1:], dtype=np.int64), hi)) - 1
        lasts = np.asarray(heads, dtype=np.int64)
        if len(content):
            lasts = np.maximum(lasts, np.where(ends >= 0, content[np.maximum(ends, 0)], -1))
        out: list[Statement] = []
        decorators: int | None = None
        for line, last in zip(heads, lasts.tolist(), strict=True):
            text = self.lines[line]
            if text.lstrip().startswith("@"):
                if decorators is None:
                    decorators = line
                continue
            found = _HEAD.match(text)
            first = line if decorators is None else decorators
            decorators = None
            if found is None:
                out.append(Statement(first, last, line))
            else:
                out.append(Statement(first, last, line, "class" if found.group(2) else "def", found.group(3)))
        if decorators is not None:  # decorators with nothing after them: an ordinary statement
            out.append(Statement(decorators, int(lasts[-1]), decorators))
        return out


class _Covered:
    """Where the strings and comments of a text are: ``covers(positions)`` says, for each
    code-point position, whether it lies inside one; ``unterminated``, whether the text ends
    inside a string that is never closed."""

    def __init__(self, text: str) -> None:
        # One split (in C) instead of a Match object per string: parts alternate text between
        # strings and comments, and the strings and comments themselves.
        parts = _SPLIT_STRINGS_AND_COMMENTS.split(text)
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)), out=offsets[1:])
        self.starts = offsets[1:-1:2]
        self.ends = offsets[2:-1:2]
        self.unterminated = len(parts) > 1 and not parts[-1] and not _closed(parts[-2])

    def covers(self, positions: np.ndarray) -> np.ndarray:
        k = np.searchsorted(self.starts, positions, side="right") - 1
        if not len(self.starts):
            return np.zeros(len(positions), dtype=bool)
        return (k >= 0) & (positions < self.ends[np.maximum(k, 0)])


_OTHER_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
"""The line breaks of ``str.splitlines()`` besides ``\\n`` (``\\r\\n`` counts as one)."""


def _with_breaks(text: str, lines: list[str], lengths: np.ndarray) -> np.ndarray:
    """The length of each line with its line break (``splitlines(keepends=True)``'s lengths):
    one more than ``lengths`` when every break is a ``\\n`` (a search for each other break
    character costs less than splitting the text again)."""
    if any(other in text for other in _OTHER_BREAKS):
        return np.fromiter(map(len, text.splitlines(keepends=True)), dtype=np.int64, count=len(lines))
    with_breaks = lengths + 1
    if len(lines) and not text.endswith("\n"):
        with_breaks[-1] -= 1
    return with_breaks


def _codes(text: str) -> np.ndarray:
    """The code points of ``text``: one byte each when it is ASCII (the usual case)."""
    if text.isascii():
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def _closed(token: str) -> bool:
    """Whether a comment or string token (as ``_STRINGS_AND_COMMENTS`` matched it) is complete."""
    return token.startswith("#") or _CLOSED_STRING.fullmatch(token) is not None
