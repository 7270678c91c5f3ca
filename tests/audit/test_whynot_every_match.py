"""Why-not names every row that matches, and which candidate row each is; a typed value's kind
is detected from its shape ([5/9] item 13, the core half)."""

from __future__ import annotations

import pytest

from scopelens.core.audit.whynot import InputKind, detect_kind, why_not
from scopelens.core.cli import main
from scopelens.core.contracts import MemoryRecord
from scopelens.core.store.store import snapshot_candidate_rows
from scopelens.core.vocab import MemoryStatus, Stage
from tests.audit.test_whynot_answers import ASK_CURSOR, TABLE
from tests.support.factories import T0
from tests.support.workspaces import Lab

UNRELATED = "".join(f"def amount_{i}(cents):\n    return cents * {i + 2}\n\n\n" for i in range(3))
"""Three functions (three chunks) that no sub-query about a table's cursor returns."""


@pytest.mark.parametrize(("value", "kind"), [
    ("src/auth/session.ts:1-33", "source_ref"),
    ("main:src/x.py:1-5", "source_ref"),
    ("memory:mem-auth-fixture-fix", "source_ref"),
    ("s-auth-role-mock-0001#6", "source_ref"),
    ("code#2", "source_ref"),
    ("(other projects)", "source_ref"),
    ("src/auth", "path"),
    ("README.md", "path"),
    ("ops/tenants.env", "path"),
    (".env", "path"),
    ("Makefile", "path"),
    ("createUserMock", "symbol"),
    ("DataTable.move_cursor", "symbol"),
    ("invoice.total", "symbol"),
    ("Never change the production default role", "text"),
    ("cursor = 50%_off", "text"),
    ("move_cursor()", "text"),
])
def test_a_value_is_detected_by_its_shape(value: str, kind: InputKind) -> None:
    assert detect_kind(value) == kind


def test_each_recorded_match_names_its_candidate_row_and_a_citation_id_asks_for_its_item(lab: Lab) -> None:
    lab.index(lab.workspace("a", {"src/table.py": TABLE}), "alpha")
    lab.remember(MemoryRecord(id="mem-guess", project="alpha", content="move_cursor bugs: change the row default",
                              status=MemoryStatus.CANDIDATE, valid_from=T0))
    observation = lab.retriever().retrieve(ASK_CURSOR, project="alpha")
    rows = snapshot_candidate_rows(observation.snapshot)
    answer = why_not(lab.store, observation.snapshot_id, "symbol", "move_cursor")
    assert len(answer.matches) >= 2
    for match in answer.matches:
        assert match.ordinal is not None
        row = rows[match.ordinal]
        assert (row["source_ref"], bool(row["from_probe"])) == (match.source_ref, match.from_probe)
    item = observation.snapshot.selected[-1]
    by_citation = why_not(lab.store, observation.snapshot_id, "path", item.citation_id)
    assert by_citation.citation_id == item.citation_id
    assert by_citation.matches[0].ordinal == len(observation.snapshot.selected) - 1


def test_every_chunk_no_sub_query_returned_is_a_match_best_first(lab: Lab, capsys: pytest.CaptureFixture[str]) -> None:
    lab.index(lab.workspace("a", {"src/table.py": TABLE, "src/money.py": UNRELATED}), "alpha")
    observation = lab.retriever().retrieve(ASK_CURSOR, project="alpha")
    answer = why_not(lab.store, observation.snapshot_id, "path", "src/money.py")
    assert answer.stage == Stage.NOT_RECALLED
    refs = [m.source_ref for m in answer.matches]
    assert len(refs) == len(set(refs)) == 3 and all(r.startswith("src/money.py:") for r in refs)
    assert refs[0] == answer.best_chunk
    assert all(m.stage == Stage.NOT_RECALLED and m.ordinal is None and "no sub-query returned it" in m.reason
               for m in answer.matches)
    code = main(["why-not", observation.snapshot_id, "--path", "src/money.py", "--db", str(lab.tmp / "lab.db")])
    printed = capsys.readouterr().out
    assert code == 0 and all(f"not-recalled  {ref}" in printed for ref in refs)


def test_a_chunk_only_on_another_branch_is_a_match_with_its_branch(lab: Lab) -> None:
    lab.index(lab.workspace("main", {"src/table.py": TABLE}), "alpha", branch="main")
    lab.index(lab.workspace("feature", {"src/table.py": TABLE, "src/money.py": UNRELATED}), "alpha", branch="feature")
    observation = lab.retriever().retrieve(ASK_CURSOR, project="alpha", branch="main")
    answer = why_not(lab.store, observation.snapshot_id, "path", "src/money.py")
    assert answer.stage == Stage.OUT_OF_SCOPE and len(answer.matches) == 3
    assert all(m.stage == Stage.OUT_OF_SCOPE and "only on branch feature" in m.reason for m in answer.matches)
