"""MCP servers as tools: the `mcp` SDK's own server in a subprocess (stdio) and over HTTP."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from pygents_ctx import (
    Agent,
    AgentRegistry,
    AnthropicModel,
    ContextConfig,
    ImageBlock,
    LoopStop,
    MemoryContextStore,
    ModelLoop,
    OpenAIModel,
    TextBlock,
    Turn,
    TurnTimeoutError,
    tool,
)
from pygents_ctx.errors import ToolArgumentsError
from pygents_ctx.hooks import ToolHook, hook
from pygents_ctx.integrations.mcp import (
    MCPClient,
    MCPConnectionError,
    MCPToolError,
)
from pygents_ctx.registry import ToolRegistry
from pygents_ctx.testing import ScriptedModel, assistant, tool_call
from tests.integrations.conftest import ROOT, SERVER_MODULE, start_http_server
from tests.integrations.mcp_tools_server import PIXEL
from tests.model.fake_api import (
    FakeAPI,
    chat_completion,
    json_reply,
    message,
    text_block,
    tool_use_block,
)


def _registered() -> list[str]:
    return [t.key for t in ToolRegistry.all()]


def stdio(**options: Any) -> MCPClient:
    options.setdefault("prefix", "t")
    return MCPClient.stdio(sys.executable, ["-m", SERVER_MODULE], cwd=str(ROOT), **options)


@pytest.fixture
async def server() -> AsyncIterator[MCPClient]:
    async with stdio() as connected:
        yield connected


def by_name(server: MCPClient) -> dict[str, Any]:
    return {item.key: item for item in server.tools()}


async def eventually(check: Any, seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the condition never held")


async def test_the_servers_tools_are_prefixed_registered_and_described(server: MCPClient) -> None:
    tools = by_name(server)

    assert list(tools)[:4] == ["t_echo", "t_add", "t_pixel", "t_fail"]
    echo = tools["t_echo"]
    assert ToolRegistry.get("t_echo") is echo
    assert echo.metadata.description == "Repeat the text."
    assert echo.metadata.input_schema == {
        "type": "object",
        "properties": {
            "text": {"title": "Text", "type": "string"},
            "times": {"default": 1, "title": "Times", "type": "integer"},
        },
        "required": ["text"],
        "title": "echoArguments",
    }
    assert "mcp" in echo.tags


async def test_results_map_to_text_images_and_structured_content(server: MCPClient) -> None:
    tools = by_name(server)

    assert await tools["t_echo"](text="hi", times=2) == "hi hi"
    assert await tools["t_pixel"]() == [TextBlock("a red pixel"), ImageBlock("image/png", PIXEL)]
    assert json.loads(await tools["t_add"](numbers=[1, 2, 3])) == {"total": 6, "count": 3}
    raw = await server.call("add", {"numbers": [4]})
    assert raw.structured == {"total": 4, "count": 1}
    assert not raw.is_error


async def test_a_server_side_error_is_raised_on_a_direct_call(server: MCPClient) -> None:
    with pytest.raises(MCPToolError, match="refused: no reason") as caught:
        await by_name(server)["t_fail"](reason="no reason")

    assert caught.value.tool == "fail"
    assert caught.value.result.is_error


async def test_arguments_are_checked_against_the_servers_schema_before_calling(
    server: MCPClient,
) -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        await by_name(server)["t_echo"](times="twice")

    assert [str(p) for p in caught.value.problems] == [
        "text: required, not given",
        "times: expected integer; got string 'twice'",
    ]


async def test_turns_of_mcp_tools_get_hooks_and_timeouts(server: MCPClient) -> None:
    seen: list[Any] = []

    @hook(ToolHook.AFTER_INVOKE, tags=["mcp"])
    async def after(result: Any) -> None:
        seen.append(result)

    tools = by_name(server)
    agent = Agent("runner", "runs MCP tools", server.tools())
    await agent.put(Turn(tools["t_echo"], kwargs={"text": "hooked"}))
    await agent.put(Turn(tools["t_slow"], kwargs={"seconds": 5}, timeout=0.3))

    with pytest.raises(TurnTimeoutError):
        async for _ in agent.run():
            pass
    assert seen == ["hooked"]
    assert await tools["t_echo"](text="after the timeout") == "after the timeout"


async def test_on_tool_error_return_makes_a_server_error_the_turns_value() -> None:
    async with stdio(on_tool_error="return") as server:
        tools = by_name(server)
        agent = Agent("tolerant", "keeps going", server.tools())
        await agent.put(Turn(tools["t_fail"], kwargs={"reason": "nope"}))
        await agent.put(Turn(tools["t_echo"], kwargs={"text": "next"}))

        values = [value async for _, value in agent.run()]

    assert isinstance(values[0], MCPToolError)
    assert "refused: nope" in str(values[0])
    assert values[1] == "next"


async def test_needs_approval_stops_a_model_loop_before_the_call() -> None:
    def risky(tool: str, arguments: dict[str, Any]) -> bool:
        return tool == "echo" and arguments.get("times", 1) > 1

    async with stdio(needs_approval=risky) as server:
        model = ScriptedModel(
            [assistant(tool_call("t_echo", text="a"), tool_call("t_echo", text="b", times=3))]
        )
        agent = Agent("careful", "asks first", server.tools(), context=memory())
        finished = await ModelLoop(agent, model).run("Echo.")

    assert finished.reason is LoopStop.APPROVAL
    assert [call.input for call in finished.pending] == [{"text": "b", "times": 3}]


def memory() -> ContextConfig:
    return ContextConfig(MemoryContextStore())


async def test_the_list_is_fetched_again_when_the_server_says_it_changed(
    server: MCPClient,
) -> None:
    before = server.tools()

    assert await by_name(server)["t_grow"](name="extra") == "added extra"
    await eventually(lambda: "t_extra" in by_name(server))

    assert server.tools()[: len(before)] == before  # the same objects
    assert await ToolRegistry.get("t_extra")(word="hi") == "extra: hi"

    pixel = by_name(server)["t_pixel"]
    assert await by_name(server)["t_shrink"](name="pixel") == "removed pixel"
    await eventually(lambda: "t_pixel" not in by_name(server))
    assert "t_pixel" not in _registered()
    with pytest.raises(MCPToolError, match="no longer offers the tool 'pixel'"):
        await pixel()


async def test_two_servers_with_the_same_names_need_a_prefix(server: MCPClient) -> None:
    with pytest.raises(ValueError, match="change the prefix"):
        async with stdio():
            pass
    async with stdio(prefix="u") as other:
        assert "u_echo" in by_name(other)
    assert "u_echo" not in _registered()  # unregistered on leaving
    assert "t_echo" in _registered()


async def test_a_server_killed_mid_call_is_a_clear_error_and_stays_gone() -> None:
    async with stdio() as server:
        tools = by_name(server)
        with pytest.raises(MCPConnectionError, match="closed before the call of 'die' was"):
            await tools["t_die"]()
        with pytest.raises(MCPConnectionError, match="is gone"):
            await tools["t_echo"](text="anyone?")
        assert not server.connected


async def test_a_server_that_exited_between_calls_is_noticed_while_idle() -> None:
    async with stdio() as server:
        tools = by_name(server)
        assert await tools["t_exit_soon"]() == "bye"
        await eventually(lambda: not server.connected)  # no call needed to notice
        # Never sent, so never "may have run": it is simply gone.
        with pytest.raises(MCPConnectionError, match="is gone") as gone:
            await tools["t_echo"](text="anyone?")
        assert "may have run" not in str(gone.value)


async def test_a_stdio_server_that_exited_while_idle_is_started_again_by_the_next_call() -> None:
    async with stdio(reconnect=True) as server:
        tools = by_name(server)
        assert await tools["t_exit_soon"]() == "bye"
        await eventually(lambda: not server.connected)
        assert await tools["t_echo"](text="back") == "back"  # the first call runs
        assert server.connected


async def test_connect_timeout_is_kept_against_a_silent_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A process that never speaks MCP: it neither answers nor exits on its own.
    silent = MCPClient.stdio(
        sys.executable, ["-c", "import time; time.sleep(60)"], connect_timeout=1
    )
    began = asyncio.get_running_loop().time()
    with pytest.raises(MCPConnectionError, match="did not answer within 1s"):
        async with silent:
            pass
    assert asyncio.get_running_loop().time() - began < 2.0
    assert not silent.connected
    await asyncio.sleep(3)  # the subprocess is shut down meanwhile, in the background
    gc.collect()
    assert "never retrieved" not in caplog.text


async def test_a_stdio_server_made_to_reconnect_is_started_again() -> None:
    async with stdio(reconnect=True) as server:
        tools = by_name(server)
        with pytest.raises(MCPConnectionError, match="closed before the call of 'die' was"):
            await tools["t_die"]()  # not repeated: it may have run
        assert not server.connected
        assert await tools["t_echo"](text="again") == "again"  # a new process
        assert server.connected
        assert json.loads(await tools["t_add"](numbers=[1, 2])) == {"total": 3, "count": 2}


async def test_a_tool_used_outside_the_connection_says_so() -> None:
    async with stdio() as server:
        echo = by_name(server)["t_echo"]
    with pytest.raises(MCPConnectionError, match="not connected"):
        await echo(text="late")


async def test_a_server_that_does_not_start_is_a_clear_error() -> None:
    missing = MCPClient.stdio(sys.executable, ["-c", "import sys; sys.exit(4)"], connect_timeout=10)
    with pytest.raises(MCPConnectionError, match="could not connect"):
        async with missing:
            pass


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="prefix 'a b'"):
        MCPClient.stdio("x", prefix="a b")
    with pytest.raises(ValueError, match="on_tool_error"):
        MCPClient.stdio("x", on_tool_error="ignore")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs_approval must be"):
        MCPClient.stdio("x", needs_approval="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must start with http"):
        MCPClient.http("127.0.0.1:80/mcp")
    with pytest.raises(MCPConnectionError, match="not connected"):
        MCPClient.stdio("x").tools()


async def test_a_model_loop_calls_mcp_tools_in_parallel_and_reads_failures(
    api: FakeAPI, openai_model: OpenAIModel, server: MCPClient
) -> None:
    calls = [
        ("call_1", "t_echo", '{"text": "ping"}'),
        ("call_2", "t_fail", '{"reason": "closed"}'),
        ("call_3", "t_echo", '{"times": 2}'),
    ]
    api.script(json_reply(chat_completion(None, calls)), json_reply(chat_completion("Done.")))
    agent = Agent(
        "mcp-user", "Uses MCP", server.tools(), context=ContextConfig(MemoryContextStore())
    )

    finished = await ModelLoop(agent, openai_model).run("Use the tools.")

    assert finished.text == "Done."
    sent = api.requests[0].body["tools"]
    echo = next(t["function"] for t in sent if t["function"]["name"] == "t_echo")
    assert echo["parameters"]["required"] == ["text"]
    assert echo["description"] == "Repeat the text."
    answers = {
        m["tool_call_id"]: m["content"]
        for m in api.requests[1].body["messages"]
        if m["role"] == "tool"
    }
    assert answers["call_1"] == "ping"
    assert answers["call_2"] == "Error: MCPToolError: Error executing tool fail: refused: closed"
    assert answers["call_3"].startswith("Error: ToolArgumentsError: tool 't_echo'")


async def test_an_image_from_an_mcp_tool_reaches_the_model(
    api: FakeAPI, anthropic_model: AnthropicModel, server: MCPClient
) -> None:
    api.script(
        json_reply(message(tool_use_block("toolu_1", "t_pixel", {}))),
        json_reply(message(text_block("A red pixel."))),
    )
    agent = Agent("looker", "Looks", server.tools(), context=ContextConfig(MemoryContextStore()))

    finished = await ModelLoop(agent, anthropic_model).run("What is the picture?")

    assert finished.text == "A red pixel."
    [result] = [
        block
        for m in api.requests[1].body["messages"]
        if isinstance(m["content"], list)
        for block in m["content"]
        if block.get("type") == "tool_result"
    ]
    assert [part["type"] for part in result["content"]] == ["text", "image"]
    assert result["content"][1]["source"]["media_type"] == "image/png"


async def test_over_http_headers_are_sent_and_a_dropped_server_is_reconnected() -> None:
    from tests.integrations.conftest import free_port

    port = free_port()
    process = start_http_server(port)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with MCPClient.http(url, headers={"Authorization": "Bearer s3cret"}) as server:
            tools = by_name(server)
            assert await tools["whoami"]() == "Bearer s3cret"
            slow = asyncio.create_task(tools["slow"](seconds=10))
            await asyncio.sleep(0.5)
            process.kill()
            process.wait()
            with pytest.raises(MCPConnectionError, match="closed before the call of 'slow' was"):
                await slow
            with pytest.raises(MCPConnectionError, match="could not connect"):
                await tools["echo"](text="down")
            process = start_http_server(port)
            assert await tools["echo"](text="back") == "back"
            assert server.connected
    finally:
        process.kill()
        process.wait()


SAVED_AGENT_SCRIPT = """
import asyncio, sys
from pygents_ctx import Agent
from pygents_ctx.integrations.mcp import MCPClient

async def main():
    saved = sys.stdin.read()
    server = MCPClient.stdio(sys.executable, ["-m", sys.argv[1]], prefix="t")
    async with server:
        agent = Agent.from_json(saved)
        print([item.key for item in agent.tools])
        print([value async for _, value in agent.run()])

asyncio.run(main())
"""


async def test_an_agent_saved_with_mcp_tools_loads_in_a_new_process(server: MCPClient) -> None:
    @tool
    async def local(text: str) -> str:
        """A local tool beside the MCP ones."""
        return text.upper()

    tools = by_name(server)
    agent = Agent("keeper", "keeps MCP tools", [tools["t_echo"], tools["t_add"]])
    await agent.put(Turn(tools["t_echo"], kwargs={"text": "again", "times": 2}))
    saved = agent.to_json()
    AgentRegistry.unregister("keeper")

    loaded = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", SAVED_AGENT_SCRIPT, SERVER_MODULE],
        input=saved if isinstance(saved, str) else saved.decode(),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )

    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.splitlines() == ["['t_echo', 't_add']", "['again again']"]


def test_the_old_name_still_works_for_a_release_with_a_warning() -> None:
    import pygents_ctx.integrations.mcp as module

    with pytest.warns(DeprecationWarning, match="now MCPClient"):
        old = module.MCPServer
    assert old is MCPClient
    with pytest.raises(AttributeError, match="no attribute 'MCPServr'"):
        module.MCPServr
