"""Each selected item lists the redactions on its visible lines, hashed under the store's key,
which lives in a file beside the store and never in it."""

from __future__ import annotations

import stat
from datetime import UTC

from scopelens.core.contracts import RetrievalIntent
from scopelens.core.store.keys import KEY_SUFFIX
from scopelens.core.vocab import Purpose, RedactionKind
from tests.support.workspaces import Lab

SETTINGS = (
    "# payment settings\n"
    "def charge_settings():\n"
    "    endpoint = 'https://pay.example/charge'\n"
    '    api_key = "q8Zr2LmX9vT4wKp7"\n'
    "    return endpoint, api_key\n"
)


def test_items_carry_their_redactions_and_the_key_stays_outside(tmp_path):
    lab = Lab(tmp_path)
    lab.index(lab.workspace("ws", {"src/settings.py": SETTINGS, "src/other.py": "def other():\n    return 2\n"}), "pay")
    intent = RetrievalIntent(purpose=Purpose.EXPLAIN_CODE, question="what are the charge_settings endpoint and api_key")
    snapshot = lab.retriever().retrieve(intent, project="pay").snapshot
    (item,) = [i for i in snapshot.selected if i.path == "src/settings.py"]
    assert "[REDACTED:env-assignment]" in item.visible_text
    assert [(r.kind, r.line, r.hash_kind) for r in item.redactions] == [(RedactionKind.ENV_ASSIGNMENT, 4, "hmac-sha256")]
    assert item.redactions[0].original_hash == lab.store.redaction_key.digest("q8Zr2LmX9vT4wKp7")

    key_file = tmp_path / f"lab.db{KEY_SUFFIX}"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key_text = key_file.read_text().strip()
    assert bytes.fromhex(key_text) == lab.store.redaction_key.secret
    lab.close()
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("lab.db*") if not p.name.endswith(KEY_SUFFIX))
    assert key_text.encode() not in stored and lab.store.redaction_key.secret not in stored


def test_a_redaction_on_trimmed_lines_is_not_listed_for_the_item():
    from datetime import datetime

    from scopelens.core.contracts import Candidate, Redaction, TrimRange
    from scopelens.core.pipeline.retriever import visible_redactions
    from scopelens.core.vocab import EvidenceKind, Source

    def on_line(line: int) -> Redaction:
        return Redaction(kind=RedactionKind.JWT, start=0, end=1, original_hash="", placeholder="[REDACTED:jwt]", line=line)

    candidate = Candidate(
        id="c", source=Source.WORKSPACE_CODE, source_ref="a.py:1-10", source_version="v", path="a.py",
        line_start=1, line_end=10, project="p", captured_at=datetime(2026, 1, 1, tzinfo=UTC), text="x",
        evidence_kind=EvidenceKind.CODE, redactions=(on_line(2), on_line(5), on_line(9)),
    )
    trimmed = (TrimRange(start_line=4, end_line=6, start_char=10, end_char=20),)
    assert [r.line for r in visible_redactions(candidate, trimmed)] == [2, 9]
