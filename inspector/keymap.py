"""User key overrides: read ``keymap.toml`` into a keymap for ``App.set_keymap``, never raising.

The file maps binding ids (the ``Action.id`` values of :mod:`scopelens.inspector.actions`) to
keys, e.g. ``"snapshot.drift" = "D"``. Whatever is wrong with it (not TOML, an unknown id, a
value that is not a key string, two actions of one screen given one key) comes back as problem
lines for one notification, and the bad entries are left out: a typo in a config file must not
stop the inspector from opening.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from textual.keys import _normalize_key_list

from scopelens.inspector.actions import ACTIONS, effective_key, key_label

KNOWN_IDS = frozenset(action.id for action in ACTIONS)
SCOPE_OF = {action.id: action.scope for action in ACTIONS}
TOML_KINDS: dict[type, str] = {bool: "true/false", int: "a number", float: "a number", list: "a list", dict: "a table"}
"""What to call a TOML value that is not a string, in a problem line."""


@dataclass(frozen=True)
class LoadedKeymap:
    """The overrides that can be applied, and one line per problem found on the way."""

    keymap: dict[str, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    fatal: bool = False
    """True when the whole file was ignored (unreadable or not TOML)."""


def default_keymap_path() -> Path:
    """``$XDG_CONFIG_HOME/scopelens/keymap.toml``, or under ``~/.config`` when that is unset.

    As the XDG spec says, an empty or relative ``XDG_CONFIG_HOME`` counts as unset.
    """
    config_home = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(config_home) if os.path.isabs(config_home) else Path.home() / ".config"
    return base / "scopelens" / "keymap.toml"


def load_keymap(path: Path | None) -> LoadedKeymap:
    """The keymap in ``path``; ``None`` or a missing file is an empty keymap, without a problem."""
    if path is None:
        return LoadedKeymap()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return LoadedKeymap()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        return LoadedKeymap(problems=(f"cannot read {path}: {reason}; using the default keys",), fatal=True)
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        return LoadedKeymap(problems=(f"{path} is not valid TOML ({error}); using the default keys",), fatal=True)

    keymap: dict[str, str] = {}
    problems: list[str] = []
    unknown: list[str] = []
    for binding_id, value in _flatten(document).items():
        if binding_id not in KNOWN_IDS:
            unknown.append(binding_id)
        elif isinstance(value, str) and value.replace(",", "").strip():
            keymap[binding_id] = normalize_keys(value)
        else:
            shown = repr(value) if isinstance(value, str) else TOML_KINDS.get(type(value), type(value).__name__)
            problems.append(f'{binding_id} needs a key like "D" or "ctrl+d", not {shown}: ignored')
    if unknown:
        problems.insert(0, f"unknown binding ids ignored: {', '.join(unknown)}")
    problems.extend(_clashes(keymap))
    if problems:
        problems[0] = f"{path}: {problems[0]}"
    return LoadedKeymap(keymap, tuple(problems))


def _flatten(table: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    """Dotted ids from nested tables: unquoted ``snapshot.drift = "D"`` is a TOML table, and
    means what the quoted ``"snapshot.drift" = "D"`` means."""
    flat: dict[str, object] = {}
    for name, value in table.items():
        if isinstance(value, dict) and f"{prefix}{name}" not in KNOWN_IDS:
            flat.update(_flatten(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = value
    return flat


def normalize_keys(value: str) -> str:
    """Keys as Textual names them (``?`` is ``question_mark``), so clashes are found whatever
    way the user wrote a key. (Textual's own helper; textual is pinned in pyproject.toml.)"""
    return _normalize_key_list(",".join(part.strip() for part in value.split(",") if part.strip()))


def _clashes(keymap: Mapping[str, str]) -> list[str]:
    """One line per key that the keymap gives to two actions of one screen (or of a screen and
    the app): Textual then runs only one of them, so say which key it is."""
    if not keymap:
        return []
    lines = []
    for scope in ["app", *sorted(set(SCOPE_OF.values()) - {"app"})]:
        by_key: dict[str, list[str]] = {}
        for action in ACTIONS:
            if action.scope in (scope, "app"):
                for key in effective_key(action, keymap).split(","):
                    by_key.setdefault(key, []).append(action.id)
        for key, ids in by_key.items():
            app_only = all(SCOPE_OF[i] == "app" for i in ids)
            if len(ids) > 1 and any(i in keymap for i in ids) and (scope == "app") == app_only:
                where = "everywhere" if app_only else f"on the {scope} screen"
                lines.append(f"{key_label(key)} is the key of {' and '.join(ids)} {where}: only one of them works")
    return lines
