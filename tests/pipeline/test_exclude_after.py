"""`exclude_after` caps `as_of` ([3/9] item 13): a file changed after the boundary keeps the
version it had then, instead of vanishing as superseded."""

from __future__ import annotations

from datetime import timedelta

from scopelens.core.contracts import RetrievalIntent, RetrievalScope, TimeBoundary
from scopelens.core.vocab import Purpose, Stage
from tests.support.workspaces import T0, write

ASK = RetrievalIntent(purpose=Purpose.ANSWER_QUESTION, question="how are refunds rounded")


def test_a_file_changed_after_exclude_after_keeps_its_version_of_then(lab):
    then = "def refund(amount):\n    # refunds rounded down to cents\n    return amount\n"
    root = lab.workspace("ws", {"src/refunds.py": then})
    lab.index(root, "shop")
    lab.clock.advance(timedelta(days=2))
    write(root, {"src/refunds.py": "def refund(amount):\n    # refunds rounded half-even now\n    return amount\n"})
    lab.index(root, "shop")
    scope = RetrievalScope(project="shop", time_boundary=TimeBoundary(exclude_after=T0 + timedelta(days=1)))
    observation = lab.retriever().retrieve(ASK, scope)
    texts = [i.visible_text for i in observation.snapshot.selected]
    assert any("rounded down to cents" in t for t in texts), texts
    assert not any("half-even" in t for t in texts)
    newer = [r for r in observation.snapshot.rejected if r.path == "src/refunds.py"]
    assert all(r.stage == Stage.STALE for r in newer)
