"""Layering rules: core never loads textual; the inspector never imports SQL libraries itself."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN_IN_INSPECTOR = ("sqlalchemy", "sqlmodel", "psycopg", "sqlite3")


def test_importing_core_loads_no_textual(tmp_path):
    code = (
        "import sys, pkgutil, importlib, scopelens.core as core\n"
        "for m in pkgutil.walk_packages(core.__path__, 'scopelens.core.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] == 'textual' or n.startswith('scopelens.inspector'))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert result.stdout.strip() == ""


def test_cli_start_does_not_import_textual(tmp_path):
    code = "import sys, scopelens.core.cli as cli; cli.build_parser(); print('textual' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert result.stdout.strip() == "False"


def test_a_preparing_worker_loads_no_models_and_no_sql(tmp_path):
    """Index workers are spawned afresh and import ``core/index/prepare.py`` alone: it must not
    pull in pydantic or SQL libraries (about 17 MiB and 0.3 s per worker for pydantic alone)."""
    code = (
        "import sys, scopelens.core.index.prepare\n"
        "heavy = ('pydantic', 'sqlalchemy', 'sqlmodel')\n"
        "print('loaded:' + ','.join(sorted(n for n in sys.modules if n.split('.')[0] in heavy)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert result.stdout.strip() == "loaded:"


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_inspector_imports_no_sql_library_directly():
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) & set(FORBIDDEN_IN_INSPECTOR))
        for path in (ROOT / "inspector").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_scan_would_catch_a_direct_import(tmp_path):
    sample = tmp_path / "bad.py"
    sample.write_text("from sqlmodel import select\nimport sqlalchemy.orm\n")
    assert imported_roots(sample) >= {"sqlmodel", "sqlalchemy"}


def test_the_command_table_names_the_module_of_every_sub_command():
    """``scopelens CMD`` imports only the module ``COMMANDS`` names for CMD: it must be the
    module that registers CMD, and every sub-command must be in the table."""
    from scopelens.core.cli import build_parser
    from scopelens.core.commands import COMMAND_MODULE_NAMES, COMMANDS

    def choices(parser):  # type: ignore[no-untyped-def]
        return {name for action in parser._actions if isinstance(action, argparse._SubParsersAction)
                for name in action.choices}

    registered = {name: module for module in COMMAND_MODULE_NAMES for name in choices(build_parser((module,)))}
    assert registered == COMMANDS


def test_index_command_loads_no_audit_or_record_machinery(tmp_path):
    """A no-op re-index waits for the imports of the CLI: ``scopelens index`` loads the index
    commands, not drift, why-not, recording or the inspector's launcher."""
    code = (
        "import sys\n"
        "from scopelens.core.cli import main\n"
        "main(['index', '.', '--project', 'p', '--db', 'x.db', '--json'])\n"
        "unwanted = ('scopelens.core.audit', 'scopelens.core.record', 'scopelens.core.commands.audit',\n"
        "            'scopelens.core.commands.record')\n"
        "print('loaded:' + ','.join(sorted(n for n in sys.modules if n.startswith(unwanted))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert result.stdout.strip().splitlines()[-1] == "loaded:"


def test_mcp_and_opentelemetry_are_imported_only_by_their_commands(tmp_path):
    """The optional extras load with ``scopelens mcp`` and ``scopelens export otel`` alone: the
    CLI's parser (every command's), a retrieval and a replay never import them."""
    code = (
        "import sys\n"
        "from scopelens.core.cli import build_parser, main\n"
        "build_parser()\n"
        "main(['sessions', '--db', 'x.db', '--json'])\n"
        "import scopelens.core.clients.scoped_tools, scopelens.core.commands.mcp_commands\n"
        "print('loaded:' + ','.join(sorted({n.split('.')[0] for n in sys.modules if n.split('.')[0] in\n"
        "                                   ('mcp', 'mcp_types', 'opentelemetry')})))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert result.stdout.strip().splitlines()[-1] == "loaded:", result.stderr[-2000:]
