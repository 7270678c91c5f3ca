"""A secret planted in every input a user or an agent can give (workspace files, memories, the
intent's question and anchors, user messages, tool arguments and output, artifacts, replies, the
script title) appears in no stored byte: the SQLite file and its WAL, or every PostgreSQL row."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import create_engine, inspect, text

from scopelens.core.cli import main
from scopelens.core.store.engine import normalise_url, sqlite_path_of

AWS = "AKIA" + "Q4TZ8VN5LP2KD8RB"
GITHUB = "ghp_" + "7fK2mQ7xLp4Rt8Vw1Zy6Hb3Nc5Jd0SaEuGiP"
STRIPE = "sk_live_" + "51HqLyjWDarjtT1zdp7dcXyzAbcDefGhij"
SECRETS = (AWS, GITHUB, STRIPE)


def scenario(base: Path) -> Path:
    workspace = base / "workspace"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "billing.py").write_text(
        f'STRIPE_KEY = "{STRIPE}"\n\ndef charge(amount):\n    return round(amount * 100)\n')
    (base.parent / "memories.jsonl").write_text(
        json.dumps(
            {
                "id": "mem-1",
                "project": "bill",
                "status": "candidate",
                "valid_from": "2026-01-01T00:00:00Z",
                "content": f"the deploy token is {GITHUB}",
            }
        )
        + "\n"
    )
    intent = {
        "purpose": "fix-test", "question": f"charge fails when called with key {AWS} and token {GITHUB}",
        "anchors": {"error_text": f"AuthError: bad key {AWS}", "traceback": f"token={GITHUB}",
                    "failing_test": "tests/test_billing.py::test_charge", "symbols": ["charge"]},
    }
    script = {"project": "bill-script", "title": f"billing with {AWS}", "steps": [
        {"user": f"charge() is wrong, my key is {AWS}"},
        {"tool": "pytest", "exit_code": 1, "arguments": {"env": {"GITHUB_TOKEN": GITHUB}},
         "output": f"FAILED test_charge\nAuthorization: Bearer {GITHUB}\n", "artifact": "pytest.log"},
        {"retrieve": intent},
        {"reply": {"text": f"Rotate {AWS}; charge rounds wrongly.", "cites": []}},
    ]}
    (base / "script.json").write_text(json.dumps(script))
    (base / "intent.json").write_text(json.dumps(intent))
    return base


def stored_bytes(url: str) -> bytes:
    path = sqlite_path_of(normalise_url(url))
    if path is not None:
        return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    engine = create_engine(normalise_url(url))
    try:
        with engine.connect() as conn:
            chunks = []
            for table in inspect(conn).get_table_names():
                for column in inspect(conn).get_columns(table):
                    raw = str(column["type"]).upper() in ("BYTEA", "LARGEBINARY")
                    expression = f'"{column["name"]}"' if raw else f'"{column["name"]}"::text'
                    for (value,) in conn.execute(text(f'SELECT {expression} FROM "{table}"')):
                        if value is not None:
                            chunks.append(bytes(value) if raw else value.encode("utf-8"))
    finally:
        engine.dispose()
    return b"\n".join(chunks)


def test_no_stored_byte_holds_a_planted_secret(capsys, tmp_path, store_url):
    base = scenario(tmp_path / "bill")
    db = ["--db", store_url]
    assert main(["index", str(base / "workspace"), "--project", "bill", *db]) == 0
    assert main(["memory", "import", str(base.parent / "memories.jsonl"), *db]) == 0
    assert main(["retrieve", "--project", "bill", "--intent", str(base / "intent.json"), "--json", *db]) == 0
    assert main(["record", str(base), *db]) == 0
    out = capsys.readouterr().out
    for secret in SECRETS:
        assert secret not in out
    everything = stored_bytes(store_url)
    # Everything happened, on redacted text: the question, the title, the memory, the file.
    for placeholder in (b"[REDACTED:aws-access-key]", b"[REDACTED:github-token]", b"REDACTED:"):
        assert placeholder in everything
    assert b"charge fails when called with key [REDACTED:aws-access-key]" in everything
    for secret in SECRETS:
        for fragment in (secret, secret[:16], secret[-16:]):
            assert fragment.encode() not in everything, f"stored: {fragment[:6]}…"
