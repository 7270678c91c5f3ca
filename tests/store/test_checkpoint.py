"""Checkpoints anchor the head: a consistent rewrite that `verify` alone cannot see is caught
against a checkpoint kept elsewhere, on both backends; signed lines are checked by key."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from scopelens.core.cli import main
from scopelens.core.errors import InvalidInputError
from scopelens.core.store.checkpoint import (
    Checkpoint,
    load_private_key,
    load_public_key,
    new_signing_key,
    parse_checkpoint,
    sign_checkpoint,
)
from scopelens.core.store.store import Store
from scopelens.core.store.verify import make_checkpoint, verify_store
from scopelens.core.vocab import EventType
from tests.support.tamper import append_forged, rewrite_consistently, tampering


@pytest.fixture
def populated(store_url: str) -> str:
    with Store.open(store_url, create=True) as store:
        a = store.create_session(project="alpha", session_id="s-a")
        b = store.create_session(project="beta", session_id="s-b")
        for n in range(3):
            store.append_event(a.id, EventType.USER_MESSAGE, {"text": f"a{n}"})
            store.append_event(b.id, EventType.USER_MESSAGE, {"text": f"b{n}"})
    return store_url


def checkpoint_of(url: str) -> Checkpoint:
    with Store.open(url, read_only=True) as store:
        return make_checkpoint(store, verify_store(store))


def verified(url: str, checkpoint: Checkpoint | None = None, key=None):
    with Store.open(url, read_only=True) as store:
        return verify_store(store, checkpoint=checkpoint, checkpoint_key=key)


def kinds(report) -> set[tuple[str, str]]:
    return {(p.kind, p.record) for p in report.problems}


def test_a_checkpoint_of_a_clean_store_holds(populated):
    checkpoint = checkpoint_of(populated)
    assert checkpoint.size == 8
    assert checkpoint.origin is not None and checkpoint.origin.startswith("scopelens/")
    report = verified(populated, parse_checkpoint(checkpoint.line()))
    assert report.clean and report.checkpoint is not None and report.checkpoint.holds
    assert report.checkpoint.appended_since == 0


def test_a_consistent_rewrite_verifies_clean_alone_but_not_against_a_checkpoint(populated):
    checkpoint = checkpoint_of(populated)
    rewrite_consistently(populated, "s-a", 2, {"text": "the refund rule is 30 days"})
    assert verified(populated).clean  # the gap a checkpoint closes
    report = verified(populated, checkpoint)
    assert ("rewritten", "store head at 8") in kinds(report)
    assert report.checkpoint is not None and not report.checkpoint.holds
    # The short form pins the same thing.
    short = parse_checkpoint(f"{checkpoint.size}:{checkpoint.head}")
    assert ("rewritten", "store head at 8") in kinds(verified(populated, short))


def test_a_forged_append_is_shown_as_appended_since_the_checkpoint(populated):
    checkpoint = checkpoint_of(populated)
    append_forged(populated, "s-a", EventType.MODEL_RESPONSE.value, {"text": "as cited in [code#1]", "cited_ids": ["code#1"]})
    assert verified(populated).clean
    report = verified(populated, checkpoint)
    assert report.clean  # the first 8 events are intact: a checkpoint pins the past, not the future
    assert report.checkpoint is not None
    assert report.checkpoint.appended_since == 1 and report.checkpoint.appended_sessions == ("s-a",)


def test_a_store_shorter_than_its_checkpoint_was_rolled_back(populated):
    checkpoint = checkpoint_of(populated)
    later = Checkpoint(size=checkpoint.size + 5, head=checkpoint.head, origin=checkpoint.origin)
    assert ("rolled-back", "store head at 13") in kinds(verified(populated, later))


def test_a_checkpoint_of_another_store_is_refused(populated, tmp_path):
    other = f"sqlite:///{tmp_path / 'other.db'}"
    with Store.open(other, create=True) as store:
        store.create_session(project="gamma", session_id="s-g")
    foreign = checkpoint_of(other)
    report = verified(populated, Checkpoint(size=foreign.size, head=foreign.head, origin=foreign.origin))
    assert ("rewritten", "store origin") in kinds(report)


def test_signed_checkpoints_are_checked_by_key(populated, tmp_path):
    new_signing_key(tmp_path / "ops.key")
    new_signing_key(tmp_path / "other.key")
    signed = sign_checkpoint(checkpoint_of(populated), load_private_key(tmp_path / "ops.key"))
    line = signed.line()
    assert " key=" in line and " sig=" in line
    right = load_public_key(tmp_path / "ops.key.pub")
    report = verified(populated, parse_checkpoint(line), right)
    assert report.clean and report.checkpoint is not None and report.checkpoint.signature_checked
    wrong = load_public_key(tmp_path / "other.key.pub")
    assert ("bad-signature", "checkpoint") in kinds(verified(populated, parse_checkpoint(line), wrong))
    # A signed line whose numbers were edited no longer matches its signature.
    edited = line.replace(f"size={signed.size}", "size=3")
    assert ("bad-signature", "checkpoint") in kinds(verified(populated, parse_checkpoint(edited), right))
    unsigned = parse_checkpoint(signed.message())
    assert ("bad-signature", "checkpoint") in kinds(verified(populated, unsigned, right))


def test_a_key_is_never_overwritten(tmp_path):
    new_signing_key(tmp_path / "k")
    assert oct((tmp_path / "k").stat().st_mode & 0o777) == "0o600"
    with pytest.raises(InvalidInputError, match="never overwritten"):
        new_signing_key(tmp_path / "k")


@pytest.mark.parametrize("text", ["", "12", "12:abc", "scopelens-checkpoint/1 size=1 head=00", "8:" + "G" * 64])
def test_malformed_checkpoints_are_one_line_errors(text):
    with pytest.raises(InvalidInputError, match="SIZE:HASH"):
        parse_checkpoint(text)


def test_cli_checkpoint_then_verify(populated, capsys, tmp_path):
    assert main(["checkpoint", "--new-key", str(tmp_path / "k"), "--db", populated]) == 0
    capsys.readouterr()
    assert main(["checkpoint", "--db", populated, "--key", str(tmp_path / "k")]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("scopelens-checkpoint/1 ") and line.count("\n") == 0
    code = main(["verify", "--db", populated, "--checkpoint", line, "--public-key", str(tmp_path / "k.pub"), "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == 0 and document["checkpoint"]["holds"] and document["checkpoint"]["signature_checked"]
    rewrite_consistently(populated, "s-b", 1, {"text": "forged"})
    code = main(["verify", "--db", populated, "--checkpoint", line])
    captured = capsys.readouterr()
    assert code == 3 and "rewritten: store head at 8" in captured.out
    assert main(["verify", "--db", populated, "--checkpoint", "nonsense"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
    # A store that does not verify gets no checkpoint (a consistent rewrite does verify alone).
    assert main(["checkpoint", "--db", populated]) == 0
    capsys.readouterr()
    with tampering(populated) as conn:
        conn.execute(text("UPDATE session_heads SET last_turn = 99 WHERE session_id = 's-b'"))
    assert main(["checkpoint", "--db", populated]) == 3
    assert "no checkpoint" in capsys.readouterr().err
