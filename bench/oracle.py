"""Oracle bench: the audit oracle's properties (``tests/audit/test_oracle.py``) with many more
examples than CI runs.

Run ``python -m bench.oracle`` (500 examples per property and backend; tens of minutes) or
``python -m bench.oracle --examples 100 --backend sqlite``. It runs pytest on the oracle module
with ``SCOPELENS_ORACLE_EXAMPLES`` set and the ``bench`` hypothesis profile (random, not
derandomized: each run tries new workspaces; a failure prints its reproducing example), and
prints hypothesis' statistics. PostgreSQL is started by the test session as in CI; without
``initdb``/``pg_ctl`` the PostgreSQL half is skipped. See docs/audit.md.

Timing never goes into unit tests: ``tests/test_bench_smoke.py`` only checks the command this
builds.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ORACLE_TESTS = ROOT / "tests" / "audit" / "test_oracle.py"
EXAMPLES_ENV = "SCOPELENS_ORACLE_EXAMPLES"
BACKENDS = ("sqlite", "postgres", "both")


def command(examples: int, backend: str = "both", workers: int = 2) -> tuple[list[str], dict[str, str]]:
    """The pytest command line and environment that run the oracle with ``examples`` each."""
    if examples < 1:
        raise ValueError("examples must be positive")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}")
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ORACLE_TESTS),
            "--hypothesis-show-statistics", "--durations=0"]
    if backend != "both":
        args += ["-k", backend]
    if workers > 1:
        args += ["-n", str(workers)]
    env = {k: v for k, v in os.environ.items() if k != "CI"}  # CI=true would load the `ci` profile
    env.update({EXAMPLES_ENV: str(examples), "HYPOTHESIS_PROFILE": "bench"})
    return args, env


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.oracle", description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=500, help="examples per property and backend (default 500)")
    parser.add_argument("--backend", choices=BACKENDS, default="both")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (default 2; 1 runs in process)")
    options = parser.parse_args(argv)
    args, env = command(options.examples, options.backend, options.workers)
    started = time.perf_counter()
    code = subprocess.call(args, env=env, cwd=ROOT)
    print(f"oracle: {options.examples} examples per property, backend {options.backend}, "
          f"{time.perf_counter() - started:.0f} s, exit {code}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
