"""The tokenizer splits code-shaped words and keeps them whole, and makes CJK findable."""

from __future__ import annotations

import os
import re
import unicodedata
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scopelens.core.index import native
from scopelens.core.index.tokenizer import count_terms, count_terms_python, tokenize, unique_terms

COUNTERS = [pytest.param(count_terms_python, id="python"), pytest.param(count_terms, id="compiled")]
"""Both implementations of ``count_terms`` meet every counting test; the compiled one (what
an install with a C compiler runs) is required in CI."""


def test_words_are_lowercased_and_kept_in_order_with_duplicates() -> None:
    assert tokenize("Foo bar FOO, bar!") == ["foo", "bar", "foo", "bar"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("user_session_id", ["user_session_id", "user", "session", "id"]),
        ("MAX_RETRY_COUNT", ["max_retry_count", "max", "retry", "count"]),
        ("createUserMock", ["createusermock", "create", "user", "mock"]),
        ("HTTPServer", ["httpserver", "http", "server"]),
        ("XMLHttpRequest", ["xmlhttprequest", "xml", "http", "request"]),
        ("parseJSON2", ["parsejson2", "parse", "json2"]),
        ("getURLs", ["geturls", "get", "urls"]),
        ("os.path.join", ["os.path.join", "os", "path", "join"]),
        ("__init__", ["__init__", "init"]),
        ("user-session", ["user-session", "user", "session"]),
    ],
)
def test_compound_words_are_kept_whole_and_split(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


def test_a_path_gives_the_path_its_segments_and_the_file_name() -> None:
    tokens = tokenize("see src/auth/session.ts for details")
    assert tokens[0] == "see"
    assert {"src/auth/session.ts", "src", "auth", "session.ts", "session", "ts"} <= set(tokens)
    assert tokens[-2:] == ["for", "details"]


def test_a_test_id_gives_file_class_and_test_names() -> None:
    tokens = set(tokenize("tests/test_auth.py::TestLogin::test_expired_token"))
    assert "tests/test_auth.py::testlogin::test_expired_token" in tokens
    assert {"test_auth.py", "testlogin", "login", "test_expired_token", "expired"} <= tokens


def test_identifier_inside_a_call_is_split_from_the_punctuation() -> None:
    assert tokenize("self.session_store.get(user_id)")[:2] == ["self.session_store.get", "self"]
    assert "session_store" in tokenize("self.session_store.get(user_id)")
    assert tokenize("user_id)") == ["user_id", "user", "id"]


def test_sentence_full_stops_do_not_join_words() -> None:
    assert tokenize("It failed. Retry later.") == ["it", "failed", "retry", "later"]


def test_single_digits_are_dropped_but_numbers_and_mixed_tokens_kept() -> None:
    tokens = tokenize("error 404 in step 1 of e2e run 7")
    assert tokens == ["error", "404", "in", "step", "of", "e2e", "run"]
    assert tokenize("x = 1") == ["x"]


def test_a_blob_is_indexed_by_its_parts_not_as_one_giant_token() -> None:
    blob = "/".join(["chunk"] * 40)
    assert tokenize(blob) == ["chunk"] * 40
    assert tokenize("a/b")[0] == "a/b"


def test_punctuation_only_gives_nothing() -> None:
    assert tokenize("") == []
    assert tokenize("-- == () _ __ {}") == []


def test_japanese_becomes_overlapping_bigrams() -> None:
    assert tokenize("権限ルール") == ["権限", "限ル", "ルー", "ール"]


def test_chinese_becomes_overlapping_bigrams() -> None:
    tokens = tokenize("用户权限规则")
    assert tokens == ["用户", "户权", "权限", "限规", "规则"]


def test_korean_becomes_bigrams_per_word() -> None:
    assert tokenize("한국어 텍스트") == ["한국", "국어", "텍스", "스트"]


def test_a_lone_cjk_character_is_a_unigram() -> None:
    assert tokenize("字 と x") == ["字", "と", "x"]


def test_japanese_punctuation_separates_runs() -> None:
    assert tokenize("権限、ルール。") == ["権限", "ルー", "ール"]


def test_mixed_japanese_and_identifiers_split_at_the_script_boundary() -> None:
    tokens = tokenize("権限ルールはcreateUserMockで確認する")
    assert {"権限", "ルー", "createusermock", "create", "user", "mock", "確認"} <= set(tokens)
    assert all(t.isascii() or not any(c.isascii() for c in t) for t in tokens)


def test_a_japanese_query_finds_its_terms_in_a_japanese_document() -> None:
    document = tokenize("モックは明示的に宣言し、権限ルールに従うこと。")
    for query in ("権限ルール", "明示的に宣言"):
        assert set(unique_terms(query)) <= set(document)
    assert not set(unique_terms("証拠")) <= set(document)


def test_full_width_and_half_width_forms_are_folded() -> None:
    assert tokenize("ＨＴＴＰＳｅｒｖｅｒ") == ["httpserver", "http", "server"]
    assert tokenize("ｶﾀｶﾅ") == tokenize("カタカナ")


def test_case_is_not_split_for_non_ascii_words() -> None:
    assert tokenize("Straße Über") == ["straße", "über"]


def test_unique_terms_keep_first_appearance_order() -> None:
    assert unique_terms("b a b c a") == ["b", "a", "c"]
    assert unique_terms("user_id user") == ["user_id", "user", "id"]


@given(st.text(alphabet=st.characters(codec="ascii"), max_size=200))
def test_ascii_fast_path_agrees_with_the_unicode_path(text: str) -> None:
    # An em dash is a non-word character NFKC leaves alone: it forces the general path.
    assert tokenize(text + " \u2014") == tokenize(text)


@given(st.text(max_size=200))
def test_tokens_are_nonempty_lowercase_and_without_spaces(text: str) -> None:
    tokens = tokenize(text)
    assert tokens == tokenize(text)
    for token in tokens:
        assert token and token == token.lower()
        assert not any(c.isspace() for c in token)
        assert not (len(token) == 1 and token.isdigit())


UNITS = st.lists(
    st.lists(st.text(alphabet=st.sampled_from(list("aB_c.D/-x9 日本語ＡßÜ\n")), max_size=40), max_size=3), max_size=5
)


@pytest.mark.parametrize("count_terms", COUNTERS)
@settings(max_examples=100, derandomize=True, deadline=None)
@given(units=UNITS, before=UNITS)
def test_count_terms_is_a_counter_of_tokenize_whatever_was_counted_before(count_terms, units, before):
    """What the index stores per chunk (counted terms) is what the query side's ``tokenize``
    gives, and does not depend on the words a process counted earlier (its cache)."""
    fresh = count_terms(units)
    count_terms(before)
    again = count_terms(units)
    for u, texts in enumerate(units):
        expected = Counter(t for text in texts for t in tokenize(text))
        assert fresh.unit(u) == dict(expected)
        assert int(fresh.lengths[u]) == sum(expected.values())
    assert (fresh.terms, fresh.term_ids.tolist(), fresh.tfs.tolist()) == (
        again.terms, again.term_ids.tolist(), again.tfs.tolist()
    )


def test_counting_a_large_vocabulary_keeps_the_caches_bounded(monkeypatch) -> None:
    """A worker preparing a large corpus counts hundreds of thousands of distinct words: the
    cache of word expansions is bounded (each generation by ``LIMIT`` plus one call's new
    words), and counting does not fill the query side's cache."""
    from scopelens.core.index import tokenizer

    # From an empty cache: a generation left by an earlier test's larger call may hold more.
    monkeypatch.setattr(tokenizer, "_EXPANSIONS", tokenizer._Expansions())
    limit = tokenizer._Expansions.LIMIT
    query_cache_before = tokenizer._expand.cache_info().currsize
    words = [f"someIdentifier_{n}_value" for n in range(3 * limit)]
    for start in range(0, len(words), 5_000):
        counts = count_terms_python([(" ".join(words[start : start + 5_000]),)])
        assert "someidentifier" in counts.terms
        assert len(tokenizer._EXPANSIONS.recent) + len(tokenizer._EXPANSIONS.older) <= 2 * (limit + 5_000)
    assert tokenizer._expand.cache_info().currsize == query_cache_before


def _kept(token: str) -> bool:
    """The rule for a term to be kept: a single letter, or longer and not all underscores."""
    if len(token) == 1:
        return token.isalpha()
    return bool(token.strip("_"))


def _reference_terms(word: str) -> tuple[str, ...]:
    """The expansion rules of the module doc, level by level with no shortcut (what
    ``tokenize`` did before the expansion skipped levels): the oracle for ``_word_terms``."""
    from scopelens.core.index import tokenizer

    if re.fullmatch(r"[a-z0-9]+", word):
        return (word,) if _kept(word) else ()
    out = [word.lower()] if len(word) <= tokenizer._MAX_WHOLE else []
    pieces = [word]
    splitters = (
        lambda w: w.replace("::", "/").split("/"),
        lambda w: w.replace("-", ".").split("."),
        lambda w: w.split("_"),
    )
    for split in splitters:
        finer: list[str] = []
        for piece in pieces:
            parts = [p for p in split(piece) if p]
            if parts != [piece]:
                out += [p.lower() for p in parts]
            finer += parts
        pieces = finer
    for piece in pieces:
        if piece.isascii() and not piece.islower() and not piece.isupper():
            humps = tokenizer._CAMEL.findall(piece)
            if len(humps) > 1:
                out += [h.lower() for h in humps]
    return tuple(t for t in out if _kept(t))


WORD_PARTS = st.sampled_from(["a", "B", "x9", "HTTP", "Server", "_", "__", "1", "42", "ß", "Ü", "Σ", "ΑΣ", "ǅ", "İ"])
JOINERS = st.sampled_from(["", "", ".", "/", "-", "::"])


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.lists(st.tuples(JOINERS, WORD_PARTS), min_size=1, max_size=8), st.integers(0, 140))
def test_word_terms_follow_the_reference_rules(parts: list[tuple[str, str]], padding: int) -> None:
    """The level-skipping expansion gives what splitting at every level in turn gives, for the
    words the tokenizer finds in any text (long ones and non-ASCII ones included)."""
    from scopelens.core.index import tokenizer

    text = "".join(joiner + part for joiner, part in parts) + "q" * (padding if padding > 100 else 0)
    for word in tokenizer._ANY_WORD.findall(text):
        assert tokenizer._word_terms(word) == _reference_terms(word), word


@pytest.mark.parametrize("count_terms", COUNTERS)
@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.lists(st.lists(st.tuples(JOINERS, WORD_PARTS, st.sampled_from([" ", "", "", "\n"])), max_size=12), max_size=4),
       st.integers(0, 140))
def test_counted_compounds_give_the_terms_of_the_reference_rules(
    count_terms, units: list[list[tuple[str, str, str]]], padding: int
) -> None:
    """``count_terms`` splits compounds into atoms a batch at a time and expands only the atoms;
    per unit, that is the multiset of every word's terms by the level-by-level rules (long
    compounds, ``::``, non-ASCII case and final sigmas included)."""
    from scopelens.core.index import tokenizer

    texts = ["".join(joiner + part + space for joiner, part, space in unit) + "q" * (padding if padding > 100 else 0)
             for unit in units]
    counts = count_terms([(text,) for text in texts])
    for u, text in enumerate(texts):
        words = tokenizer._ANY_WORD.findall(unicodedata.normalize("NFKC", text))
        expected = Counter(t for word in words for t in _reference_terms(word))
        assert counts.unit(u) == dict(expected), text


@pytest.mark.parametrize("word", ["1" * 200, "abc_" * 40, "getHTTPResponse_v2", "os.path.join", "a::B-c_dE"])
def test_word_terms_keep_the_reference_rules_on_edge_words(word: str) -> None:
    from scopelens.core.index import tokenizer

    assert tokenizer._word_terms(word) == _reference_terms(word)


def test_the_compiled_counter_is_built_in_ci() -> None:
    """The install builds ``_compiled.c`` where a C compiler is found (CI has one): without
    it every index run counts in Python, several times slower, and the tests above would
    compare the Python code with itself."""
    if native.compiled is None:
        assert not os.environ.get("CI"), "the compiled term counter was not built"
        pytest.skip("the compiled term counter is not built (no C compiler at install)")
    assert count_terms([("getHTTPResponse",)]).unit(0) == {"gethttpresponse": 1, "get": 1, "http": 1, "response": 1}


ASCII_CODE = st.text(alphabet=st.sampled_from(list("aAbBsSzZ09_.:/-  \n\t()'")), max_size=60)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(st.lists(st.lists(ASCII_CODE, max_size=3), max_size=6), st.integers(0, 140))
def test_the_compiled_counter_counts_ascii_as_the_python_one(units: list[list[str]], padding: int) -> None:
    """ASCII text is scanned and its words expanded in C: the same counts per unit as the
    Python counter, for case humps (``IDs``, ``HTTPServer``, ``A9b``), ``::`` against a lone
    ``:``, separators without a word after them, underscores alone and compounds over
    ``_MAX_WHOLE`` characters."""
    units = [[*texts, "Ab_" * (padding // 3) + "cD.e"] if padding > 100 else texts for texts in units]
    compiled, python = count_terms(units), count_terms_python(units)
    for u in range(len(units)):
        assert compiled.unit(u) == python.unit(u), units[u]
    assert compiled.lengths.tolist() == python.lengths.tolist()
    assert compiled.bounds.tolist() == python.bounds.tolist()
    for u in range(len(units)):  # each unit's term ids ascending, each once
        ids = compiled.term_ids[compiled.bounds[u] : compiled.bounds[u + 1]].tolist()
        assert ids == sorted(set(ids))


def test_the_compiled_counter_takes_words_it_cannot_scan_from_python() -> None:
    """Non-ASCII text (NFKC-folded, CJK bigrams, non-ASCII case kept whole) and file names
    with undecodable bytes (lone surrogates) are counted as the Python counter does."""
    units = [("Ａｂｃ 日本語のテキスト getΣύνολο", "caf\udce9/x.py"), ("ßtraße-Öl Über_Straße",), ()]
    compiled, python = count_terms(units), count_terms_python(units)
    for u in range(len(units)):
        assert compiled.unit(u) == python.unit(u)
    assert compiled.unit(2) == {}
