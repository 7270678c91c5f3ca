"""Planning pulls strong handles out of a report: workspace files by path suffix, modules, the
code under a named test; whole identifiers above their parts; quoted code; common prose gated."""

from __future__ import annotations

from collections.abc import Iterable

from scopelens.core.contracts import RetrievalIntent
from scopelens.core.pipeline.locate import PathIndex, is_test_path, locate
from scopelens.core.pipeline.planner import PROSE_GATE_MIN_CHUNKS, TERM_WEIGHTS, weighted_terms
from scopelens.core.vocab import Purpose

WORKSPACE = PathIndex([
    "src/flask/config.py", "src/flask/__init__.py", "src/flask/app.py", "tests/test_config.py",
    "sympy/printing/ccode.py", "sympy/utilities/codegen.py", "decoder.py", "json/decoder.py",
    "heapq.py", "test/test_heapq.py", "lib/a/util.py", "lib/b/util.py", "lib/c/util.py", "lib/d/util.py",
])


def test_a_frame_names_the_file_sharing_its_longest_path_suffix():
    assert WORKSPACE.resolve("/home/jan/venv/lib/python3.11/site-packages/sympy/printing/ccode.py") == [
        "sympy/printing/ccode.py"
    ]
    # the interpreter's json/decoder.py is the workspace's json/decoder.py, not its root decoder.py
    assert WORKSPACE.resolve("/usr/lib/python3.11/json/decoder.py") == ["json/decoder.py"]


def test_a_frame_sharing_only_a_file_name_names_nothing():
    assert WORKSPACE.resolve("/usr/lib/python3.11/email/config.py") == []
    assert WORKSPACE.resolve("/usr/lib/python3.11/heapq.py") == ["heapq.py"]  # the whole workspace path matches


def test_bare_names_and_relative_paths():
    assert WORKSPACE.resolve("ccode.py") == ["sympy/printing/ccode.py"]
    assert WORKSPACE.resolve("util.py") == []  # four files of that name: the name says nothing
    assert WORKSPACE.resolve("flask/config.py") == ["src/flask/config.py"]


def test_modules_name_module_files_never_package_inits():
    assert WORKSPACE.module("sympy.printing.ccode") == ["sympy/printing/ccode.py"]
    assert WORKSPACE.module("flask.config.Config.from_file") == ["src/flask/config.py"]
    assert WORKSPACE.module("flask.Config") == []


def test_a_test_file_leads_to_the_code_under_test():
    assert is_test_path("tests/test_config.py") and is_test_path("src/auth/session.test.ts")
    assert not is_test_path("src/flask/config.py") and not is_test_path("latest.py")
    assert WORKSPACE.under_test("tests/test_config.py") == ["src/flask/config.py"]
    assert WORKSPACE.under_test("test/test_heapq.py") == ["heapq.py"]
    found = locate(WORKSPACE, ["/ci/Lib/test/test_heapq.py"], [])
    assert [(f.path, f.how) for f in found] == [("test/test_heapq.py", "named"), ("heapq.py", "under-test")]


class FakeLexicon:
    def __init__(self, paths: Iterable[str], frequencies: dict[str, int], chunks: int) -> None:
        self.index = PathIndex(paths)
        self.frequencies = frequencies
        self.chunks = chunks

    def paths(self) -> PathIndex:
        return self.index

    def document_frequencies(self, terms: Iterable[str]) -> tuple[dict[str, int], int]:
        return {t: self.frequencies[t] for t in terms if t in self.frequencies}, self.chunks

    def file_chunks(self, path: str) -> list[tuple[str | None, str]]:
        return []


def weights(question: str, lexicon: FakeLexicon | None = None) -> dict[str, tuple[float, str]]:
    intent = RetrievalIntent(purpose=Purpose.FIX_TEST, question=question)
    return {t.term: (t.weight, t.kind) for t in weighted_terms(intent, lexicon)}


def test_whole_identifiers_weigh_more_than_their_parts():
    terms = weights("app.register_blueprint drops the url_prefix")
    assert terms["app.register_blueprint"][0] == TERM_WEIGHTS["identifier"]
    assert terms["register_blueprint"][0] == TERM_WEIGHTS["identifier"]  # the last name is an identifier too
    assert terms["app"][0] < TERM_WEIGHTS["identifier"] and terms["register"][0] < TERM_WEIGHTS["identifier"]
    assert terms["url_prefix"][0] == TERM_WEIGHTS["identifier"] and terms["prefix"][0] < TERM_WEIGHTS["identifier"]


def test_quoted_code_counts_above_prose():
    terms = weights("Calling `trigsimp(expr)` is wrong\n\n```\n>>> simplify(cos(x))\n```\nthe simplify output")
    assert terms["trigsimp"] == (TERM_WEIGHTS["quoted"], "quoted")
    assert terms["simplify"] == (TERM_WEIGHTS["quoted"], "quoted")
    assert terms["output"] == (TERM_WEIGHTS["prose"], "prose")


def test_common_prose_is_gated_in_a_large_index_only():
    question = "the version output looks weird after upgrading"
    common = {"version": 400, "output": 90, "weird": 3, "upgrading": 2, "looks": 50}
    gated = weights(question, FakeLexicon([], common, chunks=1000))
    assert "version" not in gated and "weird" in gated and "output" in gated  # 400 of 1000 chunks; 90 is under 1/8
    small = weights(question, FakeLexicon([], common, chunks=PROSE_GATE_MIN_CHUNKS - 1))
    assert "version" in small


def test_files_the_report_names_become_located_terms():
    report = 'File "/srv/app/venv/site-packages/sympy/printing/ccode.py", line 3, in ccode\nsee tests/test_config.py'
    terms = weights(report, FakeLexicon(WORKSPACE.paths, {}, chunks=10))
    located = {t for t, (_w, kind) in terms.items() if kind == "located"}
    # the named test file is evidence, not a place of the fix; the code it tests is located
    assert located == {"sympy/printing/ccode.py", "src/flask/config.py"}
    assert terms["sympy/printing/ccode.py"][0] == TERM_WEIGHTS["located"]


def test_option_names_are_identifiers():
    terms = weights("running pylint --recursive=y ignores --ignore-paths and -j")
    assert terms["ignore-paths"] == (TERM_WEIGHTS["identifier"], "identifier")
    assert terms["recursive"] == (TERM_WEIGHTS["identifier"], "identifier")
    assert "j" not in terms


def test_a_test_named_like_no_module_leads_to_what_it_imports():
    index = PathIndex(["pkg/core/mul.py", "pkg/core/util.py", "pkg/core/tests/test_arith.py", "pkg/__init__.py",
                       "src/auth/session.ts", "tests/auth/login.test.ts"])
    text = "from pkg.core.mul import Mul\nfrom ..util import helper\nfrom pkg import *\nimport unittest\n"
    assert index.imported("pkg/core/tests/test_arith.py", text) == ["pkg/core/mul.py", "pkg/core/util.py"]
    assert index.imported("tests/auth/login.test.ts", 'import { login } from "../../src/auth/session";\n') == [
        "src/auth/session.ts"
    ]
    found = locate(index, ["pkg/core/tests/test_arith.py"], [], lambda _path: text)
    assert [(f.path, f.how) for f in found][1:] == [("pkg/core/mul.py", "under-test"), ("pkg/core/util.py", "under-test")]
