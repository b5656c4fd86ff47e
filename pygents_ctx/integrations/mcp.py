"""MCP: an MCP server's tools as pygents_ctx tools, and pygents_ctx tools served over MCP.

Needs the `mcp` extra (`pip install -e '.[mcp]'` from a checkout), imported when a
server is connected or tools are served, never on import of this module.

Connect to a server over stdio (a subprocess) or streamable HTTP with
`MCPClient`, an async context manager owning the connection; its `tools()`
are `Tool`s for an agent or a `ModelLoop`. Each call of one runs as any
tool does (a `Turn` of the agent, with hooks, timeouts and `on_tool_error`),
its arguments checked against the server's input schema first. Serve
`@tool` functions to MCP clients with `serve_tools()` or
`pygents-ctx mcp serve module:tools`.

Example:
    ```python
    from pygents_ctx import Agent
    from pygents_ctx.integrations.mcp import MCPClient
    from pygents_ctx.model import ModelLoop

    async with MCPClient.stdio("uvx", ["mcp-server-fetch"], prefix="web") as web:
        agent = Agent("reader", "Reads pages.", web.tools())
        print((await ModelLoop(agent, model).run("Summarize example.com")).text)
    ```
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Final

from pygents_ctx.context.messages import TextBlock
from pygents_ctx.errors import PygentsError
from pygents_ctx.integrations._mcp_content import MCPToolResult
from pygents_ctx.integrations._mcp_serve import mcp_server, require_mcp, serve_tools
from pygents_ctx.registry import ToolRegistry
from pygents_ctx.tools import Tool
from pygents_ctx.tools._errors import check_on_tool_error

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType

    from pygents_ctx.tools._errors import OnToolError

__all__ = [
    "MCPClient",
    "MCPConnectionError",
    "MCPToolError",
    "MCPToolResult",
    "mcp_server",
    "require_mcp",
    "serve_tools",
]

_log = logging.getLogger("pygents_ctx")
# Connections given up on while their transport still shuts down (a stdio
# server is given seconds to exit), kept until done so none is collected early.
_CLOSING: set[asyncio.Task[None]] = set()
# How long a connection that timed out may take to shut down before the error is raised.
_GIVE_UP_WAIT: Final = 0.5
# What a model API takes as a tool's name; anything else in a server's names becomes "_".
_NOT_IN_NAME: Final = re.compile(r"[^a-zA-Z0-9_-]")


class MCPToolError(PygentsError, RuntimeError):
    """An MCP server answered a tool call as failed (`isError`), or refused the request.

    In a `ModelLoop` this is the call's error result, which the model reads;
    called directly, it is raised.

    Attributes:
        tool: The tool's name on the server.
        result: What the server answered (its error text in `result.text`).
    """

    def __init__(self, tool: str, result: MCPToolResult) -> None:
        self.tool = tool
        self.result = result
        super().__init__(result.text or f"the MCP tool {tool!r} failed without a message")


class MCPConnectionError(PygentsError, ConnectionError):
    """The MCP server cannot be reached: not connected, or the connection dropped."""


class MCPClient:
    """A connection to one MCP server, whose tools become pygents_ctx tools.

    Called `MCPServer` in 0.1, a name the `mcp` SDK gives its own server
    class; `MCPServer` still works for one release, with a `DeprecationWarning`.

    Make one with `MCPClient.stdio(...)` or `MCPClient.http(...)` and enter it
    (`async with`): that connects, fetches the tool list once and registers
    each tool in `ToolRegistry` under its name (after `prefix`), so an agent
    saved with them loads again once the same server is connected. Leaving
    closes the connection and unregisters them. When the server says its tool
    list changed (`notifications/tools/list_changed`), the list is fetched
    again: tools already handed out take the new description and schema, new
    ones appear in the next `tools()`, and a removed one answers with an error.

    A call whose connection drops raises `MCPConnectionError`; over HTTP the
    next call connects again (a stdio server that exited stays gone unless
    made with `reconnect=True`, which starts it again). The call itself is not
    repeated: it may have run.

    Args:
        connect: A function returning the transport's async context manager
            (its read and write streams); `stdio` and `http` make it.
        name: What errors and hook tags call the server.
        prefix: Put before each tool's name (`prefix_name`) so two servers'
            tools cannot clash; None: the server's names as they are.
        reconnect: Whether a dropped connection is made again on the next call.
        connect_timeout: Seconds to wait for the connection and the tool list.
        register: Register the tools while connected, in the `ToolRegistry`
            current when the client is made.
        on_tool_error: Each tool's `on_tool_error` (see `@tool`): what an agent
            does when a turn of one fails; None follows the agent's.
        needs_approval: Whether a `ModelLoop` stops for a person's approval
            before a call of one of the tools: True, False, or a function of
            the tool's name on the server and the call's arguments.
    """

    def __init__(
        self,
        connect: Callable[[], AbstractAsyncContextManager[Any]],
        *,
        name: str,
        prefix: str | None = None,
        reconnect: bool = False,
        connect_timeout: float = 30.0,
        register: bool = True,
        on_tool_error: OnToolError | None = None,
        needs_approval: bool | Callable[[str, dict[str, Any]], bool] = False,
    ) -> None:
        if not (isinstance(needs_approval, bool) or callable(needs_approval)):
            raise TypeError(
                f"MCP server {name!r}: needs_approval must be True, False or a function of "
                f"the tool's name and the call's arguments, not {needs_approval!r}"
            )
        if prefix is not None and not re.fullmatch(r"[a-zA-Z0-9_-]{1,40}", prefix):
            raise ValueError(
                f"MCP server {name!r}: prefix {prefix!r} must be 1 to 40 letters, digits, "
                "'_' or '-'"
            )
        if connect_timeout <= 0:
            raise ValueError(f"MCP server {name!r}: connect_timeout must be positive")
        self.name = name
        self.prefix = prefix
        self.reconnect = reconnect
        self.connect_timeout = connect_timeout
        self.register = register
        self._registry = ToolRegistry.current()  # where `register` puts the tools
        self.on_tool_error = (
            None
            if on_tool_error is None
            else check_on_tool_error(on_tool_error, f"MCP server {name!r}")
        )
        self.needs_approval = needs_approval
        self._connect = connect
        self._tools: dict[str, Tool[..., Any]] = {}  # by pygents name, in the server's order
        self._remote: dict[str, str] = {}  # pygents name -> the server's name
        self._session: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._changed = asyncio.Event()
        self._lost: str | None = None  # why the connection ended, when it did
        self._ended = asyncio.Event()  # the transport's read side closed: the server hung up
        self._entered = False
        self._connecting: asyncio.Lock | None = None
        self.instructions: str | None = None

    # -- making one ---------------------------------------------------------------

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        name: str | None = None,
        prefix: str | None = None,
        reconnect: bool = False,
        connect_timeout: float = 30.0,
        register: bool = True,
        on_tool_error: OnToolError | None = None,
        needs_approval: bool | Callable[[str, dict[str, Any]], bool] = False,
    ) -> MCPClient:
        """A server run as a subprocess, spoken to over its stdin and stdout.

        With `reconnect=True`, a server that exited is started again (a new
        process: what the old one held in memory is gone) by the next call
        after the one that found it gone.

        Args:
            command: The program to run (`"npx"`, `"uvx"`, a path).
            args: Its arguments.
            env: Environment variables added to the SDK's safe default set.
            cwd: Its working directory.
            name: What errors call it (default: the command's file name).
            prefix: As for `MCPClient`.
            reconnect: Start the server again when it has exited (default: it
                stays gone, and each call says so).
            connect_timeout: As for `MCPClient`.
            register: As for `MCPClient`.
            on_tool_error: As for `MCPClient`.
            needs_approval: As for `MCPClient`.

        Examples:
            >>> server = MCPClient.stdio("python", ["-m", "my_server"], prefix="mine")
            >>> server.name, server.prefix
            ('python', 'mine')
        """
        command_line = [command, *args]

        def connect() -> AbstractAsyncContextManager[Any]:
            mcp = require_mcp()
            parameters = mcp.StdioServerParameters(
                command=command, args=list(args), env=dict(env or {}) or None, cwd=cwd
            )
            transport: AbstractAsyncContextManager[Any] = mcp.stdio_client(parameters)
            return transport

        made = cls(
            connect,
            name=name or os.path.basename(command),
            prefix=prefix,
            reconnect=reconnect,
            connect_timeout=connect_timeout,
            register=register,
            on_tool_error=on_tool_error,
            needs_approval=needs_approval,
        )
        made._where = f"stdio: {' '.join(command_line)}"
        return made

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        prefix: str | None = None,
        reconnect: bool = True,
        connect_timeout: float = 30.0,
        register: bool = True,
        on_tool_error: OnToolError | None = None,
        needs_approval: bool | Callable[[str, dict[str, Any]], bool] = False,
    ) -> MCPClient:
        """A server reached over streamable HTTP at `url`.

        Args:
            url: The server's MCP endpoint (`http://127.0.0.1:8000/mcp`).
            headers: Sent with every request (`{"Authorization": "Bearer ..."}`).
            name: What errors call it (default: the URL).
            prefix: As for `MCPClient`.
            reconnect: As for `MCPClient`.
            connect_timeout: As for `MCPClient`.
            register: As for `MCPClient`.
            on_tool_error: As for `MCPClient`.
            needs_approval: As for `MCPClient`.

        Examples:
            >>> MCPClient.http("http://127.0.0.1:8000/mcp", prefix="docs").prefix
            'docs'
        """
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"MCP server URL {url!r} must start with http:// or https://")

        def connect() -> AbstractAsyncContextManager[Any]:
            require_mcp()
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            client = create_mcp_http_client(headers=dict(headers or {}))
            transport: AbstractAsyncContextManager[Any] = _OwningTransport(
                client, streamable_http_client(url, http_client=client)
            )
            return transport

        made = cls(
            connect,
            name=name or url,
            prefix=prefix,
            reconnect=reconnect,
            connect_timeout=connect_timeout,
            register=register,
            on_tool_error=on_tool_error,
            needs_approval=needs_approval,
        )
        made._where = "streamable HTTP" if name is None else f"streamable HTTP at {url}"
        return made

    _where = "custom transport"

    def __repr__(self) -> str:
        state = "connected" if self.connected else "not connected"
        return f"<MCPClient {self.name!r} ({self._where}), {state}>"

    # -- the connection -----------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Whether the connection is up: entered, not dropped, the server still there.

        A stdio server that exits, even while no call is running, is noticed
        when its output closes: `connected` turns False, and the next call
        says it is gone (or, with `reconnect=True`, starts it again).
        """
        return self._session is not None and self._lost is None and not self._ended.is_set()

    async def __aenter__(self) -> MCPClient:
        if self._entered:
            raise RuntimeError(f"MCP server {self.name!r} is already connected")
        require_mcp()
        self._connecting = asyncio.Lock()
        self._entered = True
        try:
            await self._open()
            await self.refresh()
        except BaseException:
            self._entered = False
            await self._close()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._entered = False
        await self._close()
        for name, item in self._tools.items():
            if self.register and self._registry._entries.get(name) is item:
                self._registry.unregister(name)

    async def _open(self) -> None:
        """Start the connection in a task of its own, and wait until it is ready."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Whatever the task reports after a timeout is answered by the error below.
        ready.add_done_callback(_retrieve)
        self._stop = asyncio.Event()
        self._ended = asyncio.Event()
        self._lost = None
        self._task = asyncio.create_task(self._hold(ready), name=f"mcp {self.name}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout)
        except TimeoutError:
            self._give_up()
            raise MCPConnectionError(
                f"MCP server {self.name!r} ({self._where}) did not answer within "
                f"{self.connect_timeout:g}s; check that it starts, or raise connect_timeout"
            ) from None

    def _give_up(self) -> None:
        """Cancel a connection that never became ready; its transport shuts down on its own.

        Nothing was ever asked of the server, so there is nothing to wait for:
        the error comes now, and a subprocess still exiting is left to finish
        in the background (kept in `_CLOSING` until it has).
        """
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        _CLOSING.add(task)
        task.add_done_callback(_CLOSING.discard)
        task.add_done_callback(_retrieve)

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        """Own the transport and the session (anyio wants one task to enter and leave them)."""
        from mcp import ClientSession

        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._connect())
                watched = _WatchedStream(read, self._ended)
                session = await stack.enter_async_context(
                    ClientSession(watched, write, message_handler=self._on_message)
                )
                initialized = await session.initialize()
                self.instructions = initialized.instructions
                self._session = session
                ready.set_result(None)
                while not self._stop.is_set():
                    waits = [
                        asyncio.ensure_future(event.wait())
                        for event in (self._stop, self._changed, self._ended)
                    ]
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                    for waiting in waits:
                        waiting.cancel()
                    if self._ended.is_set() and not self._stop.is_set():
                        self._lost = "the server closed the connection (a stdio server exited)"
                        return
                    if self._changed.is_set() and not self._stop.is_set():
                        self._changed.clear()
                        try:
                            await self._fetch_tools(session)
                        except ValueError as exc:  # a clash of names: keep the tools as they were
                            _log.warning("MCP server %r: tools not refreshed: %s", self.name, exc)
        except Exception as exc:
            if not ready.done():
                ready.set_exception(
                    MCPConnectionError(
                        f"could not connect to MCP server {self.name!r} ({self._where}): "
                        f"{_reason(exc)}"
                    )
                )
            else:
                self._lost = _reason(exc)
        finally:
            self._session = None
            if not ready.done():
                ready.set_exception(MCPConnectionError(f"MCP server {self.name!r} went away"))

    async def _close(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), 10)
        except TimeoutError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _on_message(self, message: Any) -> None:
        if type(message).__name__ == "ToolListChangedNotification":
            self._changed.set()
        elif isinstance(message, Exception):
            _log.debug("MCP server %r: transport error %r", self.name, message)

    async def _session_for_call(self) -> Any:
        """The live session; over a transport that allows it, a dropped one is made again."""
        if not self._entered:
            raise MCPConnectionError(
                f"MCP server {self.name!r} is not connected: use its tools inside "
                f"`async with` the server"
            )
        if self.connected:
            return self._session
        if not self.reconnect:
            raise MCPConnectionError(
                f"MCP server {self.name!r} ({self._where}) is gone ({self._lost or 'closed'}); "
                "connect to it again (a new `async with MCPClient...`)"
            )
        assert self._connecting is not None
        async with self._connecting:
            if not self.connected:
                _log.info("MCP server %r: connecting again (%s)", self.name, self._lost)
                await self._close()
                await self._open()
                await self._fetch_tools(self._session)
        return self._session

    # -- tools --------------------------------------------------------------------

    def tools(self) -> list[Tool[..., Any]]:
        """The server's tools, in its order, as tools of an agent or a `ModelLoop`.

        Each is named `prefix_name` (with a prefix) and calls the server.
        Called directly, a tool returns the result's text (one text), or its
        blocks (`TextBlock`, `ImageBlock`); a failed call raises `MCPToolError`.

        Raises:
            MCPConnectionError: The server was never connected.
        """
        if not self._tools and not self._entered:
            raise MCPConnectionError(
                f"MCP server {self.name!r} is not connected: `async with` it first"
            )
        return list(self._tools.values())

    async def refresh(self) -> list[Tool[..., Any]]:
        """Fetch the tool list again now (it is refreshed on the server's notice anyway)."""
        await self._fetch_tools(await self._session_for_call())
        return self.tools()

    async def call(self, tool: str, arguments: Mapping[str, Any] | None = None) -> MCPToolResult:
        """Call the server's tool `tool` (its own name) and return what it answered, failed or not.

        Raises:
            MCPConnectionError: Not connected, or the connection dropped.
        """
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED

        session = await self._session_for_call()
        try:
            result = await session.call_tool(tool, dict(arguments or {}))
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise self._closed_during(tool) from exc
            refused = TextBlock(f"{exc.message} (MCP error {exc.code})")
            return MCPToolResult([refused], is_error=True)
        except (OSError, EOFError) as exc:
            self._lost = _reason(exc)
            raise MCPConnectionError(
                f"MCP server {self.name!r} ({self._where}) cannot be reached: {self._lost}"
            ) from exc
        return MCPToolResult.of(result)

    def _closed_during(self, tool: str) -> MCPConnectionError:
        """The error of a call the connection closed under: sent, so it may have run."""
        self._lost = f"the connection closed before the call of {tool!r} was answered"
        return MCPConnectionError(
            f"the connection to MCP server {self.name!r} ({self._where}) closed before "
            f"the call of {tool!r} was answered (the server may have run it)"
        )

    async def _fetch_tools(self, session: Any) -> None:
        listed: list[Any] = []
        cursor: str | None = None
        from mcp.types import PaginatedRequestParams

        while True:
            page = await session.list_tools(
                params=None if cursor is None else PaginatedRequestParams(cursor=cursor)
            )
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        fresh: dict[str, Tool[..., Any]] = {}
        remote: dict[str, str] = {}
        for definition in listed:
            name = self._local_name(definition.name)
            if name in fresh:
                raise MCPConnectionError(
                    f"MCP server {self.name!r} has two tools named {name!r} once made valid "
                    "tool names; this server cannot be used as it is"
                )
            made = self._make_tool(name, definition)
            held = self._tools.get(name)
            if held is not None:  # handed out already: it takes the new definition
                _adopt(held, made)
                made = held
            fresh[name] = made
            remote[name] = definition.name
        self._check_names(fresh)
        for name, item in self._tools.items():
            if name not in fresh and self.register and self._registry._entries.get(name) is item:
                self._registry.unregister(name)
        self._tools, self._remote = fresh, remote
        if self.register:
            for item in fresh.values():
                self._registry.register(item)

    def _check_names(self, tools: Mapping[str, Tool[..., Any]]) -> None:
        """Refuse, before registering any, names another tool holds."""
        if not self.register:
            return
        taken = [
            name
            for name, item in tools.items()
            if self._registry._entries.get(name) not in (None, item, self._tools.get(name))
        ]
        if taken:
            hint = "give the server a prefix" if self.prefix is None else "change the prefix"
            raise ValueError(
                f"MCP server {self.name!r}: other tools are already registered as "
                f"{', '.join(map(repr, taken))}; {hint} (MCPClient...(prefix=...))"
            )

    def _local_name(self, remote: str) -> str:
        name = _NOT_IN_NAME.sub("_", remote)
        return name if self.prefix is None else f"{self.prefix}_{name}"

    def _make_tool(self, name: str, definition: Any) -> Tool[..., Any]:
        remote_name = definition.name

        async def call(**arguments: Any) -> Any:
            if name not in self._remote:  # the server dropped it from its list
                gone = f"the MCP server {self.name!r} no longer offers the tool {remote_name!r}"
                raise MCPToolError(remote_name, MCPToolResult([TextBlock(gone)], is_error=True))
            result = await self.call(self._remote[name], arguments)
            if result.is_error:
                raise MCPToolError(remote_name, result)
            return result.for_model()

        return Tool.from_schema(
            name,
            call,
            description=definition.description,
            input_schema=_input_schema(definition.input_schema),
            output_schema=definition.output_schema,
            tags=("mcp", f"mcp:{self.name}"),
            on_tool_error=self.on_tool_error,
            needs_approval=self._approval(remote_name),
        )

    def _approval(self, remote_name: str) -> bool | Callable[[dict[str, Any]], bool]:
        rule = self.needs_approval
        if isinstance(rule, bool):
            return rule
        return lambda arguments: rule(remote_name, arguments)


def __getattr__(name: str) -> Any:
    # The old name, kept for one release: it clashed with the mcp SDK's own server class.
    if name == "MCPServer":
        warnings.warn(
            "pygents_ctx.integrations.mcp.MCPServer is now MCPClient (it connects to a "
            "server; the mcp SDK's MCPServer makes one); the old name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return MCPClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _adopt(held: Tool[..., Any], new: Tool[..., Any]) -> None:
    """Give a tool handed out already the server's new definition (same name, same object)."""
    held.metadata = new.metadata
    held._validator = new._validator


def _input_schema(schema: Any) -> dict[str, Any]:
    if not isinstance(schema, Mapping):
        return {"type": "object", "properties": {}}
    given = dict(schema)  # the server's, as it gave it (MCP requires an object schema)
    given.setdefault("type", "object")
    return given


def _reason(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a future's outcome as seen: nobody awaits it any more, and asyncio need not warn."""
    if not future.cancelled():
        future.exception()


class _WatchedStream:
    """A transport's read stream that sets `ended` when the session stops reading it.

    The session leaves its `async with` on the stream once the stream has
    ended (the server closed its output, as an exiting stdio server does) or
    the session is closing: either way the connection can carry no more calls.
    """

    def __init__(self, stream: Any, ended: asyncio.Event) -> None:
        self._stream = stream
        self._ended = ended

    async def __aenter__(self) -> _WatchedStream:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self._stream.__aexit__(*exc)
        finally:
            self._ended.set()

    def __aiter__(self) -> Any:
        return self._stream.__aiter__()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _OwningTransport:
    """An HTTP transport that closes its HTTP client after it."""

    def __init__(self, client: Any, transport: AbstractAsyncContextManager[Any]) -> None:
        self._client = client
        self._transport = transport

    async def __aenter__(self) -> Any:
        await self._client.__aenter__()
        try:
            return await self._transport.__aenter__()
        except BaseException:
            await self._client.__aexit__(None, None, None)
            raise

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self._transport.__aexit__(*exc)
        finally:
            await self._client.__aexit__(None, None, None)
