"""Drift classes are exact: each names what differs between a frozen item and today's match.

Before: an edit anywhere in a file made every item of that file ``content-changed`` with an
empty diff; lines inserted above a function made it removed-and-added (or ``moved``); a doc
re-classified as a rule was ``moved`` or ``unchanged``; and two items with one source_ref in
two workspace roots were both compared with the same item of today.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from scopelens.core.audit.drift import classify, compute_drift
from scopelens.core.cli import main
from scopelens.core.commands import audit_commands
from scopelens.core.contracts import Anchors, DriftItem, DriftReport, RetrievalIntent
from scopelens.core.index.sources import SourceClassifier
from scopelens.core.vocab import Authority, DriftClass, EvidenceKind, Purpose, Source
from tests.pipeline.test_seed_seven import FIX_TEST
from tests.support.factories import make_snapshot
from tests.support.workspaces import AUTH_FILES, Lab, write

PRICING = '''"""Prices and discounts."""


def discount_rate(customer):
    """The discount rate of a customer, by tier."""
    return 0.1 if customer.tier == "gold" else 0.0


def apply_discount(price, customer):
    """A price after the customer's discount."""
    return price * (1 - discount_rate(customer))


def bulk_discount(quantity):
    """The extra discount for bulk orders."""
    return 0.05 if quantity >= 100 else 0.0


def total(lines, customer):
    """The total of order lines after discounts."""
    subtotal = sum(line.price * line.quantity for line in lines)
    return apply_discount(subtotal, customer)
'''
INTENT = RetrievalIntent(
    purpose=Purpose.EXPLAIN_CODE,
    question="how are discounts applied to a price",
    anchors=Anchors(symbols=("discount_rate", "apply_discount", "bulk_discount", "total"),
                    current_files=("src/pricing.py",)),
)
BULK_EDIT = (
    '    """The extra discount for bulk orders."""\n    return 0.05 if quantity >= 100 else 0.0',
    '    """The extra discount for bulk orders, raised for spring."""\n    return 0.07 if quantity >= 50 else 0.0',
)
"""A 2-line edit inside bulk_discount (lines 14-16), outside every other function."""
INSERTED_ABOVE_TOTAL = ("\n\ndef total", "\n\nTAX = 0.2\nROUNDING = 2\n\n\ndef total")
"""Four lines inserted above total (lines 19-22), which moves it to 23-26."""


@pytest.fixture
def lab(tmp_path, store_url):
    instance = Lab(tmp_path, store_url)
    yield instance
    instance.close()


def drift_after(lab: Lab, files: dict[str, str], edits: dict[str, str], intent: RetrievalIntent = INTENT,
                project: str = "shop", classifier: SourceClassifier | None = None) -> DriftReport:
    root = lab.workspace("a", files)
    lab.index(root, project)
    frozen = lab.retriever().retrieve(intent, project=project)
    write(root, edits)
    lab.clock.advance(timedelta(days=1))
    lab.index(root, project, classifier=classifier)
    return compute_drift(lab.store, frozen.snapshot_id).report


def by_ref(report: DriftReport) -> dict[str, DriftItem]:
    items = {item.source_ref: item for item in report.items}
    assert len(items) == len(report.items), "one item per source_ref in a one-root workspace"
    return items


def edited(*replacements: tuple[str, str]) -> str:
    text = PRICING
    for old, new in replacements:
        assert old in text
        text = text.replace(old, new)
    return text


def assert_content_changes_carry_a_diff(report: DriftReport) -> None:
    for item in report.items:
        if item.drift_class == DriftClass.CONTENT_CHANGED:
            assert item.diff and "\n-" in item.diff and "\n+" in item.diff, item


# --------------------------------------------------------------------------- item 4


def test_a_two_line_edit_outside_an_item_leaves_it_unchanged_with_its_file_changed_elsewhere(lab):
    report = drift_after(lab, {"src/pricing.py": PRICING}, {"src/pricing.py": edited(BULK_EDIT)})
    items = by_ref(report)
    assert {"src/pricing.py:4-6", "src/pricing.py:9-11", "src/pricing.py:19-22", "src/pricing.py:14-16"} <= set(items)
    for ref in ("src/pricing.py:4-6", "src/pricing.py:9-11", "src/pricing.py:19-22"):
        item = items[ref]
        expected = DriftClass.UNCHANGED if item.frozen_rank == item.today_rank else DriftClass.MOVED
        assert item.drift_class == expected, item
        assert item.changed_elsewhere and item.diff is None
        assert item.frozen_version != item.today_version
    changed = items["src/pricing.py:14-16"]
    assert changed.drift_class == DriftClass.CONTENT_CHANGED and not changed.changed_elsewhere
    assert changed.frozen_source_ref is None
    assert "-    return 0.05 if quantity >= 100 else 0.0" in (changed.diff or "")
    assert "+    return 0.07 if quantity >= 50 else 0.0" in (changed.diff or "")
    assert_content_changes_carry_a_diff(report)


def test_lines_inserted_above_a_function_shift_it_to_its_new_range(lab):
    report = drift_after(lab, {"src/pricing.py": PRICING}, {"src/pricing.py": edited(INSERTED_ABOVE_TOTAL)})
    shifted = next(i for i in report.items if i.frozen_source_ref == "src/pricing.py:19-22")
    assert shifted.drift_class == DriftClass.SHIFTED
    assert shifted.source_ref == "src/pricing.py:23-26"
    assert shifted.diff is None and shifted.changed_elsewhere
    assert not [i for i in report.items if i.drift_class == DriftClass.REMOVED]
    above = by_ref(report)["src/pricing.py:9-11"]
    assert above.drift_class in (DriftClass.UNCHANGED, DriftClass.MOVED) and above.changed_elsewhere
    assert above.frozen_source_ref is None
    assert_content_changes_carry_a_diff(report)


def test_an_edit_inside_an_item_is_content_changed_with_its_diff_even_at_a_new_range(lab):
    inside = ("    return apply_discount(subtotal, customer)", "    return round(apply_discount(subtotal, customer), 2)")
    report = drift_after(lab, {"src/pricing.py": PRICING}, {"src/pricing.py": edited(INSERTED_ABOVE_TOTAL, inside)})
    changed = next(i for i in report.items if i.frozen_source_ref == "src/pricing.py:19-22")
    assert changed.drift_class == DriftClass.CONTENT_CHANGED
    assert changed.source_ref == "src/pricing.py:23-26" and not changed.changed_elsewhere
    assert "+    return round(apply_discount(subtotal, customer), 2)" in (changed.diff or "")
    assert_content_changes_carry_a_diff(report)


# --------------------------------------------------------------------------- item 12


def test_a_doc_reclassified_as_a_rule_is_relabelled(lab):
    # Explaining, not fixing: for a fix the doc would rank under the code and not be shown.
    explain = FIX_TEST.model_copy(update={"purpose": Purpose.EXPLAIN_CODE})
    report = drift_after(lab, AUTH_FILES, {}, intent=explain, project="alpha",
                         classifier=SourceClassifier().with_globs(["docs/admin-roles.md"]))
    item = by_ref(report)["docs/admin-roles.md:1-4"]
    assert item.drift_class == DriftClass.RELABELLED
    assert (item.frozen_citation, item.today_citation) == ("doc#1", "rule#1")
    changes = {(c.field, c.then, c.now) for c in item.label_changes}
    assert {("source", "workspace-doc", "project-rule"), ("evidence-kind", "doc", "rule"),
            ("authority", "medium", "high")} <= changes
    assert item.diff is None and not item.changed_elsewhere
    assert "doc#1 -> rule#1" in (item.reason or "")


# --------------------------------------------------------------------------- item 13


def test_items_sharing_a_source_ref_in_two_roots_do_not_collapse(lab):
    root_a = lab.workspace("a", AUTH_FILES)
    other = {path: text.replace("test-user", "other-user") for path, text in AUTH_FILES.items()}
    root_b = lab.workspace("b", other)
    lab.index(root_a, "alpha")
    lab.index(root_b, "alpha")
    frozen = lab.retriever().retrieve(FIX_TEST, project="alpha")
    refs = [i.source_ref for i in frozen.snapshot.selected]
    assert refs.count("src/auth/session.ts:3-5") == 2  # createUserMock, in each root
    write(root_b, {"src/auth/session.ts": other["src/auth/session.ts"].replace("...overrides", 'role: "viewer", ...overrides')})
    lab.clock.advance(timedelta(days=1))
    lab.index(root_b, "alpha")
    report = compute_drift(lab.store, frozen.snapshot_id).report
    session = [i for i in report.items if i.source_ref == "src/auth/session.ts:3-5"]
    assert sorted(i.workspace_root or "" for i in session) == sorted([str(root_a.resolve()), str(root_b.resolve())])
    in_a = next(i for i in session if i.workspace_root == str(root_a.resolve()))
    in_b = next(i for i in session if i.workspace_root == str(root_b.resolve()))
    assert in_a.drift_class in (DriftClass.UNCHANGED, DriftClass.MOVED) and in_a.diff is None
    assert in_a.frozen_version == in_a.today_version
    assert in_b.drift_class == DriftClass.CONTENT_CHANGED
    assert '+  return { name: "other-user", role: "viewer", ...overrides };' in (in_b.diff or "")
    assert '"test-user"' not in (in_b.diff or "")
    assert len({i.today_rank for i in session}) == 2, "each matched to its own item of today"
    # Copies with the same text in both roots may now be shown from the other root: that is
    # another file, so removed and added, each with its root, never one item for both.
    for item in report.items:
        assert item.workspace_root in (str(root_a.resolve()), str(root_b.resolve())), item


# --------------------------------------------------------------------------- old runs


def test_a_drift_body_written_before_these_classes_still_loads_with_its_summary():
    old = {
        "schema_version": 1, "id": "drift-old", "snapshot_id": "snap-1", "session_id": "s-1",
        "created_at": "2026-02-02T09:00:00Z", "index_version_then": "p@-#1", "index_version_now": "p@-#2",
        "engine_then": "e", "engine_now": "e", "config_changed": False, "engine_changed": False, "index_changed": True,
        "items": [
            {"drift_class": "moved", "source_ref": "a.py:3-5", "path": "a.py", "frozen_rank": 1, "today_rank": 1},
            {"drift_class": "content-changed", "source_ref": "a.py:7-9", "path": "a.py", "frozen_rank": 2,
             "today_rank": 2, "diff": "", "reason": "was a.py:6-8"},
            {"drift_class": "removed", "source_ref": "b.md:1-2", "frozen_rank": 3, "stage_today": "not-recalled"},
        ],
    }
    report = DriftReport.model_validate(old)
    assert [i.drift_class for i in report.items] == [DriftClass.MOVED, DriftClass.CONTENT_CHANGED, DriftClass.REMOVED]
    assert report.summary() == "1 moved, 1 content-changed, 1 removed; changed since snapshot: index"


# --------------------------------------------------------------------------- the CLI


def test_the_cli_shows_the_new_classes_the_flag_and_the_root(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(audit_commands, "console", lambda: Console(width=400, color_system=None, highlight=False))
    lab = Lab(tmp_path)
    root_a = lab.workspace("a", {"src/pricing.py": PRICING})
    # Other docstrings in the second root: no function is a duplicate of the first root's.
    root_b = lab.workspace("b", {"src/pricing.py": PRICING.replace('    """', '    """(b) ')})
    lab.index(root_a, "shop")
    lab.index(root_b, "shop")
    frozen = lab.retriever().retrieve(INTENT, project="shop")
    write(root_a, {"src/pricing.py": edited(INSERTED_ABOVE_TOTAL)})
    lab.clock.advance(timedelta(days=1))
    lab.index(root_a, "shop")
    lab.close()
    assert main(["drift", frozen.snapshot_id, "--db", str(tmp_path / "lab.db")]) == 0
    out = capsys.readouterr().out
    shifted = next(line for line in out.splitlines() if "shifted" in line)
    assert f"{root_a.resolve()}:src/pricing.py:23-26" in shifted
    assert "lines 19-22 -> 23-26" in shifted and "file changed outside these lines" in shifted
    assert f"{root_b.resolve()}:src/pricing.py:19-22" in out
    assert "with the source changed elsewhere" in out


# --------------------------------------------------------------------------- the rules, item by item


@given(
    text=st.booleans(), lines=st.booleans(), rank=st.booleans(), relabel=st.booleans(), version=st.booleans()
)
def test_one_class_by_precedence_and_every_difference_recorded(text, lines, rank, relabel, version):
    frozen, _block = make_snapshot("s1", "sess", texts=("def f():\n    return 1", "def g():\n    return 2"))
    then = frozen.selected[0]
    changes: dict[str, object] = {}
    if text:
        changes.update(visible_text="def f():\n    return 10", source_version="v-new")
    if version:
        changes["source_version"] = "v-new"
    if lines:
        changes.update(source_ref="src/m1.py:3-4", line_start=3, line_end=4)
    if rank:
        changes["rank"] = 5
    if relabel:
        changes.update(source=Source.WORKSPACE_DOC, evidence_kind=EvidenceKind.DOC, authority=Authority.MEDIUM,
                       citation_id="doc#1")
    today = [then.model_copy(update=changes), frozen.selected[1]]
    item = classify(frozen, today, [])[0]
    expected = (DriftClass.RELABELLED if relabel else DriftClass.CONTENT_CHANGED if text else DriftClass.SHIFTED
                if lines else DriftClass.MOVED if rank else DriftClass.UNCHANGED)
    assert item.drift_class == expected
    assert (item.diff is not None) == text and (not text or "\n+    return 10" in (item.diff or ""))
    assert item.changed_elsewhere == (version and not text)
    assert item.frozen_source_ref == ("src/m1.py:1-2" if lines else None)
    assert bool(item.label_changes) == relabel
    assert (item.frozen_rank, item.today_rank) == (1, 5 if rank else 1)


def test_the_same_text_trimmed_otherwise_today_is_not_content_changed():
    """Found by the oracle: after an edit elsewhere in the file, today's budget trimmed an item
    the snapshot had shown whole, and drift called it content-changed although the source says
    the same at its lines. The class follows the source text; what is shown differs is noted."""
    from scopelens.core.audit.drift import _Place
    from scopelens.core.contracts import TrimRange

    frozen, _block = make_snapshot("s1", "sess", texts=("def f():\n    return 1", "def g():\n    return 2"))
    then = frozen.selected[0]
    trimmed = then.model_copy(update={
        "visible_text": "def f():\n[… line 2 trimmed …]", "source_version": "v-new",
        "trim_ranges": (TrimRange(start_line=2, end_line=2, start_char=9, end_char=21),),
    })
    same, other = _Place(None, None, "f", "hash-of-f"), _Place(None, None, "f", "hash-of-f-edited")

    item = classify(frozen, [trimmed, frozen.selected[1]], [], {then.candidate_id: same}, {then.candidate_id: same})[0]
    assert item.drift_class == DriftClass.UNCHANGED and item.changed_elsewhere
    assert "shown otherwise" in (item.reason or "") and "+[… line 2 trimmed …]" in (item.diff or "")

    item = classify(frozen, [trimmed, frozen.selected[1]], [], {then.candidate_id: same}, {then.candidate_id: other})[0]
    assert item.drift_class == DriftClass.CONTENT_CHANGED and item.diff

    same_version = trimmed.model_copy(update={"source_version": then.source_version})
    item = classify(frozen, [same_version, frozen.selected[1]], [])[0]
    assert item.drift_class == DriftClass.UNCHANGED and not item.changed_elsewhere, "same version: same text"
