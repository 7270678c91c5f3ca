"""What every command prints for people ([3/9], CLI a new user can find their way in): stdout
starts with its result, never a blank line; text cut for display ends in a single "…" (never
"..."); a time is ISO-8601 UTC to the second with its ``Z`` (``2026-03-01T12:00:00Z``) and a
table column of times says "(UTC)". JSON keeps ISO-8601 text with ``Z``, at stored precision."""

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from scopelens.core.cli import build_parser, main
from scopelens.core.store.store import Store
from scopelens.core.vocab import EventType
from tests.support.workspaces import write

SAMPLES = Path(__file__).resolve().parents[2] / "sample_sessions"

FILES = {  # no "..." anywhere, so any "..." printed would be a cut
    "src/auth/session.ts": (
        "export interface User { name: string; role?: string }\n\n"
        "export function createUserMock(overrides: Partial<User> = {}): User {\n"
        '  return Object.assign({ name: "test-user" }, overrides);\n}\n'
    ),
    "tests/auth/session.test.ts": (
        'import { createUserMock } from "../../src/auth/session";\n\n'
        'test("admin mock has admin role", () => {\n  const user = createUserMock();\n'
        '  expect(user.role).toBe("admin");\n});\n'
    ),
    "docs/admin-roles.md": "# Admin roles\n\nThe admin role grants every permission. A role is undefined until assigned.\n",
}
QUESTION = (
    "expected role admin received undefined: why does the admin mock in tests/auth/session.test.ts "
    "have no role at all, and what should the fixture declare instead"
)
LONG_MESSAGE = "the test still fails\n" + " ".join(f"word{n}" for n in range(60))
LONG_MEMORY = "Admin mocks must declare their role explicitly; " + " ".join(f"reason{n}" for n in range(30))

ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$")
"""A time in JSON: ISO-8601 UTC with Z, at whatever precision it was stored."""
SHOWN_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ(?![\w.:])")
"""A time printed for people: exactly :func:`scopelens.core.clock.when`."""
TIME_LIKE = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d|\b\d\d:\d\d:\d\d\b")

NOT_RUN_HERE = {
    "demo": "builds the sample store in the data directory: tests/record/test_demo.py runs it",
    "inspect": "opens the inspector: tests/inspector covers what it shows",
    "mcp": "serves MCP over stdio until its client leaves: tests/clients/test_mcp_server.py runs it over stdio",
    "export": "writes OTLP/JSON spans, not display text: tests/clients/test_otel_export.py runs it",
}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> dict[str, str]:
    """A store with an index, a memory, a retrieval with a long question, a long message and a drift run."""
    base = tmp_path_factory.mktemp("display")
    workspace = base / "ws"
    write(workspace, FILES)
    db = str(base / "s.db")
    memories = base / "memories.jsonl"
    memories.write_text(json.dumps({
        "id": "mem-long", "project": "alpha", "content": LONG_MEMORY, "valid_from": "2026-01-05T09:00:00Z",
    }) + "\n")
    intent = base / "intent.json"
    intent.write_text(json.dumps({"purpose": "fix-test", "question": QUESTION}))
    assert main(["index", str(workspace), "--project", "alpha", "--branch", "main", "--db", db]) == 0
    assert main(["memory", "import", str(memories), "--db", db]) == 0
    assert main(["retrieve", "--project", "alpha", "--intent", str(intent), "--workspace", str(workspace),
                 "--db", db, "--json"]) == 0
    with Store.open(db) as opened:
        (summary,) = opened.list_sessions()
        session = summary.header.id
        opened.append_event(session, EventType.USER_MESSAGE, {"text": LONG_MESSAGE})
    with sqlite3.connect(db) as conn:
        (snapshot,) = conn.execute("SELECT id FROM snapshots").fetchone()
    assert main(["drift", snapshot, "--db", db, "--json"]) == 0
    return {
        "db": db, "workspace": str(workspace), "intent": str(intent), "session": session, "snapshot": snapshot,
        "base": str(base),
        "script": str(SAMPLES / "flags-budget-trim"), "memories": str(memories),
        "imports": str(Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "swe-agent"),
    }


RUNS: dict[str, list[str]] = {
    "index": ["index", "{workspace}", "--project", "alpha", "--branch", "main"],
    "search": ["search", "admin role mock", "--project", "alpha"],
    "compact": ["compact"],
    "retrieve": ["retrieve", "--project", "alpha", "--intent", "{intent}", "--session", "{session}"],
    "memory list": ["memory", "list"],
    "memory export": ["memory", "export"],
    "memory import": ["memory", "import", "{memories}"],
    "memory promote": ["memory", "promote", "mem-long"],
    "memory deprecate": ["memory", "deprecate", "mem-long"],
    "memory link-conflict": ["memory", "link-conflict", "mem-long", "mem-long"],
    "memory history": ["memory", "history", "mem-long"],
    "record": ["record", "{script}", "--db", "{fresh}"],
    "sessions": ["sessions"],
    "show session": ["show", "{session}"],
    "show snapshot": ["show", "{snapshot}"],
    "replay": ["replay", "{session}"],
    "drift": ["drift", "{snapshot}"],
    "drift --session": ["drift", "--session", "{session}"],
    "drift --list": ["drift", "--list"],
    "why-not": ["why-not", "{snapshot}", "--text", "viewer editor owner"],
    "verify": ["verify"],
    "checkpoint": ["checkpoint"],
    "rebuild": ["rebuild", "--from", "{db}", "--db", "{fresh}"],
    "migrate": ["migrate"],
    "import": ["import", "{imports}", "--db", "{fresh}"],
}
"""One run of each command (and of each way a command prints differently)."""
PRINTS_STORED_TEXT = {"retrieve", "replay", "memory export", "show snapshot"}
"""These print recorded text (the context block, memory records, selected reasons) as it is."""


def run(capsys, store: dict[str, str], name: str, *extra: str) -> tuple[int, str]:
    fresh = str(Path(store["base"]) / f"{uuid.uuid4().hex}.db")  # a new store for commands that make one
    argv = [part.format(**store, fresh=fresh) for part in RUNS[name]]
    if "--db" not in argv:
        argv += ["--db", store["db"]]
    code = main([*argv, *extra])
    return code, capsys.readouterr().out


def test_every_command_is_run_here():
    parser = build_parser()
    (commands,) = [a for a in parser._actions if a.dest == "command"]
    run_here = {name.split()[0] for name in RUNS}
    assert set(commands.choices) - run_here - set(NOT_RUN_HERE) == set()


@pytest.mark.parametrize("name", list(RUNS))
def test_stdout_starts_with_the_result_and_shows_cuts_and_times_one_way(capsys, store, name):
    code, out = run(capsys, store, name)
    assert code in (0, 1, 2), out  # link-conflict of a record with itself is a user error: still checked
    if out:
        assert out.strip(), f"{name}: stdout holds only blank lines"
        assert out.splitlines()[0].strip(), f"{name}: stdout starts with a blank line: {out[:80]!r}"
    if name not in PRINTS_STORED_TEXT:
        assert "..." not in out, f"{name}: a cut marked with three dots instead of …"
    for line in out.splitlines():
        for found in TIME_LIKE.finditer(line):
            assert SHOWN_TIME.match(line, found.start()), f"{name}: a time not shown as when(): {line.strip()!r}"
    if SHOWN_TIME.search(out) and "┃" in out:  # a table with times in it
        header = next(line for line in out.splitlines() if "┃" in line)
        assert "(UTC)" in header, f"{name}: a column of times whose header does not say UTC: {header!r}"


def test_cut_text_ends_in_an_ellipsis_and_text_that_fits_is_whole(capsys, store):
    _, out = run(capsys, store, "show session")
    rows: dict[str, str] = {}  # the first event of each type (other tests may append more)
    for line in out.splitlines():
        if line.count("│") > 5:
            rows.setdefault(line.split("│")[3].strip(), line.split("│")[5].strip())
    started, message = rows["session.started"], rows["user.message"]
    assert started.endswith("…") and started.startswith("session on alpha@main: expected role admin")
    assert message.endswith("…") and message.startswith("the test still fails word0 word1")  # one line, then cut
    assert re.fullmatch(r"snapshot snap-\w+ \(\d+ selected\)", rows["retrieval.snapshot.created"])  # fits: whole
    _, out = run(capsys, store, "memory list")
    (content,) = [line.split("│")[4].strip() for line in out.splitlines() if "mem-long" in line]
    assert content.endswith("…") and LONG_MEMORY.startswith(content[:-1].rstrip()) and len(content) <= 80


def test_hashes_are_shown_as_their_first_characters_and_an_ellipsis(capsys, store):
    _, out = run(capsys, store, "sessions")
    (row,) = [line for line in out.splitlines() if store["session"] in line]
    head = row.split("│")[-2].strip()
    assert re.fullmatch(r"[0-9a-f]{12}…", head), head


def test_times_in_tables_are_when_and_their_headers_say_utc(capsys, store):
    for name, column in (("sessions", "started (UTC)"), ("show session", "at (UTC)"), ("drift --list", "at (UTC)")):
        _, out = run(capsys, store, name)
        assert column in out, name
        assert SHOWN_TIME.search(out), name


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


@pytest.mark.parametrize("name", ["sessions", "show session", "show snapshot", "replay", "drift", "drift --list",
                                  "memory list", "verify", "why-not", "retrieve", "index", "record", "rebuild"])
def test_json_times_are_iso_8601_utc_with_z(capsys, store, name):
    code, out = run(capsys, store, name, "--json")
    assert code == 0
    times = [s for s in _strings(json.loads(out)) if re.match(r"^\d{4}-\d\d-\d\d[T ]\d\d:", s)]
    assert all(ISO_Z.match(t) for t in times), [t for t in times if not ISO_Z.match(t)]
