"""Every option and argument of every command has help text, and every non-trivial default
is shown in it ([3/9], CLI a new user can find their way in)."""

from __future__ import annotations

import argparse

from scopelens.core.cli import build_parser


def _parsers(parser: argparse.ArgumentParser, prefix: str = "scopelens"):
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{prefix} {name}")


def test_every_option_has_help_and_shows_its_default():
    missing, undocumented_defaults = [], []
    for where, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
                continue
            name = "/".join(action.option_strings) or action.dest
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{where} {name}")
                continue
            default = action.default
            trivial = default in (None, False, [], (), argparse.SUPPRESS) or isinstance(action, argparse._StoreTrueAction)
            if not trivial and "default" not in action.help and "%(default)" not in action.help:
                undocumented_defaults.append(f"{where} {name} (default {default!r})")
    assert not missing, "options without help: " + ", ".join(missing)
    assert not undocumented_defaults, "defaults not shown: " + ", ".join(undocumented_defaults)
