"""Messages and content blocks: validation, immutability, dict form and saving in items."""

from __future__ import annotations

import base64
import dataclasses
import re
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pygents_ctx import (
    Agent,
    AgentRegistry,
    ContextItem,
    ContextPool,
    ContextQueue,
    HeuristicTokenCounter,
    ImageBlock,
    Message,
    ReasoningBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    count_message_tokens,
    from_dict,
    to_dict,
)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
IMAGE = ImageBlock("image/png", PNG)
CALL = ToolUseBlock("call-1", "search", {"query": "café ☕", "limit": 3, "tags": ["a", None]})
RESULT = ToolResultBlock("call-1", "3 hits")
RICH_RESULT = ToolResultBlock("call-2", [TextBlock("chart:"), IMAGE], is_error=True)

# Every block and message kind, with its exact dict form.
DICT_FORMS: list[tuple[Any, dict[str, Any]]] = [
    (TextBlock("hello"), {"type": "text", "text": "hello"}),
    (
        IMAGE,
        {"type": "image", "media_type": "image/png", "data": base64.b64encode(PNG).decode()},
    ),
    (
        CALL,
        {
            "type": "tool_use",
            "id": "call-1",
            "name": "search",
            "input": {"query": "café ☕", "limit": 3, "tags": ["a", None]},
        },
    ),
    (
        RESULT,
        {"type": "tool_result", "tool_use_id": "call-1", "content": "3 hits", "is_error": False},
    ),
    (
        RICH_RESULT,
        {
            "type": "tool_result",
            "tool_use_id": "call-2",
            "content": [
                {"type": "text", "text": "chart:"},
                {
                    "type": "image",
                    "media_type": "image/png",
                    "data": base64.b64encode(PNG).decode(),
                },
            ],
            "is_error": True,
        },
    ),
    (
        Message("assistant", [TextBlock("Let me look."), CALL]),
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": "call-1",
                    "name": "search",
                    "input": {"query": "café ☕", "limit": 3, "tags": ["a", None]},
                },
            ],
        },
    ),
    (
        Message("user", [RESULT]),
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call-1",
                    "content": "3 hits",
                    "is_error": False,
                }
            ],
        },
    ),
    (
        Message("system", "Be brief."),
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
    ),
    (Message("user", []), {"role": "user", "content": []}),
    (
        ThinkingBlock("2 + 2 = 4", signature="sig-1"),
        {"type": "thinking", "thinking": "2 + 2 = 4", "signature": "sig-1"},
    ),
    (ThinkingBlock("local reasoning"), {"type": "thinking", "thinking": "local reasoning"}),
    (RedactedThinkingBlock("ENCRYPTED=="), {"type": "redacted_thinking", "data": "ENCRYPTED=="}),
    (
        ReasoningBlock("rs_1", ["Plan."], "gAAAA", model="o3"),
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": ["Plan."],
            "encrypted_content": "gAAAA",
            "model": "o3",
        },
    ),
    (
        Message(
            "assistant", [ThinkingBlock("look it up", "sig-2"), RedactedThinkingBlock("x"), CALL]
        ),
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "look it up", "signature": "sig-2"},
                {"type": "redacted_thinking", "data": "x"},
                {
                    "type": "tool_use",
                    "id": "call-1",
                    "name": "search",
                    "input": {"query": "café ☕", "limit": 3, "tags": ["a", None]},
                },
            ],
        },
    ),
]
VALUES = [value for value, _ in DICT_FORMS]
IDS = [type(value).__name__ + f"-{i}" for i, value in enumerate(VALUES)]


# -- construction ---------------------------------------------------------------------------


CONSTRUCTION_ERRORS: list[tuple[Any, Any, str]] = [
    (lambda: TextBlock(5), TypeError, "TextBlock.text must be str, not int"),
    (lambda: TextBlock(None), TypeError, "TextBlock.text must be str"),
    (lambda: ImageBlock(5, PNG), TypeError, "ImageBlock.media_type must be str"),
    (lambda: ImageBlock("image/png", "iVBOR"), TypeError, "ImageBlock.data must be bytes"),
    (lambda: ImageBlock("image/png", bytearray(PNG)), TypeError, "ImageBlock.data"),
    (lambda: ToolUseBlock(1, "search", {}), TypeError, "ToolUseBlock.id must be str"),
    (lambda: ToolUseBlock("c", None, {}), TypeError, "ToolUseBlock.name must be str"),
    (lambda: ToolUseBlock("c", "search", [1]), TypeError, "ToolUseBlock.input must be dict"),
    (lambda: ToolResultBlock(7, "ok"), TypeError, "ToolResultBlock.tool_use_id must be str"),
    (lambda: ToolResultBlock("c", 42), TypeError, "ToolResultBlock.content must be"),
    (
        lambda: ToolResultBlock("c", [TextBlock("a"), CALL]),
        TypeError,
        "ToolResultBlock.content[1] must be a TextBlock or ImageBlock, not ToolUseBlock",
    ),
    (
        lambda: ToolResultBlock("c", ["plain text"]),
        TypeError,
        "ToolResultBlock.content[0] must be a TextBlock or ImageBlock, not str",
    ),
    (lambda: ToolResultBlock("c", "ok", is_error=1), TypeError, "ToolResultBlock.is_error"),
    (lambda: ToolResultBlock("c", "ok", "yes"), TypeError, "ToolResultBlock.is_error"),
    (lambda: ThinkingBlock(None), TypeError, "ThinkingBlock.thinking must be str"),
    (lambda: ThinkingBlock("t", b"sig"), TypeError, "ThinkingBlock.signature must be str"),
    (lambda: RedactedThinkingBlock(3), TypeError, "RedactedThinkingBlock.data must be str"),
    (lambda: ReasoningBlock("", model="o3"), ValueError, "ReasoningBlock.id must not be empty"),
    (lambda: ReasoningBlock("rs", "Plan."), TypeError, "ReasoningBlock.summary must be list"),
    (lambda: ReasoningBlock("rs", [1]), TypeError, "ReasoningBlock.summary[0] must be str"),
    (lambda: ReasoningBlock("rs", (), b"x"), TypeError, "ReasoningBlock.encrypted_content"),
    (lambda: Message("bot", "hi"), ValueError, "Message.role must be 'user', 'assistant'"),
    (lambda: Message(None, "hi"), ValueError, "Message.role"),
    (lambda: Message("User", "hi"), ValueError, "not 'User'"),
    # An unhashable role must still be reported as a bad role, not a hashing error.
    (lambda: Message(["user"], "hi"), (TypeError, ValueError), "Message.role"),
    (lambda: Message("user", 5), TypeError, "Message.content must be a list of content blocks"),
    (lambda: Message("user", b"hi"), TypeError, "Message.content must be a list"),
    (lambda: Message("user", {"type": "text"}), TypeError, "Message.content must be a list"),
    (lambda: Message("user", TextBlock("hi")), TypeError, "not TextBlock"),
    (
        lambda: Message("user", [TextBlock("a"), "b"]),
        TypeError,
        "Message.content[1] must be a content block, not str",
    ),
    (
        lambda: Message("user", [Message("user", "nested")]),
        TypeError,
        "Message.content[0] must be a content block, not Message",
    ),
]


@pytest.mark.parametrize(
    ("build", "error", "match"), CONSTRUCTION_ERRORS, ids=[m for _, _, m in CONSTRUCTION_ERRORS]
)
def test_construction_rejects_bad_fields_naming_them(
    build: Any, error: type[Exception] | tuple[type[Exception], ...], match: str
) -> None:
    with pytest.raises(error, match=re.escape(match)):
        build()


@pytest.mark.parametrize("media_type", ["image/jpeg", "image/png", "image/gif", "image/webp"])
def test_images_accept_the_four_supported_media_types(media_type: str) -> None:
    assert ImageBlock(media_type, PNG).media_type == media_type


@pytest.mark.parametrize("media_type", ["image/bmp", "image/svg+xml", "application/pdf", ""])
def test_images_reject_other_media_types_and_list_the_supported_ones(media_type: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"ImageBlock.media_type {media_type!r}")) as e:
        ImageBlock(media_type, PNG)
    assert "image/jpeg, image/png, image/webp" in str(e.value).replace("image/gif, ", "")


@pytest.mark.parametrize(
    ("target", "field"),
    [
        (TextBlock("a"), "text"),
        (IMAGE, "data"),
        (CALL, "input"),
        (RESULT, "is_error"),
        (Message("user", "hi"), "role"),
        (Message("user", "hi"), "content"),
    ],
)
def test_blocks_and_messages_are_frozen(target: Any, field: str) -> None:
    before = to_dict(target)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(target, field, "changed")
    assert to_dict(target) == before


def test_message_content_is_a_tuple_detached_from_the_list_passed_in() -> None:
    blocks: list[Any] = [TextBlock("first")]
    message = Message("user", blocks)
    blocks.append(TextBlock("second"))
    blocks[0] = TextBlock("replaced")

    assert message.content == (TextBlock("first"),)
    assert isinstance(message.content, tuple)


def test_tool_result_content_is_a_tuple_detached_from_the_list_passed_in() -> None:
    parts: list[Any] = [TextBlock("a")]
    result = ToolResultBlock("c", parts)
    parts.append(IMAGE)

    assert result.content == (TextBlock("a"),)
    assert result == ToolResultBlock("c", (TextBlock("a"),))


@pytest.mark.parametrize(
    "content",
    [
        [TextBlock("a"), CALL],
        (TextBlock("a"), CALL),
        (block for block in [TextBlock("a"), CALL]),
    ],
    ids=["list", "tuple", "generator"],
)
def test_message_takes_any_iterable_of_blocks(content: Any) -> None:
    assert Message("assistant", content).content == (TextBlock("a"), CALL)


def test_a_string_content_is_one_text_block() -> None:
    assert Message("user", "hello").content == (TextBlock("hello"),)
    assert Message(role="system", content="") == Message("system", [TextBlock("")])
    assert Message("user").content == ()


def test_message_accessors_pick_their_blocks_in_order() -> None:
    other_call = ToolUseBlock("call-9", "fetch", {})
    message = Message(
        "assistant", [TextBlock("one"), CALL, IMAGE, TextBlock("two"), other_call, RESULT]
    )

    assert message.text == "one\ntwo"
    assert message.tool_uses == (CALL, other_call)
    assert message.tool_results == (RESULT,)
    assert Message("user", [IMAGE]).text == ""
    assert Message("user", "x").tool_uses == () == Message("user", "x").tool_results


@pytest.mark.parametrize(
    ("result", "text"),
    [
        (ToolResultBlock("c", "plain"), "plain"),
        (ToolResultBlock("c", [TextBlock("a"), IMAGE, TextBlock("b")]), "a\nb"),
        (ToolResultBlock("c", []), ""),
    ],
)
def test_tool_result_text(result: ToolResultBlock, text: str) -> None:
    assert result.text == text


def test_image_repr_shows_the_size_not_the_bytes() -> None:
    big = ImageBlock("image/jpeg", b"\xff\xd8" + bytes(1_000_000))

    assert repr(big) == "ImageBlock(media_type='image/jpeg', data=<1000002 bytes>)"
    assert len(repr(Message("user", [big, TextBlock("look")]))) < 200


def test_messages_compare_and_hash_by_role_and_blocks() -> None:
    assert Message("user", "hi") == Message("user", [TextBlock("hi")])
    assert Message("user", "hi") != Message("assistant", "hi")
    assert hash(Message("user", "hi")) == hash(Message("user", [TextBlock("hi")]))
    assert ToolResultBlock("c", "x") != ToolResultBlock("c", "x", is_error=True)


# -- dict form --------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), DICT_FORMS, ids=IDS)
def test_to_dict_gives_the_tagged_json_ready_form(value: Any, expected: dict[str, Any]) -> None:
    assert to_dict(value) == expected


@pytest.mark.parametrize(("value", "saved"), DICT_FORMS, ids=IDS)
def test_from_dict_rebuilds_exactly(value: Any, saved: dict[str, Any]) -> None:
    rebuilt = from_dict(saved)

    assert rebuilt == value
    assert type(rebuilt) is type(value)


@pytest.mark.parametrize("value", VALUES, ids=IDS)
def test_round_trip_through_json_is_exact(value: Any) -> None:
    rebuilt = from_dict(orjson.loads(orjson.dumps(to_dict(value))))

    assert rebuilt == value
    assert to_dict(rebuilt) == to_dict(value)


_texts = st.text(max_size=20)
_blocks = st.one_of(
    st.builds(TextBlock, _texts),
    st.builds(TextBlock, _texts, cache_control=st.just({"type": "ephemeral"})),
    st.builds(ToolUseBlock, st.just("c1"), st.just("tool"), st.just({"a": 1})),
    st.builds(ToolResultBlock, st.just("c1"), _texts),
)


@given(
    role=st.sampled_from(["user", "assistant", "system"]),
    blocks=st.lists(_blocks, max_size=4),
    name=st.none() | st.just("alice"),
)
def test_a_stored_message_reads_back_as_the_same_message(
    role: Any, blocks: list[Any], name: str | None
) -> None:
    """Plain text messages (the usual stored form) and every other come back alike."""
    message = Message(role, blocks, name=name)
    rebuilt = from_dict(orjson.loads(orjson.dumps(to_dict(message))))

    assert rebuilt == message
    if not message.has_tool_uses:  # a tool call's input is a dict: unhashable
        assert hash(rebuilt) == hash(message)
    assert repr(rebuilt) == repr(message)
    assert (rebuilt.has_tool_uses, rebuilt.has_tool_results) == (
        message.has_tool_uses,
        message.has_tool_results,
    )
    assert rebuilt.tool_uses == message.tool_uses
    assert rebuilt.text == message.text


@pytest.mark.parametrize("data", [b"", b"\x00", bytes(range(256)) * 3, PNG])
def test_image_bytes_survive_base64_exactly(data: bytes) -> None:
    block = ImageBlock("image/webp", data)
    saved = orjson.loads(orjson.dumps(to_dict(block)))

    assert isinstance(saved["data"], str)
    assert from_dict(saved).data == data


def test_a_tool_result_without_is_error_is_not_an_error() -> None:
    saved = {"type": "tool_result", "tool_use_id": "c", "content": "ok"}

    assert from_dict(saved) == ToolResultBlock("c", "ok", is_error=False)


@pytest.mark.parametrize("value", ["text", 3, None, IMAGE.data])
def test_to_dict_refuses_what_is_not_a_block_or_message(value: Any) -> None:
    with pytest.raises(TypeError, match="to_dict takes a content block or a Message"):
        to_dict(value)


B64 = base64.b64encode(PNG).decode()


FROM_DICT_ERRORS: list[tuple[Any, str]] = [
    ("text", "must be a dict, not str"),
    ([{"type": "text", "text": "a"}], "must be a dict, not list"),
    ({"type": "video"}, "type 'video' is unknown"),
    ({"text": "no type"}, "type None is unknown"),
    ({"type": 3}, "type 3 is unknown"),
    ({"type": "text"}, "text block is missing the 'text' field"),
    ({"type": "text", "text": 1}, "TextBlock.text must be str, not int"),
    ({"type": "image", "media_type": "image/png"}, "image block is missing the 'data' field"),
    ({"type": "image", "data": B64}, "image block is missing the 'media_type' field"),
    ({"type": "image", "media_type": "image/png", "data": "%%%"}, "ImageBlock.data"),
    ({"type": "image", "media_type": "image/png", "data": "abc"}, "ImageBlock.data"),
    # Non-ASCII text is not base64 either; the error must still name the field.
    ({"type": "image", "media_type": "image/png", "data": "é"}, "ImageBlock.data"),
    ({"type": "image", "media_type": "image/png", "data": 12}, "ImageBlock.data"),
    ({"type": "image", "media_type": "image/png", "data": [1]}, "ImageBlock.data"),
    ({"type": "image", "media_type": "image/bmp", "data": B64}, "'image/bmp' is not supported"),
    ({"type": "image", "media_type": None, "data": B64}, "ImageBlock.media_type"),
    ({"type": "tool_use", "name": "f", "input": {}}, "missing the 'id' field"),
    ({"type": "tool_use", "id": "c", "input": {}}, "missing the 'name' field"),
    ({"type": "tool_use", "id": "c", "name": "f"}, "missing the 'input' field"),
    ({"type": "tool_use", "id": "c", "name": "f", "input": "{}"}, "ToolUseBlock.input"),
    ({"type": "tool_use", "id": 1, "name": "f", "input": {}}, "ToolUseBlock.id"),
    ({"type": "tool_result", "content": "x"}, "missing the 'tool_use_id' field"),
    ({"type": "tool_result", "tool_use_id": "c"}, "missing the 'content' field"),
    ({"type": "tool_result", "tool_use_id": "c", "content": 5}, "ToolResultBlock.content"),
    (
        {"type": "tool_result", "tool_use_id": "c", "content": "x", "is_error": "no"},
        "ToolResultBlock.is_error",
    ),
    (
        {"type": "tool_result", "tool_use_id": "c", "content": [{"type": "text"}]},
        "tool_result block.content[0] is missing the 'text' field",
    ),
    (
        {"type": "tool_result", "tool_use_id": "c", "content": [to_dict(CALL)]},
        "ToolResultBlock.content[0] must be a TextBlock or ImageBlock",
    ),
    ({"role": "user"}, "message.content must be a list of blocks, not NoneType"),
    ({"role": "user", "content": "hi"}, "message.content must be a list of blocks, not str"),
    ({"role": "bot", "content": []}, "Message.role must be 'user', 'assistant' or 'system'"),
    ({"role": ["user"], "content": []}, "Message.role"),
    ({"role": "user", "content": ["hi"]}, "message.content[0] must be a dict, not str"),
    ({"role": "user", "content": [{"type": "nope"}]}, "message.content[0].type 'nope'"),
    ({"role": "user", "content": [{"type": "text"}]}, "message.content[0] is missing"),
    (
        {
            "role": "user",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": 2}],
        },
        "message.content[1]: TextBlock.text must be str",
    ),
    (
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "c",
                    "content": [
                        {"type": "text", "text": "ok"},
                        {"type": "image", "media_type": "image/png", "data": "!!"},
                    ],
                }
            ],
        },
        "message.content[0].content[1]: ImageBlock.data is not valid base64",
    ),
    (
        {"role": "user", "content": [{"role": "user", "content": []}]},
        "message.content must hold content blocks, not messages",
    ),
]


@pytest.mark.parametrize(("data", "match"), FROM_DICT_ERRORS, ids=[m for _, m in FROM_DICT_ERRORS])
def test_from_dict_errors_are_value_errors_naming_the_field(data: Any, match: str) -> None:
    with pytest.raises(ValueError, match=re.escape(match)):
        from_dict(data)


# -- messages inside items, queues and agents ------------------------------------------------

CONVERSATION = [
    Message("system", "You are terse."),
    Message("user", [TextBlock("Find cafés"), IMAGE]),
    Message("assistant", [TextBlock("Searching."), CALL]),
    Message("user", [RESULT, RICH_RESULT]),
]


@pytest.mark.parametrize("message", CONVERSATION, ids=lambda m: m.role)
def test_an_item_holding_a_message_saves_it_tagged_and_restores_it_equal(
    message: Message,
) -> None:
    item = ContextItem(content=message, description="turn")
    saved = item.to_dict()

    assert saved == {
        "id": None,
        "description": "turn",
        "content": to_dict(message),
        "content_type": "message",
    }
    assert ContextItem.from_dict(saved) == item
    assert ContextItem.from_json(item.to_json()) == item


def test_an_item_with_plain_content_has_no_content_type() -> None:
    saved = ContextItem(content=to_dict(Message("user", "hi"))).to_dict()

    assert "content_type" not in saved
    assert ContextItem.from_dict(saved).content == {
        "role": "user",
        "content": [to_dict(TextBlock("hi"))],
    }


@pytest.mark.parametrize(
    ("saved", "match"),
    [
        ({"content": {"role": "bot", "content": []}, "content_type": "message"}, "Message.role"),
        ({"content": "hello", "content_type": "message"}, "must be a dict"),
        ({"content": "hello", "content_type": "image"}, "content_type 'image' is unknown"),
    ],
)
def test_a_badly_saved_message_item_is_a_value_error(saved: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=re.escape(match)):
        ContextItem.from_dict(saved)


@pytest.mark.parametrize("budget", [None, 10_000])
async def test_a_queue_of_messages_round_trips_through_json(budget: int | None) -> None:
    queue: ContextQueue[Message] = ContextQueue(10, max_tokens=budget)
    await queue.append(*(ContextItem(content=m) for m in CONVERSATION))

    restored = ContextQueue.from_json(queue.to_json())

    assert restored.items == queue.items
    assert restored.tokens == queue.tokens
    assert all(type(item.content) is Message for item in restored)


async def test_an_agent_with_messages_in_its_queue_and_pool_round_trips_through_json() -> None:
    queue: ContextQueue[Message] = ContextQueue(
        20, max_tokens=5_000, counter=HeuristicTokenCounter(2.0)
    )
    pool: ContextPool[Message] = ContextPool()
    agent = Agent("chat", "Holds a conversation", [], context_queue=queue, context_pool=pool)
    await queue.append(*(ContextItem(content=m) for m in CONVERSATION))
    await pool.add(ContextItem(content=CONVERSATION[1], description="the photo", id="photo"))

    data = agent.to_json()
    AgentRegistry.unregister("chat")
    restored = Agent.from_json(data)

    assert restored.context_queue.items == queue.items
    assert restored.context_queue.max_tokens == 5_000
    assert restored.context_queue.counter == HeuristicTokenCounter(2.0)
    assert restored.context_queue.tokens == queue.tokens
    assert restored.context_pool.get("photo").content == CONVERSATION[1]
    assert restored.context_pool.get("photo").content.content[1].data == PNG


def test_thinking_counts_toward_the_window_and_compares_by_value() -> None:
    plain = Message("assistant", "The answer is 4.")
    thought = Message("assistant", [ThinkingBlock("Two and two make four. " * 20), *plain.content])

    assert count_message_tokens(thought) > count_message_tokens(plain)
    assert ThinkingBlock("a", "s") == ThinkingBlock("a", "s") != ThinkingBlock("a")
    assert hash(RedactedThinkingBlock("x")) == hash(RedactedThinkingBlock("x"))
    assert "ENCRYPTED" not in repr(RedactedThinkingBlock("ENCRYPTED"))
    assert "ENCRYPTED" not in repr(ReasoningBlock("rs_1", (), "ENCRYPTED", model="o3"))
    assert thought.text == "The answer is 4."  # thinking is not the answer's text


# -- what the providers carry, and keys nobody knows ------------------------------------


def test_a_message_name_metadata_and_cache_control_are_kept_through_json() -> None:
    message = Message(
        "user",
        [TextBlock("hi", cache_control={"type": "ephemeral"})],
        name="alice",
        metadata={"trace": "t-1", "scores": [1, 2]},
    )

    saved = to_dict(message)
    back = from_dict(orjson.loads(orjson.dumps(saved)))

    assert saved == {
        "role": "user",
        "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
        "name": "alice",
        "metadata": {"trace": "t-1", "scores": [1, 2]},
    }
    assert back == message
    assert (back.name, back.metadata) == ("alice", {"trace": "t-1", "scores": [1, 2]})
    assert back.content[0].cache_control == {"type": "ephemeral"}
    assert back != Message("user", "hi", name="alice")  # the cache mark is part of the value


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"role": "user", "content": [], "nmae": "alice"},
            "message: unknown key 'nmae' (did you mean 'name'?)",
        ),
        (
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "a"},
                    {"type": "tool_result", "tool_use_id": "t", "content": "", "is_eror": True},
                ],
            },
            "message.content[1]: unknown key 'is_eror' (did you mean 'is_error'?)",
        ),
        (
            {"type": "text", "text": "a", "cache_contrl": {}},
            "text block: unknown key 'cache_contrl' (did you mean 'cache_control'?)",
        ),
        (
            {"type": "thinking", "thinking": "t", "cache_control": {"type": "ephemeral"}},
            "thinking block: unknown key 'cache_control'; expected signature, thinking, type",
        ),
        (
            {
                "type": "tool_result",
                "tool_use_id": "t",
                "content": [{"type": "text", "text": "", "xyz": 1}],
            },
            "tool_result block.content[0]: unknown key 'xyz'; "
            "expected cache_control, signature, text, type",
        ),
    ],
)
def test_from_dict_refuses_unknown_keys_with_their_path(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        from_dict(data)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: Message("user", "a", name=3), "Message.name must be str, not int"),
        (lambda: Message("user", "a", metadata=[1]), "Message.metadata must be dict, not list"),
        (
            lambda: TextBlock("a", cache_control="ephemeral"),
            "TextBlock.cache_control must be a dict or None, not str",
        ),
    ],
)
def test_the_kept_fields_are_checked_at_construction(build: Any, match: str) -> None:
    with pytest.raises(TypeError, match=re.escape(match)):
        build()
