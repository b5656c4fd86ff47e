"""An MCP server made with the `mcp` SDK's own `MCPServer`, for the client tests.

Run as a script: `python -m tests.integrations.mcp_tools_server` serves over
stdio; `... --http PORT` serves streamable HTTP on 127.0.0.1:PORT.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
from typing import Any

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

__all__ = ["PIXEL", "server"]

# A 1x1 PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

server = MCPServer("test-tools", instructions="Tools for the pygents_ctx MCP tests.")


class Sum(BaseModel):
    total: int
    count: int


@server.tool()
async def echo(text: str, times: int = 1) -> str:
    """Repeat the text."""
    return " ".join([text] * times)


@server.tool()
async def add(numbers: list[int]) -> Sum:
    """Add the numbers."""
    return Sum(total=sum(numbers), count=len(numbers))


@server.tool(structured_output=False)
async def pixel() -> list[Any]:
    """A tiny picture, with a caption."""
    return ["a red pixel", Image(data=PIXEL, format="png")]


@server.tool()
async def fail(reason: str) -> str:
    """Always fails."""
    raise ToolError(f"refused: {reason}")


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
async def die() -> str:
    """The server process exits in the middle of this call."""
    sys.stdout.flush()
    os._exit(3)


@server.tool()
async def exit_soon() -> str:
    """The server process exits a moment after answering."""
    asyncio.get_running_loop().call_later(0.1, os._exit, 0)
    return "bye"


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called `name`, and tell the client the tool list changed."""

    async def added(word: str) -> str:
        return f"{name}: {word}"

    server.add_tool(added, name=name, description=f"The tool {name}, added at run time.")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool()
async def shrink(name: str, ctx: Context) -> str:
    """Remove the tool called `name`, and tell the client the tool list changed."""
    server.remove_tool(name)
    await ctx.session.send_tool_list_changed()
    return f"removed {name}"


@server.tool()
async def whoami(ctx: Context) -> str:
    """The Authorization header the call came with (HTTP only)."""
    headers = ctx.headers or {}
    return headers.get("authorization", "no authorization")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()


if __name__ == "__main__":
    main()
