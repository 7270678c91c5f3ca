"""One retrieval reads one branch, and the block says which.

Before, an unset branch meant every branch: a checkout indexed as `main` and as `feature`
gave two contradictory copies of `src/billing.py:1-2` in one block, with no branch in the
header and pins from the latest run of any branch.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from scopelens.core.cli import main
from scopelens.core.contracts import RetrievalIntent, RetrievalScope
from scopelens.core.errors import InvalidInputError
from scopelens.core.vocab import Purpose

MAIN = {"src/billing.py": "def total(amounts):\n    return sum(amounts)  # dollars as floats\n"}
FEATURE = {"src/billing.py": "def total(amounts):\n    return sum(amounts)  # integer cents\n"}
INTENT = RetrievalIntent(purpose=Purpose.ANSWER_QUESTION, question="how does billing total the amounts")


@pytest.fixture
def two_branches(lab):
    lab.index(lab.workspace("main", MAIN), "shop", branch="main")
    lab.index(lab.workspace("feature", FEATURE), "shop", branch="feature")
    return lab


def test_a_project_on_several_branches_needs_a_branch(two_branches):
    with pytest.raises(InvalidInputError, match=r"several branches \(feature, main\): pass --branch"):
        two_branches.retriever().retrieve(INTENT, project="shop")


@pytest.mark.parametrize(("branch", "shown", "hidden"), [("main", "dollars", "cents"), ("feature", "cents", "dollars")])
def test_the_block_holds_one_branch_and_names_it(two_branches, branch, shown, hidden):
    observation = two_branches.retriever().retrieve(INTENT, project="shop", branch=branch)
    block = observation.context_block
    assert shown in block and hidden not in block
    assert f"branch {branch})" in block.splitlines()[0]
    assert f"{branch}:src/billing.py:1-2" in block
    snapshot = observation.snapshot
    assert snapshot.scope.branch == branch
    assert f"/{branch}/" in snapshot.pins.index_version or branch in snapshot.pins.index_version


def test_a_scope_file_branch_counts_and_must_agree(two_branches):
    scope = RetrievalScope(project="shop", branch="feature")
    assert "cents" in two_branches.retriever().retrieve(INTENT, scope).context_block
    with pytest.raises(InvalidInputError, match="disagrees"):
        two_branches.retriever().retrieve(INTENT, scope, branch="main")


def test_a_session_keeps_its_branch(two_branches):
    first = two_branches.retriever().retrieve(INTENT, project="shop", branch="feature")
    again = two_branches.retriever().retrieve(INTENT, project="shop", session_id=first.session_id)
    assert again.snapshot.scope.branch == "feature" and "cents" in again.context_block
    with pytest.raises(InvalidInputError, match="the session is on branch feature"):
        two_branches.retriever().retrieve(INTENT, project="shop", session_id=first.session_id, branch="main")


def test_the_only_indexed_branch_is_inferred(lab):
    lab.index(lab.workspace("main", MAIN), "shop", branch="main")
    observation = lab.retriever().retrieve(INTENT, project="shop")
    assert observation.snapshot.scope.branch == "main" and "main:src/billing.py" in observation.context_block


def test_an_index_without_a_branch_needs_none(lab):
    lab.index(lab.workspace("plain", MAIN), "shop")
    observation = lab.retriever().retrieve(INTENT, project="shop")
    assert observation.snapshot.scope.branch is None
    assert "[code#1] src/billing.py:1-2" in observation.context_block


def _git(root, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_the_workspace_git_branch_decides_among_indexed_ones(two_branches):
    root = two_branches.tmp / "feature"  # the checkout indexed as feature, with feature checked out
    _git(root, "init", "-q", "-b", "feature")
    observation = two_branches.retriever(root=root).retrieve(INTENT, project="shop")
    assert observation.snapshot.scope.branch == "feature" and "cents" in observation.context_block


def test_cli_retrieve_branch_and_index_default_from_git(tmp_path, capsys):
    db = str(tmp_path / "s.db")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "src").mkdir()
    (checkout / "src" / "billing.py").write_text(MAIN["src/billing.py"], encoding="utf-8")
    _git(checkout, "init", "-q", "-b", "release")
    assert main(["index", str(checkout), "--project", "shop", "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["branch"] == "release"
    assert main(["index", str(checkout), "--project", "shop", "--branch", "other", "--db", db, "--json"]) == 0
    capsys.readouterr()
    intent = tmp_path / "intent.json"
    intent.write_text(INTENT.model_dump_json(), encoding="utf-8")
    assert main(["retrieve", "--project", "shop", "--intent", str(intent), "--db", db]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: project shop is indexed on several branches") and "\n" not in err
    assert main(["retrieve", "--project", "shop", "--intent", str(intent), "--branch", "release", "--db", db]) == 0
    assert "release:src/billing.py:1-2" in capsys.readouterr().out
