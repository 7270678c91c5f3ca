"""``scopelens inspect``: open the Textual inspector on a store (imported lazily)."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    inspect = subparsers.add_parser("inspect", parents=[common], help="browse sessions in the terminal UI")
    inspect.add_argument("--light", action="store_true", help="start in the light theme")
    inspect.set_defaults(run=run_inspect)


def open_inspector(store_url: str, *, light: bool = False) -> int:
    """Run the inspector until the user quits (the textual import happens only here)."""
    from scopelens.core.store.store import Store

    Store.open(store_url, read_only=True).close()  # a clear one-line error before the UI starts
    from scopelens.inspector.app import make_app
    from scopelens.inspector.keymap import default_keymap_path

    theme = "textual-light" if light else "textual-dark"
    make_app(store_url, theme=theme, keymap_path=default_keymap_path()).run()
    return 0


def run_inspect(args: argparse.Namespace) -> int:
    return open_inspector(args.db, light=args.light)
