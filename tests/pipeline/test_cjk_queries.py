"""CJK and Korean questions keep their words: a two-character word is a whole word there, so
the planner's length filter (meant for Latin words like "is" or "to") must not drop it."""

from __future__ import annotations

import pytest

from scopelens.core.contracts import RetrievalIntent
from scopelens.core.pipeline.planner import weighted_terms
from tests.support.workspaces import Lab

DOCS = {
    "docs/auth.md": "# 認証\n\nトークンの期限が切れると認証に失敗します。再ログインしてください。\n",
    "docs/cache.md": "# 캐시\n\n캐시 설정 오류는 TTL 값이 잘못되었을 때 발생합니다.\n",
    "docs/deploy.md": "# Deploy\n\nRun the deploy script from the release branch.\n",
}


def terms_of(question: str) -> set[str]:
    return {t.term for t in weighted_terms(RetrievalIntent(question=question))}


@pytest.mark.parametrize(
    "question, expected",
    [
        ("認証 失敗", {"認証", "失敗"}),
        ("캐시 설정 오류", {"캐시", "설정", "오류"}),
        ("认证 失败", {"认证", "失败"}),
        ("猫 ok", {"猫"}),
        ("ログインAPI 失敗", {"ログ", "api", "失敗"}),
    ],
)
def test_short_cjk_and_korean_words_are_planned(question, expected):
    assert expected <= terms_of(question)


def test_short_latin_words_are_still_dropped():
    assert terms_of("is it ok to go") == set()


@pytest.fixture
def lab(tmp_path, store_url):
    instance = Lab(tmp_path, store_url)
    yield instance
    instance.close()


@pytest.mark.parametrize("question, path", [("認証 失敗", "docs/auth.md"), ("캐시 설정 오류", "docs/cache.md")])
def test_a_cjk_or_korean_question_finds_what_the_index_holds(lab, question, path):
    lab.index(lab.workspace("ws", DOCS), "alpha")
    observation = lab.retriever().retrieve(RetrievalIntent(question=question), project="alpha")
    assert observation.snapshot.plan.sub_queries, "the plan has no terms"
    assert [item.path for item in observation.snapshot.selected][:1] == [path]
