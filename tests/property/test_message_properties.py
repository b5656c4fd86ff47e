"""Invariants of messages: exact round trips, and counts that add up block by block."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
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
from pygents_ctx.cli._transfer import SessionFile, parse_session_file

SETTINGS = settings(max_examples=150, deadline=None)

# -- strategies -------------------------------------------------------------------------------

texts = st.text(max_size=30)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
json_objects = st.none() | st.dictionaries(st.text(max_size=5), json_values, max_size=3)
text_blocks = st.builds(TextBlock, texts, cache_control=json_objects)
image_blocks = st.builds(
    ImageBlock,
    st.sampled_from(["image/jpeg", "image/png", "image/gif", "image/webp"]),
    st.binary(max_size=64),
    cache_control=json_objects,
)
tool_use_blocks = st.builds(
    ToolUseBlock,
    st.text(min_size=1, max_size=8),
    st.text(min_size=1, max_size=12),
    st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    cache_control=json_objects,
)
tool_result_blocks = st.builds(
    ToolResultBlock,
    st.text(min_size=1, max_size=8),
    texts | st.lists(text_blocks | image_blocks, max_size=3),
    st.booleans(),
    cache_control=json_objects,
)
thinking_blocks = (
    st.builds(ThinkingBlock, texts, st.none() | texts)
    | st.builds(RedactedThinkingBlock, texts)
    | st.builds(
        ReasoningBlock,
        st.text(min_size=1, max_size=8),
        st.lists(texts, max_size=2),
        st.none() | texts,
        model=texts,
    )
)
blocks = text_blocks | image_blocks | tool_use_blocks | tool_result_blocks | thinking_blocks
messages = st.builds(
    Message,
    st.sampled_from(["user", "assistant", "system"]),
    st.lists(blocks, max_size=5),
    name=st.none() | texts,
    metadata=json_objects,
)
counters = st.sampled_from([HeuristicTokenCounter(), HeuristicTokenCounter(1), len])


# -- round trips ------------------------------------------------------------------------------


@SETTINGS
@given(value=blocks | messages)
def test_from_dict_of_to_dict_is_the_same_value(value: Any) -> None:
    rebuilt = from_dict(to_dict(value))

    assert rebuilt == value
    assert type(rebuilt) is type(value)


@SETTINGS
@given(value=blocks | messages)
def test_the_dict_form_survives_json_exactly(value: Any) -> None:
    saved = orjson.dumps(to_dict(value))

    assert from_dict(orjson.loads(saved)) == value
    assert orjson.dumps(to_dict(from_dict(orjson.loads(saved)))) == saved


# -- counting ---------------------------------------------------------------------------------


@SETTINGS
@given(
    role=st.sampled_from(["user", "assistant", "system"]),
    head=st.lists(blocks, max_size=4),
    tail=st.lists(blocks, max_size=4),
    counter=counters,
    overhead=st.integers(min_value=0, max_value=10),
    media=st.integers(min_value=0, max_value=1000),
)
def test_a_message_count_is_the_overhead_plus_its_blocks_counts(
    role: Any, head: list[Any], tail: list[Any], counter: Any, overhead: int, media: int
) -> None:
    def count(content: list[Any]) -> int:
        return count_message_tokens(
            Message(role, content), counter, per_message_overhead=overhead, tokens_per_media=media
        )

    assert count(head + tail) == count(head) + count(tail) - overhead
    assert count([]) == overhead


@SETTINGS
@given(message=messages, counter=counters)
def test_a_cached_count_equals_a_fresh_count_and_survives_saving(
    message: Message, counter: Any
) -> None:
    first = count_message_tokens(message, counter)

    assert count_message_tokens(message, counter) == first
    assert count_message_tokens(Message(message.role, message.content), counter) == first
    assert count_message_tokens(from_dict(to_dict(message)), counter) == first


# Whatever a parsed dict holds, from_dict reads it exactly or refuses it: what it reads
# writes back the same dict (its short path for plain text messages included).
near_messages = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "system", "tool", 1]),
        "content": st.lists(
            st.fixed_dictionaries({"type": st.sampled_from(["text", "image"]), "text": texts})
            | st.fixed_dictionaries(
                {"type": st.just("text"), "text": st.integers(-(2**63), 2**63 - 1)}
            )
            | blocks.map(to_dict),
            max_size=3,
        )
        | texts,
    },
    optional={"extra": st.none()},
)


@SETTINGS
@given(data=near_messages | messages.map(to_dict))
def test_from_dict_reads_a_near_message_exactly_or_refuses_it(data: dict[str, Any]) -> None:
    parsed = orjson.loads(orjson.dumps(data))
    try:
        read = from_dict(parsed)
    except ValueError:
        plain = (
            parsed.keys() == {"role", "content"}
            and parsed["role"] in ("user", "assistant", "system")
            and isinstance(parsed["content"], list)
            and all(
                block.keys() == {"type", "text"}
                and block["type"] == "text"
                and isinstance(block["text"], str)
                for block in parsed["content"]
            )
        )
        assert not plain  # a plain text message is always read
        return
    assert to_dict(read) == parsed


# -- session files --------------------------------------------------------------------------


@SETTINGS
@given(live=st.lists(messages, max_size=4), archived=st.lists(messages, max_size=2))
def test_a_session_file_gives_back_every_message_exactly(
    live: list[Message], archived: list[Message]
) -> None:
    file = SessionFile("s", live, archived)

    read = parse_session_file(file.to_json(), "f.json")

    assert [stored.message for stored in read.messages] == live
    assert [stored.message for stored in read.archived] == archived
    assert read.to_json() == file.to_json()
