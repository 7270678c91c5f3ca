"""Build backend: setuptools, after clearing what an earlier build left in ``build/``.

setuptools copies everything under ``build/lib`` into a wheel, including modules that an
earlier build of another layout put there (before 0.1.0 the packages installed as top-level
``core`` and ``inspector``), so a stale tree would ship two foreign top-level packages. Every
wheel is built from a fresh ``build/lib``; the strict editable install's link tree
(``build/__editable__*``) is left alone.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - every other hook is setuptools' own

STALE_OUTPUTS = ("build/lib", "build/bdist.*")


def _clear_stale_outputs() -> None:
    for pattern in STALE_OUTPUTS:
        for path in Path().glob(pattern):
            shutil.rmtree(path, ignore_errors=True)


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    _clear_stale_outputs()
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)
