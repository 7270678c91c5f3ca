"""Every funnel adds up, and every over-budget reason names the limit that stopped the item
([3/9] items 9 and 10), over random workspaces, budgets and branches."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scopelens.core.contracts import RetrievalBudget, RetrievalIntent, RetrievalScope
from scopelens.core.readmodel import ReadModel
from scopelens.core.vocab import Purpose, Stage
from tests.support.workspaces import Lab

WORDS = ["cursor", "row", "table", "move", "scroll", "render", "widget", "focus", "cache", "limit", "retry", "parse"]
AFTER_BOUNDARY = {Stage.BELOW_CUTOFF, Stage.DUPLICATE, Stage.OVER_BUDGET, Stage.TRIMMED_AWAY}

texts = st.lists(st.sampled_from(WORDS), min_size=2, max_size=40).map(" ".join)


@st.composite
def worlds(draw):
    files = draw(st.lists(st.tuples(st.sampled_from(["py", "md"]), texts, st.integers(1, 40)), min_size=1, max_size=8))
    return {
        "files": files,
        "other_branch": draw(st.lists(texts, max_size=3)),
        "query": draw(texts),
        "purpose": draw(st.sampled_from(list(Purpose))),
        "max_items": draw(st.integers(min_value=1, max_value=8)),
        "max_tokens": draw(st.integers(min_value=60, max_value=900)),
    }


def _workspace(files) -> dict[str, str]:
    out = {}
    for n, (ext, text, repeat) in enumerate(files):
        body = "\n".join(f"def f{n}_{i}():\n    # {text}\n    return {i}\n" for i in range(repeat)) if ext == "py" else (
            f"# Note {n}\n\n" + "\n\n".join(f"{text} {i}" for i in range(repeat))
        )
        out[f"src/m{n}.{ext}"] = body
    return out


@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(worlds())
def test_the_funnel_adds_up_and_budget_reasons_hold(world):
    with tempfile.TemporaryDirectory() as tmp:
        lab = Lab(Path(tmp))
        try:
            lab.index(lab.workspace("main", _workspace(world["files"])), "p", branch="main")
            if world["other_branch"]:
                other = {f"src/o{n}.py": f"def o{n}():\n    # {t}\n    return {n}\n" for n, t in enumerate(world["other_branch"])}
                lab.index(lab.workspace("feature", other), "p", branch="feature")
            scope = RetrievalScope(
                project="p", branch="main",
                budget=RetrievalBudget(max_items=world["max_items"], max_tokens=world["max_tokens"]),
            )
            intent = RetrievalIntent(purpose=world["purpose"], question=world["query"])
            snapshot = lab.retriever().retrieve(intent, scope).snapshot

            funnel = snapshot.funnel()
            assert funnel.recalled - sum(n for _, n in funnel.dropped) == funnel.selected == len(snapshot.selected)
            pipeline_rows = [r.candidate_id for r in snapshot.rejected if not r.from_probe]
            shown = [i.candidate_id for i in snapshot.selected]
            assert len(set(pipeline_rows + shown)) == len(pipeline_rows) + len(shown)  # one row per candidate
            past_boundary = [r for r in snapshot.rejected if not r.from_probe and r.stage in AFTER_BOUNDARY]
            assert len(snapshot.ranked) == len(shown) + len(past_boundary)
            stored = dict(snapshot.stats)
            assert stored.get(Stage.SELECTED, 0) == len(shown)
            # Over-budget reasons name the limit that stopped the item.
            for row in snapshot.rejected:
                if row.stage == Stage.OVER_BUDGET and row.reason.startswith("max_items"):
                    assert len(snapshot.selected) >= world["max_items"] - row.reason.count("required"), row.reason
            # The Funnel tab draws the same numbers, the probe's rows apart.
            model = ReadModel(str(Path(tmp) / "lab.db"))
            try:
                view = model.snapshot(snapshot.id).funnel
            finally:
                model.close()
            steps = dict(view.steps)
            assert steps["recalled"] - sum(n for s, n in view.steps if s not in ("recalled", "selected")) == steps["selected"]
            assert sum(n for _, n in view.withheld) == sum(1 for r in snapshot.rejected if r.from_probe)
        finally:
            lab.close()


def test_a_seat_freed_by_the_token_budget_goes_to_the_next_item(lab):
    huge = "def scroll_cursor_rows():\n" + "".join(f"    # cursor row table move {i}\n" for i in range(120)) + "    return 0\n"
    small = {f"src/s{n}.py": f"def cursor_row_{n}():\n    # cursor row table move\n    return {n}\n" for n in range(4)}
    lab.index(lab.workspace("main", {"src/huge.py": huge, **small}), "p")
    scope = RetrievalScope(project="p", budget=RetrievalBudget(max_items=2, max_tokens=150))
    intent = RetrievalIntent(purpose=Purpose.ANSWER_QUESTION, question="cursor row table move")
    snapshot = lab.retriever().retrieve(intent, scope).snapshot
    seats = [r for r in snapshot.rejected if r.reason.startswith("max_items")]
    assert len(snapshot.selected) == 2 or not seats, [(r.source_ref, r.reason) for r in snapshot.rejected]
    tokens = [r for r in snapshot.rejected if "token budget" in r.reason or r.stage == Stage.TRIMMED_AWAY]
    assert tokens, "the case needs an item dropped for tokens"
