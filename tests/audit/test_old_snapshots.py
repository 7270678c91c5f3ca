"""Why-not and drift on snapshots recorded before [2/9] (tests/fixtures/stores/pre-2of9), and on
snapshots whose items record no symbol: what docs/audit.md ("Old snapshots") says they answer."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlmodel import col, select

from scopelens.core.audit.drift import compute_drift
from scopelens.core.audit.whynot import WhyNot, why_not
from scopelens.core.contracts import AuditSnapshot, RejectedItem, RetrievalBudget, RetrievalIntent, RetrievalScope, SnapshotItem
from scopelens.core.hashing import sha256_hex
from scopelens.core.index.chunks import fetch_chunks
from scopelens.core.index.indexer import index_version
from scopelens.core.pipeline.probe import OTHER_PROJECTS_PREFIX
from scopelens.core.pipeline.project import render_block
from scopelens.core.store.store import Store
from scopelens.core.store.tables import IndexDocumentRow, IndexRunRow, SnapshotRow
from scopelens.core.vocab import DriftClass, Purpose, Stage
from tests.support.workspaces import Lab

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "stores" / "pre-2of9" / "store.db"
SHOWN = (Stage.SELECTED, Stage.CITED)
NOTE = "from the index: the snapshot did not record it"


@pytest.fixture(scope="module")
def old_store(tmp_path_factory):
    copy = tmp_path_factory.mktemp("old") / "store.db"
    shutil.copy2(FIXTURE, copy)
    store = Store.open(str(copy))  # a writable open applies the pending migrations
    yield store
    store.close()


def _snapshots(store: Store) -> list[AuditSnapshot]:
    with store.read() as conn:
        ids = list(conn.exec(select(col(SnapshotRow.id)).order_by(col(SnapshotRow.id))))
    return [store.get_snapshot(i).snapshot for i in ids]


def _rows(snapshot: AuditSnapshot) -> list[SnapshotItem | RejectedItem]:
    return [*snapshot.selected, *(r for r in snapshot.rejected if not r.candidate_id.startswith(OTHER_PROJECTS_PREFIX))]


def _stage(row: SnapshotItem | RejectedItem) -> Stage:
    return Stage.SELECTED if isinstance(row, SnapshotItem) else row.stage


def _answered(row: SnapshotItem | RejectedItem, matches) -> bool:
    wanted = SHOWN if isinstance(row, SnapshotItem) else (row.stage,)
    return any(m.source_ref == row.source_ref and m.stage in wanted for m in matches)


def test_the_fixture_holds_what_this_file_tests(old_store):
    snapshots = _snapshots(old_store)
    assert len(snapshots) == 5
    assert all(i.symbol is None for s in snapshots for i in s.selected)  # items did not keep their symbol then
    assert {s.pins.index_version for s in snapshots} == {"web-app@main#4", "billing-service@main#2"}  # store-wide run ids


def test_why_not_by_each_old_rows_source_ref_and_path_names_its_recorded_stage(old_store):
    for snapshot in _snapshots(old_store):
        ask = WhyNot(old_store, snapshot.id)
        for row in _rows(snapshot):
            by_ref = ask.ask("path", row.source_ref)
            assert _answered(row, by_ref.matches), (snapshot.id, row.source_ref, by_ref.summary)
            if isinstance(row, SnapshotItem):
                assert by_ref.stage in SHOWN and by_ref.citation_id == row.citation_id, by_ref.summary
            if row.path:
                by_path = ask.ask("path", row.path)
                assert _answered(row, by_path.matches), (snapshot.id, row.path, by_path.summary)


def test_why_not_by_symbol_takes_an_old_rows_symbol_from_the_index_and_says_so(old_store):
    asked = 0
    for snapshot in _snapshots(old_store):
        rows = _rows(snapshot)
        chunks = fetch_chunks(old_store, [int(r.candidate_id.split(":")[1]) for r in rows if r.candidate_id.startswith("chunk:")])
        ask = WhyNot(old_store, snapshot.id)
        for row in rows:
            chunk = chunks.get(int(row.candidate_id.split(":")[1])) if row.candidate_id.startswith("chunk:") else None
            symbol = row.symbol or (chunk.symbol if chunk else None)
            if not symbol:
                continue  # no symbol either way: matched by its text, like a memory or an event
            answer = ask.ask("symbol", symbol)
            mine = [m for m in answer.matches if m.source_ref == row.source_ref]
            assert mine and _answered(row, mine), (snapshot.id, symbol, answer.summary)
            assert (NOTE in mine[0].reason) == (row.symbol is None), mine[0].reason
            # The row that is the symbol comes first: no other row here is the same symbol.
            assert answer.matches[0].source_ref == row.source_ref, answer.summary
            asked += 1
    assert asked >= 8


def test_an_old_selected_item_answers_by_its_symbol_first_with_the_note(old_store):
    """Regression: the item was matched by its text alone, without saying where its symbol came from."""
    answer = why_not(old_store, "snap-billing-cents-time-0002", "symbol", "invoice_total")
    assert (answer.stage, answer.source_ref) == (Stage.CITED, "src/billing/invoice.py:16-18")
    assert f"symbol invoice_total {NOTE}" in answer.summary


def test_drift_compares_an_old_style_pin_with_todays_version(old_store):
    with old_store.read() as conn:
        runs = list(conn.exec(select(IndexRunRow)))
        live = {(d.project, d.path): d.content_hash for d in conn.exec(select(IndexDocumentRow)) if d.valid_to is None}
    for snapshot in _snapshots(old_store):
        project = snapshot.scope.project
        latest = max(int(r.version) for r in runs if r.project == project)
        report = compute_drift(old_store, snapshot.id, record=False).report
        assert report.index_version_then == snapshot.pins.index_version  # the old pin, read as it was written
        assert report.index_version_now == index_version(project, "main", latest)
        pinned = int(snapshot.pins.index_version.rsplit("#", 1)[1])
        changed_since = any(r.changed or r.added or r.removed for r in runs if r.project == project and r.version > pinned)
        assert report.index_changed == changed_since is True
        frozen = {i.source_ref: i for i in snapshot.selected}
        for item in report.items:
            then = frozen.get(item.frozen_source_ref or item.source_ref)
            if then is None or not then.path:
                continue
            if live.get((project, then.path)) == then.source_version:  # its file is as it was
                assert item.drift_class != DriftClass.CONTENT_CHANGED, (snapshot.id, item)
            if item.drift_class == DriftClass.CONTENT_CHANGED:
                assert item.diff, item
    fixtures = compute_drift(old_store, "snap-auth-role-mock-0001", record=False).report
    edited = next(i for i in fixtures.items if i.source_ref == "tests/auth/fixtures.ts:1-6")
    assert edited.drift_class == DriftClass.CONTENT_CHANGED and edited.diff  # run 5 edited it


BIG = "def big():\n" + "".join(f"    # cursor row table move {k}\n" for k in range(150)) + "    return 0\n"


def _without_symbols(lab: Lab, snapshot: AuditSnapshot, snapshot_id: str) -> str:
    """The snapshot as one recorded before items kept their symbol, written under a new id."""
    items = [i.model_copy(update={"symbol": None}) for i in snapshot.selected]
    block = render_block(
        snapshot_id=snapshot_id, nonce=snapshot.projection.nonce, purpose=snapshot.scope.purpose.value, items=items,
        missing=list(snapshot.missing_evidence), branch=snapshot.scope.branch,
    )
    projection = snapshot.projection.model_copy(update={"block_ref": sha256_hex(block.encode("utf-8"))})
    old = snapshot.model_copy(update={"id": snapshot_id, "selected": tuple(items), "projection": projection})
    lab.store.write_snapshot(old, block)
    return snapshot_id


def test_every_window_of_a_symbol_is_answered_when_the_snapshot_lacks_symbols(tmp_path, store_url):
    """Regression: only the window holding ``def big`` matched by text; the others were not answered."""
    lab = Lab(tmp_path, store_url)
    try:
        lab.index(lab.workspace("w", {"src/big.py": BIG}), "p")
        scope = RetrievalScope(project="p", budget=RetrievalBudget(max_items=8, max_tokens=4000))
        snapshot = lab.retriever().retrieve(RetrievalIntent(purpose=Purpose.ANSWER_QUESTION, question="cursor row table"),
                                            scope).snapshot
        windows = [i for i in snapshot.selected if i.symbol == "big"]
        assert len(windows) >= 2, [(i.source_ref, i.symbol) for i in snapshot.selected]
        old_id = _without_symbols(lab, snapshot, "snap-old-style")
        answer = why_not(lab.store, old_id, "symbol", "big")
        assert {m.source_ref for m in answer.matches[: len(windows)]} == {i.source_ref for i in windows}, answer.matches
        assert all(m.stage == Stage.SELECTED and NOTE in m.reason for m in answer.matches[: len(windows)])
        fresh = why_not(lab.store, snapshot.id, "symbol", "big")  # the snapshot that kept them: no note
        assert {m.source_ref for m in fresh.matches} >= {i.source_ref for i in windows}
        assert not any(NOTE in m.reason for m in fresh.matches)
    finally:
        lab.close()
