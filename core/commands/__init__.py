"""Sub-commands of ``scopelens``; each module has ``register(subparsers, common)``."""

from __future__ import annotations

from core.commands import audit_commands, index_commands, retrieve_commands, store_commands

COMMAND_MODULES = (store_commands, index_commands, retrieve_commands, audit_commands)
from core.commands import record_commands; COMMAND_MODULES += (record_commands,)  # noqa: E402,E702
