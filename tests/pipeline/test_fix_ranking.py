"""A bug report leads to the file to fix (issue [4/9]): frames name workspace files, the file
that defines a named function outranks those that mention it, tests and docs are evidence
rather than the place of a fix, and ``ranked`` shows where everything stood."""

from __future__ import annotations

from scopelens.core.contracts import Anchors, Candidate, RetrievalBudget, RetrievalIntent, RetrievalScope, ScoreBreakdown
from scopelens.core.pipeline.pack import MAX_ITEMS_PER_FILE, pack
from scopelens.core.pipeline.retriever import RANKED_LIMIT
from scopelens.core.vocab import EvidenceKind, Purpose, Source, Stage
from tests.support.workspaces import T0

PRICING = (
    "def apply_discount(price, rate):\n"
    "    return price - price * rate\n\n\n"
    "def bulk_total(prices):\n"
    "    return sum(prices)\n"
)
CART = (
    "from shop.pricing import apply_discount\n\n\n"
    "class Cart:\n"
    "    def total(self, price, rate):\n"
    "        return apply_discount(price, rate)\n"
)
TESTS = "".join(
    f"def test_discount_{n}():\n    # a discount rate above one gives a negative price\n"
    f"    assert apply_discount(10, 0.{n}) >= 0\n\n\n"
    for n in range(1, 9)
)
DOC = (
    "# Discounts\n\nA discount rate above one would give a negative price, so a discount rate must stay "
    "between zero and one. The price after a discount is never negative.\n"
)
FILLER = {f"shop/module{n}.py": f"def helper_{n}(value):\n    # price rounding {n}\n    return round(value, {n})\n"
          for n in range(30)}
FILES = {"shop/pricing.py": PRICING, "shop/cart.py": CART, "tests/test_pricing.py": TESTS,
         "docs/discounts.md": DOC, **FILLER}

REPORT = """A discount rate above one gives a negative price

Cart.total returns a negative price when the discount rate is above one:

Traceback (most recent call last):
  File "/home/user/venv/lib/python3.11/site-packages/shop/cart.py", line 6, in total
    return apply_discount(price, rate)
  File "/usr/lib/python3.11/functools.py", line 12, in wrapper
  File "/home/user/venv/lib/python3.11/site-packages/shop/pricing.py", line 2, in apply_discount
ValueError: negative price
"""
FIX = RetrievalIntent(purpose=Purpose.FIX_TEST, question=REPORT)


def files_in_rank_order(snapshot) -> list[str]:
    return list(dict.fromkeys(e.path for e in snapshot.ranked if e.path))


def test_the_file_that_defines_the_failing_frame_comes_first(lab):
    lab.index(lab.workspace("a", FILES), "shop")
    snapshot = lab.retriever().retrieve(FIX, project="shop").snapshot
    files = files_in_rank_order(snapshot)
    assert files[:2] == ["shop/pricing.py", "shop/cart.py"]
    # the test file and the doc share most of the report's words, and still come after the code
    assert files.index("tests/test_pricing.py") > 1 and files.index("docs/discounts.md") > 1
    assert any(item.path == "shop/pricing.py" for item in snapshot.selected)


def test_frames_name_workspace_files_by_path_suffix_and_drop_the_rest(lab):
    lab.index(lab.workspace("a", FILES), "shop")
    snapshot = lab.retriever().retrieve(FIX, project="shop").snapshot
    located = {t.term for q in snapshot.plan.sub_queries for t in q.terms if t.kind == "located"}
    # site-packages/shop/... is the workspace's shop/...; the interpreter's functools.py is not in it
    assert located == {"shop/pricing.py", "shop/cart.py"}


def test_a_named_test_file_leads_to_the_code_under_test(lab):
    files = {**FILES, "tests/test_cart.py": "def test_total():\n    assert Cart().total(10, 2) >= 0\n"}
    lab.index(lab.workspace("a", files), "shop")
    failing = RetrievalIntent(
        purpose=Purpose.FIX_TEST, question="test_total fails",
        anchors=Anchors(traceback='Traceback (most recent call last):\n  File "/ci/build/tests/test_cart.py", '
                                  'line 2, in test_total\nAssertionError'),
    )
    snapshot = lab.retriever().retrieve(failing, project="shop").snapshot
    located = {t.term for q in snapshot.plan.sub_queries for t in q.terms if t.kind == "located"}
    assert located == {"shop/cart.py"}  # the test file is evidence, not a located place of the fix
    files = files_in_rank_order(snapshot)
    assert files.index("shop/cart.py") < 3


def test_a_failing_test_leads_to_what_it_imports_and_calls(lab):
    checkout = (
        "from shop.pricing import apply_discount\n\n\n"
        "def test_total():\n    assert bulk_total([apply_discount(10, 2)]) >= 0\n"
    )
    lab.index(lab.workspace("a", {**FILES, "tests/test_checkout.py": checkout}), "shop")
    failing = RetrievalIntent(purpose=Purpose.FIX_TEST, question="the checkout total is negative",
                              anchors=Anchors(failing_test="tests/test_checkout.py::test_total"))
    snapshot = lab.retriever().retrieve(failing, project="shop").snapshot
    terms = {t.term: t.kind for q in snapshot.plan.sub_queries for t in q.terms}
    # no shop/checkout.py: the code under test is what the test imports, and what it calls
    assert terms["shop/pricing.py"] == "located" and terms["bulk_total"] == "identifier"
    assert "tests/test_checkout.py" not in {t for t, kind in terms.items() if kind == "located"}
    # the failing test itself comes first (it hits the anchor by path), its code right after
    assert files_in_rank_order(snapshot)[:2] == ["tests/test_checkout.py", "shop/pricing.py"]


def test_one_file_takes_at_most_its_share_of_the_items(lab):
    lab.index(lab.workspace("a", FILES), "shop")
    tests_first = RetrievalIntent(purpose=Purpose.EXPLAIN_CODE, question="test_discount negative price assert",
                                  anchors=Anchors(current_files=("tests/test_pricing.py",)))
    snapshot = lab.retriever().retrieve(
        tests_first, RetrievalScope(project="shop", budget=RetrievalBudget(max_items=8, max_tokens=4000))
    ).snapshot
    from_tests = [i for i in snapshot.selected if i.path == "tests/test_pricing.py"]
    assert len(from_tests) == MAX_ITEMS_PER_FILE  # of its eight matching tests
    assert len(snapshot.selected) > MAX_ITEMS_PER_FILE  # the other seats go to other files


def test_packing_caps_the_items_of_one_file():
    same_file = [
        Candidate(id=f"chunk:{n}", source=Source.WORKSPACE_CODE, source_ref=f"tests/t.py:{n}-{n}", source_version="v",
                  path="tests/t.py", project="p", captured_at=T0, text=f"test {n}", evidence_kind=EvidenceKind.CODE,
                  scores=ScoreBreakdown(final=1.0 - n / 100))
        for n in range(MAX_ITEMS_PER_FILE + 2)
    ]
    other = same_file[0].model_copy(update={"id": "chunk:o", "path": "src/x.py", "source_ref": "src/x.py:1-1",
                                            "text": "other", "scores": ScoreBreakdown(final=0.5)})
    packed = pack([*same_file, other], RetrievalBudget(max_items=8))
    assert [c.id for c in packed.selected] == [c.id for c in same_file[:MAX_ITEMS_PER_FILE]] + ["chunk:o"]
    assert [(r.candidate_id, r.stage) for r in packed.rejected] == [
        (c.id, Stage.OVER_BUDGET) for c in same_file[MAX_ITEMS_PER_FILE:]
    ]
    assert all("per-file cap (4 items of tests/t.py)" in r.reason for r in packed.rejected)


def test_ranked_lists_the_candidates_past_the_block(lab):
    many = {f"shop/m{n}.py": f"def price_{n}(value):\n    # negative price discount {n}\n    return value\n"
            for n in range(RANKED_LIMIT + 30)}
    lab.index(lab.workspace("a", many), "shop")
    snapshot = lab.retriever().retrieve(FIX, project="shop").snapshot
    assert len(snapshot.selected) < len(snapshot.ranked) <= RANKED_LIMIT
    assert len(snapshot.ranked) > 12  # the old shallow recall listed at most a dozen
