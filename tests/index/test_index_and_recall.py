"""Indexing is versioned and incremental; recall applies scope as masks, on both backends."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scopelens.core.cli import main
from scopelens.core.clock import SteppingClock
from scopelens.core.index.chunks import fetch_chunks
from scopelens.core.index.indexer import index_workspace
from scopelens.core.index.scorer import RecallFilter, Scorer
from scopelens.core.index.timeutil import to_micros
from scopelens.core.index.tokenizer import tokenize
from scopelens.core.store.store import Store
from scopelens.core.vocab import Source

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def write(root: Path, files: dict[str, str]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")


def terms(query: str) -> list[tuple[str, float]]:
    return [(t, 1.0) for t in tokenize(query)]


def search(store: Store, query: str, **masks) -> list[str]:
    masks.setdefault("project", "alpha")
    hits = Scorer(store).search(terms(query), RecallFilter(**masks), top_k=10)
    chunks = fetch_chunks(store, [h.chunk_id for h in hits])
    return [chunks[h.chunk_id].source_ref for h in hits]


AUTH = "def create_user_mock(role=None):\n    return {'name': 'u', 'role': role}\n"
ROLE_DOC = "# Roles\n\nTest mocks declare the role explicitly; admin is never implied.\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root, {"src/auth/session.py": AUTH, "docs/roles.md": ROLE_DOC, "src/util.py": "def add(a, b):\n    return a + b\n"})
    return root


def test_incremental_counts_and_versions(store_url, workspace):
    clock = SteppingClock(T0, timedelta(hours=1))
    with Store.open(store_url, create=True) as store:
        first = index_workspace(store, workspace, project="alpha", clock=clock)
        assert (len(first.added), len(first.changed), len(first.removed), first.unchanged) == (3, 0, 0, 0)
        again = index_workspace(store, workspace, project="alpha", clock=clock)
        assert (len(again.added), len(again.changed), len(again.removed), again.unchanged) == (0, 0, 0, 3)
        assert again.chunks == 0
        write(workspace, {"src/util.py": "def add(a, b):\n    return b + a\n", "src/new.py": "X = 1\n"})
        (workspace / "docs" / "roles.md").unlink()
        third = index_workspace(store, workspace, project="alpha", clock=clock)
        assert third.added == ["src/new.py"] and third.changed == ["src/util.py"] and third.removed == ["docs/roles.md"]
        assert third.unchanged == 1
        assert third.index_version != first.index_version


def test_as_of_sees_the_past(store_url, workspace):
    clock = SteppingClock(T0, timedelta(days=1))
    with Store.open(store_url, create=True) as store:
        index_workspace(store, workspace, project="alpha", clock=clock)  # T0
        write(workspace, {"docs/roles.md": "# Roles\n\nThe default role is user.\n"})
        index_workspace(store, workspace, project="alpha", clock=clock)  # T0 + 1 day
        now_hits = search(store, "default role user")
        past_hits = search(store, "admin never implied", as_of_us=to_micros(T0 + timedelta(hours=1)))
        before_anything = search(store, "role", as_of_us=to_micros(T0 - timedelta(hours=1)))
        scorer = Scorer(store)
        past = scorer.search(
            terms("admin never implied"), RecallFilter(project="alpha", as_of_us=to_micros(T0 + timedelta(hours=1)))
        )
        record = fetch_chunks(store, [past[0].chunk_id])[past[0].chunk_id]
    assert now_hits[0] == "docs/roles.md:1-3"
    assert search_text_absent(store_url, "admin never implied")
    assert past_hits and past_hits[0] == "docs/roles.md:1-3"
    assert "admin is never implied" in record.text and record.valid_to is not None
    assert before_anything == []


def search_text_absent(url: str, query: str) -> bool:
    with Store.open(url, read_only=True) as store:
        hits = Scorer(store).search(terms(query), RecallFilter(project="alpha"), top_k=10)
        texts = [c.text for c in fetch_chunks(store, [h.chunk_id for h in hits]).values()]
    return all("never implied" not in text for text in texts)


def test_masks_keep_near_identical_chunks_of_other_scopes_out(store_url, tmp_path):
    same = {"src/auth/session.py": AUTH}
    roots = {name: tmp_path / name for name in ("a", "b", "c", "d")}
    for root in roots.values():
        write(root, same)
    write(roots["d"], {"vendor/auth/session.py": AUTH})
    with Store.open(store_url, create=True) as store:
        index_workspace(store, roots["a"], project="alpha", branch="main")
        index_workspace(store, roots["b"], project="beta", branch="main")
        index_workspace(store, roots["c"], project="alpha", branch="feature")
        index_workspace(store, roots["d"], project="alpha", branch="main")
        scorer = Scorer(store)
        query = terms("create_user_mock role")

        def owners(flt: RecallFilter) -> set[tuple[str, str, str, str]]:
            hits = scorer.search(query, flt, top_k=20)
            chunks = fetch_chunks(store, [h.chunk_id for h in hits])
            return {(c.project, c.branch, Path(c.root).name, c.path) for c in chunks.values()}

        assert owners(RecallFilter(project="alpha", branch="main", workspace_root=str(roots["a"].resolve()))) == {
            ("alpha", "main", "a", "src/auth/session.py")
        }
        assert {o[0] for o in owners(RecallFilter(project="beta"))} == {"beta"}
        assert {o[1] for o in owners(RecallFilter(project="alpha", branch="feature"))} == {"feature"}
        scoped = owners(RecallFilter(project="alpha", branch="main", path_prefixes=("vendor",)))
        assert scoped == {("alpha", "main", "d", "vendor/auth/session.py")}
        # A prefix is a directory or an exact path, never a string prefix of a name.
        assert owners(RecallFilter(project="alpha", path_prefixes=("src/aut",))) == set()
        assert len(owners(RecallFilter(project="alpha"))) == 4
        # Unscoped-by-path scores equal scoped scores for the same chunk (same statistics).
        full = {h.chunk_id: h.score for h in scorer.search(query, RecallFilter(project="alpha", branch="main"), top_k=20)}
        part = scorer.search(query, RecallFilter(project="alpha", branch="main", path_prefixes=("vendor",)), top_k=20)
        assert all(full[h.chunk_id] == pytest.approx(h.score) for h in part)


def test_source_mask_and_time_window(store_url, workspace):
    clock = SteppingClock(T0, timedelta(days=10))
    with Store.open(store_url, create=True) as store:
        index_workspace(store, workspace, project="alpha", clock=clock)
        write(workspace, {"docs/new.md": "# role policy\n\nrole admin explicitly\n"})
        index_workspace(store, workspace, project="alpha", clock=clock)
        docs_only = search(store, "role", sources=frozenset({Source.WORKSPACE_DOC}))
        recent = search(store, "role", include_after_us=to_micros(T0 + timedelta(days=5)))
        old = search(store, "role", exclude_after_us=to_micros(T0 + timedelta(days=5)))
    assert docs_only and all(ref.startswith("docs/") for ref in docs_only)
    assert recent == ["docs/new.md:1-3"]
    assert "docs/new.md:1-3" not in old and "src/auth/session.py:1-2" in old


def test_cjk_documents_are_found(store_url, tmp_path):
    root = tmp_path / "ja"
    write(
        root,
        {
            "docs/ja/mock.md": "# テストの規約\n\nテスト mock は role を明示的に宣言すること。権限ルールは本番の既定値に依存しない。\n",  # noqa: E501 - data, kept whole
            "docs/zh/notes.md": "# 说明\n\n检索结果是证据，不是指令。\n",
            "docs/en.md": "# Notes\n\nNothing to see.\n",
        },
    )
    with Store.open(store_url, create=True) as store:
        index_workspace(store, root, project="alpha")
        assert search(store, "権限ルール")[0] == "docs/ja/mock.md:1-3"
        assert search(store, "明示的に宣言")[0] == "docs/ja/mock.md:1-3"
        assert search(store, "证据")[0] == "docs/zh/notes.md:1-3"


def test_secrets_are_redacted_before_anything_is_stored(store_url, tmp_path):
    root = tmp_path / "sec"
    key = "AKIA" + "Z7QX3VN5LP2KD8RT"
    write(root, {"config/settings.py": f"AWS_ACCESS_KEY_ID = '{key}'\nREGION = 'eu'\n"})
    with Store.open(store_url, create=True) as store:
        report = index_workspace(store, root, project="alpha")
        hits = Scorer(store).search(terms("aws access key region"), RecallFilter(project="alpha"))
        texts = [c.text for c in fetch_chunks(store, [h.chunk_id for h in hits]).values()]
    assert report.redactions >= 1
    assert texts and all(key not in text for text in texts)
    assert any("REDACTED" in text for text in texts)


def test_index_and_search_cli(capsys, tmp_path, workspace):
    db = str(tmp_path / "cli.db")
    (workspace / "escape").symlink_to("/etc")
    assert main(["index", str(workspace), "--project", "alpha", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "refused symlink: escape" in out and "3 added" in out
    assert main(["search", "create_user_mock", "--project", "alpha", "--db", db, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema_version"] == 1
    assert document["results"][0]["path"] == "src/auth/session.py"
    assert main(["search", "role", "--project", "alpha", "--db", db, "--as-of", "yesterday"]) == 2
    assert "not an ISO-8601" in capsys.readouterr().err
    assert main(["index", str(tmp_path / "missing"), "--project", "alpha", "--db", db]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_index_cli_reads_where_the_policy_keeps_rules_and_decisions(capsys, tmp_path):
    workspace = tmp_path / "ws"
    (workspace / "handbook").mkdir(parents=True)
    (workspace / "handbook" / "mocks.md").write_text("# Mocks\n\nEvery mock declares its role.\n")
    (workspace / ".scopelens").mkdir()
    (workspace / ".scopelens" / "policy.toml").write_text('rule_globs = ["handbook/*"]\n')
    db = str(tmp_path / "policy.db")
    assert main(["index", str(workspace), "--project", "p", "--db", db]) == 0
    capsys.readouterr()
    assert main(["search", "mock role", "--project", "p", "--source", "project-rule", "--db", db, "--json"]) == 0
    assert [r["path"] for r in json.loads(capsys.readouterr().out)["results"]] == ["handbook/mocks.md"]
    bad = tmp_path / "bad.toml"
    bad.write_text("rule_globz = []\n")
    assert main(["index", str(workspace), "--project", "p", "--db", db, "--policy", str(bad)]) == 2
    assert "rule_globz" in capsys.readouterr().err


def test_a_policy_change_reclassifies_files_whose_bytes_did_not_change(capsys, tmp_path):
    """Adding a rule glob moves an unchanged file to project-rule in the next run; removing
    it moves the file back. Files the change does not touch stay unchanged."""
    workspace = tmp_path / "ws"
    (workspace / "handbook").mkdir(parents=True)
    (workspace / "handbook" / "mocks.md").write_text("# Mocks\n\nEvery mock declares its role.\n")
    (workspace / "app.py").write_text("def role_of(user):\n    return user.role\n")
    db = str(tmp_path / "policy.db")

    def index_json(*extra: str) -> dict:
        assert main(["index", str(workspace), "--project", "p", "--db", db, "--json", *extra]) == 0
        return json.loads(capsys.readouterr().out)

    def rule_paths() -> list[str]:
        assert main(["search", "mock role", "--project", "p", "--source", "project-rule", "--db", db, "--json"]) == 0
        return [r["path"] for r in json.loads(capsys.readouterr().out)["results"]]

    first = index_json()
    assert sorted(first["added"]) == ["app.py", "handbook/mocks.md"] and rule_paths() == []
    policy = tmp_path / "policy.toml"
    policy.write_text('rule_globs = ["handbook/*"]\n')
    second = index_json("--policy", str(policy))
    assert second["reclassified"] == second["changed"] == ["handbook/mocks.md"]
    assert second["unchanged"] == 1 and rule_paths() == ["handbook/mocks.md"]
    assert index_json("--policy", str(policy))["unchanged"] == 2  # same policy: nothing to do
    third = index_json()
    assert third["reclassified"] == ["handbook/mocks.md"] and rule_paths() == []
