"""The store redacts secrets in free-text event fields on every append, whoever appends."""

from __future__ import annotations

from scopelens.core.contracts import REDACTED_FIELDS, ModelRequestPayload
from scopelens.core.store.store import Store
from scopelens.core.store.verify import verify_store
from scopelens.core.vocab import EventType

AWS_KEY = "AKIA" + "Z7QX3VN5LP2KD8RT"
GITHUB_TOKEN = "ghp_" + "9fK2mQ7xLp4Rt8Vw1Zy6Hb3Nc5Jd0SaEuGiO"


def test_free_text_fields_are_redacted_when_appended_through_the_api(store_url):
    with Store.open(store_url, create=True) as store:
        header = store.create_session(project="p", title=f"debug with {AWS_KEY}")
        store.append_event(header.id, EventType.USER_MESSAGE, {"text": f"my key is {AWS_KEY}, fix auth"})
        store.append_event(header.id, EventType.MODEL_REQUEST, ModelRequestPayload(
            request_id="r1", context_hash="a" * 64, snapshot_ids=("snap-1",)))
        store.append_event(header.id, EventType.TOOL_STARTED, {
            "call_id": "c1", "tool": "shell",
            "arguments": {"env": {"GITHUB_TOKEN": GITHUB_TOKEN}, "argv": ["curl", f"-H token:{GITHUB_TOKEN}"], "n": 3},
        })
        store.append_event(header.id, EventType.TOOL_FINISHED, {
            "call_id": "c1", "tool": "shell", "exit_code": 0, "output_preview": f"export AWS_ACCESS_KEY_ID={AWS_KEY}"})
        store.append_event(header.id, EventType.MODEL_RESPONSE, {"request_id": "r1", "text": f"Rotate {AWS_KEY} now."})
        events = store.events(header.id)
        stored_header = store.get_session(header.id)
        report = verify_store(store)
    stored = "\n".join(event.model_dump_json() for event in events)
    assert AWS_KEY not in stored and GITHUB_TOKEN not in stored
    assert {event.type for event in events} >= set(REDACTED_FIELDS)
    assert "fix auth" in stored and "Rotate" in stored and '"n":3' in stored  # the rest is kept
    request = next(e for e in events if e.type == EventType.MODEL_REQUEST)
    assert request.payload["context_hash"] == "a" * 64 and request.payload["snapshot_ids"] == ["snap-1"]
    assert stored_header.title == header.title
    assert header.title.startswith("debug with ") and AWS_KEY not in header.title
    assert not report.problems
