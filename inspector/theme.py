"""Text colours that carry meaning and stay legible in every theme (WCAG AA, 4.5:1).

Textual's ``$text-success``, ``$text-error``… are chosen by eye: on ``textual-light``,
``$text-success`` and ``$text-warning`` reach only about 3.5:1 and 3:1 on ``$surface``, and
``$success`` or Rich's named colours (whose shade is the terminal's palette) far less. The app
adds one ``$legible-<name>`` variable per colour to each theme's variables, derived from
``$text-<name>``: darkened (on a light theme) or lightened (on a dark one) in small steps until
it reaches 4.5:1 against every background the inspector draws text on (``$background``,
``$surface``, ``$panel``, each also under the foreground tint a focused table adds). A colour
that already reaches it is kept as it is. Screens colour meaning (diff lines, drift classes,
why-not stages) with these; ``tests/inspector/test_contrast.py`` recomputes each ratio from the
live widgets of both themes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.style import Style as RichStyle
from textual.app import App
from textual.color import Color

from scopelens.core.vocab import Stage

AA = 4.5
"""WCAG 2 level AA for normal text."""
LEGIBLE_FROM = {
    "legible-success": "text-success",
    "legible-error": "text-error",
    "legible-warning": "text-warning",
    "legible-primary": "text-primary",
    "legible-secondary": "text-secondary",
}
"""Each legible variable and the theme variable it starts from."""
FOCUS_TINT = 0.05
"""A focused DataTable tints its background with ``$foreground`` at 5% (Textual's default CSS)."""


def relative_luminance(colour: Color) -> float:
    """WCAG 2's relative luminance of an opaque colour."""

    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(colour.r) + 0.7152 * channel(colour.g) + 0.0722 * channel(colour.b)


def contrast_ratio(first: Color, second: Color) -> float:
    """WCAG 2's contrast ratio of two opaque colours, from 1 to 21."""
    high, low = sorted((relative_luminance(first), relative_luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def legible(colour: Color, backgrounds: Iterable[Color], ratio: float = AA) -> Color:
    """``colour``, moved away from the backgrounds' lightness only as far as it takes to reach
    ``ratio`` against each of them (its hue is kept: the Lab lightness changes)."""
    grounds = list(backgrounds)
    darker = sum(relative_luminance(g) for g in grounds) / len(grounds) > 0.18  # a light theme: go darker
    candidate = colour.with_alpha(1.0)
    for step in range(1, 51):
        if all(contrast_ratio(candidate, ground) >= ratio for ground in grounds):
            break
        candidate = colour.darken(step / 50, alpha=1.0) if darker else colour.lighten(step / 50, alpha=1.0)
    return candidate  # at the last step, black or white: as far as it goes


def text_backgrounds(variables: Mapping[str, str]) -> list[Color]:
    """The backgrounds the inspector draws text on, in the theme ``variables`` describe."""
    tint = Color.parse(variables["foreground"]).with_alpha(FOCUS_TINT)
    plain = [Color.parse(variables[name]) for name in ("background", "surface", "panel")]
    return plain + [ground.tint(tint) for ground in plain]


def legible_variables(variables: Mapping[str, str]) -> dict[str, str]:
    """The ``$legible-*`` variables for the theme ``variables`` describe."""
    grounds = text_backgrounds(variables)
    return {name: legible(Color.parse(variables[source]), grounds).hex for name, source in LEGIBLE_FROM.items()}


def rich_style(app: App[Any], spec: str) -> RichStyle:
    """``spec``, a style written with theme variables, as a Rich style for a table cell (Rich
    resolves no variables, so a cell styled this way is drawn again when the theme changes)."""
    return app.stylesheet.parse_style(spec).rich_style if spec else RichStyle()


STAGE_STYLE: dict[Stage, str] = {
    Stage.CITED: "bold $legible-success",
    Stage.SELECTED: "$legible-success",
    Stage.TRIMMED_AWAY: "$legible-warning",
    Stage.OVER_BUDGET: "$legible-warning",
    Stage.DUPLICATE: "$legible-warning",
    Stage.BELOW_CUTOFF: "$legible-warning",
    Stage.MEMORY_STATUS: "$legible-error",
    Stage.STALE: "$legible-error",
    Stage.NOT_VISIBLE: "$legible-error",
    Stage.DENIED_SOURCE: "$legible-error",
    Stage.OUT_OF_SCOPE: "$legible-error",
    Stage.NOT_RECALLED: "$legible-primary",
}
"""By what stopped it: shown to the model (green), the ranking or budget (yellow), the scope or
policy (red), recall (blue). Theme variables that reach WCAG AA in both themes (theme.py)."""
