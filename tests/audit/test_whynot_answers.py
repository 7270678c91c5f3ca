"""Why-not answers that hold ([3/9] items 1, 2, 3, 11): by symbol, by any shown source_ref,
per chunk of a file, and preferring the row the pipeline recorded over the probe's."""

from __future__ import annotations

import pytest

from scopelens.core.audit.whynot import why_not
from scopelens.core.contracts import MemoryRecord, RetrievalBudget, RetrievalIntent, RetrievalScope
from scopelens.core.pipeline.recall import DOC_FILES_KEPT, FILES_KEPT
from scopelens.core.vocab import MemoryStatus, Purpose, Stage
from tests.support.factories import T0
from tests.support.workspaces import Lab

TABLE = (
    "class DataTable:\n    '''A table with a cursor.'''\n\n    def __init__(self):\n        self.cursor = 0\n\n"
    + "".join(f"    def helper_{i}(self):\n        return {i}\n\n" for i in range(30))
    + "    def move_cursor(self, row):\n        '''Move the cursor to row.'''\n        self.cursor = row\n"
    "        return self.cursor\n"
)
MENTION = "from table import DataTable\n\n\ndef make():\n    # DataTable move_cursor cursor row\n    return DataTable()\n"
ASK_CURSOR = RetrievalIntent(purpose=Purpose.ANSWER_QUESTION, question="how does DataTable move_cursor move the cursor to a row")


@pytest.fixture
def lab(tmp_path, store_url):
    instance = Lab(tmp_path, store_url)
    yield instance
    instance.close()


def test_why_not_by_symbol_finds_the_selected_symbol_not_a_mention(lab):
    lab.index(lab.workspace("a", {"src/table.py": TABLE, "src/uses.py": MENTION}), "alpha")
    lab.index(lab.workspace("b", {"src/table.py": TABLE}), "beta")  # another project's copy
    observation = lab.retriever().retrieve(ASK_CURSOR, project="alpha")
    selected = observation.snapshot.selected
    holders = [i for i in selected if i.symbol and "DataTable.move_cursor".startswith(i.symbol)]
    assert holders, [i.symbol for i in selected]  # items keep their symbol
    answer = why_not(lab.store, observation.snapshot_id, "symbol", "DataTable.move_cursor")
    assert answer.stage == Stage.SELECTED
    assert answer.citation_id in {i.citation_id for i in holders}  # not src/uses.py, which only mentions it
    assert "beta" not in answer.summary


def test_why_not_accepts_every_shown_source_ref(lab):
    lab.index(lab.workspace("a", {"src/table.py": TABLE}), "alpha")
    lab.remember(MemoryRecord(id="mem-guess", project="alpha", content="move_cursor bugs: change the row default",
                              status=MemoryStatus.CANDIDATE, valid_from=T0))
    observation = lab.retriever().retrieve(ASK_CURSOR, project="alpha")
    snapshot = observation.snapshot
    memory_row = next(r for r in snapshot.rejected if r.source_ref == "memory:mem-guess")
    answer = why_not(lab.store, observation.snapshot_id, "path", "memory:mem-guess")
    assert answer.stage == memory_row.stage == Stage.MEMORY_STATUS
    for row in snapshot.rejected:
        if not row.candidate_id.startswith("other-projects:"):
            assert why_not(lab.store, observation.snapshot_id, "path", row.source_ref).matches[0].stage == row.stage
    for item in snapshot.selected:
        answer = why_not(lab.store, observation.snapshot_id, "path", item.source_ref)
        assert answer.stage in (Stage.SELECTED, Stage.CITED) and answer.citation_id == item.citation_id


def test_why_not_answers_each_chunk_of_a_file_best_first(lab):
    lab.index(lab.workspace("a", {"src/table.py": TABLE, "src/uses.py": MENTION}), "alpha")
    scope = RetrievalScope(project="alpha", budget=RetrievalBudget(max_items=1))
    observation = lab.retriever().retrieve(ASK_CURSOR, scope)
    for path in ("src/table.py", "src/uses.py"):
        recorded = [r for r in observation.snapshot.rejected if r.path == path and not r.from_probe]
        shown = [i for i in observation.snapshot.selected if i.path == path]
        answer = why_not(lab.store, observation.snapshot_id, "path", path)
        assert len(answer.matches) == len(recorded) + len(shown) >= 2  # one answer per chunk
        order = [m.stage for m in answer.matches]
        best_first = [Stage.CITED, Stage.SELECTED, Stage.TRIMMED_AWAY, Stage.OVER_BUDGET, Stage.DUPLICATE,
                      Stage.BELOW_CUTOFF]
        assert order == sorted(order, key=best_first.index)
        assert answer.stage == order[0] and "also:" in answer.summary


def test_why_not_prefers_the_pipeline_row_over_the_probe_and_matches_literally(lab):
    lab.index(lab.workspace("main", {"src/table.py": TABLE}), "alpha", branch="main")
    lab.index(lab.workspace("feature", {"src/table.py": TABLE.replace("cursor = 0", "cursor = 50%_off")}), "alpha",
              branch="feature")
    observation = lab.retriever().retrieve(ASK_CURSOR, project="alpha", branch="main")
    answer = why_not(lab.store, observation.snapshot_id, "text", "move the CURSOR to row")
    assert answer.stage in (Stage.SELECTED, Stage.CITED)  # case-insensitive on both backends
    # `%` and `_` are literal, not LIKE wildcards: "50x_off" matches nothing anywhere.
    assert why_not(lab.store, observation.snapshot_id, "text", "50x_off").stage == Stage.NOT_RECALLED
    other_branch = why_not(lab.store, observation.snapshot_id, "text", "cursor = 50%_off")
    assert other_branch.stage == Stage.OUT_OF_SCOPE and "branch feature" in other_branch.summary


def test_a_never_recalled_chunk_gets_its_would_be_rank(lab):
    # More matching files than a recall keeps (recall.FILES_KEPT), so the doc is never recalled.
    filler = {f"src/m{i}.py": f"def f{i}():\n    # cursor row move {i}\n    return {i}\n" for i in range(FILES_KEPT + 20)}
    lab.index(lab.workspace("a", {**filler, "docs/notes.md": "# Notes\n\nThe cursor rarely moves.\n"}), "alpha")
    observation = lab.retriever().retrieve(ASK_CURSOR, project="alpha")
    answer = why_not(lab.store, observation.snapshot_id, "text", "rarely moves")
    assert answer.stage == Stage.NOT_RECALLED and answer.best_chunk == "docs/notes.md:1-3"
    ranked = [q for q in answer.sub_queries if q.would_be_rank is not None]
    # Within the sub-query's top_k chunks, but its file below the files a recall keeps.
    assert ranked and all(q.would_be_file_rank is not None and q.would_be_file_rank > FILES_KEPT for q in ranked)
    run = ranked[0]
    assert (f"rank {run.would_be_rank} of top {run.top_k}, but its file ranks {run.would_be_file_rank} "
            f"and a recall keeps the best {FILES_KEPT} files") in answer.summary


def test_a_doc_past_the_docs_a_recall_keeps_says_so(lab):
    docs = {f"docs/d{i}.md": f"# D{i}\n\ncursor row move datatable {i}\n" for i in range(DOC_FILES_KEPT + 5)}
    lab.index(lab.workspace("a", {**docs, "docs/notes.md": "# Notes\n\nThe cursor rarely moves.\n"}), "alpha")
    observation = lab.retriever().retrieve(ASK_CURSOR, project="alpha")
    answer = why_not(lab.store, observation.snapshot_id, "text", "rarely moves")
    assert answer.stage == Stage.NOT_RECALLED
    run = next(q for q in answer.sub_queries if q.would_be_rank is not None)
    assert run.docs_cut and run.files_kept == DOC_FILES_KEPT and DOC_FILES_KEPT < run.would_be_file_rank <= FILES_KEPT
    assert f"and a recall keeps at most {DOC_FILES_KEPT} docs, which ranked above it" in answer.summary


def test_a_path_outside_the_scope_prefixes_is_out_of_scope_not_missing_words(lab):
    """Recall searches inside the path prefixes only: a file outside them was never a
    candidate, whatever its words, and why-not says so instead of listing query terms it lacks.
    Many other files match too, so the probe's few hits do not reach it either."""
    files = {f"docs/admin/page{n}.md": f"# Page {n}\n\nThe cursor moves a row on page {n}.\n" for n in range(8)}
    files["src/table.py"] = TABLE
    lab.index(lab.workspace("a", files), "alpha")
    scope = RetrievalScope(project="alpha", path_prefixes=("src",))
    observation = lab.retriever().retrieve(ASK_CURSOR, scope)
    answer = why_not(lab.store, observation.snapshot_id, "path", "docs/admin/page7.md")
    assert answer.stage == Stage.OUT_OF_SCOPE, answer.summary
    assert "outside the scope's prefixes (src)" in answer.summary and not answer.missing_terms
    assert [m.stage for m in answer.matches] == [Stage.OUT_OF_SCOPE]
