"""Sub-commands of ``scopelens``; each module has ``register(subparsers, common)``."""

from __future__ import annotations

from scopelens.core.commands import (
    audit_commands,
    index_commands,
    inspect_commands,
    record_commands,
    retrieve_commands,
    store_commands,
)

COMMAND_MODULES = (
    store_commands,
    index_commands,
    retrieve_commands,
    audit_commands,
    record_commands,
    inspect_commands,
)
