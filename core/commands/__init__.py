"""Sub-commands of ``scopelens``; each module has ``register(subparsers, common)``.

Modules are imported when a parser needs them: ``scopelens index`` loads the index commands
only, not the audit and record machinery behind the others (about a second of imports that a
no-op re-index would otherwise wait for). ``COMMANDS`` says which module registers each
sub-command; a test checks it against what the modules register.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

DEFAULT_STORE = Path(".scopelens") / "scopelens.db"
"""The store a command uses when neither ``--db`` nor ``$SCOPELENS_DB`` names one (relative:
the current directory's; ``scopelens mcp`` takes it under its workspace)."""

COMMAND_MODULE_NAMES = (
    "store_commands",
    "index_commands",
    "retrieve_commands",
    "audit_commands",
    "record_commands",
    "import_commands",
    "inspect_commands",
    "mcp_commands",
    "export_commands",
)
"""Every command module, in the order their sub-commands are listed in ``--help``."""

COMMANDS: dict[str, str] = {
    "sessions": "store_commands",
    "show": "store_commands",
    "verify": "store_commands",
    "checkpoint": "store_commands",
    "migrate": "store_commands",
    "index": "index_commands",
    "compact": "index_commands",
    "search": "index_commands",
    "retrieve": "retrieve_commands",
    "memory": "retrieve_commands",
    "replay": "audit_commands",
    "drift": "audit_commands",
    "why-not": "audit_commands",
    "rebuild": "audit_commands",
    "record": "record_commands",
    "mcp": "mcp_commands",
    "export": "export_commands",
    "demo": "record_commands",
    "import": "import_commands",
    "inspect": "inspect_commands",
}
"""The module that registers each sub-command."""


def command_modules(names: tuple[str, ...] = COMMAND_MODULE_NAMES) -> list[ModuleType]:
    """The command modules named, imported now."""
    return [importlib.import_module(f"scopelens.core.commands.{name}") for name in names]
