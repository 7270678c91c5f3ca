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
_BRACKETS = np.zeros(128, dtype=np.int32)
_BRACKETS[[ord(c) for c in "([{"]] = 1
_BRACKETS[[ord(c) for c in ")]}"]] = -1
"""Depth change per ASCII character (indexed by the code point, clipped to 127: DEL)."""
_SPACE = np.array([chr(c).isspace() for c in range(0x3002)], dtype=bool)
"""``str.isspace()`` per code point, indexed with codes clipped to U+3001 (every character it
is true for is below U+3001, and U+3001 itself is not one)."""


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

    def __init__(self, text: str, lines: list[str]) -> None:
        self.lines = lines
        n = len(lines)
        lengths = np.fromiter(map(len, text.splitlines(keepends=True)), dtype=np.int64, count=n)
        starts = np.zeros(n, dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        content_ends = starts + np.fromiter(map(len, lines), dtype=np.int64, count=n)
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        covered, unterminated = _covered(text, len(codes))
        # A line continues a statement when the character ending the previous line is inside
        # a string (a comment never spans a line break), when brackets are open at its
        # start, or when the previous line's last character is a backslash outside a string.
        continued = np.zeros(n, dtype=bool)
        continued[1:] = covered[starts[1:] - 1]
        delta = _BRACKETS[np.minimum(codes, 127)]
        delta[covered] = 0
        depth = np.zeros(len(codes) + 1, dtype=np.int32)
        np.cumsum(delta, out=depth[1:])
        self.balanced = bool(not unterminated and depth[-1] == 0 and int(depth.min(initial=0)) >= 0)
        """Every bracket closed in order and every string ended: what valid code has (the
        chunker treats other text as not Python)."""
        continued[1:] |= depth[starts[1:]] > 0
        last_chars = content_ends[:-1] - 1
        has_char = last_chars >= starts[:-1]
        safe = np.where(has_char, last_chars, 0)
        continued[1:] |= has_char & (codes[safe] == _BACKSLASH) & ~covered[safe]
        # The first character that is not whitespace (as str.isspace() counts it) on each line.
        solid = np.flatnonzero(~_SPACE[np.minimum(codes, len(_SPACE) - 1)])
        at = np.searchsorted(solid, starts)
        first = np.append(solid, len(codes))[at]
        blank = first >= content_ends
        self.indent = np.where(blank, 0, first - starts)
        first_char = codes[np.minimum(first, max(len(codes) - 1, 0))]  # (blank lines: any character)
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


def _covered(text: str, n: int) -> tuple[np.ndarray, bool]:
    """``True`` at every character inside a string or a comment; and whether the text ends
    inside a string that is never closed."""
    spans = [m.span() for m in _STRINGS_AND_COMMENTS.finditer(text)]
    unterminated = bool(spans) and spans[-1][1] == len(text) and not _closed(text[spans[-1][0] :])
    delta = np.zeros(n + 1, dtype=np.int32)
    if spans:
        edges = np.array(spans, dtype=np.int64)
        delta[edges[:, 0]] += 1  # spans do not overlap: their starts are distinct, as are their ends
        delta[edges[:, 1]] -= 1
    return np.cumsum(delta[:n]) > 0, unterminated


def _closed(token: str) -> bool:
    """Whether a comment or string token (as ``_STRINGS_AND_COMMENTS`` matched it) is complete."""
    return token.startswith("#") or _CLOSED_STRING.fullmatch(token) is not None
