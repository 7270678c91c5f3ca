"""Replay reads only the record; drift compares it with today's index and classifies each item."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import text

from scopelens.core.audit import drift as drift_module
from scopelens.core.audit.drift import compute_drift, drift_session, list_drift_runs, load_drift_run
from scopelens.core.audit.replay import context_hash_of, replay_session
from scopelens.core.cli import main
from scopelens.core.contracts import ModelRequestPayload, ModelResponsePayload, RetrievalBudget, RetrievalScope
from scopelens.core.store.verify import verify_store
from scopelens.core.vocab import DriftClass, EventType, Stage
from tests.pipeline.test_seed_seven import FIX_TEST
from tests.support.tamper import tampering
from tests.support.workspaces import AUTH_FILES, write

NEW_MOCK = (
    "export interface User { name: string; role?: string }\n\n"
    "export function createUserMock(overrides: Partial<User> = {}): User {\n"
    '  return { name: "test-user", role: "viewer", ...overrides };\n}\n'
)


def record_turn(lab, root):
    lab.index(root, "alpha")
    observation = lab.retriever(root=None).retrieve(FIX_TEST, project="alpha")
    lab.store.append_event(
        observation.session_id, EventType.MODEL_REQUEST,
        ModelRequestPayload(request_id="r1", snapshot_ids=(observation.snapshot_id,),
                            context_hash=context_hash_of([observation.context_block])),
    )
    lab.store.append_event(
        observation.session_id, EventType.MODEL_RESPONSE,
        ModelResponsePayload(request_id="r1", text="createUserMock sets no role [code#2]", cited_ids=("code#2",)),
    )
    return observation


def replay_json(capsys, db, session_id) -> str:
    assert main(["replay", session_id, "--db", db, "--json"]) == 0
    return capsys.readouterr().out


def test_replay_is_byte_identical_after_the_workspace_changes_and_drift_shows_the_diff(lab, capsys):
    root = lab.workspace("a", AUTH_FILES)
    observation = record_turn(lab, root)
    db = str(lab.tmp / "lab.db")
    before = replay_json(capsys, db, observation.session_id)
    write(root, {"src/auth/session.ts": NEW_MOCK})
    lab.clock.advance(timedelta(days=2))
    lab.index(root, "alpha")
    after = replay_json(capsys, db, observation.session_id)
    assert before == after
    turn = json.loads(after)["turns"][-1]
    assert turn["snapshots"][0]["context_block"] == observation.context_block
    assert all(check["ok"] for check in turn["checks"] + turn["snapshots"][0]["checks"])

    report = compute_drift(lab.store, observation.snapshot_id).report
    changed = [i for i in report.items if i.drift_class == DriftClass.CONTENT_CHANGED]
    assert [i.path for i in changed] == ["src/auth/session.ts"]
    assert '-  return { name: "test-user", ...overrides };' in changed[0].diff
    assert '+  return { name: "test-user", role: "viewer", ...overrides };' in changed[0].diff
    assert report.index_changed and not report.engine_changed and not report.config_changed


def test_replay_never_touches_the_index(lab, capsys):
    observation = record_turn(lab, lab.workspace("a", AUTH_FILES))
    db = str(lab.tmp / "lab.db")
    before = replay_json(capsys, db, observation.session_id)
    with tampering(db) as conn:
        for table in ("index_postings", "index_chunks", "index_documents", "index_runs"):
            conn.execute(text(f"DROP TABLE {table}"))
    assert replay_json(capsys, db, observation.session_id) == before


def test_replay_shows_turns_events_and_citations(lab):
    observation = record_turn(lab, lab.workspace("a", AUTH_FILES))
    replayed = replay_session(lab.store, observation.session_id)
    assert replayed.ok
    last = replayed.turns[-1]
    assert [e.type for e in last.events][-2:] == [EventType.MODEL_REQUEST, EventType.MODEL_RESPONSE]
    assert last.snapshots[0].snapshot.projection.citation_map["code#2"].source_ref == "src/auth/session.ts:1-1"


def test_replay_flags_a_tampered_block(lab, capsys):
    observation = record_turn(lab, lab.workspace("a", AUTH_FILES))
    db = str(lab.tmp / "lab.db")
    with tampering(db) as conn:
        conn.execute(text("UPDATE blobs SET data = :d WHERE sha256 = :h"),
                     {"d": b"forged block", "h": observation.snapshot.projection.block_ref})
    assert main(["replay", observation.session_id, "--db", db]) == 3
    out = capsys.readouterr().out
    assert "✗ context block blob" in out


def test_each_drift_class(lab):
    root = lab.workspace("a", dict(AUTH_FILES, **{"docs/extra.md": "# Extra\n\nexpected role admin received undefined extra\n"}))
    lab.index(root, "alpha")
    frozen = lab.retriever().retrieve(FIX_TEST, project="alpha")
    frozen_paths = {i.path for i in frozen.snapshot.selected}
    assert {"docs/extra.md", "src/auth/session.ts", "docs/rules/mocks.md"} <= frozen_paths
    write(
        root,
        {
            "src/auth/session.ts": NEW_MOCK,
            "tests/auth/session.fixture.ts": "// fixture for tests/auth/session.test.ts: expected role admin received undefined\nexport const role = 'admin';\n",  # noqa: E501 - data, kept whole
        },
    )
    (root / "docs" / "extra.md").unlink()
    lab.clock.advance(timedelta(days=1))
    lab.index(root, "alpha")
    report = compute_drift(lab.store, frozen.snapshot_id).report
    classes = {item.path: item for item in report.items}
    assert classes["src/auth/session.ts"].drift_class == DriftClass.CONTENT_CHANGED
    assert classes["tests/auth/session.fixture.ts"].drift_class == DriftClass.ADDED
    assert classes["docs/extra.md"].drift_class == DriftClass.REMOVED
    assert classes["docs/extra.md"].stage_today == Stage.STALE  # the probe finds the removed version
    moved_or_same = {classes[p].drift_class for p in ("docs/rules/mocks.md", "tests/auth/session.test.ts")}
    assert moved_or_same <= {DriftClass.MOVED, DriftClass.UNCHANGED}
    assert any(i.drift_class == DriftClass.MOVED and i.frozen_rank != i.today_rank for i in report.items)


def test_removed_items_name_the_stage_they_now_meet(lab):
    root = lab.workspace("a", AUTH_FILES)
    lab.index(root, "alpha")
    scope = RetrievalScope(project="alpha", budget=RetrievalBudget(max_items=2))
    frozen = lab.retriever().retrieve(FIX_TEST, scope)
    write(
        root,
        {
            "tests/auth/session.fixture.ts": "// tests/auth/session.test.ts fixture\n// expected role admin received undefined\nexport const role = 'admin';\n"  # noqa: E501 - data, kept whole
        },
    )
    lab.index(root, "alpha")
    report = compute_drift(lab.store, frozen.snapshot_id).report
    removed = [i for i in report.items if i.drift_class == DriftClass.REMOVED]
    assert removed and removed[0].stage_today == Stage.OVER_BUDGET


def test_engine_change_is_told_apart_from_index_change(lab, monkeypatch):
    root = lab.workspace("a", AUTH_FILES)
    lab.index(root, "alpha")
    frozen = lab.retriever().retrieve(FIX_TEST, project="alpha")
    same = compute_drift(lab.store, frozen.snapshot_id).report
    assert not (same.engine_changed or same.config_changed or same.index_changed)
    assert {i.drift_class for i in same.items} == {DriftClass.UNCHANGED}
    monkeypatch.setattr(drift_module, "ENGINE_VERSION", "scopelens-core/9.9.9")
    engine_only = compute_drift(lab.store, frozen.snapshot_id).report
    assert engine_only.engine_changed and not engine_only.index_changed
    monkeypatch.undo()
    write(root, {"README.md": "# readme\n"})
    lab.index(root, "alpha")
    index_only = compute_drift(lab.store, frozen.snapshot_id).report
    assert index_only.index_changed and not index_only.engine_changed


def test_drift_runs_are_recorded_and_never_modify_the_snapshot(lab):
    root = lab.workspace("a", AUTH_FILES)
    observation = record_turn(lab, root)
    before = lab.store.get_snapshot(observation.snapshot_id)
    write(root, {"src/auth/session.ts": NEW_MOCK})
    lab.index(root, "alpha")
    first = compute_drift(lab.store, observation.snapshot_id).report
    (again,) = drift_session(lab.store, observation.session_id)
    runs = list_drift_runs(lab.store, observation.snapshot_id)
    assert [r.id for r in runs] == [first.id]  # nothing changed since: a confirmation, not a second run
    assert (again.recorded, again.confirmed_run_id, again.report) == ("confirmed", first.id, first)
    assert runs[0].index_version == first.index_version_now
    assert load_drift_run(lab.store, first.id) == first
    assert lab.store.get_snapshot(observation.snapshot_id) == before
    assert verify_store(lab.store).clean


@pytest.mark.parametrize(
    "argv, message",
    [
        (["replay", "s-nope"], "no session 's-nope'"),
        (["drift", "snap-nope"], "no snapshot 'snap-nope'"),
        (["why-not", "snap-nope", "--path", "x"], "no snapshot 'snap-nope'"),
        (["drift", "--list", "snap-nope"], None),
        (["drift"], "SNAPSHOT_ID or --session"),
    ],
)
def test_unknown_ids_give_one_line_errors(lab, capsys, argv, message):
    lab.index(lab.workspace("a", AUTH_FILES), "alpha")
    code = main([*argv, "--db", str(lab.tmp / "lab.db")])
    err = capsys.readouterr().err
    if message is None:
        assert code == 0
        return
    assert code == 2 and err.startswith("error: ") and message in err and err.count("\n") == 1
