"""``scopelens mcp``: the scoped tools served over MCP, on the official SDK 2.x (``MCPServer``).

Each tool returns structured content (a JSON object) and the same as text. A scopelens error
(an unknown id, a refused scope field, bad arguments) is a tool error with its one-line
message, never a crash. Arguments a tool does not declare are refused, not dropped: the SDK
would otherwise ignore ``{"project": "other"}`` silently, and the client would believe it had
widened the scope.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ConfigDict

from scopelens.core.clients.scoped_tools import RETRIEVE_ARGUMENTS, ScopedTools
from scopelens.core.errors import ScopelensError

INSTRUCTIONS = (
    "Scoped retrieval over one project's workspace, with an audit snapshot of every answer. "
    "Call `retrieve` with your question (and anchors: failing test, error text, files, symbols); "
    "cite its citation ids. The snapshot id in each answer lets a person replay what you were shown."
)


class AnchorsArgument(BaseModel):
    """Concrete handles on the task; they outweigh prose in planning and ranking."""

    model_config = ConfigDict(extra="forbid")

    failing_test: str | None = None
    error_text: str | None = None
    current_files: list[str] = []
    symbols: list[str] = []
    traceback: str | None = None


class _ScopedServer(MCPServer):
    """Refuses undeclared arguments, recording the attempt through ``ScopedTools``."""

    def __init__(self, tools: ScopedTools) -> None:
        super().__init__("scopelens", instructions=INSTRUCTIONS)
        self.scoped = tools

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            declared = tuple(tool.parameters.get("properties", {}))
            try:
                self.scoped.refuse_widening(name, arguments or {}, declared)
            except ScopelensError as exc:
                raise ToolError(str(exc)) from None
        return await super().call_tool(name, arguments, context)


def build_server(tools: ScopedTools) -> MCPServer:
    """An MCP server whose tools answer in ``tools``' scope."""
    server = _ScopedServer(tools)

    def answer(call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            return call()
        except ScopelensError as exc:
            raise ToolError(str(exc)) from None

    @server.tool()
    async def retrieve(
        question: str,
        anchors: AnchorsArgument | None = None,
        purpose: Literal["answer-question", "fix-test", "explain-code", "review-risk"] | None = None,
        required_evidence: list[str] | None = None,
        max_tokens: int | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """Evidence for a question from this project's workspace, sessions and memories, as a
        fenced context block with citation ids. Writes an audit snapshot first; its id is in
        the answer. The scope (project, branch, sources, policy) is the server's."""
        given = {"question": question, "anchors": anchors.model_dump() if anchors else None, "purpose": purpose,
                 "required_evidence": required_evidence, "max_tokens": max_tokens, "session_id": session_id}
        assert set(given) == set(RETRIEVE_ARGUMENTS)
        return answer(lambda: tools.retrieve({k: v for k, v in given.items() if v is not None}))

    @server.tool()
    async def get_snapshot(snapshot_id: str) -> dict[str, Any]:
        """The audit snapshot of one retrieval: scope, plan, selected and rejected items, trim
        ranges, hashes and citations."""
        return answer(lambda: tools.get_snapshot(snapshot_id))

    @server.tool()
    async def replay(session_id: str, turn: int | None = None) -> dict[str, Any]:
        """What the model was shown in a session, turn by turn, from the stored snapshots (no
        search is run), with whether every hash verifies."""
        return answer(lambda: tools.replay(session_id, turn))

    @server.tool()
    async def drift(snapshot_id: str) -> dict[str, Any]:
        """A snapshot's plan re-run against today's index: what is new, gone, changed or moved."""
        return answer(lambda: tools.drift(snapshot_id))

    @server.tool()
    async def why_not(
        snapshot_id: str, path: str | None = None, symbol: str | None = None, text: str | None = None
    ) -> dict[str, Any]:
        """Why a path, symbol or text was not shown by a snapshot: the stage it dropped out at."""
        query: dict[str, str | None] = {"path": path, "symbol": symbol, "text": text}
        return answer(lambda: tools.why_not(snapshot_id, query))

    @server.tool()
    async def search(query: str, top_k: int = 10) -> dict[str, Any]:
        """Raw BM25 search of this project's indexed workspace (paths, lines, a short snippet);
        no snapshot is written. Prefer `retrieve` for evidence to answer with."""
        return answer(lambda: tools.search(query, top_k))

    return server
