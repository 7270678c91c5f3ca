"""Preparing in worker processes gives exactly what preparing in this process gives."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import numpy as np

from scopelens.core.index.prepare import PreparedDocument, prepare_all
from scopelens.core.index.sources import SourceClassifier
from scopelens.core.redact import RedactionKey

KEY = RedactionKey(bytes(range(32)))


def files() -> list[tuple[str, bytes]]:
    package = Path(sysconfig.get_paths()["stdlib"]) / "json"
    found = [(p.relative_to(package).as_posix(), p.read_bytes()) for p in sorted(package.glob("*.py"))]
    found.append(("notes/secret.md", b"# Notes\n\npassword = 'hunter2-very-secret-value'\n\n" + b"- item\n" * 200))
    found.append(("web/app.ts", b"export function f(a: number) {\n  return a + 1;\n}\n"))
    return found


def comparable(document: PreparedDocument) -> tuple[object, ...]:
    terms = document.terms
    return (
        document.path, document.content_hash, document.source, document.redactions, document.chunks,
        terms.terms, terms.bounds.tolist(), terms.term_ids.tolist(), terms.tfs.tolist(), terms.lengths.tolist(),
    )


def test_chunks_terms_and_hashes_do_not_depend_on_the_number_of_workers() -> None:
    given = files()
    in_process = [comparable(d) for d in prepare_all(given, classifier=SourceClassifier(), key=KEY, workers=0)]
    pooled = [comparable(d) for d in prepare_all(given, classifier=SourceClassifier(), key=KEY, workers=2)]
    assert [c[0] for c in in_process] == [path for path, _ in given]  # the order given
    assert pooled == in_process
    secret = next(d for d in in_process if d[0] == "notes/secret.md")
    assert b"hunter2" not in b"".join(chunk.text.encode() for chunk in secret[4])  # redacted in workers too


def test_small_inputs_are_prepared_without_a_pool(monkeypatch) -> None:
    import scopelens.core.index.prepare as prepare

    def no_pool(*args: object, **kwargs: object) -> None:
        raise AssertionError("a pool was started for a few small files")

    monkeypatch.setattr(prepare, "ProcessPoolExecutor", no_pool)
    documents = list(prepare_all(files()[:2], classifier=SourceClassifier(), key=KEY))
    assert len(documents) == 2 and all(np.all(d.terms.lengths > 0) for d in documents)
