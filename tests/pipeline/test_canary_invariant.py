"""Invariant: nothing outside the scope or not model-visible ever reaches model-visible text.

Random corpora, scopes and policies plant unique canary tokens in: every other project, a
denied source, a runtime-only path, candidate memories and another user's private memories.
No canary may appear in the context block or in any selected item's visible text.
"""

from __future__ import annotations

import json
import tempfile
from datetime import timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scopelens.core.contracts import Anchors, MemoryRecord, RetrievalIntent, RetrievalScope
from scopelens.core.pipeline.policy import Policy, VisibilityRule
from scopelens.core.vocab import MemoryStatus, Purpose, Source, Visibility
from tests.support.workspaces import T0, Lab

WORDS = ["role", "admin", "mock", "session", "token", "default", "fixture", "user", "cache", "parser", "retry", "limit"]
DENIABLE = [Source.WORKSPACE_DOC, Source.PROJECT_RULE, Source.DECISION_RECORD, Source.MEMORY]
PATH_FOR = {
    Source.WORKSPACE_DOC: "docs/guide{n}.md",
    Source.PROJECT_RULE: "docs/rules/rule{n}.md",
    Source.DECISION_RECORD: "docs/decisions/adr{n}.md",
}

texts = st.lists(st.sampled_from(WORDS), min_size=3, max_size=12).map(" ".join)


@st.composite
def worlds(draw):
    return {
        "own": draw(st.lists(texts, min_size=1, max_size=4)),
        "others": draw(st.lists(st.lists(texts, min_size=1, max_size=3), min_size=1, max_size=2)),
        "denied": draw(st.sampled_from(DENIABLE)),
        "denied_texts": draw(st.lists(texts, min_size=1, max_size=2)),
        "runtime_only": draw(st.lists(texts, min_size=1, max_size=2)),
        "memories": draw(st.lists(st.tuples(texts, st.sampled_from(["candidate", "private", "verified"])), max_size=4)),
        "query": draw(texts),
        "purpose": draw(st.sampled_from(list(Purpose))),
        "max_tokens": draw(st.integers(min_value=60, max_value=1500)),
        "by_scope_file": draw(st.booleans()),
    }


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(worlds())
def test_no_canary_reaches_model_visible_output(world):
    canaries: list[str] = []

    def canary(kind: str) -> str:
        token = f"canary{kind}{len(canaries):03d}zq"
        canaries.append(token)
        return token

    with tempfile.TemporaryDirectory() as tmp:
        lab = Lab(Path(tmp))
        try:
            own = {f"src/m{n}.py": f"# {text}\ndef f{n}():\n    return '{text}'\n" for n, text in enumerate(world["own"])}
            denied: Source = world["denied"]
            for n, text in enumerate(world["denied_texts"]):
                if denied in PATH_FOR:
                    own[PATH_FOR[denied].format(n=n)] = f"# {text}\n\n{text} {canary('denied')} {text}\n"
            for n, text in enumerate(world["runtime_only"]):
                own[f"secret/s{n}.md"] = f"# {text}\n\n{text} {canary('runtime')} {text}\n"
            lab.index(lab.workspace("own", own), "p0")
            for p, files in enumerate(world["others"], start=1):
                other = {f"src/o{n}.py": f"# {t} {canary('project')}\nX = '{t}'\n" for n, t in enumerate(files)}
                lab.index(lab.workspace(f"other{p}", other), f"p{p}")
            records = []
            for n, (text, status) in enumerate(world["memories"]):
                if status == "verified":
                    records.append(MemoryRecord(id=f"x{n}", project="p1", content=f"{text} {canary('foreign')}",
                                                status=MemoryStatus.VERIFIED, valid_from=T0 - timedelta(days=1)))
                    continue
                records.append(MemoryRecord(
                    id=f"m{n}", project="p0", content=f"{text} {canary(status)}",
                    status=MemoryStatus(status), private_to="someone-else" if status == "private" else None,
                    valid_from=T0 - timedelta(days=1),
                ))
            if denied == Source.MEMORY:
                records.append(MemoryRecord(id="d0", project="p0", content=f"{world['query']} {canary('denied')}",
                                            status=MemoryStatus.VERIFIED, valid_from=T0 - timedelta(days=1)))
            lab.remember(*records)

            policy = Policy(
                visibility=(VisibilityRule(glob="secret/*", visibility=Visibility.RUNTIME_ONLY),),
                denied_sources=() if world["by_scope_file"] else (denied,),
            )
            scope = RetrievalScope(
                project="p0",
                denied_sources=(denied,) if world["by_scope_file"] else (),
                user_id="me",
                budget={"max_tokens": world["max_tokens"]},
            )
            intent = RetrievalIntent(purpose=world["purpose"], question=world["query"],
                                     anchors=Anchors(error_text=world["query"]))
            observation = lab.retriever(policy).retrieve(intent, scope)
            visible = [observation.context_block, *(i.visible_text for i in observation.snapshot.selected)]
            visible.append(json.dumps(observation.to_json()["context_block"]))
            visible.append(json.dumps([s["source_ref"] for s in observation.to_json()["selected"]]))
            for token in canaries:
                assert all(token not in text for text in visible), f"{token} leaked into model-visible output"
            # and the snapshot's rejections never carry text
            assert all(not hasattr(r, "text") for r in observation.snapshot.rejected)
        finally:
            lab.close()
