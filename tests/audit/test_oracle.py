"""The audit oracle ([3/9]): over generated workspaces and intents, on both backends, every
recorded snapshot's answers agree with the snapshot itself (docs/audit.md).

- why-not by each candidate row's source_ref, path and symbol names that row's recorded stage
  (selected items say selected, with their citation id). A path or symbol can match several
  rows (the chunks of a file, the windows of a long function): the answer holds each of them
  with its stage, best first (for a symbol, the rows that are the symbol before the others);
- the funnel adds up;
- the block re-rendered from the snapshot document alone equals the stored block blob;
- drift right after the snapshot, with nothing changed, reports every item unchanged and no
  index change, and creates no index version;
- after an edit to a line outside an item, that item is not content-changed; after an edit
  inside it, it is (or it dropped out), and every content-changed item shows a diff.

Examples (the `ci` profile, derandomized), per backend: 40 for the first property, each a
workspace indexed once and asked 2 or 3 intents (about 95 snapshots, each with all of the
checks above but the edits), and 60 for the edits: 200 examples on the two backends together,
in under a minute of CI on two idle cores (measured: 53 s for the file). Most of an example's time
is the pipeline run twice per snapshot (retrieval, then drift); the why-not questions about
one snapshot share one ``WhyNot``, so asking every row by source_ref, path and symbol costs little.
``python -m bench.oracle --examples N`` runs the same properties with N examples each (it sets
``SCOPELENS_ORACLE_EXAMPLES``).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sqlmodel import func, select

from scopelens.core.audit.drift import compute_drift
from scopelens.core.audit.whynot import WhyNot, WhyNotMatch
from scopelens.core.contracts import AuditSnapshot, RejectedItem, RetrievalBudget, RetrievalIntent, RetrievalScope, SnapshotItem
from scopelens.core.index.chunks import fetch_chunks
from scopelens.core.pipeline.probe import OTHER_PROJECTS_PREFIX
from scopelens.core.pipeline.project import render_block
from scopelens.core.store.tables import IndexRunRow
from scopelens.core.vocab import DriftClass, Purpose, Stage
from tests.pipeline.test_funnel_adds_up import WORDS
from tests.support.workspaces import Lab

EXAMPLES_ENV = "SCOPELENS_ORACLE_EXAMPLES"
SHOWN = (Stage.SELECTED, Stage.CITED)
STAGE_ORDER = tuple(reversed(Stage))
"""Best first: the vocabulary's pipeline order, reversed (how far a row got towards the model)."""
_counter = itertools.count()


def examples(ci: int) -> int:
    """``ci`` examples, or what the bench command asks for."""
    return int(os.environ.get(EXAMPLES_ENV, ci))


ORACLE = settings(
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)

# --------------------------------------------------------------------------- worlds

texts = st.lists(st.sampled_from(WORDS), min_size=2, max_size=30).map(" ".join)


def _python(n: int, shape: str, text: str, repeat: int, shared: bool) -> str:
    if shape == "functions":
        body = "\n".join(f"def f{n}_{i}():\n    # {text}\n    return {i}\n" for i in range(repeat))
    elif shape == "class":  # split by method once it outgrows a chunk
        body = f"class C{n}:\n    '''{text}'''\n\n" + "\n".join(
            f"    def m{j}(self):\n" + "".join(f"        # {text} {j} {k}\n" for k in range(repeat)) + f"        return {j}\n"
            for j in range(4)
        )
    else:  # one function too long for a chunk: windows that share its symbol
        body = f"def big{n}():\n" + "".join(f"    # {text} {k}\n" for k in range(30 + 4 * repeat)) + "    return 0\n"
    if shared:  # the same symbol in several files
        body += f"\n\ndef helper():\n    # {text} helper\n    return {n}\n"
    return body


@st.composite
def workspaces(draw) -> dict[str, str]:
    specs = draw(st.lists(
        st.tuples(st.sampled_from(["functions", "class", "big", "md"]), texts, st.integers(1, 25), st.booleans()),
        min_size=1, max_size=6,
    ))
    files = {}
    for n, (shape, text, repeat, shared) in enumerate(specs):
        if shape == "md":
            files[f"src/m{n}.md"] = f"# Note {n}\n\n" + "\n\n".join(f"{text} {i}" for i in range(repeat))
        else:
            files[f"src/m{n}.py"] = _python(n, shape, text, repeat, shared)
    return files


intents = st.fixed_dictionaries({
    "purpose": st.sampled_from(list(Purpose)), "query": texts,
    "max_items": st.integers(1, 8), "max_tokens": st.integers(60, 900),
})


@st.composite
def worlds(draw) -> dict:
    files = draw(workspaces())
    asked = draw(st.lists(intents, min_size=2, max_size=3))
    # Another branch that matches the first question, so the scope probe has something to record.
    other = {f"src/o{n}.py": f"def o{n}():\n    # {t} {asked[0]['query']}\n    return {n}\n"
             for n, t in enumerate(draw(st.lists(texts, max_size=3)))}
    if other and draw(st.booleans()):  # one path on both branches, in two versions
        path = sorted(files)[0]
        other[path] = files[path] + "\n# feature\n"
    return {"files": files, "other_branch": other, "intents": asked, "edited_before": draw(st.booleans())}


# --------------------------------------------------------------------------- the lab


@pytest.fixture
def shared_lab(tmp_path, store_url):
    """One store per backend for all examples; each example indexes its own project."""
    lab = Lab(tmp_path, store_url)
    yield lab
    lab.close()


def _index_world(lab: Lab, world: dict, project: str) -> Path:
    root = lab.workspace(project, world["files"])
    lab.index(root, project, branch="main")
    if world["edited_before"]:  # an older version of a file in the index: the probe may call it stale
        first = root / sorted(world["files"])[0]
        first.write_text(first.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
        lab.index(root, project, branch="main")
    if world["other_branch"]:
        lab.index(lab.workspace(f"{project}-feature", world["other_branch"]), project, branch="feature")
    return root


def _retrieve(lab: Lab, project: str, intent: dict, branch: str | None = "main") -> AuditSnapshot:
    scope = RetrievalScope(
        project=project, branch=branch,
        budget=RetrievalBudget(max_items=intent["max_items"], max_tokens=intent["max_tokens"]),
    )
    return lab.retriever().retrieve(RetrievalIntent(purpose=intent["purpose"], question=intent["query"]), scope).snapshot


def _index_versions(lab: Lab) -> int:
    with lab.store.read() as conn:
        return int(conn.execute(select(func.count()).select_from(IndexRunRow)).scalar_one())


# --------------------------------------------------------------------------- the properties

Row = SnapshotItem | RejectedItem


def _rows(snapshot: AuditSnapshot) -> list[Row]:
    return [*snapshot.selected, *(r for r in snapshot.rejected if not r.candidate_id.startswith(OTHER_PROJECTS_PREFIX))]


def _key(row: Row) -> tuple[str, bool]:
    return row.source_ref, isinstance(row, RejectedItem) and row.from_probe


def _answers(row: Row, matches: tuple[WhyNotMatch, ...]) -> bool:
    """The answer holds the row with its recorded stage (a selected item: selected or cited)."""
    stages = SHOWN if isinstance(row, SnapshotItem) else (row.stage,)
    return any((m.source_ref, m.from_probe) == _key(row) and m.stage in stages for m in matches)


def _best_first(matches: tuple[WhyNotMatch, ...] | list[WhyNotMatch]) -> bool:
    order = [(m.from_probe, STAGE_ORDER.index(m.stage)) for m in matches]
    return order == sorted(order)


def _symbols(lab: Lab, rows: list[Row]) -> dict[tuple[str, bool], str]:
    """Each row's symbol: recorded, or its chunk's (probe rows record none)."""
    chunks = fetch_chunks(lab.store, [int(r.candidate_id[6:]) for r in rows if r.candidate_id.startswith("chunk:")])
    out = {}
    for row in rows:
        chunk = chunks.get(int(row.candidate_id[6:])) if row.candidate_id.startswith("chunk:") else None
        symbol = row.symbol or (chunk.symbol if chunk and chunk.source_ref == row.source_ref else None)
        if symbol:
            out[_key(row)] = symbol
    return out


def check_why_not(lab: Lab, snapshot: AuditSnapshot) -> None:
    ask = WhyNot(lab.store, snapshot.id)
    rows = _rows(snapshot)
    for row in rows:  # by source_ref
        answer = ask.ask("path", row.source_ref)
        assert _answers(row, answer.matches) and _best_first(answer.matches), (row.source_ref, answer.summary)
        if isinstance(row, SnapshotItem):
            assert answer.stage in SHOWN and answer.citation_id == row.citation_id, answer.summary
    for path in sorted({r.path for r in rows if r.path}):  # by path: one answer holds every chunk of it
        answer = ask.ask("path", path)
        assert _best_first(answer.matches), (path, answer.matches)
        for row in rows:
            if row.path == path:
                assert _answers(row, answer.matches), (path, row.source_ref, row, answer.matches)
    symbols = _symbols(lab, rows)
    for symbol in sorted(set(symbols.values())):  # by symbol: the rows that are it come first, best first
        answer = ask.ask("symbol", symbol)
        for row in rows:
            if symbols.get(_key(row)) == symbol:
                assert _answers(row, answer.matches), (symbol, row.source_ref, answer.matches)
        itself = [(m.source_ref, m.from_probe) in symbols and symbols[(m.source_ref, m.from_probe)] == symbol
                  for m in answer.matches]
        assert itself == sorted(itself, reverse=True), (symbol, answer.matches)
        assert _best_first([m for m, first in zip(answer.matches, itself, strict=True) if first]), (symbol, answer.matches)


def check_funnel_and_block(lab: Lab, snapshot: AuditSnapshot) -> None:
    funnel = snapshot.funnel()
    assert funnel.recalled - sum(n for _, n in funnel.dropped) == funnel.selected == len(snapshot.selected)
    rendered = render_block(
        snapshot_id=snapshot.id, nonce=snapshot.projection.nonce, purpose=snapshot.scope.purpose.value,
        items=list(snapshot.selected), missing=list(snapshot.missing_evidence), branch=snapshot.scope.branch,
    )
    assert rendered.encode("utf-8") == lab.store.get_blob(snapshot.projection.block_ref)


def check_drift_unchanged(lab: Lab, snapshot: AuditSnapshot) -> None:
    versions = _index_versions(lab)
    report = compute_drift(lab.store, snapshot.id, record=False).report
    assert not report.index_changed
    assert all(item.drift_class == DriftClass.UNCHANGED for item in report.items), [
        (i.source_ref, i.drift_class) for i in report.items
    ]
    assert _index_versions(lab) == versions


@settings(ORACLE, max_examples=examples(40))
@given(world=worlds())
def test_recorded_answers_agree_with_the_snapshot(shared_lab, world):
    lab = shared_lab
    project = f"p{next(_counter)}"
    _index_world(lab, world, project)
    for intent in world["intents"]:
        snapshot = _retrieve(lab, project, intent)
        check_why_not(lab, snapshot)
        check_funnel_and_block(lab, snapshot)
        check_drift_unchanged(lab, snapshot)  # right after it: nothing changed since


def _edit_line(path: Path, number: int, suffix: str) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[number - 1] = lines[number - 1] + suffix
    path.write_text("\n".join(lines), encoding="utf-8")


def _mine(report, item: SnapshotItem) -> list:
    return [d for d in report.items if d.source_ref == item.source_ref or d.frozen_source_ref == item.source_ref]


@settings(ORACLE, max_examples=examples(60))
@given(world=worlds())
def test_drift_names_an_edit_inside_an_item_and_only_there(shared_lab, world):
    lab = shared_lab
    project = f"e{next(_counter)}"
    root = lab.workspace(project, world["files"])
    lab.index(root, project)
    snapshot = _retrieve(lab, project, world["intents"][0], branch=None)
    items = [i for i in snapshot.selected if i.path and i.line_start and i.line_end and not i.trim_ranges]
    assume(items)  # an item shown whole, to edit around
    item = items[0]
    path = root / item.path
    lines = path.read_text(encoding="utf-8").split("\n")
    outside = next((n for n in range(1, len(lines) + 1)
                    if not item.line_start <= n <= item.line_end and lines[n - 1].strip()), None)

    if outside is not None:  # an edit elsewhere in the file: never content-changed
        _edit_line(path, outside, " zzedited")
        lab.index(root, project)
        report = compute_drift(lab.store, snapshot.id, record=False).report
        mine = _mine(report, item)
        assert all(d.drift_class != DriftClass.CONTENT_CHANGED for d in mine), [(d.drift_class, d.diff) for d in mine]

    inside = next(n for n in range(item.line_start, item.line_end + 1) if lines[n - 1].strip())
    _edit_line(path, inside, " zzinside")
    lab.index(root, project)
    report = compute_drift(lab.store, snapshot.id, record=False).report
    mine = _mine(report, item)
    assert mine, [(d.source_ref, d.drift_class) for d in report.items]
    assert mine[0].drift_class in (DriftClass.CONTENT_CHANGED, DriftClass.REMOVED), mine[0]
    for d in report.items:
        if d.drift_class == DriftClass.CONTENT_CHANGED:
            assert d.diff, d  # content-changed always shows what changed
