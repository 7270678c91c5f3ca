"""Text that must stay on one line and say what it is: names, paths and ids shown outside a fence.

A file name may hold a newline, a carriage return, a Unicode line separator, a bidi override or
bytes that are not UTF-8 (``os.fsdecode`` turns them into lone surrogates). Printed raw, such a
name can start a new line of its own (forging a header or an instruction) or hide what it is.
:func:`escape_controls` makes every such character visible as an escape; :func:`unsafe_name`
says whether a name holds one, so the walker can refuse it.
"""

from __future__ import annotations

import unicodedata

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


def escape_controls(text: str) -> str:
    """``text`` with every character Python does not call printable (controls, separators,
    format characters, surrogates, unassigned code points, spaces other than U+0020) and the
    backslash written as an escape: the result is one printable line that says what it holds."""
    if text.isprintable() and "\\" not in text:
        return text  # the common case: nothing to do
    out = []
    for char in text:
        if char == "\\":
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
