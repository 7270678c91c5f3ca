"""A unified diff as a reader wants it: the code highlighted by its file's language, added and
removed lines on a tinted background with their marker in the theme's legible colours.

Every colour drawn (syntax tokens included) is moved, if need be, until it reaches WCAG AA
against the background it is drawn on (``theme.legible``), so a Pygments style chosen for its
looks cannot make a line unreadable on either theme.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.style import Style
from rich.text import Text
from textual.color import Color

from scopelens.inspector.theme import legible
from scopelens.inspector.widgets.syntax import highlighted_lines, legible_on

LINE_KINDS = {"+": ("success-muted", "legible-success"), "-": ("error-muted", "legible-error")}
"""Added and removed lines: the theme variable of their background and of their marker."""


def highlighted_diff(diff: str, path: str | None, variables: Mapping[str, str], dark: bool) -> Group:
    """``diff`` (unified, as drift stores it) drawn for the theme whose ``variables`` are given."""
    ground = Color.parse(variables["background"])
    foreground = legible(Color.parse(variables["foreground"]), [ground])
    hunk = legible(Color.parse(variables["legible-primary"]), [ground])
    lines = diff.splitlines()
    code_at = [i for i, line in enumerate(lines) if line.startswith(("+", "-", " ")) and not line.startswith(("+++", "---"))]
    code = highlighted_lines("\n".join(lines[i].removeprefix(lines[i][0]) for i in code_at), path, dark)  # minus the marker
    code_of = dict(zip(code_at, code, strict=True)) if len(code) == len(code_at) else {}
    parts: list[RenderableType] = []
    for index, line in enumerate(lines):
        if line.startswith(("+++", "---")):
            parts.append(Text(line, style=Style(bold=True, color=foreground.rich_color)))
        elif line.startswith("@@"):
            parts.append(Text(line, style=Style(color=hunk.rich_color)))
        elif line.startswith("\\"):
            parts.append(Text(line, style=Style(italic=True, color=foreground.rich_color)))
        elif index in code_of:
            kind = LINE_KINDS.get(line[0])
            back = ground + Color.parse(variables[kind[0]]) if kind else ground
            marker_colour = legible(Color.parse(variables[kind[1]]), [back]) if kind else foreground
            body = legible_on(code_of[index], back)
            if not body.spans:
                body.stylize(Style(color=legible(foreground, [back]).rich_color))
            text = Text.assemble((line[0], Style(bold=True, color=marker_colour.rich_color)), body)
            parts.append(Padding(text, 0, style=Style(bgcolor=back.rich_color), expand=True) if kind else text)
        else:
            parts.append(Text(line, style=Style(color=foreground.rich_color)))
    return Group(*parts)
