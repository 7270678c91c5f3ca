"""Planted secrets are redacted in the store and in every output; ordinary code is left alone
([9/9] item 5; the full run is ``python -m bench.planted_secrets``)."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from sqlalchemy import text

from bench.planted_secrets import (
    false_positive_lines,
    leaks,
    ordinary_text,
    outputs,
    plant,
    populate,
    stdlib_texts,
)
from scopelens.core.store.store import Store

SECRETS = 240

WORKSPACE_FILES = {
    "config/settings.py": "config file", "deploy/.env": "env file", "k8s/secrets.yaml": "yaml file",
    "docs/setup.md": "docs", "scripts/deploy.sh": "shell script", "logs/app.log": "log",
}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("planted")
    planting = plant(tmp, SECRETS, seed=20261203)
    db = str(tmp / "store.db")
    populate(planting, db)
    return planting, db, tmp


def test_the_corpus_covers_every_place_and_form(planted):
    planting, _db, _tmp = planted
    places = Counter(p.place for p in planting.secrets)
    assert len(planting.secrets) == SECRETS >= 200
    assert set(places) == {*WORKSPACE_FILES.values(), "tool output", "tool arguments", "user message", "memory",
                           "imported session"}
    forms = {p.form.split()[0] for p in planting.secrets}
    assert forms == {"assignment", "url", "header", "json", "vendor"}


def test_no_planted_secret_reaches_the_store_or_any_output(planted):
    planting, db, tmp = planted
    seen = outputs(planting, db, tmp)
    assert {"store", "sessions", "verify", "why-not", "memory list", "mcp retrieve", "mcp search"} <= set(seen)
    assert any(key.startswith("export otel") for key in seen) and any(key.startswith("retrieve ") for key in seen)
    assert leaks(planting.secrets, seen) == []


def test_each_redaction_in_a_workspace_file_is_recorded(planted):
    planting, db, _tmp = planted
    with Store.open(db, read_only=True) as store, store.read() as conn:
        rows = conn.execute(text("SELECT path, redactions FROM index_documents WHERE valid_to IS NULL")).all()
    recorded = {path: len(json.loads(bytes(data))) for path, data in rows}
    for path, place in WORKSPACE_FILES.items():
        planted_here = sum(1 for p in planting.secrets if p.place == place)
        assert recorded[path] >= planted_here > 0, path


def test_session_text_keeps_a_placeholder_for_each_secret(planted):
    planting, db, _tmp = planted
    with Store.open(db, read_only=True) as store, store.read() as conn:
        bodies = [bytes(b).decode() for (b,) in conn.execute(text("SELECT body FROM events"))]
    placeholders = sum(body.count("[REDACTED:") for body in bodies)
    in_events = sum(1 for p in planting.secrets if p.place in ("tool output", "tool arguments", "user message"))
    assert placeholders >= in_events


def test_generated_hashes_uuids_and_base64_data_are_not_secrets():
    figures = false_positive_lines([("generated", ordinary_text(random.Random(20261203), 3000))])
    assert figures.lines == 3000
    assert figures.changed == 0, figures.examples


def test_real_code_the_redactor_was_not_written_for_changes_in_under_half_a_percent_of_lines():
    figures = false_positive_lines(stdlib_texts(stride=25))
    assert figures.files > 50 and figures.lines > 20_000
    assert figures.share <= 0.005, figures.examples
