"""Serving pygents_ctx tools to MCP clients (an IDE, another agent framework) over stdio or HTTP.

Built on the `mcp` SDK's low-level `Server`, so each tool is listed with its
own input schema and description exactly as a model would see them. A call
runs the tool as a direct call does (its argument check, hooks and lock); a
failure (refused arguments included) is an `isError` result carrying the
error's text, which the client's model reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

import orjson

from pygents_ctx.integrations._mcp_content import to_mcp_content
from pygents_ctx.model.definitions import input_schema
from pygents_ctx.tools import Tool

__all__ = ["mcp_server", "require_mcp", "serve_tools"]

# What MCP takes as a tool's name.
_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def require_mcp() -> Any:
    """The `mcp` package, or an ImportError naming the extra to install."""
    try:
        import mcp
    except ImportError as exc:
        raise ImportError(
            "MCP support needs the mcp package: pip install mcp (the mcp extra)"
        ) from exc
    return mcp


def _indexed(tools: Iterable[Tool[..., Any]]) -> dict[str, Tool[..., Any]]:
    index: dict[str, Tool[..., Any]] = {}
    for position, item in enumerate(tools):
        if not isinstance(item, Tool):
            raise TypeError(f"tools[{position}] must be a Tool made by @tool, not {item!r}")
        for each in item.walk():
            if not _NAME.fullmatch(each.key):
                raise ValueError(
                    f"tool {each.key!r} cannot be served over MCP: a name there is 1 to 128 "
                    "letters, digits, '_', '-' or '.'"
                )
            held = index.setdefault(each.key, each)
            if held is not each:
                raise ValueError(f"two tools are named {each.key!r}; serve one of them")
    if not index:
        raise ValueError("there are no tools to serve; pass at least one @tool")
    return index


def _definition(item: Tool[..., Any]) -> dict[str, Any]:
    definition: dict[str, Any] = {"name": item.key, "inputSchema": input_schema(item)}
    if item.metadata.description:
        definition["description"] = item.metadata.description
    output = item.metadata.output_schema
    if output is not None and output.get("type") == "object" and not item.is_generator:
        definition["outputSchema"] = output  # MCP takes only object output schemas
    return definition


async def _run(item: Tool[..., Any], arguments: Mapping[str, Any]) -> Any:
    if item.is_generator:
        return [value async for value in item(**arguments)]
    return await item(**arguments)


def mcp_server(tools: Iterable[Tool[..., Any]], *, name: str = "pygents-ctx") -> Any:
    """An MCP server (the `mcp` SDK's low-level `Server`) offering `tools`, to run as you like.

    `serve_tools` runs one; this is for mounting its
    `streamable_http_app()` in an ASGI app of your own.

    Args:
        tools: The tools to offer (each root tool with its subtools), listed
            under their registry keys.
        name: The server's name, as clients show it.

    Raises:
        ImportError: The `mcp` extra is not installed.
        TypeError: Something is not a `Tool`.
        ValueError: No tools, two with the same name, or a name MCP does not take.
    """
    require_mcp()
    import mcp.types as types
    from mcp.server.lowlevel import Server

    index = _indexed(tools)
    listing = types.ListToolsResult.model_validate(
        {"tools": [_definition(item) for item in index.values()]}
    )

    async def list_tools(ctx: Any, params: Any) -> Any:
        return listing

    async def call_tool(ctx: Any, params: Any) -> Any:
        item = index.get(params.name)
        if item is None:
            known = ", ".join(index)
            return _result(f"there is no tool {params.name!r}; the tools are: {known}", error=True)
        try:
            value = await _run(item, params.arguments or {})
        except Exception as exc:  # the client's model reads what went wrong
            return _result(f"{type(exc).__name__}: {exc}", error=True)
        content, structured = to_mcp_content(value)
        if structured is None and "outputSchema" in _definition(item):
            parsed = orjson.loads(content[0]["text"]) if content[0]["type"] == "text" else None
            structured = parsed if isinstance(parsed, dict) else None
        payload: dict[str, Any] = {"content": content, "isError": False}
        if structured is not None:
            payload["structuredContent"] = structured
        return types.CallToolResult.model_validate(payload)

    def _result(text: str, *, error: bool) -> Any:
        return types.CallToolResult.model_validate(
            {"content": [{"type": "text", "text": text}], "isError": error}
        )

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_tools(
    tools: Iterable[Tool[..., Any]],
    *,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    name: str = "pygents-ctx",
) -> None:
    """Serve `tools` to MCP clients until the client leaves (stdio) or the task is cancelled.

    Over stdio the process's stdin and stdout carry the protocol (print to
    stderr only). Over HTTP a streamable HTTP endpoint listens at
    `http://host:port/path` (127.0.0.1 by default: only this machine).

    Args:
        tools: The tools to serve, with their schemas and descriptions.
        transport: `"stdio"` or `"http"`.
        host: The HTTP address to listen on.
        port: The HTTP port.
        path: The HTTP endpoint's path.
        name: The server's name, as clients show it.

    Raises:
        ImportError: The `mcp` extra is not installed (HTTP also needs `uvicorn`).
        ValueError: As for `mcp_server`, or an unknown transport.

    Examples:
        ```python
        import asyncio
        from pygents_ctx.integrations.mcp import serve_tools
        from my_tools import search, fetch

        asyncio.run(serve_tools([search, fetch], transport="http", port=8765))
        ```
    """
    if transport not in ("stdio", "http"):
        raise ValueError(f"transport must be 'stdio' or 'http', not {transport!r}")
    server = mcp_server(tools, name=name)
    if transport == "stdio":
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return
    try:
        import uvicorn
    except ImportError as exc:
        raise ImportError("Serving tools over HTTP needs uvicorn: pip install uvicorn") from exc
    app = server.streamable_http_app(streamable_http_path=path, host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()
