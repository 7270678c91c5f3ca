"""The remedy for a store written before secrets were redacted on intake: rebuild it into a new
chain. No stored byte of the new store holds a planted secret, it verifies, it records what it
was rebuilt from, and what held no secret is copied byte for byte."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from scopelens.core.audit.rebuild import rebuild_store
from scopelens.core.audit.replay import replay_session
from scopelens.core.cli import main
from scopelens.core.contracts import ArtifactRef, MemoryRecord, ToolFinishedPayload
from scopelens.core.errors import IntegrityError, InvalidInputError
from scopelens.core.memory import list_memories, seed_memories
from scopelens.core.store import store as store_module
from scopelens.core.store.checkpoint import parse_checkpoint
from scopelens.core.store.store import Store
from scopelens.core.store.verify import make_checkpoint, verify_store
from scopelens.core.vocab import EventType, MemoryStatus
from tests.store.test_no_stored_secret import SECRETS, stored_bytes
from tests.support.factories import FACTORY_POLICY, T0, make_snapshot
from tests.support.tamper import tampering

AWS, GITHUB, STRIPE = SECRETS


def write_old_store(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store as main wrote it before [2/9]: secrets in titles, messages, artifacts, snapshot
    text and memories (the store's refusal and the memory redaction switched off)."""
    with monkeypatch.context() as patch:
        patch.setattr(store_module, "refuse_secrets", lambda what, value: None)
        with Store.open(url, create=True) as store:
            session = store.create_session(project="bill", title=f"charge fails with {AWS}", session_id="s-old", created_at=T0)
            store.append_event(session.id, EventType.USER_MESSAGE, {"text": f"my token is {GITHUB}"})
            log = f"FAILED test_charge\nkey={STRIPE}\n".encode()
            blob = store.put_blob(log)
            store.append_event(
                session.id, EventType.TOOL_FINISHED,
                ToolFinishedPayload(call_id="c1", tool="pytest", exit_code=1, output_preview=f"key={STRIPE}",
                                    artifacts=(ArtifactRef(blob=blob, name="pytest.log", size=len(log)),)),
            )
            leaky, leaky_block = make_snapshot("snap-leaky", session.id, texts=(f'STRIPE_KEY = "{STRIPE}"\n',))
            store.write_snapshot(leaky, leaky_block, blobs=[FACTORY_POLICY])
            clean, clean_block = make_snapshot("snap-clean", session.id, turn=2)
            store.write_snapshot(clean, clean_block, blobs=[FACTORY_POLICY])
            store.append_event(session.id, EventType.MODEL_RESPONSE, {"text": f"rotate {AWS}", "cited_ids": ["code#1"]})
        patch.setattr("scopelens.core.memory.redact", lambda text: type("R", (), {"text": text, "redactions": ()})())
        with Store.open(url) as store:
            seed_memories(store, [MemoryRecord(id="m-1", project="bill", status=MemoryStatus.VERIFIED,
                                               content=f"deploy token {GITHUB}", valid_from=T0)])


def test_rebuild_leaves_no_secret_and_records_its_origin(tmp_path, store_url, monkeypatch):
    old_url = f"sqlite:///{tmp_path / 'old.db'}"
    write_old_store(old_url, monkeypatch)
    old_bytes = stored_bytes(old_url)
    assert all(secret.encode() in old_bytes for secret in SECRETS)  # the premise: the old store leaks
    with Store.open(old_url, read_only=True) as old:
        old_checkpoint = make_checkpoint(old, verify_store(old))
        old_clean = old.get_snapshot("snap-clean")
        with Store.open(store_url, create=True) as new:
            report = rebuild_store(old, new)

    new_bytes = stored_bytes(store_url)
    for secret in SECRETS:
        assert secret.encode() not in new_bytes
    assert report.rebuilt_from == old_checkpoint.line()
    assert report.sessions == 1 and report.events == 6 and report.snapshots == 2 and report.snapshots_changed == 1
    with Store.open(store_url, read_only=True) as new:
        assert verify_store(new).clean
        first = new.events(report.record_session)
        recorded = parse_checkpoint(first[1].payload["text"].splitlines()[0])
        assert (recorded.origin, recorded.size, recorded.head) == (old_checkpoint.origin, 6, old_checkpoint.head)
        # What held no secret is the same document, byte for byte.
        assert new.get_snapshot("snap-clean").body == old_clean.body
        leaky = new.get_snapshot("snap-leaky").snapshot
        assert "[REDACTED:" in leaky.selected[0].visible_text
        replayed = replay_session(new, "s-old")
        assert replayed.ok and len(replayed.turns) >= 2
        events = new.events("s-old")
        artifact = next(e for e in events if e.type == EventType.TOOL_FINISHED).payload["artifacts"][0]
        assert b"[REDACTED:" in new.get_blob(artifact["blob"]) and artifact["size"] == len(new.get_blob(artifact["blob"]))
        assert "[REDACTED:" in list_memories(new)[0].content and list_memories(new)[0].status == MemoryStatus.VERIFIED


def test_rebuild_refuses_a_damaged_source_and_a_used_target(tmp_path, monkeypatch):
    old_url = f"sqlite:///{tmp_path / 'old.db'}"
    write_old_store(old_url, monkeypatch)
    used = f"sqlite:///{tmp_path / 'used.db'}"
    with Store.open(used, create=True) as store:
        store.create_session(project="x", session_id="s-x")
    with Store.open(old_url, read_only=True) as old, Store.open(used) as new, pytest.raises(InvalidInputError, match="not empty"):
        rebuild_store(old, new)


    with tampering(old_url) as conn:
        conn.execute(text("UPDATE session_heads SET last_turn = 42"))
    fresh = f"sqlite:///{tmp_path / 'n.db'}"
    with Store.open(old_url, read_only=True) as old, Store.open(fresh, create=True) as new, pytest.raises(
        IntegrityError, match="does not verify"
    ):
        rebuild_store(old, new)


def test_cli_rebuild(tmp_path, monkeypatch, capsys):
    old_url = f"sqlite:///{tmp_path / 'old.db'}"
    write_old_store(old_url, monkeypatch)
    new_db = str(tmp_path / "new.db")
    assert main(["rebuild", "--from", old_url, "--db", new_db, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["snapshots_changed"] == 1 and document["rebuilt_from"].startswith("scopelens-checkpoint/1 ")
    assert main(["verify", "--db", new_db]) == 0
    assert main(["rebuild", "--from", old_url, "--db", new_db]) == 2
    assert "not empty" in capsys.readouterr().err
