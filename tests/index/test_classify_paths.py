"""A path's language and source, decided without path objects or a glob match per pattern,
are what ``PurePosixPath`` and ``fnmatchcase`` decide."""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import PurePosixPath

from hypothesis import given, settings
from hypothesis import strategies as st

from scopelens.core.index.languages import _LANGUAGES, file_name, language_of
from scopelens.core.index.sources import DOC_LANGUAGES, LOG_LANGUAGES, SourceClassifier
from scopelens.core.vocab import Source

PATHS = st.lists(st.sampled_from([*"ab./\\_-", "log", "md", "py", "adr", "rules", "docs", "AGENTS", "TS"]),
                 max_size=12).map("".join)
PARTS = st.lists(st.sampled_from(["a", "b", ".", "..", "", "docs", "adr", "rules", "x.md", "AGENTS.md", "y.log.1", "z.PY", "a."]),
                 max_size=5).map("/".join)


def reference_language(path: str) -> str:
    """``language_of`` as it was, with path objects."""
    name = PurePosixPath(path.replace("\\", "/")).name.lower()
    if ".log." in name:
        return "log"
    return _LANGUAGES.get(PurePosixPath(name).suffix, "text")


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.one_of(PATHS, PARTS))
def test_the_language_of_a_path_is_what_path_objects_give(path: str) -> None:
    assert file_name(path) == PurePosixPath(path.replace("\\", "/")).name
    assert language_of(path) == reference_language(path)


def reference_source(classifier: SourceClassifier, path: str, language: str) -> Source:
    for pattern, source in classifier.extra:
        if fnmatchcase(path, pattern):
            return source
    if any(fnmatchcase(path, pattern) for pattern in classifier.decision_globs):
        return Source.DECISION_RECORD
    if any(fnmatchcase(path, pattern) for pattern in classifier.rule_globs):
        return Source.PROJECT_RULE
    return Source.WORKSPACE_DOC if language in DOC_LANGUAGES | LOG_LANGUAGES else Source.WORKSPACE_CODE


@settings(max_examples=300, derandomize=True, deadline=None)
@given(PARTS, st.sampled_from([(), ("*.md",), ("[a-c]*/x.md", "docs/**"), ("a?b",)]))
def test_the_source_of_a_path_is_what_a_glob_match_per_pattern_gives(path: str, extra_rules: tuple[str, ...]) -> None:
    classifier = SourceClassifier().with_globs(rules=extra_rules, decisions=extra_rules[:1])
    language = language_of(path)
    assert classifier.source_of(path, language) == reference_source(classifier, path, language)
    empty = SourceClassifier(rule_globs=(), decision_globs=())
    assert empty.source_of(path, language) in (Source.WORKSPACE_CODE, Source.WORKSPACE_DOC)


def test_a_classifier_that_has_classified_is_sent_to_a_worker_whole() -> None:
    """Its glob patterns are compiled on first use and cached on it; it is pickled to the
    preparing workers after the stat check used it, and classifies the same there."""
    import pickle

    classifier = SourceClassifier().with_globs(rules=["notes/*.md"])
    assert classifier.source_of("notes/x.md", "markdown") == Source.PROJECT_RULE
    copy = pickle.loads(pickle.dumps(classifier))
    assert copy == classifier
    assert copy.source_of("notes/x.md", "markdown") == Source.PROJECT_RULE
    assert copy.source_of("docs/adr/0001.md", "markdown") == Source.DECISION_RECORD
