"""Where a SQLite store's file is, from what the user gave, without SQLAlchemy.

``scopelens index`` reads a store's state (``index.stat_check``) and its redaction key
(``keys.early_key``) before it loads the store's code, so both need the file the store will
open: the one ``engine.sqlite_path_of(engine.normalise_url(db))`` names (a test compares).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote


def sqlite_file(db: str) -> Path | None:
    """The absolute path of the SQLite store ``db`` (a path, or a ``sqlite:///`` URL without a
    query string); ``None`` for anything else (another backend, ``:memory:``, a URL with
    options), which callers then leave to the store itself. A path's symlinks are resolved (as
    ``normalise_url`` does), a URL's are not (SQLAlchemy keeps its path as written, and the
    key file goes beside that name)."""
    if "://" not in db:
        return Path(db).expanduser().resolve() if db else None
    if not db.startswith("sqlite:///") or "?" in db:
        return None
    database = unquote(db.removeprefix("sqlite:///"))  # as SQLAlchemy's make_url decodes it
    database = database.removeprefix("file:")
    if not database or database == ":memory:":
        return None
    return Path(os.path.abspath(database))
