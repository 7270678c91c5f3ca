"""The store refuses a secret in any event, session or snapshot field instead of rewriting it;
redacted at intake (redact_values), the same event is accepted and keeps everything else."""

from __future__ import annotations

import pytest

from scopelens.core.contracts import ModelRequestPayload
from scopelens.core.errors import SecretRefusedError
from scopelens.core.redact import redact_values
from scopelens.core.store.store import Store
from scopelens.core.store.verify import verify_store
from scopelens.core.vocab import EventType

AWS_KEY = "AKIA" + "Z7QX3VN5LP2KD8RT"
GITHUB_TOKEN = "ghp_" + "9fK2mQ7xLp4Rt8Vw1Zy6Hb3Nc5Jd0SaEuGiO"
PAYLOADS = [
    (EventType.USER_MESSAGE, {"text": f"my key is {AWS_KEY}, fix auth"}),
    (EventType.TOOL_STARTED, {
        "call_id": "c1", "tool": "shell",
        "arguments": {"env": {"GITHUB_TOKEN": GITHUB_TOKEN}, "argv": ["curl", f"-H token:{GITHUB_TOKEN}"], "n": 3},
    }),
    (EventType.TOOL_FINISHED, {"call_id": "c1", "tool": "shell", "exit_code": 0,
                               "output_preview": f"export AWS_ACCESS_KEY_ID={AWS_KEY}"}),
    (EventType.MODEL_RESPONSE, {"request_id": "r1", "text": f"Rotate {AWS_KEY} now."}),
]


def test_secrets_are_refused_then_accepted_once_redacted(store_url):
    with Store.open(store_url, create=True) as store:
        with pytest.raises(SecretRefusedError, match=r"title \(aws-access-key\)") as refused:
            store.create_session(project="p", title=f"debug with {AWS_KEY}")
        assert AWS_KEY not in str(refused.value)
        header = store.create_session(project="p", title=redact_values(f"debug with {AWS_KEY}"))
        store.append_event(header.id, EventType.MODEL_REQUEST, ModelRequestPayload(
            request_id="r1", context_hash="a" * 64, snapshot_ids=("snap-1",)))
        for event_type, payload in PAYLOADS:
            before = len(store.events(header.id))
            with pytest.raises(SecretRefusedError) as refused:
                store.append_event(header.id, event_type, payload)
            assert AWS_KEY not in str(refused.value) and GITHUB_TOKEN not in str(refused.value)
            assert len(store.events(header.id)) == before  # nothing written
            store.append_event(header.id, event_type, redact_values(payload))
        events = store.events(header.id)
        report = verify_store(store)
    stored = "\n".join(event.model_dump_json() for event in events)
    assert AWS_KEY not in stored and GITHUB_TOKEN not in stored
    assert "fix auth" in stored and "Rotate" in stored and '"n":3' in stored  # the rest is kept
    request = next(e for e in events if e.type == EventType.MODEL_REQUEST)
    assert request.payload["context_hash"] == "a" * 64 and request.payload["snapshot_ids"] == ["snap-1"]
    assert header.title.startswith("debug with [REDACTED:aws-access-key]")
    assert not report.problems
