"""The read model's drift: recorded when the store takes the write (a confirmation of the last
run when it found the same), computed unrecorded when the store refuses it (a read-only role),
and any other failure raised, never swallowed."""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
import pytest

import scopelens.core.readmodel as readmodel
from scopelens.core.readmodel import ReadModel
from scopelens.core.record.recorder import record_scripts
from tests.inspector.conftest import first_snapshot_of

SCENARIO = Path(__file__).resolve().parents[2] / "sample_sessions" / "billing-cents-time" / "script.json"


def test_a_failure_while_recording_is_raised_not_retried_unrecorded(sample_store, monkeypatch):
    snapshot_id = first_snapshot_of(sample_store)
    real = readmodel.compute_drift

    def broken_when_recording(store, snapshot_id, **kwargs):  # type: ignore[no-untyped-def]
        if kwargs.get("record", True):
            raise RuntimeError("a bug while recording")
        return real(store, snapshot_id, **kwargs)

    monkeypatch.setattr(readmodel, "compute_drift", broken_when_recording)
    model = ReadModel(str(sample_store))
    try:
        with pytest.raises(RuntimeError, match="a bug while recording"):
            model.compute_drift(snapshot_id)
    finally:
        model.close()


def test_a_rerun_that_finds_the_same_is_a_confirmation_of_the_shown_run(sample_store):
    snapshot_id = first_snapshot_of(sample_store)
    model = ReadModel(str(sample_store))
    try:
        first = model.compute_drift(snapshot_id)
        again = model.compute_drift(snapshot_id)
        assert (first.recorded, again.recorded, again.confirmed_run_id) == ("new run", "confirmed", first.report.id)
        assert again.report == model.drift_run(first.report.id)
        (run,) = model.drift_runs(snapshot_id)
        assert (run.id, run.checks) == (first.report.id, 1) and run.last_checked_at is not None
    finally:
        model.close()


def test_a_read_only_role_gets_drift_computed_but_not_recorded(postgres_server, tmp_path):
    database = f"ro_{uuid.uuid4().hex[:12]}"
    url = postgres_server.create_database(database)
    (tmp_path / "work").mkdir()
    record_scripts([SCENARIO.parent], db=url, workdir=tmp_path / "work")
    role = f"reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(**postgres_server.conninfo(database), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT CONNECT ON DATABASE {database} TO {role}")
        conn.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    reader_url = url.replace(f"{postgres_server.superuser}@", f"{role}@", 1)
    model = ReadModel(reader_url)
    try:
        session = model.sessions().rows[0].id
        snapshot_id = model.snapshot_ids(session)[0]
        outcome = model.compute_drift(snapshot_id)
        assert outcome.recorded == "not recorded" and outcome.report.snapshot_id == snapshot_id
        assert model.drift_runs(snapshot_id) == ()
    finally:
        model.close()
        postgres_server.drop_database(database)
        with psycopg.connect(**postgres_server.conninfo(), autocommit=True) as conn:
            conn.execute(f"DROP ROLE {role}")
