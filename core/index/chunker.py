"""Split a source file into chunks with exact line ranges.

Lines are those of ``str.splitlines()``, numbered from 1, and every chunk satisfies
``chunk.text == "\\n".join(text.splitlines()[chunk.start_line - 1 : chunk.end_line])``.
Every line belongs to exactly one chunk, except runs of blank lines between chunks, which
may be dropped; chunks are in order, never overlap and are never blank.

Python is chunked by its statements (one chunk per top-level function or class, big classes
split by method, module-level code in ``module`` chunks), found by ``python_scan`` without a
full parse. TypeScript, JavaScript, Go, Rust, Java, C and C++ are chunked the same way by
their tree-sitter syntax (``syntax_scan``; types get ``type`` chunks). Anything else, and
text that is not Python (a bracket or string never closed, a null byte), is cut into line
windows that prefer to end where a block ends; so is what a syntax tree leaves between
definitions when it is too big for one chunk.
"""

from __future__ import annotations

import bisect
import codecs
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scopelens.core.index.languages import language_of
from scopelens.core.index.python_scan import PythonLines, Statement
from scopelens.core.index.syntax_scan import Definition, grammar_name, scan

CHUNKER_VERSION = 3
"""Changes whenever the chunks of some file change (pinned in the engine config, so drift
tells snapshots chunked one way from those chunked another). 2: Python by ``python_scan``
instead of ``ast`` (the same chunks for code that parses; Python 2 code by statements).
3: TypeScript, JavaScript, Go, Rust, Java, C and C++ by their syntax tree."""
ChunkKind = str  # "function" | "class" | "method" | "class-header" | "type" | "module" | "window"

_BRACE_LANGUAGES = frozenset(
    {"typescript", "javascript", "go", "rust", "java", "kotlin", "c", "cpp", "csharp", "swift",
     "scala", "php", "css", "json"}
)
_HEADING = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
_FENCE = re.compile(r" {0,3}(```|~~~)")
# String literals are dropped before counting brackets, so "{" in a string does not count.
_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`(?:\\.|[^`\\])*`')
_RUST_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.[^\']*|[^\'\\])\'')
_OPEN = frozenset("([{")
_CLOSE = frozenset(")]}")


@dataclass(frozen=True)
class Chunk:
    """A contiguous run of lines of one file (1-based, inclusive)."""

    path: str
    start_line: int
    end_line: int
    text: str
    kind: ChunkKind
    symbol: str | None = None


def decode_source(data: bytes) -> tuple[str, bool]:
    """Decode UTF-8, dropping a BOM; undecodable bytes become U+FFFD. Never raises.

    Returns ``(text, had_errors)``.
    """
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace"), True


def chunk_text(path: str, text: str, *, max_lines: int = 80, max_chars: int = 4000) -> list[Chunk]:
    """Chunk ``text`` (the content of ``path``), dispatching on ``language_of(path)``."""
    if max_lines < 1 or max_chars < 1:
        raise ValueError("max_lines and max_chars must be positive")
    doc = _Doc(text, max_lines, max_chars)
    if not doc.lines:
        return []
    language = language_of(path)
    spans = None
    if language == "python":
        spans = _python_spans(doc, text)
    elif (grammar := grammar_name(path, language)) is not None:
        spans = _syntax_spans(doc, text, grammar, language)
    if spans is None:
        rank = _ranks(doc, language)
        spans = doc.windows(0, len(doc.lines) - 1, "window", None, rank.__getitem__)
    return [
        Chunk(path, s + 1, e + 1, "\n".join(doc.lines[s : e + 1]), kind, symbol)
        for s, e, kind, symbol in spans
    ]


_Span = tuple[int, int, ChunkKind, "str | None"]  # 0-based inclusive line range


class _Doc:
    """The lines of one file, with what windowing needs precomputed."""

    def __init__(self, text: str, max_lines: int, max_chars: int) -> None:
        self.lines = text.splitlines()
        n = len(self.lines)
        self.lengths = lengths = np.fromiter(map(len, self.lines), dtype=np.int64, count=n)
        self.stripped = np.fromiter(map(len, map(str.lstrip, self.lines)), dtype=np.int64, count=n)
        """Each line's length without its leading whitespace (``str.isspace``'s)."""
        self.blank: list[bool] = (self.stripped == 0).tolist()
        self.indent: list[int] = (lengths - self.stripped).tolist()
        """Each line's leading whitespace, in characters."""
        self.max_lines = max_lines
        self.max_chars = max_chars
        # cum[i] = characters in lines[:i], counting one "\n" after each line.
        cum = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths + 1, out=cum[1:])
        self.cum: list[int] = cum.tolist()
        self.ranks: list[int] | None = None
        """Where windows of a span too big for one chunk may end, per line (``windows``'
        ``rank``); ``None``: by ``python_rank``. (Not a bound method kept here: that would
        be a reference cycle, which the indexer leaves uncollected while it runs.)"""

    def fits(self, s: int, e: int) -> bool:
        return e - s < self.max_lines and self.cum[e + 1] - self.cum[s] - 1 <= self.max_chars

    def trim(self, s: int, e: int) -> tuple[int, int]:
        """Drop blank lines at both ends (s > e when nothing is left)."""
        while s <= e and self.blank[s]:
            s += 1
        while e >= s and self.blank[e]:
            e -= 1
        return s, e

    def span(self, s: int, e: int, kind: ChunkKind, symbol: str | None) -> list[_Span]:
        """One span when it fits, else windows; nothing when the range is blank."""
        s, e = self.trim(s, e)
        if s > e:
            return []
        if self.fits(s, e):
            return [(s, e, kind, symbol)]
        rank = self.python_rank(s, e) if self.ranks is None else self.ranks.__getitem__
        return self.windows(s, e, kind, symbol, rank)

    def windows(
        self, s: int, e: int, kind: ChunkKind, symbol: str | None, rank: Callable[[int], int]
    ) -> list[_Span]:
        """Cut lines s..e into windows; each ends after the last line of the best rank.

        ``rank(i)`` says how good a place the end of line i is to stop: 2 (a block ends),
        1 (a blank line) or 0. A window never has more than max_lines lines nor more than
        max_chars characters, except a single line longer than max_chars.
        """
        out: list[_Span] = []
        i = s
        while True:
            i, e = self.trim(i, e)
            if i > e:
                return out
            hard = min(e, i + self.max_lines - 1)
            by_chars = bisect.bisect_right(self.cum, self.cum[i] + self.max_chars + 1) - 2
            hard = max(i, min(hard, by_chars))
            end = hard
            if hard < e:
                best = 0
                for j in range(hard, i - 1, -1):
                    r = rank(j)
                    if r > best:
                        best, end = r, j
                        if r == 2:
                            break
            last = end
            while self.blank[last]:
                last -= 1
            out.append((i, last, kind, symbol))
            i = end + 1

    def python_rank(self, s: int, e: int) -> Callable[[int], int]:
        """Prefer blank lines followed by a line at the range's outermost body indentation."""
        body = range(s + 1, e + 1)
        indent, blank = self.indent, self.blank
        base = min((indent[i] for i in body if not blank[i]), default=0)

        def rank(i: int) -> int:
            if not self.blank[i]:
                return 0
            j = i + 1
            while j < len(self.lines) and self.blank[j]:
                j += 1
            return 2 if j < len(self.lines) and indent[j] <= base else 1

        return rank


def _ranks(doc: _Doc, language: str) -> list[int]:
    """Per line, how good a place its end is to close a window (see ``_Doc.windows``)."""
    n = len(doc.lines)
    if language == "log":
        return [0] * n
    if language in _BRACE_LANGUAGES:
        return _brace_ranks(doc, language)
    if language == "markdown":
        ranks = [1 if b else 0 for b in doc.blank]
        fenced = False
        for i, line in enumerate(doc.lines):
            if _FENCE.match(line):
                fenced = not fenced
            elif not fenced and i and _HEADING.match(line):
                ranks[i - 1] = 2
        return ranks
    if language == "python":  # a file that is not valid Python
        ranks = [1 if b else 0 for b in doc.blank]
        for i in range(n - 1):
            nxt = doc.lines[i + 1]
            if doc.blank[i] and not doc.blank[i + 1] and nxt[:1] not in (" ", "\t"):
                ranks[i] = 2
        return ranks
    return [1 if b else 0 for b in doc.blank]


def _brace_ranks(doc: _Doc, language: str) -> list[int]:
    """2 where a bracket block closes back to depth 0, or at a blank line at depth 0."""
    strings = _RUST_STRINGS if language == "rust" else _STRINGS
    ranks = []
    depth = 0
    for line, blank in zip(doc.lines, doc.blank, strict=True):
        if blank:
            ranks.append(2 if depth == 0 else 1)
            continue
        before = depth
        code = line
        if "//" in code or '"' in code or "'" in code or "`" in code:
            code = strings.sub("", code).split("//", 1)[0]
        for ch in code:
            if ch in _OPEN:
                depth += 1
            elif ch in _CLOSE and depth:
                depth -= 1
        ranks.append(2 if before and not depth else 0)
    return ranks


def _python_spans(doc: _Doc, text: str) -> list[_Span] | None:
    """Spans from the statement structure (``python_scan``): one per top-level definition,
    module code between them; None when the text is not Python (an unclosed bracket or
    string, a null byte)."""
    if "\x00" in text:
        return None
    scan = PythonLines(text, doc.lines, doc.lengths, doc.stripped)
    if not scan.balanced:
        return None
    items = _ranges(doc, scan.statements(0, len(doc.lines)), -1, len(doc.lines))
    spans: list[_Span] = []
    cursor = 0
    for s, e, statement in items:
        if statement.kind is None:
            continue
        spans += doc.span(cursor, s - 1, "module", None)
        spans += _def_spans(doc, scan, statement, s, e, statement.name or "", method=False)
        cursor = e + 1
    spans += doc.span(cursor, len(doc.lines) - 1, "module", None)
    return spans


def _syntax_spans(doc: _Doc, text: str, grammar: str, language: str) -> list[_Span] | None:
    """Spans from a syntax tree: one per top-level definition (a class too big for one split
    by member), the code between them in ``module`` spans; None when the tree's rows are not
    the lines (see ``syntax_scan``)."""
    definitions = scan(text, grammar)
    if definitions is None:
        return None
    doc.ranks = _brace_ranks(doc, language)
    spans: list[_Span] = []
    cursor = 0
    for definition in definitions:
        s, e = max(definition.first, cursor), min(definition.last, len(doc.lines) - 1)
        if s > e:  # shares its only line with the definition before
            continue
        spans += doc.span(cursor, s - 1, "module", None)
        spans += _member_spans(doc, definition, s, e, definition.name, method=False)
        cursor = e + 1
    spans += doc.span(cursor, len(doc.lines) - 1, "module", None)
    return spans


def _member_spans(doc: _Doc, definition: Definition, s: int, e: int, symbol: str, *, method: bool) -> list[_Span]:
    """A definition as one span; a class too big for one is cut into its header and one span
    per member (what lies between two members goes with the one above)."""
    kind = "method" if method and definition.kind != "class" else definition.kind
    members = [m for m in definition.members if s < m.first <= e]
    if definition.kind != "class" or not members or doc.fits(*doc.trim(s, e)):
        return doc.span(s, e, kind, symbol)
    spans = doc.span(s, members[0].first - 1, "class-header", symbol)
    for k, member in enumerate(members):
        ms = max(member.first, members[k - 1].last + 1) if k else member.first
        me = members[k + 1].first - 1 if k + 1 < len(members) else e
        if ms <= me:
            spans += _member_spans(doc, member, ms, me, f"{symbol}.{member.name}", method=True)
    return spans


def _def_spans(
    doc: _Doc, scan: PythonLines, statement: Statement, s: int, e: int, symbol: str, *, method: bool
) -> list[_Span]:
    """A function or class as one span; a class too big for one is split by member."""
    if statement.kind != "class":
        return doc.span(s, e, "method" if method else "function", symbol)
    if doc.fits(*doc.trim(s, e)):
        return doc.span(s, e, "class", symbol)
    members = [
        (ms, member)
        for ms, _, member in _ranges(doc, scan.statements(statement.head + 1, e + 1), s, e + 1)
        if member.kind is not None
    ]
    if not members:
        return doc.span(s, e, "class", symbol)
    spans = doc.span(s, members[0][0] - 1, "class-header", symbol)
    for k, (ms, member) in enumerate(members):
        # Statements between two members (class attributes, comments) go with the one above.
        me = members[k + 1][0] - 1 if k + 1 < len(members) else e
        spans += _def_spans(doc, scan, member, ms, me, f"{symbol}.{member.name}", method=True)
    return spans


def _ranges(doc: _Doc, body: list[Statement], floor: int, ceiling: int) -> list[tuple[int, int, Statement]]:
    """Line ranges of statements; definitions take the comments right above them and the
    indented lines (trailing comments) after them. Ranges stay in (floor, ceiling)."""
    out: list[tuple[int, int, Statement]] = []
    prev_end = floor
    for k, statement in enumerate(body):
        s, e = max(statement.first, prev_end + 1), min(max(statement.last, statement.first), ceiling - 1)
        if s > e:
            continue
        if statement.kind is not None:
            while s - 1 > prev_end and doc.lines[s - 1].lstrip().startswith("#"):
                s -= 1
            column = doc.indent[s]
            nxt = min(body[k + 1].first, ceiling) if k + 1 < len(body) else ceiling
            for j in range(e + 1, nxt):
                if doc.blank[j]:
                    continue
                if doc.indent[j] <= column:
                    break
                e = j
        out.append((s, e, statement))
        prev_end = e
    return out
