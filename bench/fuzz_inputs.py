"""Bad input at volume: ``python -m bench.fuzz_inputs [-k PATTERN]`` runs the fuzz tests of
``tests/cli/test_bad_input_fuzz.py`` with 10,000 examples per entry point (CI runs 150,
derandomized): CLI arguments through ``main``, intent, scope and policy files, session
scripts, damaged database files and MCP tool arguments. Exit 0 only when every example gave a
result or one clear line, and a failure wrote nothing."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-k", default="", help="only the tests whose name matches (pytest -k)")
    args = parser.parse_args(argv)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=0",
               str(ROOT / "tests" / "cli" / "test_bad_input_fuzz.py")]
    if args.k:
        command += ["-k", args.k]
    env = dict(os.environ, HYPOTHESIS_PROFILE="bench")
    env.pop("CI", None)  # the CI profile would cap the examples
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
