"""Bridges to the libraries users already run, each an optional extra imported on first use.

- `pygents_ctx.integrations.mcp`: an MCP server's tools as tools of an agent
  and of a `ModelLoop` (`MCPClient`), and tools served over MCP (`serve_tools`);
  the `mcp` extra (`pip install -e '.[mcp]'` from a checkout).
- `pygents_ctx.integrations.tracing`: OpenTelemetry spans of model loop runs,
  model calls and tool calls (`instrument()`); the `otel` extra.
- `pygents_ctx.integrations.langgraph`: a LangGraph checkpointer in our SQLite
  and PostgreSQL databases, each message stored once (`ContextStoreSaver`);
  the `langgraph` extra.
- `pygents_ctx.integrations.dbos`: a `ModelLoop` or `Assistant` run as a DBOS
  workflow, each model call and tool call a step, recovered by DBOS after a
  crash (`durable_run`); the `dbos` extra.

Importing a module here never imports its library; using it does, with an
error naming the extra when it is missing.
"""

from __future__ import annotations

__all__: list[str] = []
