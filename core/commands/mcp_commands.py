"""``scopelens mcp``: serve scoped retrieval to coding agents over MCP (stdio).

``mcp`` is an optional extra (``pip install 'scopelens[mcp]'``), imported when the command
runs, never when the CLI starts.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from scopelens.core.commands import DEFAULT_STORE
from scopelens.core.errors import InvalidInputError


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    mcp = subparsers.add_parser(
        "mcp", parents=[common], help="serve retrieve, replay, drift, why-not and search to an MCP client (stdio)"
    )
    mcp.add_argument("--workspace", type=Path, required=True, metavar="DIR",
                     help="the workspace root (indexed, and re-indexed when it changes)")
    mcp.add_argument("--project", required=True, help="the project every tool answers for")
    mcp.add_argument("--branch", help="the branch (default: the one checked out in DIR, if a git work tree)")
    mcp.add_argument("--policy", type=Path, help="policy TOML (default: DIR/.scopelens/policy.toml)")
    mcp.add_argument("--max-tokens", type=int, help="the largest budget a client may ask for (default: the policy's, "
                     "else 1200)")
    mcp.set_defaults(run=run_mcp)


def run_mcp(args: argparse.Namespace) -> int:
    try:
        from scopelens.core.clients.mcp_server import build_server
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "mcp":
            raise InvalidInputError("scopelens mcp needs the mcp extra: pip install 'scopelens[mcp]'") from None
        raise
    from scopelens.core.clients.scoped_tools import ScopedTools, ServerScope
    from scopelens.core.contracts import RetrievalBudget
    from scopelens.core.index.walker import git_branch
    from scopelens.core.pipeline.policy import find_policy
    from scopelens.core.store.store import Store

    workspace = args.workspace.resolve()
    if not workspace.is_dir():
        raise InvalidInputError(f"--workspace {args.workspace}: not a directory")
    policy = find_policy(workspace, args.policy)
    budget = (policy.budget or RetrievalBudget()).max_tokens
    if args.max_tokens is not None and args.max_tokens < 1:
        raise InvalidInputError("--max-tokens must be positive")
    db = args.db
    if db == str(DEFAULT_STORE) and not os.environ.get("SCOPELENS_DB"):
        db = str(workspace / DEFAULT_STORE)  # an agent starts the server from anywhere: the workspace's store
    scope = ServerScope(
        workspace=workspace, project=args.project, branch=args.branch or git_branch(workspace) or "",
        policy=policy, db=db, max_tokens=args.max_tokens or budget,
    )
    with Store.open(db, create=True) as store:
        tools = ScopedTools(store, scope)
        tools.refresh_index()
        build_server(tools).run()
    return 0
