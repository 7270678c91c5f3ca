"""Text that must stay on one line and say what it is: names, paths and ids shown outside a fence.

A file name may hold a newline, a carriage return, a Unicode line separator, a bidi override or
bytes that are not UTF-8 (``os.fsdecode`` turns them into lone surrogates). Printed raw, such a
name can start a new line of its own (forging a header or an instruction) or hide what it is.
:func:`escape_controls` makes every such character visible as an escape; :func:`unsafe_name`
says whether a name holds one, so the walker can refuse it.

Text shown for people is also shortened in one way only: :func:`clip` cuts what does not fit
and ends it with a single "…", :func:`short` is a hash's first characters and "…", and :func:`listing` says how many list
entries it left out.
Only display text is clipped; stored documents, block text and evidence never are.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

ELLIPSIS = "…"
"""The one mark of text cut for display (U+2026), never three dots."""

UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
"""Controls, format characters (bidi overrides, zero-width), line and paragraph separators,
and surrogates (undecodable bytes under surrogateescape)."""


def _escaped(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def escape_controls(text: str, *, backslash: bool = True) -> str:
    """``text`` with every character Python does not call printable (controls, separators,
    format characters, surrogates, unassigned code points, spaces other than U+0020) and the
    backslash written as an escape: the result is one printable line that says what it holds.
    ``backslash=False`` leaves backslashes (for messages whose values are ``repr``'d already)."""
    if text.isprintable() and not (backslash and "\\" in text):
        return text  # the common case: nothing to do
    out = []
    for char in text:
        if char == "\\" and backslash:
            out.append("\\\\")
        elif not char.isprintable():
            out.append(_escaped(char))
        else:
            out.append(char)
    return "".join(out)


def unsafe_name(name: str) -> str | None:
    """Why ``name`` may not be indexed (a control or undecodable character), or None."""
    for char in name:
        category = unicodedata.category(char)
        if category == "Cs":
            return "not valid UTF-8"
        if category in UNSAFE_CATEGORIES:
            return f"holds the control character {_escaped(char)}"
    return None


def clip(text: str, width: int, *, one_line: bool = True, keep_end: bool = False) -> str:
    """``text`` in at most ``width`` characters, ending in a single "…" when it had to be cut.

    Text that fits is returned as it is (after ``one_line``). ``one_line`` turns every run of
    whitespace, line breaks included, into one space, for a cell or a summary; without it,
    lines are kept (a preview). ``keep_end`` keeps the end instead and starts with the "…"
    (a path in a progress line). The cut never leaves a space or dots beside the "…".
    """
    if one_line:
        text = " ".join(text.split())
    if len(text) <= width:
        return text
    room = max(width - 1, 0)
    if keep_end:
        kept = text[len(text) - room :] if room else ""
        return ELLIPSIS + kept.lstrip().lstrip(".…").lstrip()
    return text[:room].rstrip().rstrip(".…").rstrip() + ELLIPSIS


def listing(items: Sequence[str], limit: int, separator: str = ", ") -> str:
    """The first ``limit`` of ``items`` joined by ``separator``, saying how many more there are."""
    shown = separator.join(items[:limit])
    rest = len(items) - limit
    return f"{shown} and {rest} more" if rest > 0 else shown


def short(digest: str | None, width: int = 12) -> str:
    """A hash as people read it: its first ``width`` characters and "…" ("-" when there is none)."""
    return "-" if not digest else clip(digest, width + 1)
