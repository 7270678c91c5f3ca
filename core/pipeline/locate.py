"""Which workspace files a task names: traceback frames, paths, module names, tests.

A bug report names files in the agent's or the reporter's terms: an absolute path on their
machine (``/home/jan/.../site-packages/sympy/matrices/expressions/blockmatrix.py``), a path
relative to somewhere (``flask/config.py``), a dotted module (``sympy.printing.ccode``) or a
test id (``test_merge (test.test_heapq.TestHeapC.test_merge)``). Each is matched against the
paths the index holds by the longest common suffix of path components:

* the match must cover the whole workspace path, or at least ``MIN_SHARED_PARTS``
  components of it, so a frame in the interpreter's own ``json/decoder.py`` does not name a
  workspace ``src/decoder.py`` (standard-library and site-packages frames of code outside
  the workspace drop out this way, not by their folder names);
* a bare file name (``ccode.py``) names every workspace file of that name, up to
  ``MAX_BARE_MATCHES`` of them (beyond that the name says nothing);
* a named test file leads to the code under test by the usual naming conventions
  (``tests/test_mod.py``, ``mod_test.py``, ``test/test_mod.py`` -> ``mod.py``), the closest
  such file by shared directories; when no file is named like it, by what it imports
  (Python ``import``/``from``, relative too, and JavaScript/TypeScript ``from "./x"``).
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

MIN_SHARED_PARTS = 2
"""Components a partial match must share (``expressions/blockmatrix.py``): one, the file
name alone, is too often a different file of the same name."""
MAX_BARE_MATCHES = 3
"""A bare file name matching more workspace files than this names none of them."""

_TEST_DIRS = frozenset({"test", "tests", "testing", "__tests__", "spec", "specs"})
_TEST_STEM = re.compile(r"^(?:test_(?P<a>\w+)|(?P<b>\w+?)_tests?|(?P<c>\w+?)[._](?:test|spec))$")
MAX_IMPORTED = 5
"""At most this many imported files stand for a test's code under test (a test importing a
dozen modules says little about which one fails)."""
_PY_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+\(?([\w, \t]+)|import[ \t]+([\w., \t]+))", re.M)
_JS_IMPORT = re.compile(r"""(?:\bfrom[ \t]+|\brequire\([ \t]*|^[ \t]*import[ \t]+)['"](\.{1,2}/[^'"]+)['"]""", re.M)
_JS_SUFFIXES = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", "/index.ts", "/index.js")
_CODE_SUFFIXES = (".py", ".pyi", ".ts", ".tsx", ".js", ".jsx", ".go", ".rs", ".java", ".rb", ".c", ".cc", ".cpp", ".h")


def is_test_path(path: str) -> bool:
    """Whether a workspace path is a test file (by folder or by name), by common conventions."""
    parts = path.lower().split("/")
    if any(part in _TEST_DIRS for part in parts[:-1]):
        return True
    name = parts[-1]
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return name == "conftest.py" or _TEST_STEM.match(stem) is not None


@dataclass(frozen=True)
class Located:
    path: str
    """The workspace path."""
    how: str
    """``named`` (a path, frame or module of the task), or ``under-test`` (the code a named
    test file tests)."""


class PathIndex:
    """The workspace's paths, looked up by file name."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = sorted(set(paths))
        self.by_name: dict[str, list[str]] = defaultdict(list)
        for path in self.paths:
            self.by_name[posixpath.basename(path)].append(path)

    def resolve(self, given: str) -> list[str]:
        """Workspace paths that ``given`` (absolute, relative or bare) names, longest match first."""
        given = given.replace("\\", "/").strip()
        parts = [p for p in given.split("/") if p and p != "."]
        if not parts:
            return []
        same_name = self.by_name.get(parts[-1], [])
        if len(parts) == 1:
            return list(same_name) if len(same_name) <= MAX_BARE_MATCHES else []
        best: list[str] = []
        best_shared = 0
        for path in same_name:
            own = path.split("/")
            shared = _shared_suffix(own, parts)
            if shared < len(own) and shared < MIN_SHARED_PARTS:
                continue
            if shared > best_shared:
                best, best_shared = [path], shared
            elif shared == best_shared:
                best.append(path)
        return best

    def module(self, dotted: str) -> list[str]:
        """The module file a dotted name names (``a.b.c`` -> ``a/b/c.py``, else ``a/b.py``, ...).

        Packages' ``__init__`` files are not named this way: ``flask.Config`` says little
        about ``flask/__init__.py``.
        """
        pieces = dotted.split(".")
        for end in range(len(pieces), 0, -1):
            found = self.resolve("/".join(pieces[:end]) + ".py")
            if found and (end >= MIN_SHARED_PARTS or all(f.count("/") == 0 for f in found)):
                return found
        return []

    def under_test(self, test_path: str) -> list[str]:
        """The code a test file tests, by naming convention: the same stem without ``test``,
        preferring the file that shares most directories with the test (tests dirs aside)."""
        name = posixpath.basename(test_path)
        stem, dot, extension = name.rpartition(".")
        match = _TEST_STEM.match(stem if dot else name)
        if match is None:
            return []
        target = next(g for g in match.groups() if g)
        candidates = [
            p for suffix in ((f".{extension}",) if dot else _CODE_SUFFIXES)
            for p in self.by_name.get(target + suffix, [])
            if not is_test_path(p)
        ]
        candidates += [p for p in self.paths if p.endswith(f"/{target}/__init__.py") and not is_test_path(p)]
        if not candidates:
            return []
        home = [d for d in test_path.split("/")[:-1] if d.lower() not in _TEST_DIRS]
        return sorted(candidates, key=lambda p: (-_shared_prefix(p.split("/")[:-1], home), p))[:1]


    def imported(self, test_path: str, text: str) -> list[str]:
        """Workspace files (not tests) that a test file's text imports, in order, at most
        ``MAX_IMPORTED``: absolute Python modules by :meth:`module`, relative imports (Python
        dots, JavaScript ``./x``) against the test's folder."""
        folder = posixpath.dirname(test_path)
        known = set(self.paths)
        found: list[str] = []
        for match in _PY_IMPORT.finditer(text):
            source, names, plain = match.groups()
            if plain is not None:
                modules = [m.strip() for m in plain.split(",") if m.strip()]
                found += [p for m in modules for p in self.module(m.split(" ")[0])]
            elif source.startswith("."):
                level = len(source) - len(source.lstrip("."))
                base = folder
                for _ in range(level - 1):
                    base = posixpath.dirname(base)
                rest = source.lstrip(".").replace(".", "/")
                stems = [posixpath.join(base, rest)] if rest else []
                stems += [posixpath.join(base, rest, n.strip()) for n in names.split(",") if n.strip()]
                found += [stem + ".py" for stem in stems if stem + ".py" in known]
            else:
                dotted = [f"{source}.{n.strip()}" for n in names.split(",") if n.strip()]
                found += next((self.module(d) for d in dotted if self.module(d)), self.module(source))
        for match in _JS_IMPORT.finditer(text):
            stem = posixpath.normpath(posixpath.join(folder, match.group(1)))
            found += [stem + suffix for suffix in _JS_SUFFIXES if stem + suffix in known][:1]
        return [p for p in dict.fromkeys(found) if not is_test_path(p)][:MAX_IMPORTED]


def _shared_suffix(a: Sequence[str], b: Sequence[str]) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def _shared_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


def locate(
    index: PathIndex, paths: Iterable[str], modules: Iterable[str], text_of: Callable[[str], str] | None = None
) -> list[Located]:
    """Workspace files named by ``paths`` (frames, mentioned paths, test ids' files) and
    ``modules`` (dotted names), then the code under each named test file (by name, else by its
    imports when ``text_of`` can read the test); in order found."""
    found: dict[str, Located] = {}
    for given in paths:
        for path in index.resolve(given):
            found.setdefault(path, Located(path, "named"))
    for dotted in modules:
        for path in index.module(dotted):
            found.setdefault(path, Located(path, "named"))
    for named in [f.path for f in found.values() if is_test_path(f.path)]:
        tested = index.under_test(named)
        if not tested and text_of is not None:
            tested = index.imported(named, text_of(named))
        for path in tested:
            found.setdefault(path, Located(path, "under-test"))
    return list(found.values())
