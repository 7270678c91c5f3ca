"""The intent a counterfactual retrieval runs with, from what the agent had seen by a call."""

from __future__ import annotations

import json

from scopelens.core.audit.observed import read_observed
from scopelens.core.importers.counterfactual import edited_files, intent_at
from scopelens.core.importers.instance import read_instance
from scopelens.core.importers.store_import import import_paths
from scopelens.core.store.store import Store
from scopelens.core.vocab import Purpose
from tests.support.pydicom_checkout import GOLD, INSTANCE, PYDICOM


def test_the_intent_grows_with_what_the_agent_saw(tmp_path):
    with Store.open(str(tmp_path / "s.db"), create=True) as store:
        [outcome] = import_paths(store, [PYDICOM], project="pydicom").outcomes
        session = read_observed(store, outcome.session_id)
    instance = read_instance(INSTANCE)
    first = intent_at(session, 1, instance)
    assert first.question.startswith("We're currently solving the following issue")
    assert first.anchors.failing_test == instance.fail_to_pass[0] and first.purpose == Purpose.FIX_TEST
    assert first.anchors.traceback is None and GOLD not in first.anchors.current_files
    after_the_run = intent_at(session, 4, None)  # the script's traceback is in context
    assert after_the_run.anchors.traceback is not None and "AttributeError" in after_the_run.anchors.traceback
    assert after_the_run.anchors.error_text is not None and after_the_run.anchors.error_text.startswith("AttributeError")
    assert GOLD in after_the_run.anchors.current_files  # named by a frame
    assert "reproduce_bug.py" in edited_files(session) and GOLD in edited_files(session)


def test_a_failing_test_the_agent_saw_is_an_anchor_without_an_instance(tmp_path):
    pytest_output = ("============ short test summary info ============\n"
                     "FAILED tests/billing/test_totals.py::test_rounding - AssertionError: 10.01 != 10.0\n"
                     "1 failed, 12 passed in 0.31s")
    lines = [
        {"timestamp": "2026-03-01T10:00:00Z", "type": "session_meta", "payload": {"id": "t", "cwd": "/home/dev/app"}},
        {"timestamp": "2026-03-01T10:00:00Z", "type": "response_item",
         "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Totals are off."}]}},
        {"timestamp": "2026-03-01T10:00:01Z", "type": "response_item",
         "payload": {"type": "function_call", "name": "shell", "call_id": "c1",
                     "arguments": json.dumps({"command": ["bash", "-lc", "pytest -q"]})}},
        {"timestamp": "2026-03-01T10:00:02Z", "type": "response_item",
         "payload": {"type": "function_call_output", "call_id": "c1", "output": pytest_output}},
        {"timestamp": "2026-03-01T10:00:03Z", "type": "response_item",
         "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]}},
    ]
    source = tmp_path / "rollout-t.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    with Store.open(str(tmp_path / "s.db"), create=True) as store:
        [outcome] = import_paths(store, [source], project="app").outcomes
        session = read_observed(store, outcome.session_id)
    first, last = session.snapshots[0].turn, session.snapshots[-1].turn
    assert intent_at(session, first, None).anchors.failing_test is None  # before the run
    intent = intent_at(session, last, None)
    assert intent.anchors.failing_test == "tests/billing/test_totals.py::test_rounding"
    assert intent.purpose == Purpose.FIX_TEST
