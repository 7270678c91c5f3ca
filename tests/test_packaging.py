"""scopelens installs under one import name, `scopelens`, and never claims `core` or `inspector`.

The repository keeps its folders `core/` and `inspector/`; pyproject maps them to
`scopelens.core` and `scopelens.inspector`. These tests check that mapping from three sides:
the package list in pyproject, the modules a full import loads, and a real wheel installed
next to another distribution that ships its own top-level `core`.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import scopelens.core
import scopelens.inspector

ROOT = Path(__file__).resolve().parents[1]
FOREIGN_TOP_LEVEL = ("core", "inspector")


def package_folders() -> set[str]:
    found = {"scopelens.sample_sessions"}
    for folder in ("core", "inspector"):
        for init in (ROOT / folder).rglob("__init__.py"):
            found.add("scopelens." + init.parent.relative_to(ROOT).as_posix().replace("/", "."))
    return found


def test_pyproject_lists_every_package_folder():
    """A new subpackage that pyproject does not list would be missing from the wheel."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert set(config["packages"]) == package_folders()
    assert config["package-dir"] == {
        "scopelens.core": "core",
        "scopelens.inspector": "inspector",
        "scopelens.sample_sessions": "sample_sessions",
    }


def foreign_top_level_modules() -> list[str]:
    return sorted(name for name in sys.modules if name.split(".")[0] in FOREIGN_TOP_LEVEL)


def test_importing_every_module_loads_no_top_level_core_or_inspector():
    """Each module of both packages imports, and none of them reaches for a top-level `core`."""
    for package in (scopelens.core, scopelens.inspector):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(module.name)
    assert foreign_top_level_modules() == []


def test_a_subprocess_outside_the_repository_cannot_import_top_level_core(tmp_path):
    """Installed scopelens resolves from any directory; `core` is not among its names."""
    code = (
        "import importlib.util, json, scopelens.core, scopelens.inspector\n"
        "print(json.dumps([importlib.util.find_spec(n) is not None for n in ('core', 'inspector')]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert json.loads(result.stdout) == [False, False]


def tracked_tree(destination: Path) -> Path:
    """A copy of the files git tracks (plus the working tree's edits to them)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


def build_wheel(source: Path, out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(source)],
        check=True, capture_output=True,
    )
    (wheel,) = out.glob("scopelens-*.whl")
    return wheel


def write_foreign_core_wheel(out: Path) -> Path:
    """A minimal wheel of another distribution that ships a top-level `core` package."""
    wheel = out / "othercore-1.0-py3-none-any.whl"
    info = "othercore-1.0.dist-info"
    files = {
        "core/__init__.py": "OWNER = 'othercore'\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: othercore\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr(f"{info}/RECORD", record)
    return wheel


def site_packages_of(python: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip())


@pytest.mark.slow
def test_wheel_installs_beside_another_core_and_retrieves(tmp_path):
    """One wheel, built over a stale build/ of the old layout: only `scopelens` at its top,
    and it works beside (and after the removal of) a distribution owning `core`."""
    source = tracked_tree(tmp_path / "src")
    for stale in ("core", "inspector"):  # what a build of the old layout left behind
        (source / "build" / "lib" / stale).mkdir(parents=True)
        (source / "build" / "lib" / stale / "__init__.py").write_text("STALE = True\n")
    wheel = build_wheel(source, tmp_path / "dist")
    with zipfile.ZipFile(wheel) as archive:
        top_level = {name.split("/")[0] for name in archive.namelist()}
        assert "scopelens/sample_sessions/auth-role-mock/script.json" in archive.namelist()
        # the indexer's C part (optional, but this machine has a compiler) and its types
        compiled = [name for name in archive.namelist() if name.startswith("scopelens/core/index/_compiled.")]
        assert any(name.endswith((".so", ".pyd")) for name in compiled), compiled
        assert "scopelens/core/index/_compiled.pyi" in compiled
    assert top_level == {"scopelens", "scopelens-0.1.0.dist-info"}

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    # The new environment sees this one's dependencies (a plain path line: the editable
    # install's own .pth files there are not processed), but not this checkout of scopelens.
    dependencies = Path(next(p for p in sys.path if p.endswith("site-packages")))
    (site_packages_of(python) / "dependencies.pth").write_text(f"{dependencies}\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "--quiet"]
    subprocess.run([*pip, str(write_foreign_core_wheel(tmp_path))], check=True)
    subprocess.run([*pip, str(wheel)], check=True)

    workspace = tmp_path / "ws"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "money.py").write_text("def cents(amount):\n    return round(amount * 100)\n")
    intent = tmp_path / "intent.json"
    intent.write_text(json.dumps({"purpose": "fix-test", "question": "cents rounding of the amount"}))
    env = {**os.environ, "SCOPELENS_DB": str(tmp_path / "s.db")}
    env.pop("PYTHONPATH", None)
    scopelens = [str(venv / "bin" / "scopelens")]

    def run(*argv: str) -> str:
        result = subprocess.run([*argv], capture_output=True, text=True, env=env, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        return result.stdout

    run(*scopelens, "index", str(workspace), "--project", "p")
    retrieved = json.loads(run(*scopelens, "retrieve", "--project", "p", "--intent", str(intent), "--json"))
    assert any("money.py" in (item.get("source_ref") or "") for item in retrieved["selected"])
    assert run(str(python), "-c", "import core; print(core.OWNER)").strip() == "othercore"

    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "uninstall", "-y", "-q", "othercore"], check=True)
    assert run(*scopelens, "verify").rstrip().endswith("clean")
    assert "demo" in run(*scopelens, "--help")
