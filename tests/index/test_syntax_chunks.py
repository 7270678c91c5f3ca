"""Chunks by syntax tree (tree-sitter) for TypeScript, JavaScript, Go, Rust, Java, C and C++:
definitions with their names, big classes cut by member, and what a tree cannot give left to
windows."""

from __future__ import annotations

import textwrap

import pytest

from scopelens.core.index.chunker import chunk_text
from scopelens.core.index.syntax_scan import SYNTAX_LANGUAGES, grammar_name, scan
from tests.index.test_chunker import check_invariants


def named(path: str, text: str, **limits: int) -> list[tuple[str, str | None, int, int]]:
    chunks = chunk_text(path, text, **limits)
    check_invariants(text, chunks, max_lines=limits.get("max_lines"))
    return [(c.kind, c.symbol, c.start_line, c.end_line) for c in chunks]


def big_body(n: int, line: str) -> str:
    return "\n".join(line.format(k=k) for k in range(n))


def test_every_listed_language_has_a_grammar_that_loads() -> None:
    for language in SYNTAX_LANGUAGES:
        name = grammar_name(f"x.{language}", language)
        assert name is not None and scan("", name) == []


def test_typescript_class_too_big_is_cut_by_method_with_doc_comments_and_decorators() -> None:
    body = big_body(30, "    const v{k} = {k};")
    text = textwrap.dedent(f"""\
        import {{ Role }} from "./roles";

        /** Sessions. */
        @injectable()
        export class Auth {{
          private users = new Map<string, Role>();

          // Logs a user in.
          login(user: string): boolean {{
        {body}
            return true;
          }}

          logout(): void {{
        {body}
          }}
        }}

        export interface Options {{ ttl: number }}
        export type Id = string;
        export enum Mode {{ A, B }}
        """)
    chunks = named("src/auth.ts", text, max_lines=40)
    kinds = [(k, s) for k, s, _, _ in chunks]
    assert kinds == [
        ("module", None), ("class-header", "Auth"), ("method", "Auth.login"), ("method", "Auth.logout"),
        ("type", "Options"), ("type", "Id"), ("type", "Mode"),
    ]
    header = next(c for c in chunks if c[0] == "class-header")
    assert header[2] == 3, "the doc comment and the decorator start the class"
    login = next(c for c in chunks if c[1] == "Auth.login")
    assert text.splitlines()[login[2] - 1].strip() == "// Logs a user in."


def test_tsx_and_javascript() -> None:
    tsx = 'export function Button(props: { label: string }) {\n  return <button>{props.label}</button>;\n}\n'
    assert grammar_name("ui/Button.tsx", "typescript") == "tsx"
    assert named("ui/Button.tsx", tsx) == [("function", "Button", 1, 3)]
    js = 'const add = (a, b) => a + b;\n\nmodule.exports = { add };\n\nclass Counter {\n  inc() { return 1; }\n}\n'
    assert named("lib/add.js", js) == [("function", "add", 1, 1), ("module", None, 3, 3), ("class", "Counter", 5, 7)]


def test_go_methods_are_named_by_their_receiver_type() -> None:
    text = (
        'package flags\n\nimport "sync"\n\n// Store keeps flags.\ntype Store struct {\n\tmu sync.Mutex\n}\n\n'
        "// Get returns a flag.\nfunc (s *Store) Get(name string) bool {\n\treturn false\n}\n\n"
        "func New() *Store { return &Store{} }\n"
    )
    assert named("flags/store.go", text) == [
        ("module", None, 1, 3), ("type", "Store", 5, 8), ("method", "Store.Get", 10, 13), ("function", "New", 15, 15),
    ]


def test_rust_impl_blocks_are_classes_of_their_type() -> None:
    body = big_body(20, "        let v{k} = {k};")
    text = (
        "use std::fmt;\n\n/// A point.\n#[derive(Debug)]\npub struct Point { x: i32 }\n\n"
        f"impl<T> fmt::Display for Point<T> {{\n    fn fmt(&self) -> fmt::Result {{\n{body}\n        Ok(())\n    }}\n\n"
        f"    fn other(&self) {{\n{body}\n    }}\n}}\n"
    )
    chunks = named("src/point.rs", text, max_lines=30)
    assert [(k, s) for k, s, _, _ in chunks] == [
        ("module", None), ("type", "Point"), ("class-header", "Point"), ("method", "Point.fmt"), ("method", "Point.other"),
    ]
    assert chunks[1][2] == 3, "doc comment and attribute go with the struct"


def test_java_members_and_nested_classes() -> None:
    body = big_body(30, "    int v{k} = {k};")
    text = (
        "package a;\n\nimport b.C;\n\n/** Doc */\npublic class A {\n  private int x;\n\n  public A() {}\n\n"
        f"  @Override\n  public int get() {{\n{body}\n    return x;\n  }}\n\n  static class Inner {{ void f() {{}} }}\n}}\n"
    )
    chunks = named("src/A.java", text, max_lines=40)
    assert [(k, s) for k, s, _, _ in chunks] == [
        ("module", None), ("class-header", "A"), ("method", "A.A"), ("method", "A.get"), ("class", "A.Inner"),
    ]


def test_c_and_cpp_through_preprocessor_blocks_and_namespaces() -> None:
    c = "#include <stdio.h>\n\ntypedef struct { int a; } S;\n\nstatic int *make(void) {\n  return 0;\n}\n"
    assert named("src/make.c", c) == [("module", None, 1, 1), ("type", "S", 3, 3), ("function", "make", 5, 7)]
    cpp = textwrap.dedent("""\
        #ifndef A_H
        #define A_H
        namespace ns {
        class Foo {
         public:
          int get() const { return 1; }
        };

        int Foo::run(int a) {
          return a;
        }

        template <typename T> T id(T x) { return x; }
        }
        #endif
        """)
    symbols = [(k, s) for k, s, _, _ in named("src/foo.cpp", cpp)]
    assert ("class", "Foo") in symbols and ("method", "Foo.run") in symbols and ("function", "id") in symbols


def test_a_syntax_error_keeps_the_definitions_that_parse() -> None:
    text = "export function good(): number {\n  return 1;\n}\n\nexport function broken( {\n  return ;;; }}}\n"
    chunks = named("src/x.ts", text)
    assert chunks[0] == ("function", "good", 1, 3)
    assert all(s != "broken" for _, s, _, _ in chunks)


@pytest.mark.parametrize("br", ["\r", "\x0c", "\u2028"])
def test_line_breaks_tree_sitter_does_not_count_fall_back_to_windows(br: str) -> None:
    text = f"function a() {{{br}  return 1;\n}}\n\nfunction b() {{\n  return 2;\n}}\n"
    assert {k for k, *_ in named("x.ts", text)} == {"window"}


def test_crlf_files_chunk_by_syntax() -> None:
    text = "function a() {\r\n  return 1;\r\n}\r\n\r\nfunction b() {\r\n  return 2;\r\n}\r\n"
    assert named("x.ts", text) == [("function", "a", 1, 3), ("function", "b", 5, 7)]
