"""Bad input, fuzzed at every entry point: the CLI's arguments (through its ``main``), intent,
scope and policy files, session scripts, database files, and MCP tool arguments.

Whatever is given, the outcome is a success or one clear line (``error: …``, or argparse's
``scopelens …: error: …`` after its usage line) with a non-zero exit; never a traceback,
and a failure writes nothing to the store. CI runs a few hundred examples per entry point
(derandomized); ``python -m bench.fuzz_inputs`` runs 10,000 each.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scopelens.core.cli import main
from scopelens.core.clients.scoped_tools import ScopedTools, ServerScope
from scopelens.core.errors import ScopelensError
from scopelens.core.index.indexer import index_workspace
from scopelens.core.store.store import Store
from tests.support.workspaces import write

EXAMPLES = 10_000 if os.environ.get("HYPOTHESIS_PROFILE") == "bench" else 150
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=os.environ.get("HYPOTHESIS_PROFILE") != "bench",
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
FIELD_NAMES = st.sampled_from(["question", "purpose", "anchors", "required_evidence", "origin", "schema_version",
                               "project", "budget", "max_tokens", "allowed_sources", "denied_sources", "path_prefixes",
                               "time_boundary", "as_of", "evidence_policy", "failing_test", "symbols", "user_id"])
SHAPED_JSON = st.dictionaries(FIELD_NAMES, JSON, max_size=6)
WORDS = ["--json", "--project", "p", "--session", "s-x", "--turn", "-1", "0", "abc", "", "--path", "../../etc/passwd",
         "\x00", "--as-of", "notatime", "2026-13-45", "--top-k", "0", "99999999999999999999", "--intent", "nope.json",
         "--symbol", "--text", "--list", "--workspace", "/nonexistent", "--branch", "--", "-x", "snap-1", "ü", "--db"]
COMMANDS = ["sessions", "show", "verify", "checkpoint", "migrate", "index", "compact", "search", "retrieve", "memory",
            "replay", "drift", "why-not", "rebuild", "record", "import", "export"]


@pytest.fixture(scope="module", autouse=True)
def scratch_directory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every command runs in an empty working directory: a fuzzed ``--db NAME`` or ``index ""``
    would otherwise create stores, or index, where the tests were started (a checkout)."""
    scratch = tmp_path_factory.mktemp("cwd")
    with contextlib.chdir(scratch):
        yield scratch


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("fuzz")
    workspace = base / "ws"
    write(workspace, {"src/app.py": "def refresh_token(t):\n    return t + 1\n", "README.md": "# app\n\ntokens\n"})
    db = base / "store.db"
    with Store.open(str(db), create=True) as opened:
        index_workspace(opened, workspace, project="p", branch="main", workers=0)
    return db


def run(argv: list[str]) -> tuple[int, str]:
    """``main(argv)``: its exit code and stderr; any exception but argparse's exit fails the test."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = int(exit_.code or 0)
    return code, err.getvalue()


def assert_clean_failure(code: int, err: str) -> None:
    assert "Traceback" not in err, err
    if code == 0:
        return
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines, "a failure says why"
    last = lines[-1]
    if last.startswith("error: "):
        assert len(lines) == 1 or all("indexing" in line or "%" in line for line in lines[:-1]), err
    else:
        assert " error: " in last and lines[0].startswith("usage: "), err  # argparse: usage, then the error


def counts(db: Path) -> tuple[int, ...]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return tuple(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                     for table in ("events", "snapshots", "sessions", "index_runs", "memories", "drift_runs"))


@FUZZ
@given(command=st.sampled_from(COMMANDS), words=st.lists(st.sampled_from(WORDS) | st.text(max_size=8), max_size=6))
def test_any_arguments_give_a_result_or_one_line(store: Path, tmp_path_factory: pytest.TempPathFactory,
                                                  command: str, words: list[str]) -> None:
    before = counts(store)
    argv = [command, *words]
    code, err = run([*argv, "--db", str(store)] if "--db" not in words else argv)
    assert_clean_failure(code, err)
    if code != 0:
        assert counts(store) == before, f"{argv} failed and wrote"


@FUZZ
@given(intent=SHAPED_JSON | JSON, scope=st.none() | SHAPED_JSON | JSON)
def test_intent_and_scope_files_give_a_retrieval_or_one_line(store: Path, tmp_path: Path, intent: Any, scope: Any) -> None:
    intent_file, scope_file = tmp_path / "intent.json", tmp_path / "scope.json"
    intent_file.write_text(json.dumps(intent))
    argv = ["retrieve", "--project", "p", "--intent", str(intent_file), "--db", str(store)]
    if scope is not None:
        scope_file.write_text(json.dumps(scope))
        argv += ["--scope", str(scope_file)]
    before = counts(store)
    code, err = run(argv)
    assert_clean_failure(code, err)
    if code != 0:
        assert counts(store) == before


POLICY_LINES = st.lists(st.sampled_from([
    "schema_version = 1", "schema_version = 9", 'denied_sources = ["memory"]', 'denied_sources = ["nope"]',
    "denied_sources = 3", '[[visibility]]', 'glob = "src/*"', 'visibility = "runtime-only"', 'visibility = "open"',
    'rule_globs = ["docs/*"]', "[memory]", "[budget]", "max_tokens = 0", "max_tokens = 50", "= broken", "[[", "x = ",
    'instruction_files = "AGENTS.md"',
]), max_size=6)


@FUZZ
@given(lines=POLICY_LINES, raw=st.binary(max_size=40))
def test_policy_files_give_a_retrieval_or_one_line(store: Path, tmp_path: Path, lines: list[str], raw: bytes) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_bytes("\n".join(lines).encode() + (b"\n" + raw if raw and len(lines) % 2 else b""))
    intent = tmp_path / "intent.json"
    intent.write_text(json.dumps({"question": "refresh token"}))
    before = counts(store)
    code, err = run(["retrieve", "--project", "p", "--intent", str(intent), "--policy", str(policy), "--db", str(store)])
    assert_clean_failure(code, err)
    if code != 0:
        assert counts(store) == before


@FUZZ
@given(script=SHAPED_JSON | JSON | st.fixed_dictionaries(
    {"schema_version": st.just(1), "project": st.text(max_size=6), "steps": st.lists(SHAPED_JSON | JSON, max_size=3)}))
def test_session_scripts_give_a_recording_or_one_line(tmp_path: Path, script: Any) -> None:
    folder = tmp_path / "scenario"
    folder.mkdir(exist_ok=True)
    (folder / "script.json").write_text(json.dumps(script))
    db = tmp_path / "rec.db"
    code, err = run(["record", str(folder), "--db", str(db), "--json"])
    assert_clean_failure(code, err)


@FUZZ
@given(cut=st.floats(0, 1), noise=st.binary(max_size=64), where=st.floats(0, 1))
def test_damaged_database_files_are_one_line_and_left_as_they_are(store: Path, tmp_path: Path, cut: float,
                                                                   noise: bytes, where: float) -> None:
    data = store.read_bytes()
    damaged = bytearray(data[: int(len(data) * cut)])
    at = int(len(damaged) * where)
    damaged[at : at + len(noise)] = noise
    path = tmp_path / "damaged.db"
    path.write_bytes(bytes(damaged))
    for command in (["sessions"], ["verify"], ["replay", "s-x"], ["search", "token", "--project", "p"]):
        code, err = run([*command, "--db", str(path)])
        assert_clean_failure(code, err)
        assert path.read_bytes() == bytes(damaged), f"{command} changed a damaged store"


@pytest.fixture(scope="module")
def served(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScopedTools]:
    workspace = tmp_path_factory.mktemp("mcp-ws")
    write(workspace, {"src/app.py": "def refresh_token(t):\n    return t + 1\n"})
    db = tmp_path_factory.mktemp("mcp") / "store.db"
    with Store.open(str(db), create=True) as opened:
        tools = ScopedTools(opened, ServerScope(workspace=workspace, project="p", branch="main", db=str(db)))
        tools.refresh_index()
        yield tools


@FUZZ
@given(tool=st.sampled_from(["retrieve", "get_snapshot", "replay", "drift", "why_not", "search"]),
       arguments=st.dictionaries(FIELD_NAMES | st.sampled_from(["snapshot_id", "session_id", "path", "query", "top_k",
                                                               "turn", "text", "symbol"]), JSON, max_size=5))
def test_mcp_tool_arguments_give_an_answer_or_a_scopelens_error(served: ScopedTools, tool: str,
                                                                arguments: dict[str, Any]) -> None:
    calls = {
        "retrieve": lambda a: served.retrieve(a),
        "get_snapshot": lambda a: served.get_snapshot(a.get("snapshot_id")),
        "replay": lambda a: served.replay(a.get("session_id"), a.get("turn")),
        "drift": lambda a: served.drift(a.get("snapshot_id")),
        "why_not": lambda a: served.why_not(a.get("snapshot_id"), {k: a.get(k) for k in ("path", "symbol", "text")}),
        "search": lambda a: served.search(a.get("query"), a.get("top_k", 10)),
    }
    try:
        answer = calls[tool](arguments)
    except ScopelensError as error:
        assert "\n" not in str(error).strip()
    else:
        json.dumps(answer)


@pytest.mark.parametrize("arguments", [
    {"question": "x", "max_tokens": "many"}, {"question": "x", "max_tokens": -5}, {"question": 7},
    {"question": "x", "session_id": 3}, {"question": "x", "anchors": "src/app.py"}, {"question": "x", "purpose": "win"},
    {"required_evidence": 1},  # found by the 10,000-example run
])
def test_mistyped_retrieve_arguments_are_one_line_errors(served: ScopedTools, arguments: dict[str, Any]) -> None:
    with pytest.raises(ScopelensError) as raised:
        served.retrieve(arguments)
    assert "\n" not in str(raised.value)


def test_an_argument_echoed_in_an_error_cannot_rewrite_the_terminal_line(store: Path) -> None:
    code, err = run(["show", "s-\r\x1b[2Kforged", "--db", str(store)])
    assert code == 2 and "\r" not in err and "\x1b" not in err and "\\r" in err  # repr'd, not escaped twice
    code, err = run(["sessions", "--bogus\rflag", "--db", str(store)])
    assert code == 2 and "\r" not in err and "\\x0d" in err


def recorded_store(tmp_path: Path) -> Path:
    """A store with one recorded sample session, in ``tmp_path``."""
    from scopelens.core.record.recorder import record_scripts

    (tmp_path / "work").mkdir()
    db = tmp_path / "store.db"
    record_scripts([Path(__file__).resolve().parents[2] / "sample_sessions" / "billing-cents-time"],
                   db=str(db), workdir=tmp_path / "work")
    return db


def test_a_store_damaged_in_its_last_pages_is_one_line(tmp_path: Path) -> None:
    """The pages opening reads are whole, so the store opens; the damage shows at whichever page
    a query reaches (``database disk image is malformed``): one line, exit 3, the file untouched."""
    db = recorded_store(tmp_path)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
    data = db.read_bytes()
    keep = len(data) // page * 3 // 4 * page
    damaged = data[:keep] + b"\xff" * (len(data) - keep)
    db.write_bytes(damaged)
    code, err = run(["verify", "--db", str(db)])
    assert code == 3 and err.startswith("error: store ") and "is damaged" in err and err.count("\n") == 1, err
    assert db.read_bytes() == damaged


@pytest.mark.parametrize("argv", [["record", "\x00"], ["sessions", "--db", "a\x00b"], ["index", "x\x00", "--project", "p"]])
def test_a_nul_byte_in_an_argument_is_one_line(argv: list[str]) -> None:
    """Found by the 10,000-example run: ``record`` opened a path holding NUL (``ValueError``)."""
    code, err = run(argv)
    assert code == 2 and err == "error: an argument holds a NUL byte\n"


def test_a_column_that_is_not_utf8_is_a_damaged_store(tmp_path: Path) -> None:
    """Found by the 10,000-example run: a text column whose bytes are not UTF-8 (a flipped byte in
    a page) raised sqlite3's ``Could not decode to UTF-8`` from verify."""
    db = recorded_store(tmp_path)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("DROP TRIGGER IF EXISTS blobs_no_update")
        conn.execute("UPDATE blobs SET sha256 = CAST(X'ff' || CAST(sha256 AS BLOB) AS TEXT) WHERE rowid = 1")
        conn.commit()
    code, err = run(["verify", "--db", str(db)])
    assert code == 3 and "is damaged" in err and "Could not decode" in err and err.count("\n") == 1, err
