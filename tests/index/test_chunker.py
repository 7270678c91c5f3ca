"""Tests of core.index.chunker: syntax-aware chunks with exact line ranges."""

from __future__ import annotations

import ast
import sysconfig
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scopelens.core.index.chunker import Chunk, chunk_text, decode_source
from scopelens.core.index.languages import language_of

STDLIB = Path(sysconfig.get_paths()["stdlib"])


def check_invariants(text: str, chunks: list[Chunk], *, max_lines: int | None = None) -> None:
    """Exact ranges, in order, no overlap, no blank chunk, every non-blank line covered."""
    lines = text.splitlines()
    previous_end = 0
    covered: set[int] = set()
    for chunk in chunks:
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
        assert previous_end < chunk.start_line <= chunk.end_line <= len(lines)
        assert chunk.text.strip()
        if max_lines is not None:
            assert chunk.end_line - chunk.start_line + 1 <= max_lines
        previous_end = chunk.end_line
        covered.update(range(chunk.start_line, chunk.end_line + 1))
    for number, line in enumerate(lines, start=1):
        assert number in covered or not line.strip(), f"line {number} dropped: {line!r}"


def by_symbol(chunks: list[Chunk]) -> dict[str | None, list[Chunk]]:
    out: dict[str | None, list[Chunk]] = {}
    for chunk in chunks:
        out.setdefault(chunk.symbol, []).append(chunk)
    return out


# --- decoding and languages -----------------------------------------------------------------


def test_decode_source_strips_bom_and_reports_clean_text() -> None:
    assert decode_source("\ufeffx = 'é'\n".encode("utf-8")) == ("x = 'é'\n", False)


def test_decode_source_replaces_undecodable_bytes() -> None:
    text, had_errors = decode_source(b"ok\n\xff\xfe bad \xc3\n")
    assert had_errors
    assert text == "ok\n\ufffd\ufffd bad \ufffd\n"


def test_language_of() -> None:
    assert language_of("a/b.py") == "python"
    assert language_of("web/App.TSX") == "typescript"
    assert language_of("x.mjs") == "javascript"
    assert language_of("main.go") == "go"
    assert language_of("lib.rs") == "rust"
    assert language_of("README.md") == "markdown"
    assert language_of("logs/app.log") == "log"
    assert language_of("logs/app.log.1") == "log"
    assert language_of("NOTES") == "text"


# --- python -----------------------------------------------------------------------------------

PY_SOURCE = textwrap.dedent(
    '''\
    """Module docstring."""
    import os
    import sys

    LIMIT = 10


    # Adds one.
    @functools.cache
    @other(
        "arg",
    )
    def add_one(x):
        return x + 1


    async def fetch():
        return await thing()


    class Small:
        def a(self):
            return 1


    if __name__ == "__main__":
        add_one(1)
    '''
)


def test_python_top_level_defs_are_one_chunk_each_with_decorators() -> None:
    chunks = chunk_text("m.py", PY_SOURCE)
    check_invariants(PY_SOURCE, chunks)
    assert [(c.kind, c.symbol) for c in chunks] == [
        ("module", None),
        ("function", "add_one"),
        ("function", "fetch"),
        ("class", "Small"),
        ("module", None),
    ]
    add_one = chunks[1]
    assert add_one.text.startswith("# Adds one.\n@functools.cache\n@other(")
    assert add_one.text.endswith("return x + 1")
    assert chunks[0].text == '"""Module docstring."""\nimport os\nimport sys\n\nLIMIT = 10'
    assert chunks[-1].text.startswith('if __name__ == "__main__":')


def make_big_class(methods: int = 6, body_lines: int = 12) -> str:
    parts = ["import os", "", "", "class Big(Base):", '    """A big class."""', ""]
    parts += ["    limit = 3", ""]
    for m in range(methods):
        if m == 2:
            parts.append("    @property")
        parts.append(f"    def method_{m}(self):")
        parts += [f"        x{k} = {k}" for k in range(body_lines)]
        parts.append("")
    parts += ["    alias = method_0", "", "", "def after():", "    return 1", ""]
    return "\n".join(parts)


def test_big_class_is_split_by_method_with_qualified_symbols() -> None:
    text = make_big_class()
    chunks = chunk_text("big.py", text, max_lines=30)
    check_invariants(text, chunks, max_lines=30)
    kinds = [(c.kind, c.symbol) for c in chunks]
    assert kinds == [
        ("module", None),
        ("class-header", "Big"),
        *[("method", f"Big.method_{m}") for m in range(6)],
        ("function", "after"),
    ]
    header = chunks[1]
    assert header.text == 'class Big(Base):\n    """A big class."""\n\n    limit = 3'
    assert by_symbol(chunks)["Big.method_2"][0].text.startswith("    @property\n    def method_2")
    # A class attribute after the last method stays with it rather than vanishing.
    assert by_symbol(chunks)["Big.method_5"][0].text.endswith("    alias = method_0")


def test_big_function_is_windowed_but_keeps_its_symbol() -> None:
    body = "\n".join(f"    y = {k}" + ("\n" if k % 10 == 9 else "") for k in range(100))
    text = f"def huge():\n{body}\n\nX = 1\n"
    chunks = chunk_text("h.py", text, max_lines=25)
    check_invariants(text, chunks, max_lines=25)
    huge = [c for c in chunks if c.symbol == "huge"]
    assert len(huge) > 1 and {c.kind for c in huge} == {"function"}
    assert chunks[-1].kind == "module" and chunks[-1].text == "X = 1"


def test_huge_module_level_code_is_windowed() -> None:
    text = "DATA = [\n" + "".join(f"    {k},\n" for k in range(300)) + "]\n"
    chunks = chunk_text("d.py", text, max_lines=50)
    check_invariants(text, chunks, max_lines=50)
    assert len(chunks) > 1 and {c.kind for c in chunks} == {"module"}


def test_char_cap_splits_a_function_with_long_lines() -> None:
    text = "def f():\n" + "".join(f"    s{k} = '{'x' * 200}'\n" for k in range(10))
    chunks = chunk_text("c.py", text, max_chars=1000)
    check_invariants(text, chunks)
    assert len(chunks) > 1
    assert all(len(c.text) <= 1000 for c in chunks)


def test_syntax_error_falls_back_to_windows() -> None:
    text = "def broken(:\n    pass\n\n" + "x = 1\n" * 200
    chunks = chunk_text("bad.py", text, max_lines=40)
    check_invariants(text, chunks, max_lines=40)
    assert {c.kind for c in chunks} == {"window"}


def test_null_bytes_fall_back_to_windows() -> None:
    text = "x = 1\n\x00\ny = 2\n"
    chunks = chunk_text("nul.py", text)
    check_invariants(text, chunks)
    assert [c.kind for c in chunks] == ["window"]


def test_undecodable_python_bytes_are_chunked_without_crash() -> None:
    text, had_errors = decode_source(b"def f():\n    return '\xff\xfe'\n\n\x80\x81 = 3\n")
    assert had_errors
    chunks = chunk_text("u.py", text)
    check_invariants(text, chunks)
    assert "\ufffd" in "".join(c.text for c in chunks)


def test_form_feed_and_unicode_line_separators_keep_exact_ranges() -> None:
    # splitlines() breaks on these, Python's tokenizer does not: ranges must still be exact.
    text = 'x = 1\n\x0c\ndef f():\n    s = "a\u2028b"\n    return s\n\nclass C:\n    pass\x0c\n'
    chunks = chunk_text("ff.py", text)
    check_invariants(text, chunks)
    assert [(c.kind, c.symbol) for c in chunks] == [
        ("module", None),
        ("function", "f"),
        ("class", "C"),
    ]
    assert chunks[1].text == 'def f():\n    s = "a\n' + 'b"\n    return s'


def test_crlf_and_bom_source() -> None:
    text, _ = decode_source(b"\xef\xbb\xbfimport os\r\n\r\ndef f():\r\n    return 1\r\n")
    chunks = chunk_text("w.py", text)
    check_invariants(text, chunks)
    assert [(c.kind, c.symbol, c.text) for c in chunks] == [
        ("module", None, "import os"),
        ("function", "f", "def f():\n    return 1"),
    ]


def test_empty_and_blank_files_have_no_chunks() -> None:
    assert chunk_text("e.py", "") == []
    assert chunk_text("e.ts", "\n\n  \n") == []
    assert chunk_text("e.py", "\n\n  \n") == []


# --- other languages ------------------------------------------------------------------------

TS_SOURCE = textwrap.dedent(
    """\
    import { a } from "./a";

    export function first(x: number): number {
      const y = { k: "}" };

      if (x > 1) {
        return x;
      }
      return y.k.length;
    }

    export const second = (s: string): string => {
      // a brace in a comment: {
      const t = `${s}{`;

      return t;
    };

    function third() {
      return 3;
    }
    """
)


def test_typescript_functions_are_chunks_with_their_names() -> None:
    """Each function (an arrow function bound to a const too) is one chunk named by it, at
    every size that fits it; braces in strings and comments do not matter to a syntax tree."""
    functions = {"first": (3, 10), "second": (12, 17), "third": (19, 21)}  # 1-based inclusive
    for max_lines in range(8, 25):
        chunks = chunk_text("a.ts", TS_SOURCE, max_lines=max_lines)
        check_invariants(TS_SOURCE, chunks, max_lines=max_lines)
        named = {c.symbol: (c.start_line, c.end_line) for c in chunks if c.kind == "function"}
        assert named == functions, (max_lines, named)
        assert [c.kind for c in chunks if c.symbol is None] == ["module"]


def test_brace_languages_without_a_grammar_break_between_functions() -> None:
    """Kotlin has no grammar here: windows that end where a block closes."""
    kotlin = "package main\n\n" + "\n".join(f"fun f{k}(): Int {{\n    val x = {k}\n    return x\n}}\n" for k in range(20))
    chunks = chunk_text("m.kt", kotlin, max_lines=12)
    check_invariants(kotlin, chunks, max_lines=12)
    assert {c.kind for c in chunks} == {"window"}
    for chunk in chunks[:-1]:
        assert chunk.text.endswith("}"), chunk.text


def test_markdown_breaks_before_headings() -> None:
    sections = []
    for k in range(6):
        fence = "```sh\n# not a heading\n```"
        sections.append(f"## Section {k}\n\nline one of {k}\nline two of {k}\n{fence}")
    text = "# Title\n\nIntro.\n\n" + "\n\n".join(sections) + "\n"
    chunks = chunk_text("README.md", text, max_lines=16)
    check_invariants(text, chunks, max_lines=16)
    assert len(chunks) > 1
    for chunk in chunks[1:]:
        assert chunk.text.startswith("## Section"), chunk.text


def test_logs_are_plain_windows() -> None:
    text = "".join(f"2024-01-01 INFO step {k}\n" + ("\n" if k % 7 == 0 else "") for k in range(100))
    chunks = chunk_text("run.log", text, max_lines=20)
    check_invariants(text, chunks, max_lines=20)
    assert {c.kind for c in chunks} == {"window"}


def test_single_line_longer_than_char_cap_is_kept_whole() -> None:
    text = "short\n" + "x" * 500 + "\nshort again\n"
    chunks = chunk_text("a.txt", text, max_chars=100)
    check_invariants(text, chunks)
    assert any(c.text == "x" * 500 for c in chunks)


def test_caps_must_be_positive() -> None:
    with pytest.raises(ValueError):
        chunk_text("a.txt", "x", max_lines=0)


# --- the line-range invariant on random text ----------------------------------------------

TOKENS = [
    *list("ab {}();#@:=\t "),
    "\n",
    "\r",
    "\r\n",
    "\x0c",
    "\x0b",
    "\u2028",
    "\x85",
    "é",
    "\x00",
    "�",
    "def f():\n    ",
    "class C:\n    ",
    "function f() {\n",
    "class K {\n  m() {",
    "func (s *S) M() {\n",
    "impl S {\n fn m() {",
    "struct T {",
    "/* c */",
    "## ",
    "}\n",
    '"""',
    "'",
    "\n\n",
]
LINE_TEXT = st.lists(st.sampled_from(TOKENS), max_size=200).map("".join) | st.text(max_size=300)
PATHS = st.sampled_from(
    ["a.py", "a.ts", "a.tsx", "a.js", "a.go", "a.rs", "a.java", "a.c", "a.cpp", "a.kt", "a.md", "a.log", "a.txt"]
)


@given(text=LINE_TEXT, path=PATHS, max_lines=st.integers(1, 12), max_chars=st.integers(1, 200))
def test_line_range_invariant_on_random_text(
    text: str, path: str, max_lines: int, max_chars: int
) -> None:
    chunks = chunk_text(path, text, max_lines=max_lines, max_chars=max_chars)
    check_invariants(text, chunks, max_lines=max_lines)
    for chunk in chunks:
        assert chunk.path == path
        assert chunk.kind in {"function", "class", "method", "class-header", "type", "module", "window"}
        assert len(chunk.text) <= max_chars or chunk.start_line == chunk.end_line


NOISE = ["", "\x0c", "# a\u2028b", "x = 'a\x0bb'", "\x0c# c"]


@given(
    names=st.lists(st.sampled_from(["f", "g", "C", "D"]), min_size=1, max_size=8),
    body=st.integers(1, 15),
    max_lines=st.integers(2, 20),
    noise=st.lists(st.sampled_from(NOISE), min_size=8, max_size=8),
)
def test_line_range_invariant_on_random_python(
    names: list[str], body: int, max_lines: int, noise: list[str]
) -> None:
    # The noise lines hold characters that splitlines() breaks on and the tokenizer does not.
    parts = ["import os", ""]
    for name, extra in zip(names, noise, strict=False):
        parts.append(extra)
        if name.isupper():
            parts += [f"class {name}:", "    x = 1", ""]
            parts += [f"    def m{k}(self):\n        return {k}\n" for k in range(body // 3 + 1)]
        else:
            parts += ["@dec", f"def {name}():", *[f"    v = {k}" for k in range(body)]]
            parts += ["", "Y = 2"]
    text = "\n".join(parts) + "\n"
    ast.parse(text)
    chunks = chunk_text("r.py", text, max_lines=max_lines)
    check_invariants(text, chunks, max_lines=max_lines)
    assert "window" not in {c.kind for c in chunks}
    for chunk in chunks:
        lines = chunk.text.splitlines()
        if chunk.kind == "module":
            assert not any(line.startswith(("def ", "class ", "@")) for line in lines)
        elif chunk.kind in {"function", "class"} and chunk.symbol and "." not in chunk.symbol:
            heads = [line for line in lines if line.startswith(("def ", "class "))]
            assert heads[:1] in ([], [f"def {chunk.symbol}():"], [f"class {chunk.symbol}:"])


# --- real files -------------------------------------------------------------------------------


def unparsable_stdlib_files() -> list[Path]:
    data = STDLIB / "lib2to3" / "tests" / "data"
    found = []
    for path in sorted(data.glob("*.py")) if data.is_dir() else []:
        try:
            ast.parse(decode_source(path.read_bytes())[0])
        except (SyntaxError, ValueError):
            found.append(path)
    return found


UNPARSABLE_SOURCES = {
    "py2_print.py": b'print "hello"\nexec "x = 1"\n',
    "null_bytes.py": b"def f():\n    return 1\x00\n",
    "latin1.py": b"# -*- coding: latin-1 -*-\nname = '\xe9t\xe9'\ndef broken(:\n    pass\n",
    "open_string.py": b'def f():\n    return """never closed\n\ndef g():\n    pass\n',
}


def test_unparsable_stdlib_files_keep_the_invariant() -> None:
    """Real stdlib files that do not parse (when this Python ships them: Debian's does not):
    Python 2 code is chunked by its statements like any other, broken text by windows."""
    for path in unparsable_stdlib_files():
        text, _ = decode_source(path.read_bytes())
        chunks = chunk_text(str(path), text)
        check_invariants(text, chunks, max_lines=80)


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("py2_print.py", {"module"}),  # Python 2, but statements are still statements
        ("null_bytes.py", {"window"}),
        ("latin1.py", {"window"}),  # a bracket never closed
        ("open_string.py", {"window"}),  # a string never closed
    ],
)
def test_text_that_is_not_python_falls_back_to_windows(tmp_path: Path, name: str, kinds: set[str]) -> None:
    text, _ = decode_source(UNPARSABLE_SOURCES[name])
    chunks = chunk_text(name, text)
    check_invariants(text, chunks, max_lines=80)
    assert {c.kind for c in chunks} == kinds


@pytest.mark.parametrize("package", ["json", "email"])
def test_stdlib_packages_keep_the_invariant(package: str) -> None:
    files = sorted((STDLIB / package).rglob("*.py"))
    assert files
    for path in files:
        text, _ = decode_source(path.read_bytes())
        chunks = chunk_text(str(path), text)
        check_invariants(text, chunks, max_lines=80)
        assert "window" not in {c.kind for c in chunks}, path
        symbols = {c.symbol for c in chunks}
        tree = ast.parse(text)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                assert node.name in symbols, (path, node.name)
