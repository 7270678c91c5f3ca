"""The one-pass literal prefilter decides only which regexes run, never what is redacted."""

from __future__ import annotations

import platform
import re
import sys
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scopelens.core import redaction_prefilter, redaction_scan
from scopelens.core.redaction_prefilter import LiteralFinder, LiteralGroup
from scopelens.core.redaction_scan import _DETECTORS, _Assignments, _Pattern, redaction_spans
from tests.index.test_redact import CASES


def _without_prefilter(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[tuple[int, int, object]]]:
    with monkeypatch.context() as patch:
        patch.setattr(redaction_scan, "_literal_finder", lambda: None)
        return redaction_spans(text)


HAS_WHEELS = platform.machine() in ("x86_64", "AMD64") or (sys.platform == "darwin" and platform.machine() == "arm64")
"""Where pyproject's marker installs hyperscan (CI's machine is one)."""
needs_hyperscan = pytest.mark.skipif(redaction_prefilter.hyperscan is None, reason="hyperscan is not installed here")


def test_the_prefilter_runs_wherever_hyperscan_is_installed() -> None:
    # The path users run is the one tested: on CI's machine the finder must exist.
    assert (redaction_scan._literal_finder() is not None) == HAS_WHEELS


def test_each_literal_is_part_of_its_pattern() -> None:
    for detector in _DETECTORS:
        if isinstance(detector, _Pattern):
            assert detector.literals
            for literal in detector.literals:
                assert re.escape(literal) in detector.regex.pattern or literal in detector.regex.pattern, literal
                assert not detector.lowered or literal == literal.lower()
        else:
            assert isinstance(detector, _Assignments)
            assert detector.literal_group.caseless and detector.literal_group.every


@pytest.mark.parametrize(("text", "secret"), [(c[1], c[3]) for c in CASES], ids=[c[0] for c in CASES])
def test_every_format_is_found_as_without_the_prefilter(text: str, secret: str, monkeypatch: pytest.MonkeyPatch) -> None:
    original = text.format(s=secret)
    for variant in (original, original.upper(), original.swapcase(), f"x\n{original}\n{original}"):
        found = redaction_spans(variant)
        assert found == _without_prefilter(variant, monkeypatch)
    assert redaction_spans(original)[1]


_LITERALS = sorted({literal for detector in _DETECTORS for literal in detector.literal_group.literals})
_PIECES = st.sampled_from(
    [c[3] for c in CASES]
    + _LITERALS
    + [literal.upper() for literal in _LITERALS]
    + [
        " ", "\n", "=", ": ", '"', "'", "/", "@", "-", "_", "SECRET_KEY=", "Password: ", "AUTHORIZATION: Bearer ",
        "https://u:", "@host", "AccountKey=", "[REDACTED:jwt]", "ab12CD34ef56GH78ij90KL", "é", "権限",
    ]
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.one_of(_PIECES, st.text(alphabet=st.characters(max_codepoint=127), max_size=8)), max_size=14).map("".join))
def test_redaction_is_the_same_with_and_without_the_prefilter(text: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        assert redaction_spans(text) == _without_prefilter(text, patch)


@needs_hyperscan
def test_the_finder_reports_every_start_or_one_and_declines_text_that_is_not_ascii() -> None:
    finder = LiteralFinder([LiteralGroup(("key", "pwd"), caseless=True, every=True), LiteralGroup(("AKIA",))])
    assert finder.find("keyKEY pwd a_key akia AKIA AKIA") == [[0, 3, 7, 13], [22]]
    assert finder.find("nothing here") == [[], []]
    assert finder.find("key é") is None


@needs_hyperscan
def test_scans_from_several_threads_give_each_its_own_answer() -> None:
    finder = LiteralFinder([LiteralGroup(("key",), caseless=True, every=True)])
    texts = [" key" * n for n in range(1, 60)]
    expected = [[4 * i + 1 for i in range(n)] for n in range(1, 60)]
    failures: list[str] = []

    def scan() -> None:
        for _ in range(20):
            for text, want in zip(texts, expected, strict=True):
                result = finder.find(text)
                if result != [want]:
                    failures.append(text)

    threads = [threading.Thread(target=scan) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


@needs_hyperscan
def test_without_hyperscan_or_where_it_cannot_compile_or_scan_there_is_no_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    groups = [LiteralGroup(("AKIA",))]
    assert redaction_prefilter.literal_finder(groups) is not None
    assert redaction_prefilter.hyperscan is not None
    error = redaction_prefilter.hyperscan.error

    def cannot(_groups: object) -> LiteralFinder:
        raise error("this CPU lacks SSSE3")

    with monkeypatch.context() as patch:
        patch.setattr(redaction_prefilter, "LiteralFinder", cannot)
        assert redaction_prefilter.literal_finder(groups) is None
    with monkeypatch.context() as patch:
        patch.setattr(redaction_prefilter, "hyperscan", None)
        assert redaction_prefilter.literal_finder(groups) is None
    with monkeypatch.context() as patch:
        patch.setattr(redaction_prefilter, "LiteralFinder", lambda _groups: 1 / 0)  # an API this was not written for
        assert redaction_prefilter.literal_finder(groups) is None
    finder = redaction_prefilter.literal_finder(groups)
    assert finder is not None

    class Failing:
        def scan(self, *args: object, **kwargs: object) -> None:
            raise error("scratch in use")

    monkeypatch.setattr(finder, "_database", Failing())
    assert finder.find("AKIA") is None
