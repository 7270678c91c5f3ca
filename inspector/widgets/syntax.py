"""Code highlighted by its file's language (Rich's Syntax, through Pygments), for evidence and
diffs, in colours that stay legible on the background they are drawn on."""

from __future__ import annotations

from functools import lru_cache
from pathlib import PurePosixPath

from pygments.lexers import find_lexer_class_for_filename  # type: ignore[import-untyped]  # rich's dependency; no stubs
from rich.style import Style
from rich.syntax import Syntax
from rich.text import Text
from textual.color import Color

from scopelens.inspector.theme import legible

SYNTAX_THEMES = {True: "monokai", False: "default"}
"""Pygments styles for dark and light themes (their token colours only: never their background)."""


@lru_cache(maxsize=256)
def lexer_for(path: str) -> str | None:
    """The Pygments lexer a file name calls for, from the names alone (Pygments' guess by
    content would load every lexer module: 0.7 s on first use); None when none claims it."""
    found = find_lexer_class_for_filename(PurePosixPath(path).name)
    return found.aliases[0] if found is not None and found.aliases else None


def highlighted_lines(text: str, path: str | None, dark: bool) -> list[Text]:
    """Each line of ``text`` highlighted by the language its path names (plain when unknown).

    Token styles keep their colour, weight and slant, never the Pygments style's background:
    the code sits on the inspector's own background."""
    lexer = lexer_for(path) if path else None
    if lexer is None or lexer == "text":
        return [Text(line) for line in text.split("\n")]
    highlighted = Syntax(text, lexer, theme=SYNTAX_THEMES[dark], background_color="default").highlight(text)
    highlighted.rstrip()  # highlight() ends the text with a newline of its own
    lines = list(highlighted.split("\n", allow_blank=True))
    if len(lines) != text.count("\n") + 1:
        return [Text(line) for line in text.split("\n")]
    return [_foreground_only(line) for line in lines]


def _foreground_only(line: Text) -> Text:
    out = Text(line.plain)
    for span in line.spans:
        style = span.style if isinstance(span.style, Style) else Style.parse(span.style)
        out.stylize(Style(color=style.color, bold=style.bold, italic=style.italic, underline=style.underline),
                    span.start, span.end)
    return out


def legible_on(text: Text, ground: Color) -> Text:
    """``text`` with each span's colour moved, if need be, to reach WCAG AA on ``ground``."""
    out = Text(text.plain, style=text.style)
    for span in text.spans:
        style = span.style if isinstance(span.style, Style) else Style.parse(span.style)
        if style.color is not None:
            style = style + Style(color=legible(Color.from_rich_color(style.color), [ground]).rich_color)
        out.stylize(style, span.start, span.end)
    return out
