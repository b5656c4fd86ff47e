"""pygents_ctx.testing: `ScriptedModel`, and `assistant()` and `tool_call()` for its replies."""

from __future__ import annotations

from typing import Any

import pytest

from pygents_ctx import (
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    count_tokens,
)
from pygents_ctx.testing import ModelCall, ScriptedModel, assistant, tool_call

HELLO = [Message("user", "hello")]
WINDOW = [Message("system", "Be brief."), Message("user", "What is the tide doing?")]

# -- replies --------------------------------------------------------------------------


async def test_replies_come_in_script_order() -> None:
    scripted = assistant("Let me look.", tool_call("tides", port="Brest"))
    model = ScriptedModel([scripted, "It is rising."])

    first = await model(HELLO)
    second = await model(HELLO)

    assert first is scripted  # a Message is returned as it is
    assert second == Message("assistant", "It is rising.")  # a string: assistant text


@pytest.mark.parametrize(
    "script",
    [("one", "two"), iter(["one", "two"]), (reply for reply in ["one", "two"])],
    ids=["tuple", "iterator", "generator"],
)
async def test_any_iterable_is_a_script(script: Any) -> None:
    model = ScriptedModel(script)

    assert [(await model(HELLO)).text for _ in range(2)] == ["one", "two"]


@pytest.mark.parametrize(
    "failure", [ConnectionError("provider down"), ConnectionError], ids=["instance", "class"]
)
async def test_an_exception_in_the_script_is_raised_for_that_call(failure: Any) -> None:
    model = ScriptedModel(["first", failure, "third"])

    assert (await model(HELLO)).text == "first"
    with pytest.raises(ConnectionError):
        await model(WINDOW)
    assert (await model(HELLO)).text == "third"  # the script goes on after a failure
    assert [call.messages for call in model.calls] == [tuple(HELLO), tuple(WINDOW), tuple(HELLO)]


def _answer_text(window: list[Message]) -> str:
    return f"{len(window)} messages, last: {window[-1].text}"


def _answer_message(window: list[Message]) -> Message:
    return assistant(_answer_text(window))


async def _answer_text_later(window: list[Message]) -> str:
    return _answer_text(window)


async def _answer_message_later(window: list[Message]) -> Message:
    return _answer_message(window)


@pytest.mark.parametrize(
    "write",
    [_answer_text, _answer_message, _answer_text_later, _answer_message_later],
    ids=["sync-str", "sync-message", "async-str", "async-message"],
)
async def test_a_function_writes_the_reply_from_the_window(write: Any) -> None:
    model = ScriptedModel([write, write])

    first = await model(WINDOW)
    second = await model(HELLO)

    assert first == Message("assistant", "2 messages, last: What is the tide doing?")
    assert second == Message("assistant", "1 messages, last: hello")


async def test_a_function_gets_a_copy_of_the_window() -> None:
    def meddle(window: list[Message]) -> str:
        window.clear()
        return "done"

    model = ScriptedModel([meddle])
    window = list(WINDOW)

    await model(window)

    assert window == WINDOW
    assert model.calls[0].messages == tuple(WINDOW)


@pytest.mark.parametrize("reply", [42, None, [Message("assistant", "hi")], b"bytes"])
async def test_a_reply_that_is_not_a_message_or_text_raises_type_error(reply: Any) -> None:
    model = ScriptedModel(["fine", lambda window: reply])

    await model(HELLO)
    with pytest.raises(TypeError, match=rf"reply 2 is {type(reply).__name__}; script a Message"):
        await model(HELLO)


@pytest.mark.parametrize("reply", [42, None, b"bytes"])
async def test_a_script_entry_that_is_not_a_reply_raises_type_error(reply: Any) -> None:
    model = ScriptedModel([reply])

    with pytest.raises(TypeError, match=rf"reply 1 is {type(reply).__name__}"):
        await model(HELLO)


@pytest.mark.parametrize(
    "script",
    ["one reply", b"bytes", 42, None, Message("assistant", "hi")],
    ids=["str", "bytes", "int", "none", "message"],
)
def test_a_script_that_is_not_a_list_of_replies_raises_type_error(script: Any) -> None:
    with pytest.raises(TypeError, match="ScriptedModel script must be a list of replies"):
        ScriptedModel(script)


# -- what it records ---------------------------------------------------------------------


async def test_every_call_is_recorded_with_its_window_and_token_count() -> None:
    model = ScriptedModel(["a", "b"])
    window = list(WINDOW)

    await model(window)
    window.append(Message("assistant", "a"))  # the caller's list changes afterwards
    await model(window)

    assert model.calls == [
        ModelCall(tuple(WINDOW), count_tokens(WINDOW)),
        ModelCall((*WINDOW, Message("assistant", "a")), count_tokens(window)),
    ]
    assert model.calls[0].input_tokens > 0


async def test_a_failed_call_is_recorded_too() -> None:
    model = ScriptedModel([ValueError("bad request")])

    with pytest.raises(ValueError, match="bad request"):
        await model(HELLO)

    assert model.calls == [ModelCall(tuple(HELLO), count_tokens(HELLO))]
    assert model.remaining == 0


async def test_remaining_counts_the_replies_left() -> None:
    model = ScriptedModel(["a", "b", "c"])
    assert model.remaining == 3
    assert repr(model) == "ScriptedModel(calls=0, left=3)"

    await model(HELLO)

    assert model.remaining == 2
    assert repr(model) == "ScriptedModel(calls=1, left=2)"


@pytest.mark.parametrize("length", [0, 1, 3])
async def test_running_out_of_replies_raises_runtime_error_naming_the_count(length: int) -> None:
    model = ScriptedModel(["reply"] * length)
    for _ in range(length):
        await model(HELLO)

    with pytest.raises(
        RuntimeError, match=rf"no reply for call {length + 1}: the script has {length}; add"
    ):
        await model(HELLO)
    assert len(model.calls) == length + 1  # the call without a reply is recorded too


async def test_remaining_stays_at_zero_after_running_out() -> None:
    model = ScriptedModel(["only reply"])
    await model(HELLO)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            await model(HELLO)

    assert model.remaining == 0
    assert repr(model) == "ScriptedModel(calls=3, left=0)"


# -- assistant() and tool_call() ----------------------------------------------------------


def test_assistant_builds_a_message_from_text_and_tool_calls_in_order() -> None:
    search = tool_call("search", query="tides")
    fetch = tool_call("fetch", doc_id="tides-101")

    message = assistant("Looking.", search, "And fetching.", fetch)

    assert message.role == "assistant"
    assert message.content == (TextBlock("Looking."), search, TextBlock("And fetching."), fetch)
    assert message.tool_uses == (search, fetch)


def test_assistant_with_text_only_is_a_plain_reply() -> None:
    assert assistant("Hi!") == Message("assistant", "Hi!")
    assert assistant("Hi!").text == "Hi!"


@pytest.mark.parametrize(
    "part",
    [
        42,
        TextBlock("already a block"),
        ToolResultBlock("call_1", "result"),
        ImageBlock(media_type="image/png", data=b"\x89PNG"),
        Message("assistant", "hi"),
    ],
    ids=["int", "text-block", "tool-result", "image", "message"],
)
def test_assistant_rejects_other_parts(part: Any) -> None:
    with pytest.raises(
        TypeError, match=rf"takes text and tool_call\(\) blocks, not {type(part).__name__}"
    ):
        assistant("text", part)


def test_tool_call_makes_a_call_block_from_keyword_arguments() -> None:
    call = tool_call("lookup", name="Brest", limit=3)

    assert isinstance(call, ToolUseBlock)
    assert call.name == "lookup"
    assert call.input == {"name": "Brest", "limit": 3}  # `name` is free as an argument
    assert tool_call("ping").input == {}


def test_tool_call_ids_are_unique() -> None:
    ids = [tool_call("search", query="tides").id for _ in range(2000)]

    assert len(set(ids)) == len(ids)
    assert all(isinstance(call_id, str) and call_id for call_id in ids)
