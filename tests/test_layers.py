"""The import-linter contract in pyproject names every module of the engine, so a new module
cannot sit outside the layers (CI runs `lint-imports` on the contract itself)."""

from __future__ import annotations

import pkgutil
import re
import tomllib
from pathlib import Path

import scopelens.core

ROOT = Path(__file__).resolve().parents[1]


def layered_names() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
    return {name.strip().strip("()") for layer in layers for name in re.split(r"[|:]", layer) if name.strip()}


def test_every_engine_module_is_in_a_layer():
    modules = {f"scopelens.core.{m.name}" for m in pkgutil.iter_modules(scopelens.core.__path__)}
    assert modules - layered_names() == set()


def test_the_inspector_sits_between_the_read_model_and_the_commands():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
    position = {name.strip().strip("()"): i for i, layer in enumerate(layers) for name in re.split(r"[|:]", layer)}
    assert position["scopelens.core.commands"] < position["scopelens.inspector"] < position["scopelens.core.readmodel"]
    assert position["scopelens.core.readmodel"] < position["scopelens.core.audit"] < position["scopelens.core.pipeline"]
    assert position["scopelens.core.store"] < position["scopelens.core.redact"]
