"""Walk a workspace root: the files the index may read, and why the others were left out.

The walk honours ``.gitignore`` files (the root's and nested ones, with git's precedence: a
deeper file overrides a shallower one, and the last matching pattern in a file wins) and
``.scopelens/ignore`` (gitignore syntax, relative to the root, overriding every
``.gitignore``). It never enters ``.git/`` or ``.scopelens/``, never follows a symlink, and
skips binaries and files over the size cap. An ignored directory is not entered, so, as in
git, nothing under it can be re-included.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pathspec import GitIgnoreSpec

from scopelens.core.errors import PathEscapeError, UnreadableFileError
from scopelens.core.textsafety import escape_controls, unsafe_name

SkipReason = Literal[
    "ignored", "binary", "too-large", "symlink", "outside-root", "unreadable", "bad-ignore-pattern", "unsafe-name"
]

ALWAYS_SKIPPED_DIRS = frozenset({".git", ".scopelens"})
BINARY_SNIFF_BYTES = 8192
GIT_TIMEOUT_SECONDS = 10.0
BAD_PATTERN_ERRORS = (ValueError, re.error)
"""What pathspec raises for a pattern it cannot compile (its own errors are ValueErrors)."""


@dataclass(frozen=True)
class WalkedFile:
    """A file the index may read."""

    rel_path: str
    abs_path: Path
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class SkippedPath:
    """A path the walk left out on purpose; ``detail`` is the link target, size or error."""

    rel_path: str
    reason: SkipReason
    detail: str = ""

    @property
    def message(self) -> str:
        """One line for a user, e.g. ``refused symlink: docs/link -> /etc/passwd``."""
        text = {
            "ignored": "ignored: {p}",
            "binary": "skipped binary file: {p}",
            "too-large": "skipped file over the size cap: {p} ({d})",
            "symlink": "refused symlink: {p} -> {d}",
            "outside-root": "refused path outside the workspace root: {p} -> {d}",
            "unreadable": "unreadable: {p} ({d})",
            "bad-ignore-pattern": "dropped a bad ignore pattern at {p}: {d}",
            "unsafe-name": "refused a name that {d}: {p}",
        }[self.reason].format(p=self.rel_path, d=self.detail)
        return escape_controls(text)


@dataclass(frozen=True)
class WalkResult:
    """Files sorted by rel_path; skipped paths sorted likewise; ignored entries only counted.

    An ignored directory counts once: its contents are not walked.
    """

    files: list[WalkedFile] = field(default_factory=list)
    skipped: list[SkippedPath] = field(default_factory=list)
    ignored_count: int = 0
    directories: list[str] = field(default_factory=list)
    """The directories walked (``""`` for the root, else ``a/b/``), in the order entered."""


def walk_workspace(root: Path, *, max_bytes: int = 1_000_000) -> WalkResult:
    """Walk ``root`` and return what the index may read and what it left out."""
    root = Path(root).resolve()
    if not root.is_dir():
        raise UnreadableFileError(f"workspace root is not a directory: {root}")
    files: list[WalkedFile] = []
    skipped: list[SkippedPath] = []
    ignored = 0
    directories: list[str] = []
    # Ignore layers, most authoritative first: .scopelens/ignore, then the deepest .gitignore.
    scopelens_spec = _load_spec(root / ".scopelens" / "ignore", ".scopelens/ignore", skipped)
    stack: list[tuple[str, Path, list[tuple[str, GitIgnoreSpec]]]] = [("", root, [])]
    while stack:
        rel_dir, abs_dir, layers = stack.pop()
        gitignore = _load_spec(abs_dir / ".gitignore", f"{rel_dir}.gitignore", skipped)
        if gitignore is not None:
            layers = [(rel_dir, gitignore), *layers]
        try:
            with os.scandir(abs_dir) as it:
                entries = sorted(it, key=lambda entry: entry.name)
        except OSError as exc:
            skipped.append(SkippedPath(rel_dir or ".", "unreadable", _os_error(exc)))
            continue
        directories.append(rel_dir)
        subdirs = []
        for entry in entries:
            rel = f"{rel_dir}{entry.name}"
            problem = unsafe_name(entry.name)
            if problem is not None:  # never read, and never entered: its name could forge text
                skipped.append(SkippedPath(escape_controls(rel), "unsafe-name", problem))
                continue
            try:
                is_link = entry.is_symlink()
                is_dir = not is_link and entry.is_dir(follow_symlinks=False)
            except OSError as exc:
                skipped.append(SkippedPath(rel, "unreadable", _os_error(exc)))
                continue
            if entry.name in ALWAYS_SKIPPED_DIRS:
                continue
            if _ignored(rel + "/" if is_dir else rel, scopelens_spec, layers):
                ignored += 1
            elif is_link:
                skipped.append(SkippedPath(rel, "symlink", _link_target(entry.path)))
            elif is_dir:
                real = Path(os.path.realpath(entry.path))
                if real != root and not real.is_relative_to(root):
                    skipped.append(SkippedPath(rel, "outside-root", str(real)))
                else:
                    subdirs.append((rel + "/", Path(entry.path), layers))
            else:
                outcome = _check_file(entry, rel, max_bytes)
                if isinstance(outcome, WalkedFile):
                    files.append(outcome)
                else:
                    skipped.append(outcome)
        stack.extend(reversed(subdirs))
    files.sort(key=lambda f: f.rel_path)
    skipped.sort(key=lambda s: s.rel_path)
    return WalkResult(files, skipped, ignored, directories)


def resolve_inside(root: Path, rel: str) -> Path:
    """Resolve a user-supplied path against ``root``; raise PathEscapeError if it leaves it."""
    root = Path(root).resolve()
    if "\x00" in rel:
        raise PathEscapeError(escape_controls(f"invalid path (NUL byte): {rel!r}"))
    lexical = Path(os.path.normpath(root / rel))
    if lexical != root and not lexical.is_relative_to(root):
        where = "is outside" if Path(rel).is_absolute() else "escapes"
        raise PathEscapeError(escape_controls(f"path {where} the workspace root {root}: {rel}"))
    # Resolve the path as given, not the normalised one: the OS applies "link/.." after
    # following the link.
    resolved = (root / rel).resolve()
    if resolved != root and not resolved.is_relative_to(root):
        raise PathEscapeError(
            escape_controls(f"path goes through a symlink out of the workspace root: {rel} -> {resolved}")
        )
    return resolved


def git_state(root: Path) -> tuple[str | None, bool | None]:
    """(HEAD commit, dirty) of the git work tree holding ``root``; (None, None) if none.

    ``dirty`` covers the root's subtree only, untracked files included. A repository with no
    commit yet gives (None, dirty). Never raises.

    Only a *tracked* directory gets a commit: the work tree's top, or a directory holding at
    least one file git tracks. A git-ignored directory inside a repository (a virtualenv, a
    package installed into one, ``vendor/``) or a new untracked one gives (None, None): the
    enclosing repository's HEAD says nothing about its files, and its status would call them
    clean.
    """
    inside = _git(root, "rev-parse", "--is-inside-work-tree", "--show-prefix")
    lines = (inside or "").splitlines()
    if not lines or lines[0].strip() != "true":
        return None, None
    prefix = lines[1].strip() if len(lines) > 1 else ""
    if prefix and not _tracks_anything(root):
        return None, None
    status = _git(root, "status", "--porcelain", "--untracked-files=normal", "--", ".")
    head = _git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    dirty = None if status is None else bool(status.strip())
    return (head.strip() or None) if head else None, dirty


def _tracks_anything(root: Path) -> bool:
    """Whether git tracks (has in its index) at least one file under ``root``."""
    listed = _git(root, "ls-files", "-z", "--cached", "--", ".")
    return bool(listed)


def git_branch(root: Path) -> str | None:
    """The branch checked out in the git work tree holding ``root``; None if none (not a
    repository, or a detached HEAD). Never raises."""
    name = _git(root, "symbolic-ref", "--quiet", "--short", "HEAD")
    return (name.strip() or None) if name else None


def _git(root: Path, *args: str) -> str | None:
    # GIT_DIR and friends would point git at another repository; optional locks would let a
    # read-only query rewrite the index.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_OPTIONAL_LOCKS"] = "0"
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=GIT_TIMEOUT_SECONDS,
            env=env,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return done.stdout if done.returncode == 0 else None


def _check_file(entry: os.DirEntry[str], rel: str, max_bytes: int) -> WalkedFile | SkippedPath:
    try:
        st = entry.stat(follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block the read below
            return SkippedPath(rel, "unreadable", "not a regular file")
        if st.st_size > max_bytes:
            return SkippedPath(rel, "too-large", f"{st.st_size} bytes > {max_bytes}")
        with open(entry.path, "rb") as fh:
            if b"\x00" in fh.read(BINARY_SNIFF_BYTES):
                return SkippedPath(rel, "binary")
    except OSError as exc:
        return SkippedPath(rel, "unreadable", _os_error(exc))
    return WalkedFile(rel, Path(entry.path), st.st_size, st.st_mtime_ns)


def _ignored(
    rel: str,
    scopelens_spec: GitIgnoreSpec | None,
    layers: list[tuple[str, GitIgnoreSpec]],
) -> bool:
    """Whether ``rel`` (with a trailing "/" for a directory) is ignored."""
    if scopelens_spec is not None:
        verdict = scopelens_spec.check_file(rel).include
        if verdict is not None:
            return verdict
    for base, spec in layers:
        verdict = spec.check_file(rel[len(base):]).include
        if verdict is not None:
            return verdict
    return False


def _load_spec(path: Path, rel_path: str, problems: list[SkippedPath]) -> GitIgnoreSpec | None:
    """The patterns of an ignore file, or None when there is none.

    A line pathspec cannot compile is dropped and recorded in ``problems`` (as
    ``FILE:LINE``), like git, which also skips a bad pattern and keeps the others. An ignore
    file reached through a symlink is not read: it could point outside the root.
    """
    if path.parent.is_symlink() or path.is_symlink() or not path.is_file():
        return None
    try:
        lines = path.read_bytes().decode("utf-8", "replace").splitlines()
    except OSError as exc:
        problems.append(SkippedPath(rel_path, "unreadable", _os_error(exc)))
        return None
    try:
        return GitIgnoreSpec.from_lines(lines)
    except BAD_PATTERN_ERRORS:
        pass  # find the bad lines one by one
    good = []
    for number, line in enumerate(lines, start=1):
        try:
            GitIgnoreSpec.from_lines([line])
        except BAD_PATTERN_ERRORS as exc:
            problems.append(SkippedPath(f"{rel_path}:{number}", "bad-ignore-pattern", f"{line!r} ({exc})"))
            continue
        good.append(line)
    return GitIgnoreSpec.from_lines(good)


def _link_target(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError as exc:
        return f"<{_os_error(exc)}>"


def _os_error(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__

