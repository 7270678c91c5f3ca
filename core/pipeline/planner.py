"""Turn an intent into a plan: weighted terms, then one sub-query per kind of evidence.

Real users paste an issue, so free text is mined for handles first: test ids
(``tests/x.py::TestY::test_z``), traceback frames (``File "...", line N, in f``), exception
names, paths, and identifiers (CamelCase, snake_case, dotted). They weigh more than prose
words, and explicit anchors weigh most. Each term is then tokenized the way the index is.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from scopelens.core.contracts import RetrievalIntent, RetrievalPlan, RetrievalScope, SubQuery, WeightedTerm
from scopelens.core.index.tokenizer import has_cjk, tokenize
from scopelens.core.pipeline.locate import PathIndex, is_test_path, locate
from scopelens.core.vocab import Authority, EvidenceKind, MergePolicy, Purpose, Source, SubQueryIntent

TERM_WEIGHTS: dict[str, float] = {
    "anchor": 3.0,
    "test-id": 2.5,
    "located": 2.5,
    "frame": 2.0,
    "exception": 2.0,
    "path": 2.0,
    "identifier": 1.5,
    "quoted": 1.0,
    "error": 1.0,
    "prose": 0.5,
}
"""How much each kind of handle counts, relative to a prose word. ``located``: a workspace
file the task names (a traceback frame, a path, a module) or the code under a named test,
searched as its whole path, which every chunk of that file is indexed under."""
PART_SHARE = 1 / 3
"""A part of an identifier (``register`` of ``register_blueprint``) weighs this share of the
whole: 0.5 for an identifier, a prose word's weight, because on its own it is just a word.
The last name of a dotted identifier (``register_blueprint`` of ``app.register_blueprint``)
is an identifier itself and keeps the whole weight."""
PROSE_MAX_SHARE = 1 / 8
"""Prose words (and words of quoted code) in more than one chunk in eight are dropped from the
plan: they match nearly everything and only blur the handles (BM25's IDF already weighs them
little, but a bug report brings dozens of them)."""
GATED_KINDS = frozenset({"prose", "quoted"})
PROSE_GATE_MIN_CHUNKS = 100
"""Below this many chunks no word is dropped: in a small workspace every word is common."""

TEST_ID = re.compile(r"[\w./-]+\.\w+::[\w:\[\]-]+")
FRAME = re.compile(r'File "([^"]+)", line (\d+), in ([\w<>.]+)')
EXCEPTION = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception|Warning|Failure|Exit|Interrupt))\b")
PATH = re.compile(r"(?<![\w/])((?:[\w.-]+/)+[\w.-]+\.\w+|[\w-]+\.(?:py|ts|tsx|js|jsx|go|rs|md|toml|json|ya?ml))\b")
IDENTIFIER = re.compile(
    # dotted names first: alternation takes the first branch that matches at a position
    r"\b([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[a-z]+(?:[A-Z][a-z0-9]*)+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[A-Za-z]\w*_\w+)\b"
)
CODE_SPAN = re.compile(r"```.*?(?:```|\Z)|`[^`\n]+`|^[ \t]*(?:>>>|\.\.\.|\$|In \[\d+\]:) .*$", re.S | re.M)
"""Quoted code in a report: fenced blocks, inline backticks, and interpreter or shell lines."""
CODE_WORD = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]{2,}\b")
CODE_KEYWORDS = frozenset(keyword.kwlist) | frozenset(
    "self cls print import from len str int float list dict set tuple range none true false".split()  # noqa: SIM905
)
"""Words of quoted code that name nothing in particular (keywords and the commonest builtins)."""
OPTION = re.compile(r"(?<![\w-])--?([A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)+|[A-Za-z]{3,}[A-Za-z0-9]*)(?![\w-])")
"""Command-line options (``--ignore-paths``, ``--recursive``): the code that declares them
spells the name (``ignore-paths``, ``ignore_paths``), so it is an identifier."""
STOPWORDS = frozenset(
    """a an the and or but if then else when while of in on at to for from by with without into onto
    is are was were be been being do does did done have has had this that these those it its it's
    i you he she we they me him her us them my your our their not no yes can could should would will
    shall may might must so as than too very just also there here what which who whom whose why how
    all any each few more most other some such only own same both about above below after before
    again further once up down out over under until between through during because get got use used
    using fix fixed please help issue bug problem error fails failing failed test tests""".split()  # noqa: SIM905 - a word list reads best as prose
)


PATH_KINDS = frozenset({"anchor", "path", "test-id"})
MIN_PROSE_CHARS = 2
"""A prose word needs more characters than this to count, unless it is CJK."""


@dataclass(frozen=True)
class Handle:
    text: str
    kind: str


def extract_handles(text: str) -> list[Handle]:
    """Handles found in free text, strongest kinds first, without duplicates."""
    found: list[Handle] = []
    seen: set[str] = set()

    def add(value: str, kind: str) -> None:
        value = value.strip().strip(".,;:'\"()[]")
        if not value or value.lower() in seen:
            return
        if kind == "identifier" and any(value in h.text for h in found if h.kind in PATH_KINDS):
            return  # a piece of a path or test id already found, e.g. session.test.ts
        seen.add(value.lower())
        found.append(Handle(value, kind))

    for match in TEST_ID.finditer(text):
        add(match.group(0), "test-id")
    for match in FRAME.finditer(text):
        add(match.group(1), "path")
        add(match.group(3), "frame")
    for match in EXCEPTION.finditer(text):
        add(match.group(1), "exception")
    for match in PATH.finditer(text):
        add(match.group(1), "path")
    for match in IDENTIFIER.finditer(text):
        add(match.group(1), "identifier")
    for match in OPTION.finditer(text):
        add(match.group(1), "identifier")
    for span in CODE_SPAN.finditer(text):
        for word in CODE_WORD.findall(span.group(0)):
            if word.lower() not in CODE_KEYWORDS:
                add(word, "quoted")
    for word in re.findall(r"[^\W_]+", text):
        # Short Latin words ("is", "to", "ok") carry little; a two-character CJK or Korean
        # word (認証, 캐시) is a whole word, so the length filter skips those.
        if (len(word) > MIN_PROSE_CHARS or has_cjk(word)) and word.lower() not in STOPWORDS and not word.isdigit():
            add(word, "prose")
    return found


PATH_PART_WEIGHT = 0.3
"""Directory names and other fragments of a path handle are weak evidence on their own."""


IDENTIFIER_KINDS = frozenset({"identifier", "frame", "exception", "error", "quoted"})


def _identifier_terms(handle: Handle, weight: float) -> list[tuple[str, float]]:
    """The whole identifier at ``weight``, its last dotted name too, its other parts at
    ``PART_SHARE`` of it."""
    tokens = tokenize(handle.text)
    if len(tokens) <= 1:
        return [(t, weight) for t in tokens]
    whole = {tokens[0]}
    last = handle.text.rsplit(".", 1)[-1]
    if last != handle.text and IDENTIFIER.fullmatch(last):
        whole.add(last.lower())
    part = max(weight * PART_SHARE, TERM_WEIGHTS["prose"])
    return [(t, weight if t in whole else min(weight, part)) for t in tokens]


def _handle_terms(handle: Handle) -> list[tuple[str, float]]:
    """Index terms of a handle with their weights.

    For a path-like handle (``src/auth/session.ts``, ``a/b.py::TestX::test_y``) only the whole
    path, the file's stem and the test names keep the handle's weight: directory parts
    weigh ``PATH_PART_WEIGHT`` and the file extension is dropped, or every ``.ts`` file would
    match a TypeScript anchor.
    """
    weight = TERM_WEIGHTS[handle.kind]
    if handle.kind in IDENTIFIER_KINDS:
        return _identifier_terms(handle, weight)
    tokens = tokenize(handle.text)
    if handle.kind not in PATH_KINDS or not ("/" in handle.text or "." in handle.text):
        return [(t, weight) for t in tokens]
    file_part, _, test_part = handle.text.partition("::")
    name = file_part.rsplit("/", 1)[-1]
    stem, _, extension = name.rpartition(".") if "." in name else (name, "", "")
    strong = {handle.text.lower(), file_part.lower(), name.lower(), *tokenize(stem), *tokenize(test_part)}
    weak_drop = {extension.lower()} if extension else set()
    result = []
    for token in tokens:
        if token in weak_drop:
            continue
        result.append((token, weight if token in strong else min(weight, PATH_PART_WEIGHT)))
    return result


class Lexicon(Protocol):
    """What planning may ask of the index in scope: its paths, and how rare terms are."""

    def paths(self) -> PathIndex: ...

    def document_frequencies(self, terms: Iterable[str]) -> tuple[dict[str, int], int]: ...

    def file_chunks(self, path: str) -> list[tuple[str | None, str]]:
        """The live chunks of a workspace file in scope, in line order: (symbol, text)."""
        ...


def _intent_handles(intent: RetrievalIntent) -> list[Handle]:
    handles: list[Handle] = []
    anchors = intent.anchors
    for value in (anchors.failing_test, *anchors.current_files, *anchors.symbols):
        if value:
            handles.append(Handle(value, "anchor"))
    for text in (anchors.error_text, anchors.traceback):
        if text:
            handles += [Handle(h.text, "error" if h.kind in GATED_KINDS else "anchor") for h in extract_handles(text)]
    handles += extract_handles(intent.question)
    return handles


def located_files(
    intent: RetrievalIntent, paths: PathIndex, handles: list[Handle] | None = None, lexicon: Lexicon | None = None
) -> list[str]:
    """Workspace files the task names (frames, paths, modules, test ids) and the code under a
    named test (by name, else by what it imports, read through ``lexicon``); named test files
    themselves are left out (they are the failure's evidence, found by their own words, not the
    place of a fix). ``handles``: the intent's, if known."""
    handles = _intent_handles(intent) if handles is None else handles
    given = [h.text.split("::")[0] for h in handles if h.kind in PATH_KINDS]
    modules = [h.text for h in handles if h.kind in ("identifier", "frame") and "." in h.text]
    modules += [m.group(1) for m in UNITTEST_ID.finditer(" ".join(filter(None, (
        intent.question, intent.anchors.error_text, intent.anchors.traceback))))]
    def text_of(path: str) -> str:
        return "\n".join(text for _symbol, text in lexicon.file_chunks(path)) if lexicon is not None else ""

    return [f.path for f in locate(paths, given, modules, text_of) if not is_test_path(f.path)]


CALLED = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
TEST_HARNESS_NAMES = frozenset("expect describe it test beforeeach aftereach setup teardown".split())  # noqa: SIM905
"""Calls in a test that belong to the test framework, not to the code under test."""


def failing_test_calls(intent: RetrievalIntent, paths: PathIndex, lexicon: Lexicon) -> list[str]:
    """The names a failing test (``tests/x.py::TestY::test_z``) calls: what it exercises.
    Assertions, the framework's own calls and the language's keywords and common builtins are
    left out."""
    file_part, _, test = intent.anchors.failing_test.partition("::") if intent.anchors.failing_test else ("", "", "")
    name = test.split("::")[-1].split("[")[0]
    if not name:
        return []
    calls: list[str] = []
    for path in paths.resolve(file_part):
        for symbol, text in lexicon.file_chunks(path):
            if symbol and symbol.rsplit(".", 1)[-1] == name:
                calls += [
                    c for c in CALLED.findall(text)
                    if c != name and c.lower() not in CODE_KEYWORDS and c.lower() not in TEST_HARNESS_NAMES
                    and not c.lower().startswith("assert")
                ]
    return list(dict.fromkeys(calls))


UNITTEST_ID = re.compile(r"\(([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+)\)")
"""unittest's ``test_x (package.test_module.TestCase.test_x)``: the dotted test id names the test
module."""


def weighted_terms(intent: RetrievalIntent, lexicon: Lexicon | None = None) -> tuple[WeightedTerm, ...]:
    """Every handle of the intent as index terms, each term at the weight of its best handle.

    With a ``lexicon``, files the task names become ``located`` terms (their whole paths), the
    names a failing test calls become identifiers, and prose words too common to tell chunks
    apart (``PROSE_MAX_SHARE``) are dropped.
    """
    best: dict[str, WeightedTerm] = {}
    handles = _intent_handles(intent)
    if lexicon is not None:
        handles += [Handle(call, "identifier") for call in failing_test_calls(intent, lexicon.paths(), lexicon)]
    for handle in handles:
        for term, weight in _handle_terms(handle):
            if term in STOPWORDS:
                continue
            current = best.get(term)
            if current is None or current.weight < weight:
                best[term] = WeightedTerm(term=term, weight=weight, kind=handle.kind)
    if lexicon is None:
        return tuple(best.values())
    for path in located_files(intent, lexicon.paths(), handles, lexicon):
        whole = path.lower()
        if tokenize(path)[:1] == [whole]:  # indexed as one term (no spaces, not too long)
            best[whole] = WeightedTerm(term=whole, weight=TERM_WEIGHTS["located"], kind="located")
    frequencies, chunks = lexicon.document_frequencies([t.term for t in best.values() if t.kind in GATED_KINDS])
    if chunks < PROSE_GATE_MIN_CHUNKS:
        return tuple(best.values())
    limit = chunks * PROSE_MAX_SHARE
    return tuple(t for t in best.values() if t.kind not in GATED_KINDS or frequencies.get(t.term, 0) <= limit)


SUBQUERY_SOURCES: dict[SubQueryIntent, tuple[Source, ...]] = {
    SubQueryIntent.FIND_ERROR: (Source.ARTIFACT, Source.SESSION_EVENT),
    SubQueryIntent.FIND_CODE: (Source.WORKSPACE_CODE, Source.WORKSPACE_DOC),
    SubQueryIntent.FIND_RULE: (Source.PROJECT_RULE,),
    SubQueryIntent.FIND_MEMORY: (Source.MEMORY,),
    SubQueryIntent.FIND_DECISION: (Source.DECISION_RECORD,),
}
SUBQUERY_TOP_K: dict[SubQueryIntent, int] = {
    SubQueryIntent.FIND_ERROR: 6,
    SubQueryIntent.FIND_CODE: 400,
    SubQueryIntent.FIND_RULE: 5,
    SubQueryIntent.FIND_MEMORY: 5,
    SubQueryIntent.FIND_DECISION: 4,
}
SUBQUERY_MIN_AUTHORITY: dict[SubQueryIntent, Authority] = {
    SubQueryIntent.FIND_ERROR: Authority.LOW,
    SubQueryIntent.FIND_CODE: Authority.LOW,
    SubQueryIntent.FIND_RULE: Authority.MEDIUM,
    SubQueryIntent.FIND_MEMORY: Authority.LOW,  # memory status rules, not authority, govern memories
    SubQueryIntent.FIND_DECISION: Authority.MEDIUM,
}
REQUIRED_KIND_INTENT: dict[EvidenceKind, SubQueryIntent] = {
    EvidenceKind.TEST_LOG: SubQueryIntent.FIND_ERROR,
    EvidenceKind.EVENT: SubQueryIntent.FIND_ERROR,
    EvidenceKind.CODE: SubQueryIntent.FIND_CODE,
    EvidenceKind.DOC: SubQueryIntent.FIND_CODE,
    EvidenceKind.RULE: SubQueryIntent.FIND_RULE,
    EvidenceKind.MEMORY: SubQueryIntent.FIND_MEMORY,
    EvidenceKind.DECISION: SubQueryIntent.FIND_DECISION,
}


def plan(
    intent: RetrievalIntent,
    scope: RetrievalScope,
    merge_policy: MergePolicy = MergePolicy.INTERLEAVE_BY_RELEVANCE,
    lexicon: Lexicon | None = None,
) -> RetrievalPlan:
    """One sub-query per intent kind that the scope's sources allow, sharing the terms; their
    results merge under ``merge_policy`` (recorded in the plan, so drift re-runs it)."""
    terms = weighted_terms(intent, lexicon)
    wanted = _wanted_intents(intent, scope)
    sub_queries: list[SubQuery] = []
    query_text = " ".join(t.term for t in sorted(terms, key=lambda t: (-t.weight, t.term)))
    for kind in SubQueryIntent:
        if kind not in wanted:
            continue
        sources = tuple(s for s in SUBQUERY_SOURCES[kind] if scope.admits_source(s))
        errors = intent.anchors.error_text or intent.anchors.traceback
        if kind == SubQueryIntent.FIND_ERROR and errors and scope.admits_source(Source.WORKSPACE_DOC):
            sources += (Source.WORKSPACE_DOC,)  # logs kept in the workspace, docs quoting the error
        if not sources or not terms:
            continue
        sub_queries.append(
            SubQuery(
                id=f"q{len(sub_queries) + 1}-{kind.value}",
                intent=kind,
                query_text=query_text,
                terms=terms,
                sources=sources,
                top_k=SUBQUERY_TOP_K[kind],
                min_authority=SUBQUERY_MIN_AUTHORITY[kind],
            )
        )
    return RetrievalPlan(sub_queries=tuple(sub_queries), merge_policy=merge_policy)


def _wanted_intents(intent: RetrievalIntent, scope: RetrievalScope) -> set[SubQueryIntent]:
    wanted = {SubQueryIntent.FIND_CODE, SubQueryIntent.FIND_RULE, SubQueryIntent.FIND_MEMORY, SubQueryIntent.FIND_DECISION}
    anchors = intent.anchors
    if anchors.error_text or anchors.failing_test or anchors.traceback or scope.purpose == Purpose.FIX_TEST:
        wanted.add(SubQueryIntent.FIND_ERROR)
    wanted.update(REQUIRED_KIND_INTENT[kind] for kind in intent.required_evidence)
    return wanted
