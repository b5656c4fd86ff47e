"""The parts of the MCP integration in process: content both ways, and the served tools."""

from __future__ import annotations

import base64
from typing import Any

import mcp.types as types
import pytest
from mcp import Client

from pygents_ctx import ContextItem, ImageBlock, Message, TextBlock, Tool, tool
from pygents_ctx.integrations._mcp_content import MCPToolResult, to_mcp_content
from pygents_ctx.integrations.mcp import mcp_server, serve_tools
from tests.integrations import served_tools
from tests.integrations.mcp_tools_server import PIXEL

ENCODED = base64.b64encode(PIXEL).decode()


def result(*content: Any, structured: dict[str, Any] | None = None) -> MCPToolResult:
    return MCPToolResult.of(
        types.CallToolResult(content=list(content), structured_content=structured)
    )


def test_every_kind_of_mcp_content_becomes_a_block() -> None:
    mapped = result(
        types.TextContent(type="text", text="hello"),
        types.ImageContent(type="image", data=ENCODED, mime_type="image/png"),
        types.ImageContent(type="image", data=ENCODED, mime_type="image/svg+xml"),
        types.ImageContent(type="image", data="not base64!", mime_type="image/png"),
        types.AudioContent(type="audio", data=ENCODED, mime_type="audio/wav"),
        types.ResourceLink(type="resource_link", uri="file:///a.txt", name="a.txt"),
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(uri="file:///b.txt", text="the text of b"),
        ),
        types.EmbeddedResource(
            type="resource",
            resource=types.BlobResourceContents(
                uri="file:///c.bin", blob=ENCODED, mime_type="application/octet-stream"
            ),
        ),
    )

    assert mapped.content == [
        TextBlock("hello"),
        ImageBlock("image/png", PIXEL),
        TextBlock(f"[an image of type image/svg+xml, {len(PIXEL)} bytes]"),
        TextBlock("[an image (image/png) whose data is not base64]"),
        TextBlock("[audio of type audio/wav]"),
        TextBlock("[resource file:///a.txt (a.txt)]"),
        TextBlock("the text of b"),
        TextBlock("[resource file:///c.bin of type application/octet-stream]"),
    ]
    assert isinstance(mapped.for_model(), list)


def test_what_the_model_reads_of_a_result() -> None:
    assert result(types.TextContent(type="text", text="one")).for_model() == "one"
    two = result(types.TextContent(type="text", text="a"), types.TextContent(type="text", text="b"))
    assert two.for_model() == "a\nb"
    assert result().for_model() == ""
    structured_only = result(structured={"total": 3})
    assert structured_only.for_model() == '{"total":3}'
    assert structured_only.text == '{"total":3}'
    picture = result(
        types.ImageContent(type="image", data=ENCODED, mime_type="image/png"),
        structured={"size": 1},
    )
    assert picture.for_model() == [TextBlock('{"size":1}'), ImageBlock("image/png", PIXEL)]


def test_tool_values_become_mcp_content() -> None:
    assert to_mcp_content("hi") == ([{"type": "text", "text": "hi"}], None)
    assert to_mcp_content(TextBlock("t")) == ([{"type": "text", "text": "t"}], None)
    image = {"type": "image", "data": ENCODED, "mimeType": "image/png"}
    assert to_mcp_content(
        Message("assistant", [TextBlock("x"), ImageBlock("image/png", PIXEL)])
    ) == (
        [{"type": "text", "text": "x"}, image],
        None,
    )
    assert to_mcp_content({"a": 1}) == ([{"type": "text", "text": '{"a":1}'}], {"a": 1})
    assert to_mcp_content([1, 2]) == ([{"type": "text", "text": "[1,2]"}], None)
    item = ContextItem(content="a document", description="doc")
    assert to_mcp_content(item) == ([{"type": "text", "text": "a document"}], None)


async def test_served_tools_in_process_through_the_sdk_client() -> None:
    server = mcp_server(
        [served_tools.forecast, served_tools.stats, served_tools.words], name="in-process"
    )
    async with Client(server) as client:
        listed = {item.name: item for item in (await client.list_tools()).tools}
        forecast = await client.call_tool("forecast", {"city": "Oslo"})
        stats = await client.call_tool("stats", {"text": "a b"})
        words = await client.call_tool("words", {"text": "x y"})
        missing = await client.call_tool("nowcast", {})

    assert listed["forecast"].description == "The weather forecast for a city."
    assert listed["stats"].output_schema == served_tools.stats.metadata.output_schema
    assert forecast.content[0].text == "Oslo: sunny for 3 days, 21C"
    assert stats.structured_content == {"letters": 2, "words": 2}
    assert words.content[0].text == '["x","y"]'
    assert missing.is_error
    assert "the tools are: forecast, stats, words" in missing.content[0].text


async def test_subtools_are_served_under_their_keys() -> None:
    @tool
    async def files() -> str:
        """The file tools."""
        return "files"

    @files.subtool
    async def read(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    async with Client(mcp_server([files])) as client:
        names = [item.name for item in (await client.list_tools()).tools]
        answer = await client.call_tool("files.read", {"path": "a.txt"})

    assert names == ["files", "files.read"]
    assert answer.content[0].text == "contents of a.txt"


def test_what_cannot_be_served_is_refused() -> None:
    @tool
    async def echo(text: str) -> str:
        return text

    async def twin(text: str) -> str:
        return text

    twin.__name__ = "echo"

    async def größe() -> str:
        return "big"

    with pytest.raises(ValueError, match="two tools are named 'echo'"):
        mcp_server([echo, Tool(twin)])
    with pytest.raises(ValueError, match="cannot be served over MCP"):
        mcp_server([Tool(größe)])


async def test_an_unknown_transport_is_refused() -> None:
    with pytest.raises(ValueError, match="transport must be 'stdio' or 'http'"):
        await serve_tools([served_tools.forecast], transport="sse")  # type: ignore[arg-type]
