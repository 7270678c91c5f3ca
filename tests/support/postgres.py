"""A throwaway PostgreSQL server for the test session.

``PostgresServer`` runs ``initdb`` + ``pg_ctl start`` in a fresh temporary
directory (never inside the repository), listening only on a unix socket in
that directory, and tuned for speed (no fsync).  When the tests run as root the
binaries are run as the unprivileged user ``nobody`` because ``initdb`` and
``postgres`` refuse to run as root.

    server = PostgresServer()
    server.start()
    url = server.create_database("t_abc")  # "postgresql+psycopg://postgres@/t_abc?host=...&port=..."
    ...
    server.stop()
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from sqlalchemy.engine import URL, make_url

# Seconds that pg_ctl may wait for the server to start / stop.
PG_CTL_TIMEOUT = 60
# Unix socket paths are limited to ~107 bytes; keep the socket directory short.
_MAX_SOCKET_DIR_LEN = 80
_UNPRIVILEGED_USER = "nobody"


def libpq_url(url: str) -> str:
    """A store's SQLAlchemy URL (``postgresql+psycopg://…``) as ``psycopg.connect`` takes it."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class PostgresUnavailable(RuntimeError):
    """initdb / pg_ctl could not be found on this machine."""


class PostgresStartError(RuntimeError):
    """The server could not be initialised or started."""


def find_pg_bindir() -> Path | None:
    """Directory holding ``initdb`` and ``pg_ctl``, or ``None``.

    ``shutil.which`` first (both must be on PATH), then the newest
    ``/usr/lib/postgresql/<version>/bin`` (Debian/Ubuntu layout).
    """
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl:
        # Prefer the real directory of pg_ctl if initdb lives there too, so both
        # binaries (and the `postgres` that pg_ctl spawns) are the same version.
        real = Path(os.path.realpath(pg_ctl)).parent
        if (real / "initdb").is_file():
            return real
        return Path(pg_ctl).parent

    def version_key(path: str) -> tuple[int, ...]:
        version = Path(path).parent.name
        return tuple(int(part) for part in re.findall(r"\d+", version)) or (0,)

    candidates = [
        d
        for d in glob.glob("/usr/lib/postgresql/*/bin")
        if os.access(os.path.join(d, "initdb"), os.X_OK)
        and os.access(os.path.join(d, "pg_ctl"), os.X_OK)
    ]
    if not candidates:
        return None
    return Path(max(candidates, key=version_key))


def _traversable_by_others(path: Path) -> bool:
    """True if every ancestor of ``path`` can be traversed by an arbitrary user."""
    for p in [path, *path.parents]:
        try:
            if not os.stat(p).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


class PostgresServer:
    """A private PostgreSQL cluster in a temporary directory (unix socket only)."""

    superuser = "postgres"

    def __init__(self, bindir: Path | str | None = None, port: int = 5432) -> None:
        found = Path(bindir) if bindir is not None else find_pg_bindir()
        if found is None:
            raise PostgresUnavailable(
                "PostgreSQL binaries not found: need `initdb` and `pg_ctl` on PATH "
                "or in /usr/lib/postgresql/<version>/bin"
            )
        self.bindir = found
        # With listen_addresses='' the port only names the socket file
        # (.s.PGSQL.<port>), which lives in our private directory.
        self.port = port
        self.base_dir: Path | None = None
        self._started = False
        self._run_as: pwd.struct_passwd | None = (
            pwd.getpwnam(_UNPRIVILEGED_USER) if os.geteuid() == 0 else None
        )

    # -- paths -------------------------------------------------------------
    @property
    def data_dir(self) -> Path:
        return self._base() / "data"

    @property
    def socket_dir(self) -> Path:
        return self._base()

    @property
    def log_file(self) -> Path:
        return self._base() / "server.log"

    def _base(self) -> Path:
        if self.base_dir is None:
            raise RuntimeError("PostgresServer has not been started")
        return self.base_dir

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> PostgresServer:
        if self._started:
            return self
        self.base_dir = self._make_base_dir()
        try:
            self._initdb()
            self._pg_ctl_start()
        except BaseException:
            self._cleanup_dir()
            raise
        self._started = True
        atexit.register(self.stop)  # safety net if the fixture teardown never runs
        return self

    def stop(self) -> None:
        if self.base_dir is None:
            return
        try:
            if self._started and self.data_dir.exists():
                self._run(
                    [
                        str(self.bindir / "pg_ctl"),
                        "stop",
                        "-D", str(self.data_dir),
                        "-m", "immediate",
                        "-w", "-t", str(PG_CTL_TIMEOUT),
                    ],
                    check=False,
                )
        finally:
            self._started = False
            self._cleanup_dir()
            atexit.unregister(self.stop)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- databases ---------------------------------------------------------
    def url(self, dbname: str = "postgres") -> str:
        """SQLAlchemy URL (psycopg 3 driver) for ``dbname`` over the unix socket."""
        return URL.create(
            "postgresql+psycopg",
            username=self.superuser,
            database=dbname,
            query={"host": str(self.socket_dir), "port": str(self.port)},
        ).render_as_string(hide_password=False)

    def conninfo(self, dbname: str = "postgres") -> dict[str, str]:
        """Keyword arguments for ``psycopg.connect``."""
        return {
            "host": str(self.socket_dir),
            "port": str(self.port),
            "user": self.superuser,
            "dbname": dbname,
        }

    def create_database(self, name: str) -> str:
        """Create an empty database ``name`` and return its SQLAlchemy URL."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(**self.conninfo(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop ``name``, terminating any connections still open to it."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(**self.conninfo(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    # -- internals ---------------------------------------------------------
    def _make_base_dir(self) -> Path:
        parent = Path(tempfile.gettempdir())
        # The server user must be able to reach the directory, and the socket
        # path must stay short; otherwise fall back to /tmp.
        if len(str(parent)) > _MAX_SOCKET_DIR_LEN - 30 or (
            self._run_as is not None and not _traversable_by_others(parent)
        ):
            parent = Path("/tmp")
        base = Path(tempfile.mkdtemp(prefix="scopelens-pg-", dir=parent))
        if self._run_as is not None:
            os.chown(base, self._run_as.pw_uid, self._run_as.pw_gid)
        os.chmod(base, 0o700)
        return base

    def _cleanup_dir(self) -> None:
        if self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None

    def _run(self, args: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith("PG")
        }  # PGDATA/PGHOST/... from the caller must not leak in
        env.update(HOME=str(self._base()), LC_ALL="C", LANG="C")
        kwargs: dict[str, object] = {}
        if self._run_as is not None:
            kwargs.update(
                user=self._run_as.pw_uid, group=self._run_as.pw_gid, extra_groups=[]
            )
        proc = subprocess.run(
            args,
            cwd=self._base(),  # the caller's cwd may not be readable by `nobody`
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=PG_CTL_TIMEOUT + 30,
            **kwargs,
        )
        if check and proc.returncode != 0:
            raise PostgresStartError(
                f"{Path(args[0]).name} failed (exit {proc.returncode}):\n{proc.stdout}"
                + self._log_tail()
            )
        return proc

    def _initdb(self) -> None:
        self._run(
            [
                str(self.bindir / "initdb"),
                "-D", str(self.data_dir),
                "-U", self.superuser,
                "--auth=trust",
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",
            ]
        )
        # Settings passed on the command line to pg_ctl would need quoting;
        # appending them to postgresql.conf is simpler (last one wins).
        settings = {
            "listen_addresses": "''",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.socket_dir}'",
            "max_connections": "100",
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "logging_collector": "off",
        }
        with open(self.data_dir / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write("\n# scopelens test settings\n")
            for key, value in settings.items():
                conf.write(f"{key} = {value}\n")

    def _pg_ctl_start(self) -> None:
        self._run(
            [
                str(self.bindir / "pg_ctl"),
                "start",
                "-D", str(self.data_dir),
                "-l", str(self.log_file),
                "-w", "-t", str(PG_CTL_TIMEOUT),
            ]
        )

    def _log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_file.read_text(encoding="utf-8", errors="replace")
        except (OSError, RuntimeError):
            return ""
        tail = "\n".join(text.splitlines()[-lines:])
        return f"\n--- tail of {self.log_file} ---\n{tail}" if tail else ""
