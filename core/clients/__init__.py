"""Ways for other programs to use scopelens: an MCP server for coding agents, OpenTelemetry export.

Their third-party packages (``mcp``, ``opentelemetry-proto``) are optional extras, imported only
by the modules and commands that need them.
"""
