"""The ``scopelens`` command: argument parsing, store selection and the error edge.

User errors are :class:`scopelens.core.errors.ScopelensError`; they become one line on stderr and a
non-zero exit. ``--debug`` shows the traceback instead. Command modules register their own
sub-commands, so this module stays the same as commands are added.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from scopelens.core import __version__
from scopelens.core.commands import COMMAND_MODULE_NAMES, COMMANDS, DEFAULT_STORE, command_modules
from scopelens.core.errors import ScopelensError, StoreUnavailableError
from scopelens.core.textsafety import escape_controls


def store_url(explicit: str | None) -> str:
    """Store selection: ``--db`` > ``$SCOPELENS_DB`` > ``./.scopelens/scopelens.db``."""
    return explicit or os.environ.get("SCOPELENS_DB") or str(DEFAULT_STORE)


class _Parser(argparse.ArgumentParser):
    """argparse, with the user's words in its error line escaped: an argument holding a carriage
    return or an escape sequence would otherwise rewrite the terminal line it is echoed on."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {escape_controls(message, backslash=False)}\n")


def build_parser(modules: tuple[str, ...] = COMMAND_MODULE_NAMES) -> argparse.ArgumentParser:
    """The parser of every sub-command, or of those the named command modules register."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--db",
        metavar="URL",
        default=argparse.SUPPRESS,
        help="store path or SQLAlchemy URL (default: $SCOPELENS_DB, else ./.scopelens/scopelens.db)",
    )
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    parser = _Parser(
        prog="scopelens",
        description="Scoped retrieval for coding agents, with audit snapshots you can inspect.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"scopelens {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in command_modules(modules):
        module.register(subparsers, common)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The sub-command ``argv`` names, if it is the first word after the global options."""
    words = iter(argv)
    for word in words:
        if word == "--db":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script is ``console_main``)."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    if any("\x00" in argument for argument in arguments):  # no path or id holds one; os calls refuse it
        print("error: an argument holds a NUL byte", file=sys.stderr)
        return 2
    command = _command_of(arguments)
    parser = build_parser((COMMANDS[command],) if command in COMMANDS else COMMAND_MODULE_NAMES)
    args = parser.parse_args(arguments)
    debug = getattr(args, "debug", False)
    defaulted = getattr(args, "db", None) is None and not os.environ.get("SCOPELENS_DB")
    args.db = store_url(getattr(args, "db", None))
    try:
        return int(args.run(args) or 0)
    except ScopelensError as exc:
        if debug:
            raise
        hint = _demo_hint() if defaulted and isinstance(exc, StoreUnavailableError) else ""
        print(f"error: {escape_controls(str(exc), backslash=False)}{hint}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def console_main() -> NoReturn:
    """The ``scopelens`` command: ``main``, then exit without collecting what the run made.

    At exit Python collects every reference cycle one by one (its own class graphs, SQLAlchemy's
    and pydantic's, the tokenizer's caches): 0.35–0.4 s after indexing the standard library,
    with the report already printed. ``gc.freeze()`` leaves them to the operating system; the
    store and files are closed by then (their ``with`` blocks ended inside ``main``), and the
    standard streams are still flushed at exit."""
    code = main()
    gc.freeze()
    sys.exit(code)


def _demo_hint() -> str:
    """After `scopelens demo`, the next command has no local store: say exactly how to reach the demo's."""
    from scopelens.core.record.demo import DEMO_DB, data_dir

    demo = data_dir() / DEMO_DB
    if DEFAULT_STORE.exists() or not demo.exists():
        return ""
    return f"; the demo store is {demo}: pass --db {demo}, or export SCOPELENS_DB={demo}"


if __name__ == "__main__":  # pragma: no cover
    console_main()
