"""Session events and artifacts are recalled under the same scope as code.

* owner: a retrieval recalls the events and artifacts of its own session only; another
  session of the same project is out of scope (recorded by the probe, never its text);
* path prefixes: an artifact named by a workspace path outside the scope's prefixes is out
  of scope, and so is the tool event that previews it;
* policy path rules: an artifact's name gets the visibility and grants of the rules that
  match it, like a code file's path; the tool event that previews it gets them too.

Both store backends.
"""

from __future__ import annotations

import pytest

from scopelens.core.audit.whynot import why_not
from scopelens.core.contracts import ArtifactRef, RetrievalIntent, RetrievalScope, ToolFinishedPayload
from scopelens.core.pipeline.policy import Policy, VisibilityRule
from scopelens.core.pipeline.retriever import RetrievalObservation
from scopelens.core.vocab import EventType, EvidenceKind, Purpose, Source, Stage, Visibility
from tests.support.workspaces import AUTH_FILES, Lab

CANARY = "canarysessionzq"
SESSION_SOURCES = (Source.SESSION_EVENT, Source.ARTIFACT)
LOG = "FAILED tests/auth/session.test.ts admin mock role undefined\nexpected role admin received undefined\n"


@pytest.fixture
def lab(tmp_path, store_url):
    instance = Lab(tmp_path, store_url)
    instance.index(instance.workspace("ws", AUTH_FILES), "auth")
    yield instance
    instance.close()


def tool_output(lab: Lab, session_id: str, name: str, text: str, *, call: str = "c1") -> None:
    """A finished tool call whose whole output is the artifact ``name`` (preview: its head)."""
    data = text.encode("utf-8")
    ref = ArtifactRef(blob=lab.store.put_blob(data), name=name, size=len(data), evidence_kind=EvidenceKind.TEST_LOG)
    lab.store.append_event(
        session_id, EventType.TOOL_FINISHED,
        ToolFinishedPayload(call_id=call, tool="pnpm test", exit_code=1, output_preview=text[:300], artifacts=(ref,)),
    )


def retrieve(lab: Lab, session_id: str, policy: Policy | None = None, **scope: object) -> RetrievalObservation:
    intent = RetrievalIntent(purpose=Purpose.FIX_TEST, question="admin mock role undefined expected role admin")
    return lab.retriever(policy).retrieve(
        intent, RetrievalScope(project="auth", **scope), session_id=session_id  # type: ignore[arg-type]
    )


def visible(observation: RetrievalObservation) -> str:
    return "\n".join([observation.context_block, *(item.visible_text for item in observation.snapshot.selected)])


def test_another_sessions_events_and_artifacts_are_out_of_scope(lab):
    mine = lab.store.create_session(project="auth", session_id="s-a", title="mine")
    theirs = lab.store.create_session(project="auth", session_id="s-b", title="theirs")
    lab.store.append_event(mine.id, EventType.USER_MESSAGE, {"text": "the admin mock role is undefined"})
    lab.store.append_event(theirs.id, EventType.USER_MESSAGE, {"text": f"admin mock role undefined {CANARY}"})
    tool_output(lab, theirs.id, "test-output.log", f"{LOG}token {CANARY}\n")

    observation = retrieve(lab, mine.id, allowed_sources=SESSION_SOURCES)

    assert CANARY not in visible(observation)
    snapshot = observation.snapshot
    assert {item.source_ref for item in snapshot.selected} == {"s-a#1"}, "the session's own message is recalled"
    withheld = [r for r in snapshot.rejected if r.from_probe and r.source in SESSION_SOURCES]
    assert withheld, "what the scope withheld is on record"
    for rejected in withheld:
        assert (rejected.stage, rejected.from_probe) == (Stage.OUT_OF_SCOPE, True)
        assert "session s-b" in rejected.reason
    assert {r.source for r in withheld} == {Source.SESSION_EVENT, Source.ARTIFACT}
    assert all(not hasattr(r, "text") for r in snapshot.rejected)
    # Nothing of session B reached the ranking either.
    assert not [e for e in snapshot.ranked if "s-b" in e.candidate_id or e.candidate_id.startswith("artifact:")]


def test_an_artifact_outside_the_path_prefixes_is_out_of_scope(lab):
    session = lab.store.create_session(project="auth", session_id="s-a", title="mine")
    tool_output(lab, session.id, "ops/deploy.log", f"{LOG}deploy token {CANARY}\n", call="c1")
    tool_output(lab, session.id, "src/auth/trace.log", f"{LOG}trace\n", call="c2")
    tool_output(lab, session.id, "test-output.log", f"{LOG}output\n", call="c3")

    observation = retrieve(lab, session.id, allowed_sources=SESSION_SOURCES, path_prefixes=("src/auth",))

    assert CANARY not in visible(observation)
    shown = {item.path for item in observation.snapshot.selected if item.source == Source.ARTIFACT}
    assert shown == {"src/auth/trace.log", "test-output.log"}, "inside the prefixes, or a bare output name"
    outside = [r for r in observation.snapshot.rejected if r.path == "ops/deploy.log"]
    assert outside and all((r.stage, r.from_probe) == (Stage.OUT_OF_SCOPE, True) for r in outside)
    assert "outside the scope's prefixes (src/auth)" in outside[0].reason
    preview = [r for r in observation.snapshot.rejected if r.source == Source.SESSION_EVENT and r.from_probe]
    assert [(r.stage, r.source_ref) for r in preview] == [(Stage.OUT_OF_SCOPE, "s-a#1")], "its preview too"
    answer = why_not(lab.store, observation.snapshot_id, "path", "ops/deploy.log")
    assert answer.stage == Stage.OUT_OF_SCOPE


def test_policy_path_rules_apply_to_artifacts_and_their_previews(lab):
    session = lab.store.create_session(project="auth", session_id="s-a", title="mine")
    tool_output(lab, session.id, "ops/deploy.log", f"{LOG}deploy {CANARY}1\n", call="c1")
    tool_output(lab, session.id, "secret/keys.log", f"{LOG}keys {CANARY}2\n", call="c2")
    tool_output(lab, session.id, "test-output.log", LOG, call="c3")
    policy = Policy(visibility=(
        VisibilityRule(glob="ops/*", visibility=Visibility.RUNTIME_ONLY),
        VisibilityRule(glob="secret/*", visibility=Visibility.RAW, requires_grant="secrets"),
    ))

    observation = retrieve(lab, session.id, policy, allowed_sources=SESSION_SOURCES)

    assert CANARY not in visible(observation)
    rejected = observation.snapshot.rejected
    ops = {r.stage for r in rejected if r.path == "ops/deploy.log"}
    assert ops == {Stage.NOT_VISIBLE}
    keys = [r for r in rejected if r.path == "secret/keys.log"]
    assert keys and {r.stage for r in keys} == {Stage.DENIED_SOURCE}
    assert "secret/* requires grant 'secrets'" in keys[0].reason
    previews = {r.source_ref: r.stage for r in rejected
                if r.source == Source.SESSION_EVENT and r.stage in (Stage.NOT_VISIBLE, Stage.DENIED_SOURCE)}
    assert previews == {"s-a#1": Stage.NOT_VISIBLE, "s-a#2": Stage.DENIED_SOURCE}
    assert {item.path for item in observation.snapshot.selected if item.source == Source.ARTIFACT} == {"test-output.log"}

    granted = retrieve(lab, session.id, policy, allowed_sources=SESSION_SOURCES,
                       permission_context={"grants": ["secrets"]})
    assert f"{CANARY}1" not in visible(granted)
    assert f"{CANARY}2" in visible(granted), "the grant opens what it guards"
