"""The session PostgreSQL fixtures give real, isolated databases."""

import pytest
from sqlalchemy import create_engine, inspect, text

pytestmark = pytest.mark.postgres


def test_postgres_url_round_trip(postgres_url):
    assert postgres_url.startswith("postgresql+psycopg://")
    engine = create_engine(postgres_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE items (id integer PRIMARY KEY, name text NOT NULL)"))
            conn.execute(text("INSERT INTO items (id, name) VALUES (1, :name)"), {"name": "héllo"})
        with engine.connect() as conn:
            assert conn.execute(text("SELECT id, name FROM items")).all() == [(1, "héllo")]
            assert "PostgreSQL" in conn.execute(text("SELECT version()")).scalar_one()
            assert engine.dialect.name == "postgresql"
            assert engine.dialect.driver == "psycopg"
    finally:
        engine.dispose()


def test_postgres_databases_are_distinct(postgres_database_factory):
    url_a = postgres_database_factory()
    url_b = postgres_database_factory()
    assert url_a != url_b
    engine_a, engine_b = create_engine(url_a), create_engine(url_b)
    try:
        with engine_a.begin() as conn:
            conn.execute(text("CREATE TABLE only_in_a (id integer)"))
        assert inspect(engine_a).has_table("only_in_a")
        assert not inspect(engine_b).has_table("only_in_a")
        with engine_a.connect() as ca, engine_b.connect() as cb:
            assert ca.execute(text("SELECT current_database()")).scalar_one() != cb.execute(
                text("SELECT current_database()")
            ).scalar_one()
    finally:
        engine_a.dispose()
        engine_b.dispose()


def test_postgres_url_is_fresh_per_test(postgres_url):
    # The table created by the round-trip test must not leak into this database.
    engine = create_engine(postgres_url)
    try:
        assert inspect(engine).get_table_names() == []
    finally:
        engine.dispose()
