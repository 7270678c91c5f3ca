"""Tests of core.index.walker: what the index may read, what it refuses, and why."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from scopelens.core.errors import PathEscapeError, UnreadableFileError
from scopelens.core.index.walker import SkippedPath, git_state, resolve_inside, walk_workspace


def write(root: Path, rel: str, data: str | bytes = "x\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    return path


def rel_paths(root: Path) -> list[str]:
    return [f.rel_path for f in walk_workspace(root).files]


def skipped(root: Path, **kwargs: int) -> dict[str, SkippedPath]:
    return {s.rel_path: s for s in walk_workspace(root, **kwargs).skipped}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


# --- ignore files -----------------------------------------------------------------------------


def test_walk_lists_files_sorted_with_posix_paths_and_stats(root: Path) -> None:
    for rel in ["b.py", "a/z.py", "a/b/c.txt", "A.md"]:
        write(root, rel)
    result = walk_workspace(root)
    assert [f.rel_path for f in result.files] == ["A.md", "a/b/c.txt", "a/z.py", "b.py"]
    first = result.files[1]
    assert first.abs_path == root.resolve() / "a" / "b" / "c.txt"
    assert first.size == 2 and first.mtime_ns == first.abs_path.stat().st_mtime_ns
    assert result.skipped == [] and result.ignored_count == 0


def test_root_gitignore_with_negation_and_dir_patterns(root: Path) -> None:
    write(root, ".gitignore", "*.log\n!keep.log\nbuild/\n/top.txt\n")
    for rel in ["a.log", "keep.log", "sub/b.log", "build/out.js", "sub/build/x.js",
                "top.txt", "sub/top.txt", "src/main.py"]:
        write(root, rel)
    result = walk_workspace(root)
    assert [f.rel_path for f in result.files] == [
        ".gitignore", "keep.log", "src/main.py", "sub/top.txt",
    ]
    # a.log, sub/b.log, build/, sub/build/, top.txt: an ignored directory counts once.
    assert result.ignored_count == 5
    assert result.skipped == []


def test_nested_gitignore_is_relative_to_its_directory_and_overrides_the_root(root: Path) -> None:
    write(root, ".gitignore", "*.gen\ncache/\n")
    write(root, "pkg/.gitignore", "!keep.gen\n/local.txt\n")
    for rel in ["x.gen", "pkg/a.gen", "pkg/keep.gen", "keep.gen", "pkg/local.txt",
                "pkg/deep/local.txt", "local.txt", "pkg/cache/c.py"]:
        write(root, rel)
    assert rel_paths(root) == [
        ".gitignore", "local.txt", "pkg/.gitignore", "pkg/deep/local.txt", "pkg/keep.gen",
    ]


def test_negation_cannot_reinclude_a_file_under_an_ignored_directory(root: Path) -> None:
    write(root, ".gitignore", "vendor/\n!vendor/keep.py\n")
    write(root, "vendor/keep.py")
    assert rel_paths(root) == [".gitignore"]


def test_scopelens_ignore_applies_and_overrides_gitignore(root: Path) -> None:
    write(root, ".gitignore", "*.tmp\n")
    write(root, ".scopelens/ignore", "secrets/\ndocs/*.md\n!wanted.tmp\n")
    for rel in ["secrets/key.txt", "docs/a.md", "docs/a.txt", "x.tmp", "wanted.tmp",
                "sub/docs/b.md"]:
        write(root, rel)
    assert rel_paths(root) == [".gitignore", "docs/a.txt", "sub/docs/b.md", "wanted.tmp"]


def test_git_and_scopelens_directories_are_always_skipped(root: Path) -> None:
    write(root, ".git/config", "[core]\n")
    write(root, ".scopelens/policy.toml", "")
    write(root, "sub/.git/HEAD", "ref\n")
    write(root, "main.py")
    result = walk_workspace(root)
    assert [f.rel_path for f in result.files] == ["main.py"]
    assert result.skipped == [] and result.ignored_count == 0


# --- binaries, size, odd files ------------------------------------------------------------------


def test_binary_files_are_skipped(root: Path) -> None:
    write(root, "img.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    write(root, "late_nul.txt", b"a" * 9000 + b"\x00")  # NUL after the first 8 KiB: text
    write(root, "latin1.txt", b"caf\xe9\n")  # undecodable is not binary
    assert rel_paths(root) == ["late_nul.txt", "latin1.txt"]
    skip = skipped(root)["img.png"]
    assert skip.reason == "binary" and skip.message == "skipped binary file: img.png"


def test_size_cap(root: Path) -> None:
    write(root, "small.txt", "a" * 100)
    write(root, "exact.txt", "a" * 200)
    write(root, "big.txt", "a" * 201)
    result = walk_workspace(root, max_bytes=200)
    assert [f.rel_path for f in result.files] == ["exact.txt", "small.txt"]
    assert [(s.rel_path, s.reason) for s in result.skipped] == [("big.txt", "too-large")]
    assert "big.txt" in result.skipped[0].message and "\n" not in result.skipped[0].message


def test_fifo_is_not_read(root: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    os.mkfifo(root / "pipe")
    assert skipped(root)["pipe"].reason == "unreadable"


def test_missing_root_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UnreadableFileError, match="not a directory"):
        walk_workspace(tmp_path / "nope")


# --- symlinks -------------------------------------------------------------------------------


def test_symlink_to_a_file_outside_root_is_refused_and_named(root: Path, tmp_path: Path) -> None:
    secret = write(tmp_path, "outside/secret.txt", "top secret\n")
    write(root, "docs/readme.md")
    (root / "docs" / "link").symlink_to(secret)
    result = walk_workspace(root)
    assert [f.rel_path for f in result.files] == ["docs/readme.md"]
    [skip] = result.skipped
    assert (skip.rel_path, skip.reason) == ("docs/link", "symlink")
    assert skip.message == f"refused symlink: docs/link -> {secret}"


def test_symlinked_directory_is_refused_not_entered(root: Path, tmp_path: Path) -> None:
    write(tmp_path, "elsewhere/inner.py")
    write(root, "inside/real.py")
    (root / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (root / "loop").symlink_to(root, target_is_directory=True)
    result = walk_workspace(root)
    assert [f.rel_path for f in result.files] == ["inside/real.py"]
    reasons = [(s.rel_path, s.reason) for s in result.skipped]
    assert reasons == [("linked", "symlink"), ("loop", "symlink")]
    assert result.skipped[0].message == f"refused symlink: linked -> {tmp_path / 'elsewhere'}"


def test_symlink_inside_root_is_refused_too(root: Path) -> None:
    write(root, "real.py")
    (root / "alias.py").symlink_to("real.py")
    assert skipped(root)["alias.py"].message == "refused symlink: alias.py -> real.py"


def test_gitignore_reached_through_a_symlink_is_not_read(root: Path, tmp_path: Path) -> None:
    write(tmp_path, "evil_ignore", "*\n")
    (root / ".gitignore").symlink_to(tmp_path / "evil_ignore")
    write(root, "a.py")
    assert rel_paths(root) == ["a.py"]


def test_root_given_through_a_symlink_is_walked(tmp_path: Path, root: Path) -> None:
    write(root, "a.py")
    alias = tmp_path / "alias"
    alias.symlink_to(root, target_is_directory=True)
    assert [f.rel_path for f in walk_workspace(alias).files] == ["a.py"]


# --- resolve_inside --------------------------------------------------------------------------


def test_resolve_inside_accepts_paths_inside(root: Path) -> None:
    write(root, "a/b.py")
    real = root.resolve()
    assert resolve_inside(root, "a/b.py") == real / "a" / "b.py"
    assert resolve_inside(root, "a/../a/./b.py") == real / "a" / "b.py"
    assert resolve_inside(root, "not/yet/there.py") == real / "not" / "yet" / "there.py"
    assert resolve_inside(root, ".") == real
    assert resolve_inside(root, str(real / "a")) == real / "a"


@pytest.mark.parametrize("rel", ["../x", "a/../../x", "..", "/etc/passwd"])
def test_resolve_inside_refuses_escapes(root: Path, rel: str) -> None:
    with pytest.raises(PathEscapeError) as info:
        resolve_inside(root, rel)
    message = str(info.value)
    assert rel in message and "\n" not in message


def test_resolve_inside_refuses_a_symlink_out_of_the_root(root: Path, tmp_path: Path) -> None:
    write(tmp_path, "outside/secret.txt")
    (root / "docs").mkdir()
    (root / "docs" / "out").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(PathEscapeError, match="symlink") as info:
        resolve_inside(root, "docs/out/secret.txt")
    assert "docs/out/secret.txt" in str(info.value)
    # "link/.." follows the link first, as the OS would.
    with pytest.raises(PathEscapeError):
        resolve_inside(root, "docs/out/../outside/secret.txt")


def test_resolve_inside_refuses_nul(root: Path) -> None:
    with pytest.raises(PathEscapeError):
        resolve_inside(root, "a\x00b")


# --- git_state ---------------------------------------------------------------------------------

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")


def git(repo: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    done = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.invalid",
         "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args],
        cwd=repo, capture_output=True, text=True, check=True, env=env,
    )
    return done.stdout.strip()


@needs_git
def test_git_state_clean_then_dirty(root: Path) -> None:
    git(root, "init", "-q")
    write(root, "a.py", "x = 1\n")
    git(root, "add", "a.py")
    git(root, "commit", "-q", "-m", "first")
    head = git(root, "rev-parse", "HEAD")
    assert git_state(root) == (head, False)
    write(root, "a.py", "x = 2\n")
    assert git_state(root) == (head, True)
    git(root, "checkout", "-q", "--", "a.py")
    write(root, "new.py")
    assert git_state(root) == (head, True)  # untracked files count


@needs_git
def test_git_state_of_a_subdirectory_covers_only_its_subtree(root: Path) -> None:
    git(root, "init", "-q")
    write(root, "sub/a.py")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    write(root, "other.py")
    head = git(root, "rev-parse", "HEAD")
    assert git_state(root / "sub") == (head, False)
    assert git_state(root) == (head, True)


@needs_git
def test_git_state_without_commits(root: Path) -> None:
    git(root, "init", "-q")
    assert git_state(root) == (None, False)


@needs_git
def test_git_state_of_an_ignored_or_untracked_directory_is_none(root: Path) -> None:
    """HEAD says nothing about a directory git does not track: a git-ignored virtualenv, a
    package installed into it, a new untracked directory. No commit, no dirty flag for them."""
    git(root, "init", "-q")
    write(root, ".gitignore", ".venv/\n")
    write(root, "app.py")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    head = git(root, "rev-parse", "HEAD")
    write(root, ".venv/lib/python3.12/site-packages/textual/app.py")
    write(root, "env/.gitignore", "*\n")  # what `python -m venv env` writes since 3.13
    write(root, "env/lib/site.py")
    write(root, "scratch/notes.md")
    assert git_state(root / ".venv" / "lib" / "python3.12" / "site-packages" / "textual") == (None, None)
    assert git_state(root / ".venv") == (None, None)
    assert git_state(root / "env") == (None, None)
    assert git_state(root / "scratch") == (None, None)
    assert git_state(root) == (head, True)  # scratch/ is untracked: the work tree is dirty
    git(root, "add", "scratch")
    assert git_state(root / "scratch") == (head, True)  # tracked now (staged, not yet committed)


@needs_git
def test_an_index_of_an_ignored_directory_records_no_commit(root: Path, store_url: str) -> None:
    from scopelens.core.index.indexer import index_workspace
    from scopelens.core.store.store import Store

    git(root, "init", "-q")
    write(root, ".gitignore", "vendor/\n")
    write(root, "app.py")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    write(root, "vendor/textual/app.py", "class App:\n    pass\n")
    with Store.open(store_url, create=True) as store:
        vendored = index_workspace(store, root / "vendor" / "textual", project="textual", branch="main")
        own = index_workspace(store, root, project="own", branch="main")
    assert (vendored.git_commit, vendored.git_dirty) == (None, None)
    assert (own.git_commit, own.git_dirty) == (git(root, "rev-parse", "HEAD"), False)


def test_git_state_outside_a_repo(tmp_path: Path) -> None:
    lonely = tmp_path / "not-a-repo"
    lonely.mkdir()
    (lonely / ".git").write_text("")  # not even a valid gitfile: still (None, None)
    assert git_state(lonely) == (None, None)
    assert git_state(tmp_path / "missing") == (None, None)


def test_git_state_without_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    assert git_state(tmp_path) == (None, None)


@needs_git
def test_scopelens_index_asks_git_before_loading_the_indexer_and_records_its_answer(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Asked while the process is small: a child is counted at its parent's size until it execs.
    import json

    from scopelens.core.cli import main
    from scopelens.core.commands import index_commands
    from scopelens.core.index import indexer

    git(root, "init", "-q")
    write(root, "app.py")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    asked: list[Path] = []

    def asking(path: Path) -> tuple[str | None, bool | None]:
        asked.append(path)
        return git_state(path)

    def not_again(path: Path) -> tuple[str | None, bool | None]:
        raise AssertionError("index_workspace asked git again")

    monkeypatch.setattr(index_commands, "git_state", asking)
    monkeypatch.setattr(indexer, "git_state", not_again)
    assert main(["index", str(root), "--project", "p", "--db", str(tmp_path / "s.db"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(asked) == 1
    assert (report["git_commit"], report["git_dirty"]) == (git(root, "rev-parse", "HEAD"), False)
