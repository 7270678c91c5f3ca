"""The scorer's per-scope caches are keyed by the set of live chunks and bounded ([6/9] item 5):
a harness that pins ``as_of`` to each request's time no longer grows them by one entry a call,
and a bounded cache answers exactly as a fresh scorer does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from scopelens.core.clock import SteppingClock
from scopelens.core.index.indexer import index_workspace
from scopelens.core.index.scorer import LIVE_SETS_CACHED, RecallFilter, Scorer
from scopelens.core.index.timeutil import to_micros
from scopelens.core.index.tokenizer import tokenize
from scopelens.core.store.store import Store

T0 = datetime(2026, 3, 1, tzinfo=UTC)
RUNS = LIVE_SETS_CACHED + 3


def query(text: str) -> list[tuple[str, float]]:
    return [(t, 1.0) for t in tokenize(text)]


def build(store: Store, root: Path) -> None:
    """RUNS index runs a day apart, each changing one file: RUNS distinct live sets."""
    clock = SteppingClock(T0, timedelta(days=1))
    (root / "src").mkdir(parents=True)
    (root / "src" / "stable.py").write_text("def stable_limit(rate):\n    return rate * 2\n", encoding="utf-8")
    for n in range(RUNS):
        (root / "src" / "moving.py").write_text(f"def moving_limit(rate):\n    return rate + {n}\n", encoding="utf-8")
        index_workspace(store, root, project="alpha", clock=clock)


def ids(hits) -> list[tuple[int, float]]:  # type: ignore[no-untyped-def]
    return [(h.chunk_id, h.score) for h in hits]


def test_as_of_pinned_to_each_request_shares_one_entry(tmp_path):
    with Store.open(f"sqlite:///{tmp_path / 'store.db'}", create=True) as store:
        build(store, tmp_path / "ws")
        scorer = Scorer(store)
        after_last = T0 + timedelta(days=RUNS)
        answers = set()
        for second in range(300):  # 300 distinct as_of values, one live set
            flt = RecallFilter(project="alpha", as_of_us=to_micros(after_last + timedelta(seconds=second)))
            answers.add(tuple(ids(scorer.search(query("moving limit rate"), flt))))
            scorer.live_paths(flt)
        view = scorer._views["alpha"]
        assert len(answers) == 1
        assert len(view.stats) == 1 and len(view.terms) == 1
        assert len({key[0] for key in view.live_paths}) == 1


def test_many_live_sets_stay_bounded_and_answer_as_a_fresh_scorer(tmp_path):
    with Store.open(f"sqlite:///{tmp_path / 'store.db'}", create=True) as store:
        build(store, tmp_path / "ws")
        scorer = Scorer(store)
        moments = [T0 + timedelta(days=n, hours=1) for n in range(RUNS)]
        first_pass = []
        for moment in moments * 2:  # twice round: every entry is evicted before it is used again
            flt = RecallFilter(project="alpha", as_of_us=to_micros(moment))
            first_pass.append(ids(scorer.search(query("moving limit rate stable"), flt)))
            view = scorer._views["alpha"]
            assert len(view.stats) <= LIVE_SETS_CACHED
            assert set(view.terms) <= set(view.stats)
            assert view.cached_terms == sum(len(terms) for terms in view.terms.values())
        assert first_pass[:RUNS] == first_pass[RUNS:]
        for moment, answer in zip(moments, first_pass, strict=False):
            fresh = Scorer(store).search(query("moving limit rate stable"),
                                         RecallFilter(project="alpha", as_of_us=to_micros(moment)))
            assert ids(fresh) == answer
        assert len({tuple(a) for a in first_pass[:RUNS]}) > 1  # the live sets did differ
