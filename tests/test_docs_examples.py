"""The harness example in docs/api.md runs as written (paths swapped for temp ones)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.workspaces import AUTH_FILES, write

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_the_harness_example_runs_and_records_a_snapshot(tmp_path, capsys):
    workspace = tmp_path / "web-app"
    write(workspace, AUTH_FILES)
    first, second = python_blocks()[:2]
    code = first.replace('Path("~/src/web-app").expanduser()', f"Path({str(workspace)!r})")
    code = code.replace('"audit.db"', repr(str(tmp_path / "audit.db")))
    assert len(first.strip().splitlines()) <= 22, "the example is meant to stay about 20 lines"
    namespace: dict[str, object] = {}
    exec(compile(code, "docs/api.md", "exec"), namespace)
    observation = namespace["observation"]
    assert "Retrieved evidence" in namespace["prompt_part"]
    assert observation.snapshot_id in capsys.readouterr().out
    store_code = second.replace("reply_text", "'fixed in the fixture'")
    from scopelens.core.store.store import Store

    with Store.open(str(tmp_path / "audit.db")) as store:
        exec(compile(store_code, "docs/api.md", "exec"), {"store": store, "observation": observation})
        types = [e.type.value for e in store.events(observation.session_id)]
    assert types[-2:] == ["model.request", "model.response"]


def test_api_md_names_exactly_the_keys_retrieve_json_prints(tmp_path):
    from scopelens.core.contracts import RetrievalIntent
    from scopelens.core.vocab import Purpose
    from tests.support.workspaces import Lab

    text = DOC.read_text(encoding="utf-8").split("<!-- retrieve-json-keys -->", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`([a-z_]+)`", text))
    lab = Lab(tmp_path)
    try:
        lab.index(lab.workspace("ws", AUTH_FILES), "alpha")
        intent = RetrievalIntent(purpose=Purpose.ANSWER_QUESTION, question="expected role admin received undefined")
        printed = set(lab.retriever().retrieve(intent, project="alpha").to_json())
    finally:
        lab.close()
    assert named == printed
