"""The statement scanner finds what Python's own parser finds, on real code, without parsing."""

from __future__ import annotations

import ast
import random
import sysconfig
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scopelens.core.index.chunker import chunk_text, decode_source
from scopelens.core.index.python_scan import PythonLines, Statement

STDLIB = Path(sysconfig.get_paths()["stdlib"])
SAMPLE = 120


@cache
def stdlib_sample() -> list[Path]:
    files = sorted(
        path for path in STDLIB.rglob("*.py")
        if "site-packages" not in path.parts and "__pycache__" not in path.parts
    )
    return sorted(random.Random(20261202).sample(files, min(SAMPLE, len(files))))


def parsed(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def expected_definitions(body: list[ast.stmt]) -> list[tuple[int, int, str, str]]:
    """``(first, last, kind, name)`` of each def/class, 0-based, decorators included."""
    out = []
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            first = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
            kind = "class" if isinstance(node, ast.ClassDef) else "def"
            out.append((first, (node.end_lineno or node.lineno) - 1, kind, node.name))
    return out


def found_definitions(statements: list[Statement]) -> list[tuple[int, int, str, str]]:
    return [(s.first, s.last, s.kind, s.name or "") for s in statements if s.kind is not None]


def comparable(path: Path) -> bool:
    """Files that parse and have no line breaks other than ``\\r`` and ``\\n`` (where
    ``str.splitlines()`` and the parser number lines alike)."""
    text, _ = decode_source(path.read_bytes())
    return parsed(text) is not None and not any(ch in text for ch in "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


@pytest.mark.parametrize(
    "path", [p for p in stdlib_sample() if comparable(p)], ids=lambda p: p.relative_to(STDLIB).as_posix()
)
def test_definitions_match_the_parser_on_the_standard_library(path: Path) -> None:
    text, _ = decode_source(path.read_bytes())
    tree = parsed(text)
    assert tree is not None
    lines = text.splitlines()
    scan = PythonLines(text, lines)
    assert scan.balanced
    assert found_definitions(scan.statements(0, len(lines))) == expected_definitions(tree.body)
    # Members of every top-level class, as the chunker asks for them.
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.end_lineno:
            members = scan.statements(node.lineno, node.end_lineno)
            assert found_definitions(members) == expected_definitions(node.body), node.name


def test_strings_brackets_and_backslashes_hide_what_looks_like_code() -> None:
    text = (
        "@decorator(\n"
        "    option=1)\n"
        "def real(a,\n"
        "def_not=2):\n"
        '    doc = """\n'
        "def in_a_string():\n"
        '"""\n'
        "    return a + \\\n"
        "class_not\n"
        "# def in_a_comment():\n"
        "async def second():\n"
        "    x = '\"\"\"'  # a quote in a string opens nothing\n"
        "class Third(Base,\n"
        "            Other): pass\n"
    )
    lines = text.splitlines()
    scan = PythonLines(text, lines)
    assert found_definitions(scan.statements(0, len(lines))) == [
        (0, 8, "def", "real"),
        (10, 11, "def", "second"),
        (12, 13, "class", "Third"),
    ]
    assert found_definitions(scan.statements(0, len(lines))) == expected_definitions(ast.parse(text).body)


@pytest.mark.parametrize(
    ("text", "balanced"),
    [
        ("x = (1,\n", False),
        ("x = 1)\n", False),
        ('s = """open\n', False),
        ("s = 'a' + \"b\\\\\"\n", True),
        ("# only ( a comment\n", True),
    ],
)
def test_balanced_says_whether_brackets_and_strings_close(text: str, balanced: bool) -> None:
    assert PythonLines(text, text.splitlines()).balanced is balanced


@settings(max_examples=60, derandomize=True, deadline=None)
@given(data=st.data())
def test_mutated_real_code_never_breaks_the_chunk_invariant(data: st.DataObject) -> None:
    """Deleting or duplicating lines of real code (unbalanced brackets, cut strings) always
    gives exact, ordered, non-overlapping chunks: by statements or by windows."""
    path = data.draw(st.sampled_from(stdlib_sample()[:20]))
    lines = decode_source(path.read_bytes())[0].splitlines(keepends=True)[:300]
    for _ in range(data.draw(st.integers(0, 6))):
        if not lines:
            break
        at = data.draw(st.integers(0, len(lines) - 1))
        if data.draw(st.booleans()):
            del lines[at]
        else:
            lines.insert(at, lines[at])
    text = "".join(lines)
    chunks = chunk_text("m.py", text, max_lines=40)
    split = text.splitlines()
    previous_end = 0
    for chunk in chunks:
        assert previous_end < chunk.start_line <= chunk.end_line
        assert chunk.text == "\n".join(split[chunk.start_line - 1 : chunk.end_line])
        assert chunk.text.strip()
        previous_end = chunk.end_line


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab \t#'\"(\n\r\x0b\x0c\x1c\x85\u2028é")), max_size=60))
def test_line_starts_count_every_kind_of_line_break(text: str) -> None:
    """The scanner finds where lines start from their lengths plus one break character, unless the
    text holds a break other than a newline; either way, what ``splitlines(keepends=True)`` gives."""
    from scopelens.core.index.python_scan import _with_breaks

    lines = text.splitlines()
    lengths = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))
    assert _with_breaks(text, lines, lengths).tolist() == [len(line) for line in text.splitlines(keepends=True)]
    assert PythonLines(text, lines).lines == lines
