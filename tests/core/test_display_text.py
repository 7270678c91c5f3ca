"""Display text is shortened one way and times are shown one way ([3/9], CLI a new user can
find their way in): :func:`clip` ends a cut with a single "…" and never cuts what fits;
:func:`when` is the only display format of a time; no display module formats or slices on its own."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from scopelens.core.clock import when, when_stored
from scopelens.core.textsafety import ELLIPSIS, clip, listing, short

ROOT = Path(__file__).resolve().parents[2]
DISPLAY_MODULES = (
    *sorted((ROOT / "core" / "commands").glob("*.py")),
    *(ROOT / "core" / name for name in ("cli.py", "output.py", "readmodel.py")),
    *sorted((ROOT / "inspector").rglob("*.py")),
)


def test_text_that_fits_is_never_cut():
    assert clip("exactly ten", 11) == "exactly ten"
    assert clip("", 5) == ""
    assert clip("two\nlines", 9) == "two lines"  # one line, and it fits
    assert clip("two\nlines", 20, one_line=False) == "two\nlines"


def test_a_cut_ends_in_one_ellipsis_and_keeps_the_width():
    assert clip("abcdefghij", 5) == "abcd…"
    assert clip("a word cut here", 8) == "a word…"  # no space before the "…"
    assert clip("wait... more text", 8) == "wait…"  # no dots before it either
    assert clip("path/to/some/file.py", 10, keep_end=True) == "…e/file.py"
    assert clip("line one\nline two\nline three", 12, one_line=False) == "line one\nli…"


@given(st.text(max_size=60), st.integers(min_value=1, max_value=40), st.booleans(), st.booleans())
def test_clip_never_exceeds_the_width_and_marks_every_cut(text, width, one_line, keep_end):
    shown = clip(text, width, one_line=one_line, keep_end=keep_end)
    whole = " ".join(text.split()) if one_line else text
    assert len(shown) <= width
    if len(whole) <= width:
        assert shown == whole
    else:
        assert shown.count(ELLIPSIS) >= 1 and (shown.startswith(ELLIPSIS) if keep_end else shown.endswith(ELLIPSIS))
        assert "..." not in shown[-4:] and not shown.endswith(("……", " …", ".…"))


def test_hashes_show_their_first_characters_and_an_ellipsis():
    digest = "0123456789abcdef" * 4
    assert short(digest) == "0123456789ab…"
    assert short(digest, 16) == "0123456789abcdef…"
    assert short(None) == "-" and short("") == "-"
    assert short("abc") == "abc"


def test_a_shortened_list_says_how_many_it_left_out():
    assert listing(["a", "b", "c"], 3) == "a, b, c"
    assert listing(["a", "b", "c", "d", "e"], 2, "; ") == "a; b and 3 more"
    assert listing([], 4) == ""


def test_one_display_format_of_a_time_iso_utc_with_z():
    moment = datetime(2026, 3, 1, 14, 0, 5, 123456, tzinfo=timezone(timedelta(hours=2)))
    assert when(moment) == "2026-03-01T12:00:05Z"
    assert when_stored("2026-03-01T12:00:05.123456Z") == "2026-03-01T12:00:05Z"
    assert when_stored("2026-03-01T12:00:05+00:00") == when(datetime(2026, 3, 1, 12, 0, 5, tzinfo=UTC))
    assert when_stored("not a time") == "not a time"  # a damaged row is shown as it is


def test_display_modules_format_times_only_through_the_clock():
    """strftime, isoformat or a hand-cut stored time in a CLI or inspector module would be a
    second display format; JSON goes through output.print_json's encoder."""
    offenders = []
    for path in DISPLAY_MODULES:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if re.search(r"\.strftime\(|created_at\[:|\.replace\(\"T\", \" \"\)", line) or (
                ".isoformat(" in line and path.name != "output.py"
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


def test_display_modules_cut_text_only_through_clip():
    """A string slice with a literal width (``text[:80]``, ``path[-40:]``) in a CLI or inspector
    module cuts without the "…"; digests go through short(), text through clip()."""
    slice_of_text = re.compile(r"\[\s*-?\d+\s*:\s*\]|\[\s*:\s*-?\d+\s*\]")
    allowed = re.compile(r"parts\[:-1\]|sys\.argv\[1:\]")  # a trailing separator, the program name: not cuts
    offenders = []
    for path in DISPLAY_MODULES:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if slice_of_text.search(allowed.sub("", line)):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []
