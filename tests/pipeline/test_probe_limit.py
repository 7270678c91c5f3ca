"""The policy's `[memory] max_candidates_probed` is how many memories the scope probe takes per
query to record what the scope withheld: another project's (counted) or a denied memory source's
(named). It was accepted and ignored before; the default (3) is what the probe always took."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from scopelens.core.contracts import MemoryRecord, RetrievalScope
from scopelens.core.pipeline.policy import MemoryRules, Policy, load_policy
from scopelens.core.vocab import MemoryStatus, Source, Stage
from tests.pipeline.test_seed_seven import FIX_TEST
from tests.support.workspaces import AUTH_FILES, T0

NOTES = ("Role admin undefined: fixed in the fixture.", "Role admin undefined: fixed in a mock.",
         "Role admin undefined: fixed in the role default.", "Role admin undefined: fixed by a test helper.")


def memories(project: str) -> list[MemoryRecord]:
    return [
        MemoryRecord(id=f"m-{project}-{n}", project=project, content=text, status=MemoryStatus.VERIFIED,
                     valid_from=T0 - timedelta(days=30))
        for n, text in enumerate(NOTES)
    ]


@pytest.fixture
def auth(lab):
    lab.index(lab.workspace("a", AUTH_FILES), "alpha")
    return lab


def counted_elsewhere(auth, policy: Policy) -> str | None:
    snapshot = auth.retriever(policy).retrieve(FIX_TEST, project="alpha").snapshot
    rows = [r for r in snapshot.rejected if r.candidate_id == "other-projects:memory"]
    return rows[0].reason.split(" of other projects")[0] if rows else None


@pytest.mark.parametrize(("limit", "expected"), [(3, "3 memory record(s)"), (1, "1 memory record(s)"), (0, None)])
def test_it_caps_the_other_projects_memories_the_probe_counts(auth, limit, expected):
    auth.remember(*memories("beta"))
    assert counted_elsewhere(auth, Policy(memory=MemoryRules(max_candidates_probed=limit))) == expected


def test_the_default_is_what_the_probe_always_took(auth):
    auth.remember(*memories("beta"))
    assert Policy().memory.max_candidates_probed == 3
    assert counted_elsewhere(auth, Policy()) == "3 memory record(s)"


def test_it_caps_the_memories_named_when_the_memory_source_is_denied(auth):
    auth.remember(*memories("alpha"))
    scope = RetrievalScope(project="alpha", denied_sources=(Source.MEMORY,))
    for limit in (3, 2):
        policy = Policy(memory=MemoryRules(max_candidates_probed=limit))
        snapshot = auth.retriever(policy).retrieve(FIX_TEST, scope).snapshot
        denied = [r for r in snapshot.rejected if r.source == Source.MEMORY]
        assert len(denied) == limit and all(r.stage == Stage.DENIED_SOURCE and r.from_probe for r in denied)


def test_a_policy_file_sets_it(tmp_path: Path):
    path = tmp_path / "policy.toml"
    path.write_text("[memory]\nmax_candidates_probed = 1\n", encoding="utf-8")
    assert load_policy(path).memory.max_candidates_probed == 1
