"""The `scopelens` command exits without collecting what the run made, its store left closed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

from tests.support.workspaces import write

# Reports, at exit, how many objects the run left frozen (not collected one by one).
PROBE = (
    "import atexit, gc, sys\n"
    "atexit.register(lambda: sys.stderr.write(f'frozen={gc.get_freeze_count()}\\n'))\n"
    "from scopelens.core.cli import console_main\n"
    "sys.argv = ['scopelens', *sys.argv[1:]]\n"
    "console_main()\n"
)


def test_the_console_script_is_console_main() -> None:
    [script] = [entry for entry in entry_points(group="console_scripts") if entry.name == "scopelens"]
    assert script.value == "scopelens.core.cli:console_main"


def test_an_index_run_exits_without_collecting_and_leaves_its_store_closed(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    write(workspace, {f"mod_{k}.py": f"def f_{k}(x):\n    return x + {k}\n" for k in range(20)})
    db = tmp_path / "store.db"
    env = {key: value for key, value in os.environ.items() if key not in ("SCOPELENS_DB", "SCOPELENS_REDACTION_KEY_FILE")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "index", str(workspace), "--project", "p", "--db", str(db)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "20 added" in done.stdout
    frozen = re.search(r"frozen=(\d+)", done.stderr)
    assert frozen is not None and int(frozen.group(1)) > 10_000
    # Closed before the freeze: no journal, WAL or shared-memory file is left beside the store.
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith("store.db")) == [
        "store.db", "store.db.index-lock", "store.db.redaction-key"
    ]
    verified = subprocess.run(
        [sys.executable, "-c", PROBE, "verify", "--db", str(db)], capture_output=True, text=True, env=env,
        timeout=120, check=False,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
