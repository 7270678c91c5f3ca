"""Recording session scripts: deterministic hashes, strict scripts, and the findings rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scopelens.core.cli import main
from scopelens.core.errors import InvalidInputError
from scopelens.core.record import FindingKind, Outcome, load_script, record_script, record_scripts
from scopelens.core.record.support import check_support, key_terms
from scopelens.core.store.store import Store
from scopelens.core.store.verify import verify_store

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_sessions"
SCENARIOS = sorted(p.parent.name for p in SAMPLES.glob("*/script.json"))


def write_scenario(base: Path, script: dict, files: dict[str, str], memories: list[dict] | None = None) -> Path:
    """A scenario directory with a workspace and a script.json; returns the directory."""
    for rel, content in files.items():
        path = base / "workspace" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    (base / "workspace").mkdir(parents=True, exist_ok=True)
    if memories:
        (base / "memories.jsonl").write_text("".join(json.dumps(m) + "\n" for m in memories), encoding="utf-8")
    (base / "script.json").write_text(json.dumps(script), encoding="utf-8")
    return base


TINY_FILES = {
    "src/auth/session.ts": (
        "export function createUserMock(overrides = {}) {\n"
        "  return { id: 'u-1', ...overrides };\n"
        "}\n"
    ),
    "docs/rules/mocks.md": "# Mocks\n\nEvery mock declares its role explicitly.\n",
}
TINY_INTENT = {
    "purpose": "fix-test",
    "question": "Why is the role of createUserMock undefined?",
    "anchors": {"current_files": ["src/auth/session.ts"], "symbols": ["createUserMock"]},
}


def tiny_script(steps: list[dict], **top: object) -> dict:
    return {"project": "tiny", "steps": [{"user": "role is undefined"}, {"retrieve": TINY_INTENT}, *steps], **top}


@pytest.fixture(scope="module")
def all_samples(tmp_path_factory):
    """Every sample scenario recorded into one store, as `scopelens demo` does."""
    db = str(tmp_path_factory.mktemp("samples") / "samples.db")
    results = record_scripts([SAMPLES / name for name in SCENARIOS], db=db)
    return db, {result.scenario: result for result in results}


# --------------------------------------------------------------------------- determinism


def test_the_same_script_gives_the_same_hashes_in_two_fresh_stores(tmp_path):
    """Record auth-role-mock twice, into stores in different directories: identical heads and snapshots.

    Edits happen in a copy, so the sample workspace is byte-for-byte unchanged afterwards.
    """
    workspace = SAMPLES / "auth-role-mock" / "workspace"
    before = {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()}
    heads, snapshots = [], []
    for name in ("one", "two"):
        db = str(tmp_path / name / "store.db")
        result = record_script(SAMPLES / "auth-role-mock", db=db)
        with Store.open(db, read_only=True) as store:
            heads.append(store.store_head())
        snapshots.append([(s.snapshot_id, s.snapshot_hash) for s in result.snapshots])
        assert result.session_head
    assert heads[0] == heads[1]
    assert snapshots[0] == snapshots[1]
    assert {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()} == before


@pytest.mark.postgres
def test_sqlite_and_postgresql_record_the_same_hashes(tmp_path, postgres_url):
    """The engine's ids and times are injected, so the backend does not change a hash either."""
    scenario = SAMPLES / "limiter-replay-drift"
    on_sqlite = record_script(scenario, db=str(tmp_path / "s.db"))
    on_postgres = record_script(scenario, db=postgres_url)
    assert [s.snapshot_hash for s in on_sqlite.snapshots] == [s.snapshot_hash for s in on_postgres.snapshots]
    assert on_sqlite.session_head == on_postgres.session_head


def test_the_copy_path_does_not_reach_the_record(all_samples):
    """The session's workspace_root is a logical name, and no snapshot scope carries a path."""
    db, results = all_samples
    with Store.open(db, read_only=True) as store:
        for result in results.values():
            assert store.get_session(result.session_id).workspace_root == f"script:{result.scenario}"
            for snap in result.snapshots:
                assert store.get_snapshot(snap.snapshot_id).snapshot.scope.workspace_root is None


def test_a_scenario_cannot_be_recorded_twice_into_one_store(tmp_path):
    db = str(tmp_path / "s.db")
    base = write_scenario(tmp_path / "tiny", tiny_script([]), TINY_FILES)
    record_script(base, db=db)
    with pytest.raises(InvalidInputError, match="already recorded"):
        record_script(base, db=db)


# --------------------------------------------------------------------------- the samples


def test_there_are_at_least_four_scenarios_covering_every_failure_form(all_samples):
    _db, results = all_samples
    assert len(results) >= 4
    forms = {FindingKind(e.finding) for r in results.values() for e in r.expectations}
    assert forms >= {
        FindingKind.SIMILARITY_POLLUTION, FindingKind.TIME_POLLUTION, FindingKind.PERMISSION_POLLUTION,
        FindingKind.CANDIDATE_MEMORY_POLLUTION, FindingKind.CITATION_DISTORTION,
        FindingKind.BUDGET_TRIM_DISTORTION, FindingKind.REPLAY_DRIFT,
    }


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_scenario_produces_the_findings_it_was_built_to_show(all_samples, scenario):
    _db, results = all_samples
    result = results[scenario]
    assert result.expectations, f"{scenario} expects no finding"
    assert [e.describe() for e in result.unmet] == []


def test_replay_drift_says_what_drift_reports_of_the_item_not_of_its_file(all_samples):
    """The limiter's BURST_CAPACITY line changed, outside the cited class's lines 12-28: the
    finding used to say drift reports the class as content-changed (drift says unchanged,
    with changed_elsewhere); the decision's own text changed, and that is content-changed."""
    _db, results = all_samples
    drifted = {f.source_ref: f.explanation for f in results["limiter-replay-drift"].findings
               if f.kind == FindingKind.REPLAY_DRIFT}
    limiter = drifted["gateway/limiter.py:12-28"]
    assert "outside lines 12-28" in limiter and limiter.endswith("drift reports it as unchanged with changed_elsewhere")
    assert "would see the same lines" in limiter
    assert drifted["docs/decisions/0003-burst-capacity.md:1-6"].endswith("drift reports it as content-changed")


def test_the_samples_store_verifies_clean(all_samples):
    db, _results = all_samples
    with Store.open(db, read_only=True) as store:
        report = verify_store(store)
    assert report.clean, report.problems


def test_the_auth_story_follows_the_essay(all_samples):
    """Bare search selects the admin doc; the scoped intent shows test-log, code, rule and memory."""
    db, results = all_samples
    auth = results["auth-role-mock"]
    with Store.open(db, read_only=True) as store:
        bare, scoped, _fixture = (store.get_snapshot(s.snapshot_id).snapshot for s in auth.snapshots)
        events = store.events(auth.session_id)
    assert {"src/admin/rbac.ts", "docs/admin/permissions.md"} <= {item.path for item in bare.selected}
    kinds = {item.evidence_kind.value for item in scoped.selected}
    assert {"test-log", "code", "rule", "memory"} <= kinds
    assert not any(item.path and item.path.startswith(("docs/admin", "src/admin")) for item in scoped.selected)
    memory = next(item for item in scoped.selected if item.evidence_kind.value == "memory")
    assert "本番" in memory.visible_text
    responses = [e for e in events if e.type.value == "model.response"]
    assert responses[0].payload["cited_ids"] == ["doc#1", "rule#2"]  # rule#2 dangles: the distortion
    assert set(responses[1].payload["cited_ids"]) == {"test-log#1", "code#1", "rule#1", "memory#1"}
    assert "[memory#1]" in responses[1].payload["text"]


# --------------------------------------------------------------------------- citations


def test_an_unsupported_citation_is_a_finding(tmp_path):
    base = write_scenario(tmp_path / "tiny", tiny_script([
        {"reply": {"text": "The mock declares its role [1]; the rule is about billing [2].", "cites": [
            {"source_ref": "docs/rules/mocks.md", "claim": "every mock declares its role explicitly"},
            {"source_ref": "docs/rules/mocks.md", "claim": "invoices are rounded to cents at checkout"},
        ]}},
    ]), TINY_FILES)
    result = record_script(base, db=str(tmp_path / "s.db"))
    unsupported = [f for f in result.findings if f.kind == FindingKind.UNSUPPORTED_CITATION]
    assert len(unsupported) == 1
    assert "invoices are rounded" in unsupported[0].explanation
    assert unsupported[0].source_ref == "docs/rules/mocks.md:1-3"


def test_a_citation_of_unseen_evidence_is_citation_distortion(tmp_path):
    base = write_scenario(tmp_path / "tiny", tiny_script([
        {"reply": {"text": "See [1] and [2].", "cites": [
            {"citation_id": "rule#7", "claim": "mocks declare roles"},
            {"source_ref": "src/billing/invoice.ts:1-9", "claim": "invoices"},
        ]}},
    ]), TINY_FILES)
    db = str(tmp_path / "s.db")
    result = record_script(base, db=db)
    distortions = [f for f in result.findings if f.kind == FindingKind.CITATION_DISTORTION]
    assert {(f.citation_id, f.source_ref) for f in distortions} == {("rule#7", None), (None, "src/billing/invoice.ts:1-9")}
    with Store.open(db, read_only=True) as store:
        response = next(e for e in store.events(result.session_id) if e.type.value == "model.response")
    assert response.payload["text"] == "See [rule#7] and [src/billing/invoice.ts:1-9]."
    assert response.payload["cited_ids"] == ["rule#7"]


def test_an_uncited_reply_under_a_citation_policy_is_a_finding(tmp_path):
    base = write_scenario(tmp_path / "tiny", tiny_script([{"reply": {"text": "Add a role to the mock."}}]), TINY_FILES)
    result = record_script(base, db=str(tmp_path / "s.db"))
    uncited = [f for f in result.findings if f.kind == FindingKind.UNCITED_REPLY]
    assert len(uncited) == 1 and uncited[0].outcome == Outcome.OCCURRED and uncited[0].turn == 1


def test_key_terms_and_support_rule():
    assert key_terms("createUserMock sets no role default") == [
        "createusermock",
        "create",
        "user",
        "mock",
        "sets",
        "role",
        "default",
    ]
    text = "export function createUserMock(overrides) { return { ...overrides }; } // sets no role default"
    assert check_support("createUserMock sets no role default", text).supported
    assert not check_support("the limiter resets buckets at midnight", text).supported
    assert check_support(
        "本番の default role は変更しなかった", "本番の createUserMock の default role は変更しなかった。"
    ).supported


def test_a_scope_naming_another_project_is_permission_pollution(tmp_path):
    db = str(tmp_path / "s.db")
    record_script(write_scenario(tmp_path / "tiny", tiny_script([]), TINY_FILES), db=db)
    other = {"project": "other", "steps": [
        {"user": "why is the role undefined?"},
        {"retrieve": {**TINY_INTENT, "scope": {"project": "tiny"}}},
    ]}
    result = record_script(write_scenario(tmp_path / "other", other, {"README.md": "# other\n"}), db=db)
    occurred = [f for f in result.findings if f.kind == FindingKind.PERMISSION_POLLUTION and f.outcome == Outcome.OCCURRED]
    assert len(occurred) == 1 and "project tiny" in occurred[0].explanation


# --------------------------------------------------------------------------- strict scripts


@pytest.mark.parametrize(
    ("script", "named"),
    [
        ({"project": "p", "steps": [{"user": "x"}], "colour": "red"}, "colour"),
        ({"project": "p", "steps": [{"user": "x", "mood": 1}]}, "steps[0] (user): mood"),
        ({"project": "p", "steps": [{"tool": "t", "exitcode": 1}]}, "steps[0] (tool): exitcode"),
        ({"project": "p", "steps": [{"retrieve": {"question": "q", "anchor": {}}}]}, "steps[0] (retrieve): anchor"),
        ({"project": "p", "steps": [{"retrieve": {"question": "q", "scope": {"budgett": {}}}}]}, "scope: budgett"),
        (
            {"project": "p", "steps": [{"reply": {"text": "t", "cites": [{"source_ref": "a:1-2", "claim": "c", "x": 1}]}}]},
            "cites.0.x",
        ),
        ({"project": "p", "steps": [{"expect": [{"finding": "similarity", "outcome": "occurred"}]}]}, "expect.0.finding"),
        ({"project": "p", "steps": [{"jump": 1}]}, "steps[0]: a step has exactly one of"),
        ({"project": "p", "steps": [{"edit": {"path": "../x", "content": "y"}}]}, "edit.path"),
    ],
)
def test_an_unknown_or_bad_field_is_a_one_line_error_naming_it(tmp_path, script, named):
    base = write_scenario(tmp_path / "bad", script, {"a.txt": "a\n"})
    with pytest.raises(InvalidInputError) as caught:
        load_script(base)
    message = str(caught.value)
    assert "\n" not in message
    assert named in message and str(base / "script.json") in message


def test_the_cli_reports_a_bad_script_in_one_line(tmp_path, capsys):
    base = write_scenario(tmp_path / "bad", {"project": "p", "steps": [{"user": "x", "mood": 1}]}, {"a.txt": "a\n"})
    assert main(["record", str(base), "--db", str(tmp_path / "s.db")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: ") and "mood" in err


def test_record_cli_prints_findings_and_json(tmp_path, capsys):
    base = write_scenario(tmp_path / "tiny", tiny_script([{"reply": {"text": "Add a role."}}]), TINY_FILES)
    assert main(["record", str(base), "--db", str(tmp_path / "a.db")]) == 0
    text = capsys.readouterr().out
    assert "uncited-reply (occurred)" in text and "store head:" in text
    assert main(["record", str(base), "--db", str(tmp_path / "b.db"), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema_version"] == 1 and document["kind"] == "record"
    assert "uncited-reply" in {f["kind"] for f in document["results"][0]["findings"]}


def test_an_unmet_expectation_fails_the_record_command(tmp_path, capsys):
    base = write_scenario(tmp_path / "tiny", tiny_script([
        {"expect": [{"finding": "budget-trim-distortion"}]},
    ]), TINY_FILES)
    assert main(["record", str(base), "--db", str(tmp_path / "s.db")]) == 1
    assert "budget-trim-distortion" in capsys.readouterr().err


# --------------------------------------------------------------------------- docs


def test_the_script_doc_names_every_step_finding_and_outcome():
    from scopelens.core.record.findings import Outcome as Outcomes
    from scopelens.core.record.script import STEP_VERBS

    text = (ROOT / "docs" / "session-scripts.md").read_text(encoding="utf-8")
    missing = [f"`{k.value}`" for k in FindingKind if f"`{k.value}`" not in text]
    missing += [f"`{o.value}`" for o in Outcomes if f"`{o.value}`" not in text]
    missing += [verb for verb in STEP_VERBS if f'{{"{verb}"' not in text]
    assert missing == []


def test_the_samples_readme_tells_every_scenario():
    text = (SAMPLES / "README.md").read_text(encoding="utf-8")
    assert [name for name in SCENARIOS if f"## {name}" not in text] == []


def test_no_sample_file_is_ignored_by_git():
    """A sample file the repository's .gitignore hides (e.g. under .scopelens/) would vanish from CI."""
    import pathspec

    spec = pathspec.GitIgnoreSpec.from_lines((ROOT / ".gitignore").read_text(encoding="utf-8").splitlines())
    files = [p.relative_to(ROOT).as_posix() for p in SAMPLES.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert files and [f for f in files if spec.match_file(f)] == []


def test_secrets_in_tool_arguments_and_output_are_redacted_before_they_are_stored(tmp_path):
    token = "ghp_" + "Zq7" * 12
    base = write_scenario(tmp_path / "tiny", tiny_script([
        {"tool": "deploy", "arguments": {"env": {"GITHUB_TOKEN": token}, "argv": ["--token", token]},
         "output": f"using token {token}", "exit_code": 0},
    ]), TINY_FILES)
    db = str(tmp_path / "s.db")
    result = record_script(base, db=db)
    with Store.open(db, read_only=True) as store:
        tool_events = [e for e in store.events(result.session_id) if e.type.value.startswith("tool.")]
    assert tool_events and all(token not in repr(e.payload) for e in tool_events)
    assert tool_events[0].payload["arguments"]["env"]["GITHUB_TOKEN"].startswith("[REDACTED:")


def test_why_not_a_typescript_symbol_follows_its_definition_past_the_rows_that_mention_it(all_samples):
    """The essay's TypeScript example, chunked by function: turn 3 showed the test log, which
    mentions requireRole, but not requireRole's own chunk. why-not answers for the definition
    (where it dropped out) and lists the mentions beside it."""
    from scopelens.core.audit.whynot import why_not
    from scopelens.core.vocab import Stage

    db, _results = all_samples
    store = Store.open(db)
    try:
        answer = why_not(store, "snap-auth-role-mock-0002", "symbol", "requireRole")
        shown = why_not(store, "snap-auth-role-mock-0002", "symbol", "createUserMock")
    finally:
        store.close()
    assert answer.stage == Stage.NOT_RECALLED and answer.best_chunk == "src/auth/session.ts:29-33", answer.summary
    assert "best chunks kept of its file" in answer.summary
    assert "rows that mention it: test-output.log:1-14 cited" in answer.summary
    assert shown.stage == Stage.CITED and shown.source_ref == "src/auth/session.ts:15-23"


def test_a_look_alike_log_is_never_said_to_be_outside_a_later_scopes_path_prefixes(all_samples):
    """Path prefixes confine workspace files, not a tool's output named by a bare name: a log
    selected on word overlap and not selected under a prefixed scope later was not recalled;
    it was never 'outside the scope's path prefixes'. A file is (rbac.ts, turn 3)."""
    from scopelens.core.record.findings import FindingContext, _similarity
    from scopelens.core.vocab import Stage

    db, results = all_samples
    store = Store.open(db)
    try:
        later = store.get_snapshot("snap-auth-role-mock-0003").snapshot  # prefixes (tests/auth), no log shown
    finally:
        store.close()
    assert later.scope.path_prefixes and all(i.source_ref != "test-output.log:1-14" for i in later.selected)
    ctx = FindingContext("auth-role-mock", "s-auth-role-mock-0001", "web-app")
    ctx.add(ctx.make(FindingKind.SIMILARITY_POLLUTION, Outcome.OCCURRED, 2, "look-alike",
                     snapshot_id="snap-auth-role-mock-0001", source_ref="test-output.log:1-14", stage=Stage.SELECTED))
    _similarity(later, ctx)
    prevented = [f for f in ctx.findings if f.outcome == Outcome.PREVENTED]
    assert [(f.source_ref, f.stage) for f in prevented] == [("test-output.log:1-14", Stage.NOT_RECALLED)]
    rbac = next(f for f in results["auth-role-mock"].findings
                if f.outcome == Outcome.PREVENTED and f.source_ref == "src/admin/rbac.ts:10-12")
    assert rbac.stage == Stage.OUT_OF_SCOPE and "never searched" in rbac.explanation
