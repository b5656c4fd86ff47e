"""Round trips of random conversations through the OpenAI and Anthropic wire formats.

`conversations(wire_format, lossless=...)` is the reusable strategy: random
`Message` lists that the format carries whole (`lossless=True`), or any list
the converter accepts, including what it degrades (`lossless=False`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx.context.messages import (
    ContentBlock,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from pygents_ctx.context.wire import from_anthropic, from_openai, to_anthropic, to_openai

WireFormat = Literal["openai", "anthropic"]
FORMATS: tuple[WireFormat, ...] = ("openai", "anthropic")
SETTINGS = settings(max_examples=100, deadline=None)

# -- strategies -------------------------------------------------------------

texts = st.text(max_size=12)
ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=8)
# Blank text is never sent (the APIs refuse it), so it cannot come back.
text_blocks = st.builds(TextBlock, texts.filter(str.strip))
image_blocks = st.builds(
    ImageBlock,
    st.sampled_from(["image/gif", "image/jpeg", "image/png", "image/webp"]),
    st.binary(max_size=24),
)
# What JSON holds and reads back as equal: no tuples, no NaN, 64-bit integers.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
tool_uses = st.builds(
    ToolUseBlock, ids, ids, st.dictionaries(st.text(max_size=6), json_values, max_size=4)
)
# What the providers put on messages and blocks that a Message keeps: OpenAI's participant
# `name`, Anthropic's `cache_control` (with or without a `ttl`).
names = st.none() | ids
cache_controls = st.none() | st.fixed_dictionaries(
    {"type": st.just("ephemeral")}, optional={"ttl": st.sampled_from(["5m", "1h"])}
)


def cached(block: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`block`, with a random `cache_control` on it."""
    return st.builds(lambda b, cache: replace(b, cache_control=cache), block, cache_controls)


def tool_results(*, images: bool, errors: bool) -> st.SearchStrategy[ToolResultBlock]:
    parts = text_blocks | image_blocks if images else text_blocks
    return st.builds(
        ToolResultBlock,
        ids,
        texts | st.lists(parts, max_size=3),
        st.booleans() if errors else st.just(False),
    )


def blocks(
    *kinds: st.SearchStrategy[Any], min_size: int = 0, max_size: int = 4
) -> st.SearchStrategy[list[Any]]:
    return st.lists(st.one_of(*kinds), min_size=min_size, max_size=max_size)


def conversations(
    wire_format: WireFormat, *, lossless: bool = True
) -> st.SearchStrategy[list[Message]]:
    """Random conversations for `wire_format`.

    With `lossless`, only what the format carries whole (the round trip gives
    the messages back exactly); without it, anything its `to_` converter
    accepts, including what it degrades.
    """
    if wire_format == "openai":
        return _openai_conversations(lossless)
    return _anthropic_conversations(lossless)


@st.composite
def _openai_conversations(draw: st.DrawFn, lossless: bool) -> list[Message]:
    messages: list[Message] = []
    previous = ""
    for _ in range(draw(st.integers(0, 6))):
        kinds = ["system", "user", "assistant", "results"]
        if lossless and previous == "results":
            kinds.remove("results")  # adjacent result messages come back merged
        kind = draw(st.sampled_from(kinds))
        if kind == "system":
            content: list[ContentBlock] = draw(blocks(text_blocks, max_size=3))
        elif kind == "user":  # a message with nothing to send is not sent
            content = draw(blocks(text_blocks, image_blocks, min_size=1))
        elif kind == "assistant":
            content = draw(blocks(text_blocks, max_size=2)) + draw(blocks(tool_uses, max_size=3))
            if not content:
                content = [draw(text_blocks)]
            if not lossless:  # text after a tool call comes out first
                content = draw(st.permutations(content))
        elif lossless:
            content = draw(
                st.lists(tool_results(images=False, errors=False), min_size=1, max_size=3)
            )
        else:  # error results degrade; other blocks move into a user message after them
            content = draw(
                st.lists(tool_results(images=False, errors=True), min_size=1, max_size=3)
            )
            content = draw(st.permutations(content + draw(blocks(text_blocks, image_blocks))))
        if kind == "results":  # OpenAI's tool messages have no participant name
            messages.append(Message("user", content))
        else:
            messages.append(Message(kind, content, name=draw(names)))  # type: ignore[arg-type]
        previous = kind
    return messages


@st.composite
def _anthropic_conversations(draw: st.DrawFn, lossless: bool) -> list[Message]:
    # Several leading system messages come back as one.
    systems = draw(st.integers(0, 1 if lossless else 3))
    system_blocks = blocks(cached(text_blocks), max_size=3)
    messages = [Message("system", draw(system_blocks)) for _ in range(systems)]
    anything = blocks(
        cached(text_blocks),
        cached(image_blocks),
        cached(tool_uses),
        cached(tool_results(images=True, errors=True)),
        min_size=1,
    )
    roles = st.sampled_from(["user", "assistant"])
    messages += draw(st.lists(st.builds(Message, roles, anything), max_size=6))
    return messages


# -- the formats, as one JSON-ready value each ------------------------------


def to_wire(wire_format: WireFormat, messages: list[Message]) -> Any:
    if wire_format == "openai":
        return to_openai(messages)
    system, wire = to_anthropic(messages)
    return {"system": system, "messages": wire}


def from_wire(wire_format: WireFormat, wire: Any) -> list[Message]:
    if wire_format == "openai":
        return from_openai(wire)
    return from_anthropic(wire["messages"], system=wire["system"])


def for_each_format(test: Callable[..., None]) -> Any:
    return pytest.mark.parametrize("wire_format", FORMATS)(SETTINGS(given(data=st.data())(test)))


# -- properties -------------------------------------------------------------


@for_each_format
def test_messages_the_format_carries_come_back_exactly(
    wire_format: WireFormat, data: st.DataObject
) -> None:
    messages = data.draw(conversations(wire_format))

    assert from_wire(wire_format, to_wire(wire_format, messages)) == messages


@for_each_format
def test_converted_output_is_canonical_wire_input_and_reading_it_changes_nothing(
    wire_format: WireFormat, data: st.DataObject
) -> None:
    wire = to_wire(wire_format, data.draw(conversations(wire_format, lossless=False)))
    before = copy.deepcopy(wire)

    assert to_wire(wire_format, from_wire(wire_format, wire)) == before
    assert wire == before


@for_each_format
def test_output_is_json_that_reads_back_the_same(
    wire_format: WireFormat, data: st.DataObject
) -> None:
    wire = to_wire(wire_format, data.draw(conversations(wire_format, lossless=False)))

    assert orjson.loads(orjson.dumps(wire)) == wire


@SETTINGS
@given(conversations("openai", lossless=False))
def test_openai_keeps_every_tool_call_and_result_in_order(messages: list[Message]) -> None:
    back = from_openai(to_openai(messages))

    def calls(ms: list[Message]) -> list[tuple[str, str, Any]]:
        return [(b.id, b.name, b.input) for m in ms for b in m.tool_uses]

    def results(ms: list[Message]) -> list[tuple[str, str]]:
        return [(r.tool_use_id, r.text) for m in ms for r in m.tool_results]

    expected = [
        (r.tool_use_id, "Error: " + r.text if r.is_error else r.text)
        for m in messages
        for r in m.tool_results
    ]
    assert calls(back) == calls(messages)
    assert results(back) == expected
