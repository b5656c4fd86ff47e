"""`pygents-ctx mcp serve MODULE[:NAME]`: serve `@tool` functions to MCP clients.

Over stdio by default (an IDE or agent starts the command and speaks MCP on
its stdin and stdout), or streamable HTTP with `--http` (127.0.0.1 unless
`--host` says otherwise).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sys
from typing import Any

from pygents_ctx.cli._db import CliError
from pygents_ctx.cli._render import Output
from pygents_ctx.integrations.mcp import serve_tools
from pygents_ctx.tools import Tool

__all__ = ["add_commands", "load_tools", "serve"]

_SERVE_EPILOG = """\
TOOLS is a module and, after a colon, the name of a tool or a list of tools in
it (my_app.tools:public); a module alone serves every tool defined at its top
level. The current directory is importable, as with python -m.

An MCP client configuration for stdio:
  {"command": "pygents-ctx", "args": ["mcp", "serve", "my_app.tools"]}
"""


def add_commands(commands: Any, layout: type[argparse.HelpFormatter]) -> None:
    """Add `mcp serve` to the command line's subparsers."""
    mcp = commands.add_parser(
        "mcp", help="serve tools over MCP (needs the mcp extra)", formatter_class=layout
    )
    actions = mcp.add_subparsers(dest="mcp_command", required=True, metavar="ACTION")
    serving = actions.add_parser(
        "serve",
        help="serve @tool functions to MCP clients",
        epilog=_SERVE_EPILOG,
        formatter_class=layout,
    )
    serving.set_defaults(run=serve)
    serving.add_argument("tools", metavar="TOOLS", help="module[:name], e.g. my_app.tools:public")
    serving.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    serving.add_argument("--host", default="127.0.0.1", help="HTTP address (default 127.0.0.1)")
    serving.add_argument("--port", type=_port, default=8000, help="HTTP port (default 8000)")
    serving.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")
    serving.add_argument("--name", default="pygents-ctx", help="the server's name for clients")


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 1 to 65535, not {text!r}")
    return port


def load_tools(spec: str) -> list[Tool[..., Any]]:
    """The tools `spec` (`module` or `module:name`) names.

    Raises:
        CliError: The module cannot be imported, has no such name, or it holds no tools.
    """
    module_name, _, attribute = spec.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CliError(f"cannot import {module_name!r}: {exc}") from exc
    if not attribute:
        found = [value for value in vars(module).values() if isinstance(value, Tool)]
        if not found:
            raise CliError(f"module {module_name!r} defines no @tool at its top level")
        return found
    if not hasattr(module, attribute):
        raise CliError(f"module {module_name!r} has no {attribute!r}")
    value = getattr(module, attribute)
    if isinstance(value, Tool):
        return [value]
    if isinstance(value, list | tuple | set | frozenset) and all(
        isinstance(item, Tool) for item in value
    ):
        return list(value)
    raise CliError(f"{spec} is {value!r}, not a @tool or a list of them")


def serve(args: argparse.Namespace, out: Output) -> None:
    """`mcp serve`: serve the tools until the client leaves (stdio) or Ctrl-C (HTTP)."""
    tools = load_tools(args.tools)
    if args.http:
        print(
            f"serving {len(tools)} tools at http://{args.host}:{args.port}{args.path}",
            file=sys.stderr,
        )
    try:
        asyncio.run(
            serve_tools(
                tools,
                transport="http" if args.http else "stdio",
                host=args.host,
                port=args.port,
                path=args.path,
                name=args.name,
            )
        )
    except ImportError as exc:
        raise CliError(str(exc)) from exc
