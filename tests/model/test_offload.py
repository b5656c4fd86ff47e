"""Offloaded tool results: the stub the history keeps, the blob, the read tool, and the way
they survive saving, loading, export, import and the viewer."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    Agent,
    AnthropicModel,
    AutoCompactStore,
    ClearToolResults,
    ContextConfig,
    HeuristicTokenCounter,
    ImageBlock,
    InMemoryBlobStore,
    MemoryContextStore,
    Message,
    ModelLoop,
    OffloadedResult,
    OpenAIModel,
    OpenAIResponsesModel,
    PostgresContextStore,
    SlidingWindow,
    SQLiteBlobStore,
    SQLiteContextStore,
    TextBlock,
    ToolPolicy,
    ToolResultBlock,
    ToolResultNotFoundError,
    ToolResultOffload,
    ToolUseBlock,
    TruncateToolResults,
    connect,
    connect_postgres,
    from_dict,
    to_dict,
    tool,
)
from pygents_ctx.cli import main
from pygents_ctx.cli.viewer import SQLiteSource, Viewer
from pygents_ctx.cli.viewer._server import route
from pygents_ctx.context.tokens import DEFAULT_COUNTER
from pygents_ctx.memory import PostgresBlobStore
from pygents_ctx.testing import ScriptedModel, ScriptedSummarizer, assistant, tool_call
from tests import postgres_server

from .fake_api import (
    FakeAPI,
    chat_completion,
    json_reply,
    message,
    text_block,
    tool_use_block,
)
from .fake_responses import call_item, message_item, response

LOG = "".join(f"{n:05d} GET /api/items/{n} 200 {n * 7 % 997}ms\n" for n in range(4000))
HANDLE = "tool-results/" + hashlib.sha256(LOG.encode()).hexdigest()  # named by its content


@pytest.fixture
def read_log() -> Any:
    @tool
    async def read_log() -> str:
        """Read the server's log."""
        return LOG

    return read_log


def loop_for(model: Any, tools: list[Any], store: Any = None, **options: Any) -> ModelLoop:
    context = ContextConfig(MemoryContextStore() if store is None else store)
    return ModelLoop(
        Agent("ops", "Reads logs", tools, context=context, replace=True), model, **options
    )


async def history(loop: ModelLoop) -> list[Message]:
    assert loop.agent.context is not None
    return await loop.agent.context.history()


def only_result(messages: list[Message]) -> ToolResultBlock:
    (result,) = [r for m in messages for r in m.tool_results]
    return result


# -- the stub in the history, the tool the model reads the rest with -------------------------


async def test_a_large_result_is_kept_as_a_stub_and_the_model_reads_the_rest(
    read_log: Any,
) -> None:
    model = ScriptedModel([assistant(tool_call("read_log")), "The log is fine."])
    loop = loop_for(model, [read_log])

    await loop.run("Anything wrong in the log?")

    stored = only_result(await history(loop))
    stub = stored.offloaded
    assert stub is not None
    assert (stub.chars, stub.tokens) == (len(LOG), DEFAULT_COUNTER(LOG))
    assert LOG.startswith(stub.head)
    assert LOG.endswith(stub.tail)
    assert len(stub.head) == 2000
    assert len(stub.tail) == 1000
    assert stub.media_type == "text/plain"
    assert stored.content == stub.stub_text()
    assert f'read_tool_result(handle="{stub.handle}", offset=2000' in stored.content
    assert DEFAULT_COUNTER(stored.content) <= 8000 < DEFAULT_COUNTER(LOG)
    # What the model saw next: the stub, and the tool to read the rest with.
    second = model.calls[1]
    assert second.messages[-1].tool_results[0].content == stored.content
    assert "read_tool_result" in second.tools
    assert "read_tool_result" not in model.calls[0].tools
    whole = await loop.read_tool_result(stub.handle)
    assert whole == LOG
    assert stub.head + await loop.read_tool_result(stub.handle, len(stub.head)) == LOG


async def test_the_read_tool_returns_a_page_and_says_where_the_next_starts(
    read_log: Any,
) -> None:
    model = ScriptedModel(
        [
            assistant(tool_call("read_log")),
            assistant(tool_call("read_tool_result", handle=HANDLE, offset=300, length=50_000)),
            assistant(tool_call("read_tool_result", handle=HANDLE, offset=len(LOG) - 20)),
            "done",
        ]
    )
    small = ToolResultOffload(max_tokens=256, head_chars=300, tail_chars=100, page_chars=1000)
    loop = loop_for(model, [read_log], tool_policy=ToolPolicy(offload=small))

    await loop.run("Read the log.")

    first, last = [m.tool_results[0] for m in (await history(loop))[-4:-1:2]]
    assert first.offloaded is None
    assert last.offloaded is None
    assert first.content == (
        LOG[300:1300] + f"\n[chars 300 to 1,300 of {len(LOG):,}; read on with "
        f'read_tool_result(handle="{HANDLE}", offset=1300)]'
    )
    assert last.content == (
        LOG[-20:] + f"\n[chars {len(LOG) - 20:,} to {len(LOG):,} of {len(LOG):,}: "
        "the end of the result]"
    )


async def test_the_read_tool_is_offered_while_the_window_shows_a_stub(read_log: Any) -> None:
    model = ScriptedModel([assistant(tool_call("read_log")), "read", "later", "again"])
    loop = loop_for(model, [read_log])
    await loop.run("Read the log.")
    assert loop.agent.context is not None

    loop.agent.context.strategy = SlidingWindow(2)  # the stub falls out of the window
    await loop.run("Anything else?")
    loop.agent.context.strategy = SlidingWindow(100)
    await loop.run("And now?")

    assert ["read_tool_result" in call.tools for call in model.calls] == [
        False,
        True,
        False,
        True,
    ]


async def test_a_small_result_stays_whole_and_no_read_tool_is_offered() -> None:
    @tool
    async def status() -> str:
        """The service's status."""
        return "ok"

    model = ScriptedModel([assistant(tool_call("status")), "It is ok."])
    loop = loop_for(model, [status])

    await loop.run("Status?")

    result = only_result(await history(loop))
    assert (result.content, result.offloaded) == ("ok", None)
    assert all("read_tool_result" not in call.tools for call in model.calls)


async def test_offload_none_keeps_every_result_whole(read_log: Any) -> None:
    model = ScriptedModel([assistant(tool_call("read_log")), "long"])
    loop = loop_for(model, [read_log], tool_policy=ToolPolicy(offload=None))

    await loop.run("Read it.")

    result = only_result(await history(loop))
    assert (result.content, result.offloaded) == (LOG, None)
    with pytest.raises(ValueError, match="does not offload tool results"):
        await loop.read_tool_result("tool-results/00")


async def test_json_results_are_marked_and_images_stay_after_the_stub() -> None:
    rows = [{"id": n, "name": f"row {n}"} for n in range(3000)]
    image = b"\x89PNG\r\n"

    @tool
    async def query() -> str:
        """Run the query."""
        return json.dumps(rows)

    @tool
    async def snapshot() -> Any:
        """A snapshot and its log."""
        return [TextBlock(LOG), ImageBlock("image/png", image)]

    model = ScriptedModel([assistant(tool_call("query"), tool_call("snapshot")), "seen"])
    loop = loop_for(model, [query, snapshot])

    await loop.run("Go.")

    json_result, image_result = (await history(loop))[2].tool_results
    assert json_result.offloaded is not None
    assert image_result.offloaded is not None
    assert json_result.offloaded.media_type == "application/json"
    assert image_result.offloaded.media_type == "text/plain"
    assert [type(part).__name__ for part in image_result.content] == ["TextBlock", "ImageBlock"]
    assert image_result.content[1].data == image  # type: ignore[index, union-attr]
    assert await loop.read_tool_result(json_result.offloaded.handle) == json.dumps(rows)


async def test_the_same_text_twice_is_one_blob(read_log: Any) -> None:
    blobs = InMemoryBlobStore()
    model = ScriptedModel([assistant(tool_call("read_log"), tool_call("read_log")), "same"])
    loop = loop_for(model, [read_log], tool_policy=ToolPolicy(offload=ToolResultOffload(blobs)))

    await loop.run("Twice.")

    first, second = (await history(loop))[2].tool_results
    assert first.offloaded == second.offloaded
    assert [info.name for info in await blobs.list()] == [first.offloaded.handle]  # type: ignore[union-attr]


# -- errors ----------------------------------------------------------------------------------


async def test_a_foreign_or_unknown_handle_is_a_clear_error_for_the_model_and_in_python(
    read_log: Any,
) -> None:
    blobs = InMemoryBlobStore()
    other = loop_for(
        ScriptedModel([assistant(tool_call("read_log")), "ok"]),
        [read_log],
        tool_policy=ToolPolicy(offload=ToolResultOffload(blobs)),
    )
    await other.run("Read it.")
    foreign = only_result(await history(other)).offloaded.handle  # type: ignore[union-attr]
    model = ScriptedModel(
        [
            assistant(tool_call("read_tool_result", handle=foreign)),
            assistant(tool_call("read_tool_result", handle="tool-results/nope")),
            "I cannot.",
        ]
    )
    loop = loop_for(model, [read_log], tool_policy=ToolPolicy(offload=ToolResultOffload(blobs)))

    await loop.run("Read the other session's log.")

    results = [m.tool_results[0] for m in (await history(loop))[2:5:2]]
    assert all(result.is_error for result in results)
    assert results[0].content == (
        f"ToolResultNotFoundError: no offloaded tool result '{foreign}' in this conversation "
        f"(session '{loop.agent.context.session_id}'); use a handle that one of its stubs names"  # type: ignore[union-attr]
    )
    assert "no offloaded tool result 'tool-results/nope'" in str(results[1].content)
    with pytest.raises(ToolResultNotFoundError, match="in this conversation") as raised:
        await loop.read_tool_result(foreign)
    assert isinstance(raised.value, KeyError)


async def test_bad_offsets_and_a_lost_blob_are_clear_errors(read_log: Any) -> None:
    blobs = InMemoryBlobStore()
    loop = loop_for(
        ScriptedModel([assistant(tool_call("read_log")), "ok"]),
        [read_log],
        tool_policy=ToolPolicy(offload=ToolResultOffload(blobs)),
    )
    await loop.run("Read it.")
    handle = only_result(await history(loop)).offloaded.handle  # type: ignore[union-attr]

    with pytest.raises(ValueError, match=f"offset {len(LOG)} is past the end .* give an offset"):
        await loop.read_tool_result(handle, len(LOG))
    with pytest.raises(ValueError, match="offset must be at least 0, not -1"):
        await loop.read_tool_result(handle, -1)
    with pytest.raises(ValueError, match="length must be at least 1, not 0"):
        await loop.read_tool_result(handle, 0, 0)
    with pytest.raises(TypeError, match="offset must be an int, not str '3'"):
        await loop.read_tool_result(handle, "3")  # type: ignore[arg-type]
    await blobs.delete(handle)
    with pytest.raises(
        ToolResultNotFoundError, match="in the blob store; was it written to another store"
    ):
        await loop.read_tool_result(handle)


@pytest.mark.parametrize(
    ("options", "error", "text"),
    [
        ({"max_tokens": 255}, ValueError, "max_tokens must be at least 256, not 255"),
        ({"head_chars": -1}, ValueError, "head_chars must be at least 0, not -1"),
        ({"page_chars": 0}, ValueError, "page_chars must be at least 1, not 0"),
        ({"tail_chars": 1.5}, TypeError, "tail_chars must be an int, not float 1.5"),
        ({"blobs": "blobs"}, TypeError, "blobs must be a BlobStore"),
        ({"counter": 3}, TypeError, "counter must be a callable"),
    ],
)
def test_bad_offload_options_are_refused(
    options: dict[str, Any], error: type[Exception], text: str
) -> None:
    blobs = options.pop("blobs", None)
    with pytest.raises(error, match=text):
        ToolResultOffload(blobs, **options)


def test_a_tool_named_read_tool_result_is_refused_unless_offloading_is_off() -> None:
    @tool
    async def read_tool_result(handle: str) -> str:
        """Mine."""
        return handle

    with pytest.raises(
        ValueError, match=r"rename yours, or pass tool_policy=ToolPolicy\(offload=None\)"
    ):
        loop_for(ScriptedModel(["hi"]), [read_tool_result])
    with pytest.raises(TypeError, match=r"ToolPolicy\.offload must be a ToolResultOffload"):
        ToolPolicy(offload=8000)  # type: ignore[arg-type]
    kept_whole = loop_for(
        ScriptedModel(["hi"]), [read_tool_result], tool_policy=ToolPolicy(offload=None)
    )
    assert kept_whole.tool_policy.offload is None


def test_a_malformed_stub_is_refused_when_read() -> None:
    block = to_dict(ToolResultBlock("c1", "stub", offloaded=OffloadedResult("h", 10, 3, "ab", "")))
    block["offloaded"]["chars"] = 1
    with pytest.raises(ValueError, match="head and tail hold 2 chars, more than the whole"):
        from_dict(block)
    block["offloaded"] = {**block["offloaded"], "chars": 10, "hadle": "h"}
    with pytest.raises(ValueError, match="unknown key 'hadle'"):
        from_dict(block)


# -- strategies ------------------------------------------------------------------------------


async def test_strategies_keep_the_stub_and_its_facts() -> None:
    stub = OffloadedResult("tool-results/ab", chars=9000, tokens=2250, head="a" * 600, tail="z")
    history_ = [
        Message("user", "go"),
        Message("assistant", [ToolUseBlock("c1", "read_log", {})]),
        Message("user", [ToolResultBlock("c1", stub.stub_text(), offloaded=stub)]),
        Message("assistant", [ToolUseBlock("c2", "read_log", {})]),
        Message("user", [ToolResultBlock("c2", "x" * 800)]),
    ]

    truncated = await TruncateToolResults(100).compact(history_)
    cleared = await ClearToolResults(keep_recent=0).compact(history_)

    assert truncated[2] == history_[2]  # the stub's note, which names the handle, stays
    assert truncated[4].tool_results[0].content != history_[4].tool_results[0].content
    assert cleared[2].tool_results[0].content == "Done"
    assert cleared[2].tool_results[0].offloaded == stub


# -- the three provider formats, through their SDKs ------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_the_providers_are_sent_the_stub_and_offered_the_read_tool(
    api: FakeAPI,
    openai_model: OpenAIModel,
    anthropic_model: AnthropicModel,
    provider: str,
    read_log: Any,
) -> None:
    if provider == "openai":
        model: Any = openai_model
        api.script(
            json_reply(chat_completion(None, [("call_1", "read_log", "{}")])),
            json_reply(chat_completion("All fine.")),
        )
    else:
        model = anthropic_model
        api.script(
            json_reply(message(tool_use_block("toolu_1", "read_log", {}))),
            json_reply(message(text_block("All fine."))),
        )
    loop = loop_for(model, [read_log])

    await loop.run("Check the log.")

    stub = only_result(await history(loop))
    body = api.requests[1].body
    if provider == "openai":
        sent = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        names = [t["function"]["name"] for t in body["tools"]]
    else:
        sent = [
            b["content"]
            for m in body["messages"]
            for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        names = [t["name"] for t in body["tools"]]
    assert sent == [stub.content]
    assert "read_tool_result" in names
    assert "read_tool_result" not in str(api.requests[0].body.get("tools"))


async def test_the_responses_api_is_sent_the_stub_and_offered_the_read_tool(
    read_log: Any,
) -> None:
    from .fake_responses import FakeResponsesAPI

    api = await FakeResponsesAPI().start()
    try:
        api.script(
            json_reply(response(call_item("call_1", "read_log", "{}"))),
            json_reply(response(message_item("All fine."))),
        )
        model = OpenAIResponsesModel("gpt-test", base_url=f"{api.url}/v1", api_key="k", timeout=5)
        loop = loop_for(model, [read_log])

        await loop.run("Check the log.")
    finally:
        await api.close()

    stub = only_result(await history(loop))
    body = api.requests[1].body
    outputs = [item["output"] for item in body["input"] if item["type"] == "function_call_output"]
    assert outputs == [stub.content]
    assert "read_tool_result" in [t["name"] for t in body["tools"]]


# -- saving, resuming in another process, export, import, the viewer ------------------------


async def run_on_sqlite(path: Path, read_log: Any) -> tuple[str, OffloadedResult]:
    async with connect(path) as conn:
        loop = loop_for(
            ScriptedModel([assistant(tool_call("read_log")), "ok"]),
            [read_log],
            SQLiteContextStore(conn, session_id="ops"),
        )
        await loop.run("Read it.")
        stub = only_result(await history(loop)).offloaded
        assert stub is not None
        return "ops", stub


async def test_on_sqlite_the_blob_is_beside_the_conversation_and_survives_a_new_process(
    tmp_path: Path, read_log: Any
) -> None:
    path = tmp_path / "agent.db"
    session, stub = await run_on_sqlite(path, read_log)

    async with connect(path) as conn:  # as another process would open it
        loaded = await SQLiteContextStore(conn, session_id=session).get_history()
        assert only_result(loaded).offloaded == stub
        blob = await SQLiteBlobStore(conn).get(stub.handle)
        assert blob.data.decode() == LOG
        assert blob.info.content_type == "text/plain; charset=utf-8"
        loop = loop_for(
            ScriptedModel(["x"]), [read_log], SQLiteContextStore(conn, session_id=session)
        )
        assert await loop.read_tool_result(stub.handle, 5, 10) == LOG[5:15]


async def test_through_an_auto_compact_store_the_blob_is_in_the_inner_database(
    tmp_path: Path, read_log: Any
) -> None:
    async with connect(tmp_path / "agent.db") as conn:
        store = AutoCompactStore(
            SQLiteContextStore(conn), ScriptedSummarizer(["short"]), max_tokens=200_000
        )
        loop = loop_for(ScriptedModel([assistant(tool_call("read_log")), "ok"]), [read_log], store)

        await loop.run("Read it.")

        assert (await SQLiteBlobStore(conn).get(HANDLE)).data.decode() == LOG


async def test_on_postgres_the_blob_is_beside_the_conversation(
    postgres: postgres_server.PostgresServer, read_log: Any
) -> None:
    async with connect_postgres(postgres.dsn) as conn:
        store = PostgresContextStore(conn)
        loop = loop_for(ScriptedModel([assistant(tool_call("read_log")), "ok"]), [read_log], store)
        await loop.run("Read it.")
        stub = only_result(await history(loop)).offloaded
        assert stub is not None
        assert (await PostgresBlobStore(conn).get(stub.handle)).data.decode() == LOG
        assert await loop.read_tool_result(stub.handle, len(LOG) - 3) == LOG[-3:]


def test_export_and_import_carry_the_blob_and_the_viewer_opens_it(
    tmp_path: Path, read_log: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    source, copy, file = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "ops.json"
    session, stub = asyncio.run(run_on_sqlite(source, read_log))

    assert main(["--db", str(source), "export", session, "-o", str(file)]) == 0
    document = orjson.loads(file.read_bytes())
    assert document["version"] == 5
    assert [blob["name"] for blob in document["blobs"]] == [stub.handle]
    assert main(["--db", str(copy), "import", str(file)]) == 0
    capsys.readouterr()

    async def read_copy() -> tuple[list[Message], bytes]:
        async with connect(copy) as conn:
            messages = await SQLiteContextStore(conn, session_id=session).get_history()
            return messages, (await SQLiteBlobStore(conn).get(stub.handle)).data

    messages, data = asyncio.run(read_copy())
    assert only_result(messages).offloaded == stub
    assert data.decode() == LOG
    viewer = Viewer(SQLiteSource(str(copy)))
    with viewer.source.reading() as reading:
        transcript = route(viewer, reading, ["session", session], {})
        blob_page = route(viewer, reading, ["memory", "blobs", stub.handle], {})
        second_page = route(viewer, reading, ["memory", "blobs", stub.handle], {"page": "2"})
    link = "/memory/blobs/" + stub.handle.replace("/", "%2F")
    assert f'<a class=offloaded href="{link}">the whole result' in transcript
    assert f"{len(LOG):,} characters" in transcript
    size = 64 << 10  # a page of the blob
    assert LOG[:size] in blob_page
    assert LOG[size : size + 200] not in blob_page
    assert LOG[size : 2 * size] in second_page
    assert f"page 1 of {-(-len(LOG) // size)}" in blob_page


def test_a_tampered_blob_in_a_session_file_is_refused_and_nothing_is_imported(
    tmp_path: Path, read_log: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    source, copy, file = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "ops.json"
    session, _ = asyncio.run(run_on_sqlite(source, read_log))
    assert main(["--db", str(source), "export", session, "-o", str(file)]) == 0
    document = orjson.loads(file.read_bytes())
    document["blobs"][0]["data"] = "aGk="
    file.write_bytes(orjson.dumps(document))

    assert main(["--db", str(copy), "import", str(file)]) == 1

    assert "is not the text its name was made from" in capsys.readouterr().err
    assert not copy.exists()


# -- the invariant ---------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(min_size=0, max_size=6000),
    max_tokens=st.integers(256, 2000),
    head=st.integers(0, 3000),
    tail=st.integers(0, 3000),
)
def test_head_and_blob_rebuild_any_result_and_the_stub_fits_its_budget(
    text: str, max_tokens: int, head: int, tail: int
) -> None:
    counter = HeuristicTokenCounter()
    offload = ToolResultOffload(
        InMemoryBlobStore(), max_tokens=max_tokens, head_chars=head, tail_chars=tail
    )
    store = MemoryContextStore()

    async def check() -> None:
        block = await offload.apply(ToolResultBlock("c1", text), store)
        stub = block.offloaded
        if stub is None:
            assert counter(text) <= max_tokens
            assert block.content == text
            return
        assert counter(block.text) <= max_tokens < counter(text)
        rest = await offload.read(stub.handle, store, offset=len(stub.head))
        assert stub.head + rest == text
        assert text.endswith(stub.tail)
        assert len(stub.head) + len(stub.tail) <= len(text)
        assert from_dict(to_dict(block)) == block

    asyncio.run(check())
