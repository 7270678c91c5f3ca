"""Planted secrets: every one redacted everywhere; ordinary code left alone ([9/9] item 5).

**Planted.** ``plant(count, seed)`` writes a scenario directory (``scopelens record``'s input:
a workspace, memories and a session script) and a Claude Code session file, with ``count``
generated secrets spread over workspace files, a log, tool output, tool arguments, a user
message, memories and the imported session. The values are random (base62, hex, base64,
URL-safe, punctuated), so no rule can know them, and they sit in the forms users write:
``key = value`` under names such as ``password``, ``secret``, ``token``, ``api_key``, ``auth``;
URL userinfo; ``Authorization`` headers (Bearer, Basic, token); JSON and YAML positions; and
a few vendor formats. ``check(...)`` then looks for every secret (any 10 characters of it) in
the whole store (every column of every table), every context block, and the output of each
command a user or an agent reads: ``show``, ``replay``, ``search``, ``retrieve``, ``why-not``,
``memory``, ``export otel --include-content``, ``verify --json`` and the MCP tools.

**False positives.** ``false_positive_lines(paths)`` redacts ordinary text and counts the
lines changed: generated lockfile hashes, UUIDs, git object ids, base64 test data not under a
secret name, and real code the redactor's author did not write (the running interpreter's
standard library, pinned by its version).

``python -m bench.planted_secrets`` runs 1,000 secrets and the whole standard library; CI runs
240 secrets and a slice of it (``tests/core/test_planted_secrets.py``).
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import string
import sys
import sysconfig
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROJECT = "vault"
GRAM = 10
"""A secret counts as leaked if any run of this many of its characters appears."""

_BASE62 = string.ascii_letters + string.digits
_ALPHABETS = {
    "base62": _BASE62,
    "hex": "0123456789abcdef",
    "base64": _BASE62 + "+/",
    "urlsafe": _BASE62 + "-_",
    "punctuated": _BASE62 + "!#%^*~",
}
NAMES = (
    "password", "passwd", "db_password", "DB_PASSWORD", "secret", "client_secret", "SECRET_KEY", "token",
    "access_token", "auth_token", "refreshToken", "api_key", "apiKey", "API_KEY", "auth", "AUTH", "oauth",
    "private_key", "signing_key", "session_secret", "smtpPassword", "github_token", "x-api-key", "credentials",
)
ASSIGNMENTS = (
    '{name} = "{value}"', "{name} = '{value}'", "{name}={value}", "{name}: {value}", '{name}: "{value}"',
    "export {upper}={value}", "    '{name}' => '{value}',", '{name} := "{value}"', "--{name}={value}",
    "set {upper}={value}", "{name}={value}  # rotated monthly", "ENV {upper}={value}",
)
URLS = (
    "postgres://app:{value}@db.internal:5432/main", "https://ci-bot:{value}@git.example.org/team/repo.git",
    "redis://default:{value}@cache.local:6379/0", "amqp://svc:{value}@mq.internal:5672/",
    "mongodb+srv://admin:{value}@cluster0.example.net/orders", "mysql://root:{value}@127.0.0.1/shop",
)
HEADERS = (
    "Authorization: Bearer {value}", "authorization: bearer {value}", "Authorization: token {value}",
    '-H "Authorization: Bearer {value}"', '"Authorization": "Bearer {value}"', "Authorization: Basic {basic}",
    "Proxy-Authorization: Basic {basic}", "X-Api-Key: {value}",
)
JSON_FORMS = (
    '{{"password": "{value}"}}', '{{"auth": {{"token": "{value}"}}}}', '{{"client_secret":"{value}","client_id":"web"}}',
    '"apiKey": "{value}",', "{{'secret': '{value}'}}", '{{"credentials": {{"password": "{value}", "user": "ops"}}}}',
)
VENDOR = (
    ("ghp_", _BASE62, 36), ("AKIA", string.ascii_uppercase + string.digits, 16), ("glpat-", _BASE62, 20),
    ("xoxb-", string.digits, 12), ("sk-proj-", _BASE62, 48), ("npm_", _BASE62, 36),
)


@dataclass(frozen=True)
class Planted:
    """One secret, where it was put and in which form."""

    secret: str
    place: str
    form: str


@dataclass
class Planting:
    """What ``plant`` wrote: the scenario directory, the session file, and every secret."""

    scenario: Path
    session_file: Path
    secrets: list[Planted] = field(default_factory=list)


def _value(rng: random.Random, alphabet: str | None = None) -> str:
    name = rng.choice(sorted(_ALPHABETS)) if alphabet is None else alphabet
    chars = _ALPHABETS[name]
    length = rng.randint(20, 40) if name != "hex" else rng.choice((32, 40, 64))
    while True:
        value = "".join(rng.choice(chars) for _ in range(length))
        # Generated, so it must look generated: letters and digits both (a random run of one
        # class only is rare, and reads as a word or a number, not a key).
        if any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
            return value


def _secret_line(rng: random.Random, n: int) -> tuple[str, str, str]:
    """(line, secret, form) for the n-th secret: the forms in turn, values at random."""
    family = n % 5
    if family == 0:
        value = _value(rng)
        name = NAMES[(n // 5) % len(NAMES)]
        template = ASSIGNMENTS[(n // 5) % len(ASSIGNMENTS)]
        return template.format(name=name, upper=name.upper().replace("-", "_"), value=value), value, f"assignment {name}"
    if family == 1:
        value = _value(rng, rng.choice(("base62", "hex", "urlsafe")))
        template = URLS[(n // 5) % len(URLS)]
        return template.format(value=value), value, "url userinfo"
    if family == 2:
        value = _value(rng, rng.choice(("base62", "urlsafe", "hex")))
        template = HEADERS[(n // 5) % len(HEADERS)]
        basic = base64.b64encode(f"deploy:{value}".encode()).decode()
        return template.format(value=value, basic=basic), basic if "{basic}" in template else value, "header"
    if family == 3:
        value = _value(rng)
        template = JSON_FORMS[(n // 5) % len(JSON_FORMS)]
        return template.format(value=value), value, "json"
    prefix, chars, length = VENDOR[(n // 5) % len(VENDOR)]
    value = prefix + "".join(rng.choice(chars) for _ in range(length))
    return f"fallback credential {value} (do not commit)", value, f"vendor {prefix}"


_ORDINARY = (
    "def load_settings(path):", "    return parse(path.read_text())", "# retry the connection three times",
    "timeout = 30", "region: eu-west-1", "log_level = INFO", "    user: ops", "max_connections = 20",
)


def plant(dest: Path, count: int, seed: int = 0) -> Planting:
    """Write the scenario and the session file under ``dest`` with ``count`` planted secrets."""
    rng = random.Random(seed)
    places = ("config file", "env file", "yaml file", "docs", "shell script", "log", "tool output",
              "tool arguments", "user message", "memory", "imported session")
    by_place: dict[str, list[tuple[str, Planted]]] = {place: [] for place in places}
    planting = Planting(dest / "scenario", dest / "claude-session.jsonl")
    for n in range(count):
        line, secret, form = _secret_line(rng, n)
        planted = Planted(secret, places[n % len(places)], form)
        planting.secrets.append(planted)
        by_place[planted.place].append((line, planted))

    workspace = planting.scenario / "workspace"
    files = {
        "config/settings.py": "config file", "deploy/.env": "env file", "k8s/secrets.yaml": "yaml file",
        "docs/setup.md": "docs", "scripts/deploy.sh": "shell script", "logs/app.log": "log",
    }
    for rel, place in files.items():
        lines: list[str] = []
        for i, (line, _planted) in enumerate(by_place[place]):
            lines += [_ORDINARY[i % len(_ORDINARY)], line]
            if place == "log":
                lines[-1] = f"2026-01-0{i % 9 + 1}T10:00:00Z DEBUG request {i}: {line}"
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text("\n".join(lines) + "\n", encoding="utf-8")
    memories = [
        {"id": f"mem-secret-{i}", "project": PROJECT, "status": "verified",
         "content": f"Deploy note {i}: the staging service is reached with {line}", "confidence": "high",
         "valid_from": "2026-01-01T00:00:00Z", "tags": ["deploy"]}
        for i, (line, _planted) in enumerate(by_place["memory"])
    ]
    (planting.scenario / "memories.jsonl").write_text("".join(json.dumps(m) + "\n" for m in memories), encoding="utf-8")
    steps: list[dict[str, Any]] = [
        {"user": "Deploy fails to reach the database. Here is my config: "
         + " ; ".join(line for line, _ in by_place["user message"])},
        {"tool": "cat deploy/.env logs/app.log", "exit_code": 0,
         "output": [line for line, _ in by_place["tool output"]] or ["(empty)"]},
    ]
    steps += [{"tool": f"curl -sS {line} https://api.example.com/v1/status", "exit_code": 0, "output": ["ok"]}
              for line, _ in by_place["tool arguments"]]
    steps += [{"retrieve": {"question": question, "purpose": "answer-question", "origin": "model"}}
              for question in ("database password in the deploy settings", "authorization header token in the log",
                               "api key and client secret configuration", "staging credentials deploy note")]
    script = {"schema_version": 1, "title": "Planted secrets", "project": PROJECT, "branch": "main",
              "start": "2026-01-05T09:00:00Z", "steps": steps}
    (planting.scenario / "script.json").write_text(json.dumps(script, indent=1), encoding="utf-8")
    planting.session_file.write_text(_claude_session(by_place["imported session"]), encoding="utf-8")
    return planting


def _claude_session(lines: list[tuple[str, Planted]]) -> str:
    """A Claude Code session whose user message, tool input and tool result hold the secrets."""
    third = max(1, len(lines) // 3)
    said, ran, read = lines[:third], lines[third : 2 * third], lines[2 * third :]
    base = {"sessionId": "planted-session", "cwd": "/project", "gitBranch": "main"}
    records = [
        {**base, "type": "user", "timestamp": "2026-01-06T10:00:00.000Z", "uuid": "m1",
         "message": {"role": "user", "content": "Use these to debug: " + " ; ".join(line for line, _ in said)}},
        {**base, "type": "assistant", "timestamp": "2026-01-06T10:00:05.000Z", "uuid": "m2",
         "message": {"role": "assistant", "content": [
             {"type": "tool_use", "id": "toolu_1", "name": "Bash",
              "input": {"command": " && ".join(f"echo '{line}'" for line, _ in ran) or "true"}}]}},
        {**base, "type": "user", "timestamp": "2026-01-06T10:00:10.000Z", "uuid": "m3",
         "message": {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "toolu_1", "content": "\n".join(line for line, _ in read)}]}},
        {**base, "type": "assistant", "timestamp": "2026-01-06T10:00:15.000Z", "uuid": "m4",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "The credentials are set."}]}},
    ]
    return "".join(json.dumps(record) + "\n" for record in records)


# ---------------------------------------------------------------------------- running and checking


def run_cli(args: list[str]) -> str:
    """One ``scopelens`` command through the CLI's main, in process: what it printed."""
    import contextlib
    import io

    from scopelens.core.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    if code not in (0, 1):
        raise RuntimeError(f"scopelens {' '.join(args)} exited {code}: {err.getvalue()[-300:]}")
    return out.getvalue() + err.getvalue()


def populate(planting: Planting, db: str) -> None:
    run_cli(["record", str(planting.scenario), "--db", db])
    run_cli(["import", str(planting.session_file), "--project", PROJECT, "--db", db])


def outputs(planting: Planting, db: str, workdir: Path) -> dict[str, str]:
    """Everything a reader of the store sees, by what produced it."""
    from scopelens.core.store.store import Store

    with Store.open(db, read_only=True) as store:
        sessions = [s.header.id for s in store.list_sessions()]
        snapshots = [s.snapshot.id for sid in sessions for s in store.snapshots_of(sid)]
    seen = {"store": store_dump(db)}
    seen["sessions"] = run_cli(["sessions", "--db", db])
    for sid in sessions:
        seen[f"show {sid}"] = run_cli(["show", sid, "--db", db])
        seen[f"replay {sid}"] = run_cli(["replay", sid, "--db", db])
        otel = workdir / f"otel-{sid}.jsonl"
        run_cli(["export", "otel", "--session", sid, "--include-content", "--out", str(otel), "--db", db])
        seen[f"export otel {sid}"] = otel.read_text(encoding="utf-8")
    for snapshot_id in snapshots:
        seen[f"show {snapshot_id}"] = run_cli(["show", snapshot_id, "--db", db, "--json"])
    workspace = planting.scenario / "workspace"
    for n, query in enumerate(("password secret token", "authorization bearer basic", "api key credentials",
                               "postgres redis")):
        seen[f"search {query}"] = run_cli(["search", query, "--project", PROJECT, "--db", db])
        intent = workdir / f"intent-{n}.json"
        intent.write_text(json.dumps({"question": query}), encoding="utf-8")
        seen[f"retrieve {query}"] = run_cli(
            ["retrieve", "--intent", str(intent), "--project", PROJECT, "--workspace", str(workspace), "--db", db])
    seen["why-not"] = run_cli(["why-not", snapshots[0], "--path", "deploy/.env", "--db", db]) if snapshots else ""
    seen["memory list"] = run_cli(["memory", "list", "--project", PROJECT, "--db", db])
    seen["verify"] = run_cli(["verify", "--json", "--db", db])
    seen.update(_mcp_outputs(db, workspace))
    return seen


def _mcp_outputs(db: str, workspace: Path) -> dict[str, str]:
    from scopelens.core.clients.scoped_tools import ScopedTools, ServerScope
    from scopelens.core.store.store import Store

    with Store.open(db) as store:
        tools = ScopedTools(store, ServerScope(workspace=workspace, project=PROJECT, branch="main", db=db))
        answer = tools.retrieve({"question": "database password and api token"})
        found = tools.search("password token secret authorization")
        snapshot = tools.get_snapshot(answer["snapshot_id"])
        replayed = tools.replay(answer["session_id"])
    return {f"mcp {name}": json.dumps(value) for name, value in
            (("retrieve", answer), ("search", found), ("get_snapshot", snapshot), ("replay", replayed))}


def store_dump(db: str) -> str:
    """Every column of every row of every table, as text (bytes decoded)."""
    from sqlalchemy import MetaData

    from scopelens.core.store.store import Store

    parts: list[str] = []
    with Store.open(db, read_only=True) as store, store.engine.connect() as conn:
        metadata = MetaData()
        metadata.reflect(conn)
        for table in metadata.sorted_tables:
            for row in conn.execute(table.select()):
                for value in row:
                    text_value = bytes(value).decode("utf-8", "replace") if isinstance(value, (bytes, memoryview)) else str(value)
                    parts.append(text_value)
    return "\n".join(parts)


def leaks(secrets: Iterable[Planted], seen: dict[str, str]) -> list[str]:
    """``where: form (place)`` for every secret any run of ``GRAM`` characters of which is seen."""
    grams: dict[str, Planted] = {}
    for planted in secrets:
        for i in range(len(planted.secret) - GRAM + 1):
            grams[planted.secret[i : i + GRAM]] = planted
    found = []
    for where, text in seen.items():
        hits = {grams[text[i : i + GRAM]] for i in range(len(text) - GRAM + 1) if text[i : i + GRAM] in grams}
        found += [f"{where}: {p.form} ({p.place}) {p.secret[:4]}…" for p in sorted(hits, key=lambda p: p.secret)]
    return found


# ---------------------------------------------------------------------------- false positives


def ordinary_text(rng: random.Random, lines: int) -> str:
    """Lockfile hashes, UUIDs, object ids and base64 test data, none under a secret name."""
    makers: list[Callable[[], str]] = [
        lambda: f'      "integrity": "sha512-{base64.b64encode(rng.randbytes(64)).decode()}",',
        lambda: f'    {{file = "pkg-{rng.randint(1, 9)}.tar.gz", hash = "sha256:{rng.randbytes(32).hex()}"}},',
        lambda: f'  resolved "https://registry.yarnpkg.com/x/-/x-1.0.{rng.randint(0, 9)}.tgz#{rng.randbytes(20).hex()}"',
        lambda: f"request_id = '{uuid.UUID(int=rng.getrandbits(128))}'",
        lambda: f"commit {rng.randbytes(20).hex()}",
        lambda: f'PNG_HEADER = "{base64.b64encode(rng.randbytes(48)).decode()}"',
        lambda: f"    assert decode(b'{base64.b64encode(rng.randbytes(24)).decode()}') == expected",
        lambda: f"checksum: {rng.randbytes(32).hex()}",
        lambda: f"etag = \"W/{rng.randbytes(16).hex()}\"",
    ]
    return "\n".join(rng.choice(makers)() for _ in range(lines)) + "\n"


@dataclass(frozen=True)
class FalsePositives:
    files: int
    lines: int
    changed: int
    examples: tuple[str, ...]

    @property
    def share(self) -> float:
        return self.changed / self.lines if self.lines else 0.0


def false_positive_lines(texts: Iterable[tuple[str, str]]) -> FalsePositives:
    """Redact each (name, text); count the lines any redaction touched."""
    from scopelens.core.redaction_scan import redaction_spans

    files = lines = changed = 0
    examples: list[str] = []
    for name, text in texts:
        files += 1
        lines += text.count("\n") + (0 if text.endswith("\n") else 1)
        _redacted, spans = redaction_spans(text)
        touched = {text.count("\n", 0, start) for start, _end, _kind in spans}
        changed += len(touched)
        if spans and len(examples) < 10:
            start, end, kind = spans[0]
            examples.append(f"{name}:{text.count(chr(10), 0, start) + 1} [{kind.value}] {text[start:end][:24]}…")
    return FalsePositives(files, lines, changed, tuple(examples))


def stdlib_texts(limit: int | None = None, stride: int = 1) -> Iterable[tuple[str, str]]:
    """The running interpreter's standard library (.py files, sorted), every ``stride``-th."""
    root = Path(sysconfig.get_paths()["stdlib"])
    paths = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts and "__pycache__" not in p.parts)
    for path in paths[::stride][:limit]:
        yield str(path.relative_to(root)), path.read_text(encoding="utf-8", errors="replace")


PACKAGES = ("sqlalchemy", "pydantic", "textual", "rich", "psycopg", "hypothesis")
"""Installed packages read as a second corpus of real code (their versions are printed)."""


def package_texts(names: Iterable[str] = PACKAGES) -> tuple[list[str], Iterable[tuple[str, str]]]:
    """``name==version`` of each installed package of ``names``, and its .py files' texts."""
    import importlib.metadata
    import importlib.util

    found, roots = [], []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        found.append(f"{name}=={importlib.metadata.version(name)}")
        roots += [Path(p) for p in spec.submodule_search_locations]

    def texts() -> Iterable[tuple[str, str]]:
        for root in roots:
            for path in sorted(root.rglob("*.py")):
                yield str(path.relative_to(root.parent)), path.read_text(encoding="utf-8", errors="replace")

    return found, texts()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--secrets", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        planting = plant(Path(tmp), args.secrets, args.seed)
        db = str(Path(tmp) / "store.db")
        populate(planting, db)
        seen = outputs(planting, db, Path(tmp))
        found = leaks(planting.secrets, seen)
        places = sorted({p.place for p in planting.secrets})
        print(f"planted {len(planting.secrets)} secrets (seed {args.seed}) in {len(places)} places "
              f"({', '.join(places)}); looked in {len(seen)} outputs ({sum(map(len, seen.values())) / 1e6:.1f} MB): "
              f"{len(found)} leak(s) ({time.perf_counter() - started:.0f} s)")
        for leak in found[:40]:
            print(f"  LEAK {leak}")
        failed |= bool(found)
    rng = random.Random(args.seed)
    generated = false_positive_lines([("generated", ordinary_text(rng, 20_000))])
    real = false_positive_lines(stdlib_texts())
    versions, package_files = package_texts()
    packages = false_positive_lines(package_files)
    for label, figures in (("generated lockfile hashes, UUIDs, object ids, base64 data", generated),
                           (f"Python {sys.version.split()[0]} standard library", real),
                           (", ".join(versions), packages)):
        print(f"false positives, {label}: {figures.changed} of {figures.lines} lines in {figures.files} file(s) "
              f"changed ({figures.share:.3%}; target <= 0.5%)")
        for example in figures.examples:
            print(f"  e.g. {example}")
        failed |= figures.share > 0.005
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
