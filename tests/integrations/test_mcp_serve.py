"""Tools served over MCP: `pygents-ctx mcp serve`, called by the `mcp` SDK's own client."""

from __future__ import annotations

import base64
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from pygents_ctx.cli import main
from pygents_ctx.cli._mcp import load_tools
from pygents_ctx.integrations.mcp import MCPClient, mcp_server
from tests.integrations import served_tools
from tests.integrations.conftest import ROOT, free_port
from tests.integrations.mcp_tools_server import PIXEL

SERVE = [sys.executable, "-m", "pygents_ctx", "mcp", "serve"]


@asynccontextmanager
async def stdio_session(spec: str) -> AsyncIterator[ClientSession]:
    parameters = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], spec], cwd=str(ROOT))
    async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@pytest.fixture
def http_url() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [*SERVE, "tests.integrations.served_tools", "--http", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        import socket

        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() < deadline, "the server did not start listening"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)
        if process.stderr:
            process.stderr.close()


def texts(result: Any) -> list[str]:
    return [block.text for block in result.content if block.type == "text"]


async def test_stdio_lists_the_tools_with_their_schemas_and_descriptions() -> None:
    async with stdio_session("tests.integrations.served_tools") as session:
        listed = {item.name: item for item in (await session.list_tools()).tools}

    assert sorted(listed) == ["forecast", "picture", "refuse", "stats", "words"]
    forecast = listed["forecast"]
    assert forecast.description == served_tools.forecast.metadata.description
    assert forecast.input_schema == served_tools.forecast.metadata.input_schema
    assert forecast.input_schema["properties"]["unit"]["enum"] == ["C", "F"]
    assert listed["stats"].output_schema == served_tools.stats.metadata.output_schema
    assert listed["forecast"].output_schema is None  # MCP takes object output schemas only


async def test_stdio_calls_return_text_structured_content_images_and_errors() -> None:
    async with stdio_session("tests.integrations.served_tools") as session:
        forecast = await session.call_tool("forecast", {"city": "Oslo", "days": 2})
        stats = await session.call_tool("stats", {"text": "two words"})
        picture = await session.call_tool("picture", {})
        refused = await session.call_tool("refuse", {"reason": "tests"})
        bad = await session.call_tool("forecast", {"days": "soon"})
        words = await session.call_tool("words", {"text": "a b c"})
        unknown = await session.call_tool("nowcast", {})

    assert (texts(forecast), forecast.is_error) == (["Oslo: sunny for 2 days, 21C"], False)
    assert stats.structured_content == {"letters": 8, "words": 2}
    assert [block.type for block in picture.content] == ["text", "image"]
    assert base64.b64decode(picture.content[1].data) == PIXEL
    assert refused.is_error
    assert texts(refused) == ["PermissionError: not allowed: tests"]
    assert bad.is_error
    assert "city: required, not given" in texts(bad)[0]
    assert "days: expected integer" in texts(bad)[0]
    assert texts(words) == ['["a","b","c"]']
    assert unknown.is_error
    assert "there is no tool 'nowcast'" in texts(unknown)[0]


async def test_http_serves_the_named_list_to_an_sdk_client(http_url: str) -> None:
    async with (
        streamable_http_client(http_url) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listed = [item.name for item in (await session.list_tools()).tools]
        answer = await session.call_tool("forecast", {"city": "Lima", "unit": "F"})

    assert sorted(listed) == ["forecast", "picture", "refuse", "stats", "words"]
    assert texts(answer) == ["Lima: sunny for 3 days, 21F"]


async def test_served_tools_are_usable_as_tools_again_through_mcp_server(http_url: str) -> None:
    async with MCPClient.http(http_url, prefix="remote") as remote:
        tools = {item.key: item for item in remote.tools()}
        assert await tools["remote_forecast"](city="Rome") == "Rome: sunny for 3 days, 21C"
        assert tools["remote_forecast"].metadata.input_schema == (
            served_tools.forecast.metadata.input_schema
        )


def test_a_module_and_name_pick_the_tools_and_bad_specs_are_clear_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["mcp", "serve", "tests.integrations.no_such_module"]) == 1
    assert "cannot import 'tests.integrations.no_such_module'" in capsys.readouterr().err
    assert main(["mcp", "serve", "tests.integrations.served_tools:missing"]) == 1
    assert "has no 'missing'" in capsys.readouterr().err
    assert main(["mcp", "serve", "tests.integrations.served_tools:Stats"]) == 1
    assert "not a @tool or a list of them" in capsys.readouterr().err
    assert main(["mcp", "serve", "tests.integrations.served_tools", "--http", "--port", "0"]) == 2
    assert "must be a port number from 1 to 65535" in capsys.readouterr().err
    assert main(["mcp", "serve", "tests.integrations.conftest"]) == 1
    assert "defines no @tool at its top level" in capsys.readouterr().err
    assert load_tools("tests.integrations.served_tools:forecast") == [served_tools.forecast]
    assert {item.key for item in load_tools("tests.integrations.served_tools")} == {
        "forecast",
        "stats",
        "picture",
        "refuse",
        "words",
    }


async def test_a_named_list_is_served_alone() -> None:
    async with stdio_session("tests.integrations.served_tools:PUBLIC") as session:
        listed = sorted(item.name for item in (await session.list_tools()).tools)

    assert listed == ["forecast", "stats"]


def test_mcp_server_refuses_what_it_cannot_serve() -> None:
    with pytest.raises(ValueError, match="no tools to serve"):
        mcp_server([])
    with pytest.raises(TypeError, match=r"tools\[0\] must be a Tool"):
        mcp_server([print])  # type: ignore[list-item]
