"""The demo store: every sample session recorded into one store in the per-user data directory.

``ensure_demo_store()`` builds ``<user data dir>/demo.db`` from ``sample_sessions/`` when it
is missing, when the samples, the engine version or the engine's configuration changed since
it was built, or when asked to, and otherwise reuses it. A stamp beside it (``demo.json``)
holds the hash of the samples, the engine version and configuration hash, the store head it
was built with and the findings of each scenario, so a reused store can be summarised
without recording again, and so a reader of the store (the inspector's Findings screen) can
list them: :func:`recorded_findings` reads them back for a store whose head is the one the
stamp names, and says why when it cannot.

The store is built under a temporary name, verified, and only then moved into place, so an
interrupted build never leaves a half-built demo store behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

import scopelens.core
from scopelens.core import ENGINE_VERSION
from scopelens.core.contracts import SCHEMA_VERSION
from scopelens.core.errors import IntegrityError, ScopelensError, UnreadableFileError
from scopelens.core.record.findings import Finding
from scopelens.core.record.recorder import record_scripts
from scopelens.core.record.script import SCRIPT_FILE
from scopelens.core.store.engine import sqlite_path_of
from scopelens.core.store.store import Store
from scopelens.core.store.verify import verify_store
from scopelens.core.textsafety import clip, short

SAMPLES_ENV = "SCOPELENS_SAMPLES"
DEMO_DB = "demo.db"
STAMP = "demo.json"
SKIPPED_NAMES = frozenset({"__pycache__", ".DS_Store"})
STAMP_KIND = "demo-stamp"


def samples_dir() -> Path:
    """``$SCOPELENS_SAMPLES``, else the ``sample_sessions/`` beside ``scopelens.core``.

    It is the repository's folder in an editable install and ``scopelens/sample_sessions`` in a
    wheel; the link tree of a strict editable install resolves to the repository.
    """
    override = os.environ.get(SAMPLES_ENV)
    path = Path(override) if override else Path(scopelens.core.__file__).resolve().parent.parent / "sample_sessions"
    if not path.is_dir():
        raise UnreadableFileError(
            f"sample sessions not found at {path}: set ${SAMPLES_ENV} to the sample_sessions directory"
        )
    return path


def scenario_scripts(samples: Path) -> list[Path]:
    """The scenario directories of ``samples`` (each holds ``script.json``), by name."""
    scripts = sorted(p.parent for p in samples.glob(f"*/{SCRIPT_FILE}"))
    if not scripts:
        raise UnreadableFileError(f"no scenario (*/{SCRIPT_FILE}) in {samples}")
    return scripts


def samples_hash(samples: Path) -> str:
    """SHA-256 over every sample file's relative path and bytes, in path order."""
    digest = hashlib.sha256()
    files = sorted(
        p for p in samples.rglob("*") if p.is_file() and not SKIPPED_NAMES.intersection(p.relative_to(samples).parts)
    )
    for path in files:
        digest.update(path.relative_to(samples).as_posix().encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def data_dir() -> Path:
    """The per-user data directory (honours ``XDG_DATA_HOME`` on Linux)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("scopelens", appauthor=False))


@dataclass(frozen=True)
class DemoStore:
    """The demo store, and whether this call built it."""

    path: Path
    rebuilt: bool
    reason: str
    stamp: dict[str, Any]

    @property
    def store_head(self) -> str:
        return str(self.stamp["store_head"])

    @property
    def scenarios(self) -> list[dict[str, Any]]:
        return list(self.stamp["scenarios"])


def ensure_demo_store(*, rebuild: bool = False, directory: Path | None = None, samples: Path | None = None) -> DemoStore:
    """Build the demo store if needed (see the module docstring); returns where it is."""
    directory = directory or data_dir()
    samples = samples or samples_dir()
    db = directory / DEMO_DB
    current = samples_hash(samples)
    reason = "rebuild requested" if rebuild else _stale_reason(db, directory / STAMP, current)
    if reason is None:
        return DemoStore(db, False, "samples unchanged", _read_stamp(directory / STAMP) or {})
    stamp = _build(directory, samples, current)
    return DemoStore(db, True, reason, stamp)


def _read_stamp(path: Path) -> dict[str, Any] | None:
    try:
        stamp = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def _stale_reason(db: Path, stamp_path: Path, current: str) -> str | None:
    """Why the demo store must be (re)built, or ``None`` when it can be reused."""
    if not db.is_file():
        return "no demo store yet"
    stamp = _read_stamp(stamp_path)
    if stamp is None or stamp.get("schema_version") != SCHEMA_VERSION or "scenarios" not in stamp:
        return "no readable stamp beside the demo store"
    if stamp.get("samples_hash") != current:
        return "the sample sessions changed"
    if stamp.get("engine_version") != ENGINE_VERSION:
        return f"built by {stamp.get('engine_version')}, this is {ENGINE_VERSION}"
    if stamp.get("config_hash") != _config_hash():
        return "the engine's configuration changed"
    try:
        with Store.open(str(db), read_only=True) as store:
            _, head = store.store_head()
    except ScopelensError:
        return "the demo store cannot be opened as it is"
    if head != stamp.get("store_head"):
        return "the demo store's head differs from the one it was built with"
    return None


def _fold_wal(path: Path) -> None:
    """Checkpoint the store's WAL into the file and let SQLite delete ``-wal`` and ``-shm``.

    The last connection to the built store was the read-only one that verified it, which may
    not remove them; renamed, the store would leave them behind under the old name (and a WAL
    with content would be cut off from its database)."""
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()  # the last connection: SQLite deletes the WAL and its index


def _build(directory: Path, samples: Path, current: str) -> dict[str, Any]:
    directory.mkdir(parents=True, exist_ok=True)
    building = directory / f"{DEMO_DB}.building"
    building.unlink(missing_ok=True)
    try:
        results = record_scripts(list(scenario_scripts(samples)), db=str(building))
        with Store.open(str(building), read_only=True) as store:
            report = verify_store(store)
            events, head = store.store_head()
        if not report.clean:
            raise IntegrityError(f"the freshly built demo store does not verify: {report.problems[0].detail}")
        _fold_wal(building)
        os.replace(building, directory / DEMO_DB)
    finally:
        building.unlink(missing_ok=True)
        # The index-run lock file of the build (core/store/index_lock.py): no run is left.
        building.with_name(building.name + ".index-lock").unlink(missing_ok=True)
    stamp = {
        "schema_version": SCHEMA_VERSION,
        "kind": STAMP_KIND,
        "samples": str(samples),
        "samples_hash": current,
        "engine_version": ENGINE_VERSION,
        "config_hash": _config_hash(),
        "store_head": head,
        "events": events,
        "scenarios": [result.to_json() for result in results],
    }
    tmp = directory / f"{STAMP}.tmp"
    tmp.write_text(json.dumps(stamp, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, directory / STAMP)
    return stamp


def _config_hash() -> str:
    """The hash every snapshot pins for the engine's weights and limits (see ``retriever.py``)."""
    from scopelens.core.hashing import document_hash
    from scopelens.core.pipeline.retriever import engine_config

    return document_hash(engine_config())


# --------------------------------------------------------------------------- reading findings back


@dataclass(frozen=True)
class RecordedFindings:
    """The findings recorded for one store, as the stamp beside it holds them."""

    findings: tuple[Finding, ...]
    """In the stamp's order: scenario by scenario, each in the order its rules found them."""
    stamp: Path | None
    """The stamp beside the store (None: there is none, or the store is not a SQLite file)."""
    problem: str | None = None
    """Why a stamp beside the store gives no findings, in one line: it cannot be read, or it
    was written for another store (its head differs)."""


def recorded_findings(store: Store) -> RecordedFindings:
    """The findings of the stamp beside ``store``'s file, when the stamp is this store's.

    A stamp belongs to the store whose store head it names: the head hashes every event, so a
    store with another head (another store, or this one after more was recorded into it) would
    be shown findings that may not hold, and gets none, with the reason. A missing stamp is
    no problem (most stores are not the demo's); one that is not a readable stamp is a problem,
    never an exception.
    """
    path = sqlite_path_of(store.url)
    if path is None:
        return RecordedFindings((), None)
    stamp_path = path.parent / STAMP
    if not stamp_path.is_file():
        return RecordedFindings((), None)
    try:
        stamp = json.loads(stamp_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        return RecordedFindings((), stamp_path, f"{STAMP} beside this store cannot be read ({_first_line(exc)})")
    if not isinstance(stamp, dict) or stamp.get("kind") != STAMP_KIND:
        return RecordedFindings((), stamp_path, f"{STAMP} beside this store is not a scopelens demo stamp")
    _, head = store.store_head()
    stamped = stamp.get("store_head")
    if stamped != head:
        written_for = f"store head {short(stamped)}" if isinstance(stamped, str) and stamped else "no store head"
        return RecordedFindings((), stamp_path, (
            f"{STAMP} beside this store was written for {written_for}, and this store's head is {short(head)}: "
            "its findings may not hold here, so none are shown (`scopelens demo` rebuilds the demo store with its findings)"
        ))
    try:
        findings = tuple(
            Finding.model_validate(finding) for scenario in stamp["scenarios"] for finding in scenario["findings"]
        )
    except (KeyError, TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        return RecordedFindings((), stamp_path, f"{STAMP} beside this store holds no readable findings ({_first_line(exc)})")
    return RecordedFindings(findings, stamp_path)


def _first_line(error: BaseException) -> str:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "finding"
        return clip(f"{where}: {first['msg']}", 160)
    text = str(error).strip()
    return clip(text.splitlines()[0], 160) if text else type(error).__name__
