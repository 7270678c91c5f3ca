# --- PostgreSQL server + hypothesis profiles (tests/support/postgres.py) ------
import contextlib as _contextlib
import os as _os
import uuid as _uuid

import pytest
from hypothesis import settings as _hypothesis_settings

from tests.support.postgres import (
    PostgresServer as _PostgresServer,
)
from tests.support.postgres import (
    PostgresUnavailable as _PostgresUnavailable,
)


def _in_ci() -> bool:
    return _os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


_hypothesis_settings.register_profile(
    "ci", derandomize=True, deadline=None, database=None, max_examples=50
)
_hypothesis_settings.register_profile("dev", deadline=None, max_examples=100)
_hypothesis_settings.register_profile("bench", deadline=None, max_examples=10000)
_hypothesis_settings.load_profile(
    "ci" if _in_ci() else _os.environ.get("HYPOTHESIS_PROFILE", "dev")
)


@pytest.fixture(scope="session")
def postgres_server():
    """One throwaway PostgreSQL server (unix socket only) for the whole session.

    Skips locally when initdb/pg_ctl are missing; with CI=true a missing or
    broken PostgreSQL fails the tests instead.
    """
    problem = None
    try:
        server = _PostgresServer()
    except _PostgresUnavailable as exc:
        problem = str(exc)
    if problem is not None:  # outside the except block: no chained traceback noise
        if _in_ci():
            pytest.fail(f"CI=true but PostgreSQL is unavailable: {problem}", pytrace=False)
        pytest.skip(f"{problem} (set CI=true to make this a failure)")
    try:
        server.start()
    except Exception as exc:  # noqa: BLE001 - report any start failure
        problem = f"could not start PostgreSQL from {server.bindir}: {exc}"
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_database_factory(postgres_server):
    """Callable ``make(prefix="t") -> url`` creating fresh, uniquely named databases.

    Databases made during a test are dropped (WITH (FORCE)) after it.
    """
    created: list[str] = []

    def make(prefix: str = "t") -> str:
        name = f"{prefix}_{_uuid.uuid4().hex[:16]}".lower()
        url = postgres_server.create_database(name)
        created.append(name)
        return url

    yield make
    for name in created:
        with _contextlib.suppress(Exception):  # best effort; the server is temporary anyway
            postgres_server.drop_database(name)


@pytest.fixture
def postgres_url(postgres_database_factory) -> str:
    """SQLAlchemy URL (postgresql+psycopg, unix socket) of a fresh empty database."""
    return postgres_database_factory()


# --- store backends ---------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path) -> str:
    """A URL for a fresh, empty store location on each backend the store supports."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture(autouse=True)
def _isolated_user_environment(tmp_path_factory, monkeypatch):
    """Tests never touch the user's real directories or store settings."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("SCOPELENS_DB", raising=False)


@pytest.fixture(scope="session", autouse=True)
def no_top_level_core_or_inspector():
    """Fails the run (at teardown) if anything imported `core` or `inspector` as top-level names.

    The repository root is on sys.path under pytest, so `import core` would work here and
    nowhere else; scopelens installs only as `scopelens.core` / `scopelens.inspector`.
    """
    import sys as _sys

    yield
    leaked = sorted(n for n in _sys.modules if n.split(".")[0] in ("core", "inspector"))
    assert leaked == [], f"top-level modules that an installed scopelens does not have: {leaked}"
