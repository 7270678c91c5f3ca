"""The oracle bench builds a pytest command that runs the oracle's properties with the asked
number of examples (running it is the bench's business, not a unit test's)."""

from __future__ import annotations

import pytest

from bench import oracle
from tests.audit import test_oracle


def test_the_bench_runs_the_oracle_module_with_its_examples():
    args, env = oracle.command(300, "sqlite", workers=2)
    assert str(oracle.ORACLE_TESTS) in args and oracle.ORACLE_TESTS.exists()
    assert args[args.index("-k") + 1] == "sqlite" and args[args.index("-n") + 1] == "2"
    assert oracle.EXAMPLES_ENV == test_oracle.EXAMPLES_ENV  # the variable the oracle reads
    assert env[oracle.EXAMPLES_ENV] == "300" and env["HYPOTHESIS_PROFILE"] == "bench" and "CI" not in env
    both, _ = oracle.command(5, "both", workers=1)
    assert "-k" not in both and "-n" not in both


def test_the_oracle_takes_its_example_count_from_the_bench(monkeypatch):
    monkeypatch.delenv(test_oracle.EXAMPLES_ENV, raising=False)
    assert test_oracle.examples(60) == 60
    monkeypatch.setenv(test_oracle.EXAMPLES_ENV, "1000")
    assert test_oracle.examples(60) == 1000


def test_the_bench_refuses_nonsense():
    with pytest.raises(ValueError):
        oracle.command(0)
    with pytest.raises(ValueError):
        oracle.command(5, "mysql")
