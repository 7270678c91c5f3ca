"""Where a workspace's policy file is. A module of its own, without the policy's model
(pydantic): ``scopelens index`` asks it first, and loads the model only if there is a file, so
that its preparing workers start before that import (``index_commands.run_index``)."""

from __future__ import annotations

from pathlib import Path

POLICY_PATH = Path(".scopelens") / "policy.toml"


def policy_file(workspace_root: Path | None, explicit: Path | None) -> Path | None:
    """``--policy`` if given, else the workspace's ``.scopelens/policy.toml`` if it exists."""
    if explicit is not None:
        return explicit
    if workspace_root is not None and (workspace_root / POLICY_PATH).is_file():
        return workspace_root / POLICY_PATH
    return None
