"""A DataTable whose columns always fit its width, so nothing hides behind a horizontal scroll.

Each column has a preferred width. Flexible columns take the room that is left and give it
back first; other shrinkable columns then shrink towards their minimum; when even the minimums
do not fit, droppable columns are hidden, highest ``drop`` first (screens show every field of
the highlighted row in a detail pane, so a hidden column loses nothing). Widths never depend
on content, so a screen renders the same whenever its rows arrive. Cells longer than their
column end in "…", and cell strings are plain text, never markup: a path like ``[x]`` or a
recorded message is shown as written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey


@dataclass(frozen=True)
class Column:
    """A column: preferred ``width``, how far it may shrink, and how it gives way."""

    key: str
    label: str
    width: int
    min_width: int | None = None
    """Narrowest it may become; ``None`` keeps it at ``width`` (a fixed column)."""
    flex: int = 0
    """Share of the room left over; flexible columns also shrink first."""
    drop: int = 0
    """0: always shown. Otherwise hidden when the minimums do not fit, highest first."""
    short: str | None = None
    """Header to use when ``label`` does not fit the width the column gets."""

    @property
    def narrowest(self) -> int:
        return self.width if self.min_width is None else min(self.min_width, self.width)


def fit_widths(columns: Sequence[Column], available: int, padding: int) -> dict[str, int]:
    """Widths of the columns that are shown in ``available`` cells, in column order.

    ``padding`` is the cells each column spends around its content. The result always
    includes every column with ``drop == 0``; it may be wider than ``available`` only when
    those alone do not fit.
    """
    shown = list(columns)

    def cost(cols: Sequence[Column], width_of: Mapping[str, int]) -> int:
        return sum(width_of[c.key] + padding for c in cols)

    while True:
        minimum = {c.key: c.narrowest for c in shown}
        droppable = [c for c in shown if c.drop]
        if cost(shown, minimum) <= available or not droppable:
            break
        shown.remove(max(droppable, key=lambda c: (c.drop, shown.index(c))))

    widths = {c.key: c.width for c in shown}
    excess = cost(shown, widths) - available
    # Shrink: flexible columns first, then the rest, each group in proportion to how far
    # its columns may shrink.
    for group in ([c for c in shown if c.flex], [c for c in shown if not c.flex]):
        slack = {c.key: widths[c.key] - c.narrowest for c in group}
        total_slack = sum(slack.values())
        if excess <= 0 or not total_slack:
            continue
        take = min(excess, total_slack)
        gives = {key: take * room // total_slack for key, room in slack.items()}
        rest = take - sum(gives.values())  # what rounding down left: from the roomiest first
        for key in sorted(slack, key=lambda k: gives[k] - slack[k]):
            extra = min(rest, slack[key] - gives[key])
            gives[key] += extra
            rest -= extra
        for key, give in gives.items():
            widths[key] -= give
        excess -= take
    # Grow: the room left goes to flexible columns, by their share.
    flexible = [c for c in shown if c.flex]
    if excess < 0 and flexible:
        room, shares = -excess, sum(c.flex for c in flexible)
        for index, column in enumerate(flexible):
            extra = room if index == len(flexible) - 1 else room * column.flex // shares
            widths[column.key] += extra
            room -= extra
    return {c.key: widths[c.key] for c in shown}


def _one_line(plain_text: str) -> bool:
    return "\n" not in plain_text and "\t" not in plain_text and "\r" not in plain_text


def plain(value: object) -> Text:
    """A cell as plain text (no markup), one line, ending in "…" when cut."""
    text = value.copy() if isinstance(value, Text) else Text(str(value))
    text.no_wrap = True
    text.overflow = "ellipsis"
    return text


class FittedTable(DataTable[Any]):
    """A DataTable laid out by :func:`fit_widths` whenever the layout changes its width.

    Rows are given in column order, every column included (shown or not); the table keeps
    them so it can lay itself out again when its width changes.
    """

    def __init__(self, columns: Sequence[Column], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.specs: tuple[Column, ...] = tuple(columns)
        self.header_mark: tuple[str, str] | None = None
        self.shown_widths: dict[str, int] = {}
        self._values: dict[RowKey, list[Any]] = {}
        self._fitted_width = 0
        self._lay_out({c.key: c.width for c in self.specs})

    def _size_updated(self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True) -> bool:
        # Fit as soon as the layout knows the width, before the first frame is drawn: the
        # Resize event comes after it, and rows drawn at the preferred widths would be drawn
        # again (a visible cost on the first screen of a big store).
        resized = super()._size_updated(size, virtual_size, container_size, layout)
        self.refit(size.width)
        if self._require_update_dimensions:
            # What DataTable does when idle, done now: otherwise the first frame is drawn with
            # the old virtual width and every cell is drawn again once idle corrects it.
            # (Private DataTable state; textual is pinned in pyproject.toml.)
            self._require_update_dimensions = False
            new_rows = self._new_rows.copy()
            self._new_rows.clear()
            self._update_dimensions(new_rows)
        return resized

    def refit(self, width: int) -> None:
        if width <= 0 or width == self._fitted_width:
            return
        self._fitted_width = width
        available = width - self.styles.scrollbar_size_vertical
        widths = fit_widths(self.specs, available, 2 * self.cell_padding)
        if widths != self.shown_widths:
            self._lay_out(widths)

    def _update_dimensions(self, new_rows: Any) -> None:
        """The virtual size, without measuring cells: every column here has a fixed width and
        every row a height of 1, so DataTable's own version (which measures each cell of each
        new row to size auto-width columns) would do work that changes nothing.
        (Private DataTable hook; textual is pinned in pyproject.toml.)"""
        header_height = self.header_height if self.show_header else 0
        width = sum(column.get_render_width(self) for column in self.columns.values())
        self.virtual_size = Size(width, self._total_row_height + header_height)

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> list[list[Segment]]:
        """A body cell drawn straight from its one-line Text, with DataTable's cache key.

        DataTable sends every cell through Rich's general layout (Styled(Padding(cell)) and
        render_lines), which wraps, measures and splits lines: most of the cost of drawing a
        table, and of a big store's first screen. Every body cell here is a one-line Text in
        a fixed-width column, so the same segments come from truncating it and padding it.
        Anything else (headers, labels, fixed cells, multi-line or justified text, a column
        too narrow for text) takes DataTable's path.
        A test holds the two paths equal. (Private DataTable hook; textual is pinned.)
        """
        if (
            row_index < self.fixed_rows
            or column_index < self.fixed_columns
            or row_index < 0
            or column_index < 0
        ):
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        if row_key is None or column_key is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        cache_key = (
            row_key,
            column_key,
            base_style,
            cursor,
            hover,
            self._show_hover_cursor,
            self._update_count,
            self._pseudo_class_state,
        )
        cached = self._cell_render_cache.get(cache_key)
        if cached is not None:
            return cached
        cell = self._get_row_renderables(row_index).cells[column_index]
        padding = self.cell_padding
        inner = width - 2 * padding
        if not (
            isinstance(cell, Text)
            and self.rows[row_key].height == 1
            and _one_line(cell.plain)
            and cell.justify in (None, "default", "left")
            and inner > 0
        ):
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        component_style, post_style = self._get_styles_to_render_cell(
            False, False, False, hover, cursor, self.show_cursor, self._show_hover_cursor,
            self.cursor_foreground_priority == "css", self.cursor_background_priority == "css",
        )
        style = base_style + Style.from_meta({"row": row_index, "column": column_index}) + component_style
        text = cell.copy()
        text.truncate(inner, overflow=cell.overflow or "ellipsis")
        console = self.app.console
        body = text.render(console, end="")
        if text.style:  # Text.render leaves the base style to its caller
            body = Segment.apply_style(body, console.get_style(text.style, default=Style.null()))
        segments = [Segment(" " * padding), *body]
        fill = inner - text.cell_len
        segments.append(Segment(" " * (fill + padding)))
        lines = [list(Segment.apply_style(segments, style, post_style))]
        self._cell_render_cache[cache_key] = lines
        return lines

    def mark_header(self, key: str | None, mark: str) -> None:
        """Put ``mark`` (a sort arrow) after the header of column ``key``, and none elsewhere."""
        self.header_mark = (key, mark) if key is not None else None
        for spec in self.specs:
            column = self.columns.get(ColumnKey(spec.key))
            if column is not None:
                column.label = plain(self._label(spec, self.shown_widths[spec.key]))
        self._clear_caches()
        self.refresh()

    def _label(self, spec: Column, width: int) -> str:
        label = spec.short if spec.short and len(spec.label) > width else spec.label
        if self.header_mark is not None and self.header_mark[0] == spec.key:
            label = f"{label}{self.header_mark[1]}"
        return label

    def _lay_out(self, widths: dict[str, int]) -> None:
        cursor, scroll = self.cursor_row, self.scroll_offset
        super().clear(columns=True)
        self.shown_widths = widths
        for spec in self.specs:
            if spec.key in widths:
                super().add_column(plain(self._label(spec, widths[spec.key])), key=spec.key, width=widths[spec.key])
        for key, values in self._values.items():
            super().add_row(*self._shown(values), key=key.value)
        if self.row_count:
            self.move_cursor(row=min(cursor, self.row_count - 1), animate=False, scroll=False)
            self.scroll_to(scroll.x, scroll.y, animate=False)

    def _shown(self, values: Sequence[Any]) -> list[Text]:
        return [plain(value) for spec, value in zip(self.specs, values, strict=True) if spec.key in self.shown_widths]

    def add_row(self, *cells: Any, height: int | None = 1, key: str | None = None, label: Any = None) -> RowKey:
        if len(cells) != len(self.specs):
            raise ValueError(f"{len(cells)} cells for {len(self.specs)} columns")
        row_key = super().add_row(*self._shown(cells), height=height, key=key, label=label)
        self._values[row_key] = list(cells)
        return row_key

    def update_cell(self, row_key: RowKey | str, column_key: Any, value: Any, *, update_width: bool = False) -> None:
        row_key = RowKey(row_key) if isinstance(row_key, str) else row_key
        column = str(getattr(column_key, "value", column_key))
        index = next(i for i, spec in enumerate(self.specs) if spec.key == column)
        self._values[row_key][index] = value
        if column in self.shown_widths:
            super().update_cell(row_key, column, plain(value))

    def clear(self, columns: bool = False) -> FittedTable:
        if columns:
            raise ValueError("a FittedTable keeps its columns")
        self._values.clear()
        super().clear()
        return self

    def cursor_key(self) -> str | None:
        """The key of the highlighted row, or None when the table is empty."""
        if self.row_count == 0:
            return None
        return str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)

    def row_values(self, row_key: str) -> dict[str, Any]:
        """Every field of a row, shown or not, by column key."""
        values = self._values[RowKey(row_key)]
        return {spec.key: value for spec, value in zip(self.specs, values, strict=True)}
