"""Wire converters: Message lists to and from the OpenAI and Anthropic message formats."""

from __future__ import annotations

import base64
import copy
import json
import re
from typing import Any

import pytest

from pygents_ctx.context import wire
from pygents_ctx.context.messages import (
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from pygents_ctx.context.wire import from_anthropic, from_openai, to_anthropic, to_openai

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
PNG_B64 = base64.b64encode(PNG).decode("ascii")
PNG_URL = f"data:image/png;base64,{PNG_B64}"
JPEG = b"\xff\xd8\xff\xe0 jpeg"
JPEG_B64 = base64.b64encode(JPEG).decode("ascii")

Wire = list[dict[str, Any]]


def raises_at(path: str) -> Any:
    """`pytest.raises(ValueError)` whose message starts with the offending field."""
    return pytest.raises(ValueError, match=rf"^{re.escape(path)}(?![\w\[.])")


def openai_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    function = {"name": name, "arguments": arguments}
    return {"id": call_id, "type": "function", "function": function}


def openai_image(url: str = PNG_URL) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def anthropic_image(data: str = PNG_B64, media_type: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def test_the_module_exports_the_five_converters() -> None:
    assert sorted(wire.__all__) == [
        "from_anthropic",
        "from_openai",
        "to_anthropic",
        "to_gemini",
        "to_openai",
    ]


# ============================================================================ OpenAI

# Conversations the OpenAI format carries whole, next to their OpenAI form:
# each converts exactly, in both directions.
OPENAI_EXACT: list[tuple[str, list[Message], Wire]] = [
    ("empty", [], []),
    ("user text", [Message("user", "Hi")], [{"role": "user", "content": "Hi"}]),
    (
        "user text and image",
        [Message("user", [TextBlock("What is this?"), ImageBlock("image/png", PNG)])],
        [{"role": "user", "content": [text("What is this?"), openai_image()]}],
    ),
    (
        "user image alone",
        [Message("user", [ImageBlock("image/jpeg", JPEG)])],
        [{"role": "user", "content": [openai_image(f"data:image/jpeg;base64,{JPEG_B64}")]}],
    ),
    (
        "user two texts",
        [Message("user", [TextBlock("a"), TextBlock("b")])],
        [{"role": "user", "content": [text("a"), text("b")]}],
    ),
    (
        "system text",
        [Message("system", "Be brief."), Message("user", "Hi")],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    ),
    (
        "system two texts, mid-conversation",
        [Message("user", "Hi"), Message("system", [TextBlock("a"), TextBlock("b")])],
        [
            {"role": "user", "content": "Hi"},
            {"role": "system", "content": [text("a"), text("b")]},
        ],
    ),
    (
        "assistant text",
        [Message("assistant", "Hello!")],
        [{"role": "assistant", "content": "Hello!"}],
    ),
    (
        "assistant two texts",
        [Message("assistant", [TextBlock("a"), TextBlock("b")])],
        [{"role": "assistant", "content": [text("a"), text("b")]}],
    ),
    (
        "assistant tool call only",
        [Message("assistant", [ToolUseBlock("call_1", "search", {"q": "pygents"})])],
        [
            {
                "role": "assistant",
                "tool_calls": [openai_call("call_1", "search", '{"q":"pygents"}')],
            }
        ],
    ),
    (
        "assistant text and parallel tool calls, then their results",
        [
            Message(
                "assistant",
                [
                    TextBlock("Checking both."),
                    ToolUseBlock("call_1", "weather", {"city": "Paris", "days": [1, 2]}),
                    ToolUseBlock("call_2", "weather", {"city": "Zürich", "metric": True}),
                    ToolUseBlock("call_3", "now", {}),
                ],
            ),
            Message(
                "user",
                [
                    ToolResultBlock("call_1", "sunny"),
                    ToolResultBlock("call_2", [TextBlock("rain"), TextBlock("wind")]),
                    ToolResultBlock("call_3", ""),
                ],
            ),
            Message("assistant", "Sunny in Paris, rainy in Zürich."),
        ],
        [
            {
                "role": "assistant",
                "content": "Checking both.",
                "tool_calls": [
                    openai_call("call_1", "weather", '{"city":"Paris","days":[1,2]}'),
                    openai_call("call_2", "weather", '{"city":"Zürich","metric":true}'),
                    openai_call("call_3", "now", "{}"),
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_2", "content": [text("rain"), text("wind")]},
            {"role": "tool", "tool_call_id": "call_3", "content": ""},
            {"role": "assistant", "content": "Sunny in Paris, rainy in Zürich."},
        ],
    ),
    (
        "tool result with an empty block list",
        [Message("user", [ToolResultBlock("call_1", [])])],
        [{"role": "tool", "tool_call_id": "call_1", "content": []}],
    ),
]


@pytest.mark.parametrize(
    ("messages", "openai"),
    [case[1:] for case in OPENAI_EXACT],
    ids=[case[0] for case in OPENAI_EXACT],
)
def test_openai_conversion_is_exact_both_ways(messages: list[Message], openai: Wire) -> None:
    assert to_openai(messages) == openai
    assert from_openai(openai) == messages


# What OpenAI cannot carry exactly: (messages, their OpenAI form, what comes back).
OPENAI_LOSSY: list[tuple[str, list[Message], Wire, list[Message]]] = [
    (
        "is_error becomes an 'Error: ' prefix",
        [Message("user", [ToolResultBlock("call_1", "disk full", is_error=True)])],
        [{"role": "tool", "tool_call_id": "call_1", "content": "Error: disk full"}],
        [Message("user", [ToolResultBlock("call_1", "Error: disk full")])],
    ),
    (
        "an error result's text blocks are joined into one string",
        [
            Message(
                "user",
                [ToolResultBlock("call_1", [TextBlock("bad"), TextBlock("input")], is_error=True)],
            )
        ],
        [{"role": "tool", "tool_call_id": "call_1", "content": "Error: bad\ninput"}],
        [Message("user", [ToolResultBlock("call_1", "Error: bad\ninput")])],
    ),
    (
        "assistant text after a tool call comes out first",
        [
            Message(
                "assistant",
                [TextBlock("a"), ToolUseBlock("call_1", "f", {}), TextBlock("b")],
            )
        ],
        [
            {
                "role": "assistant",
                "content": [text("a"), text("b")],
                "tool_calls": [openai_call("call_1", "f", "{}")],
            }
        ],
        [
            Message(
                "assistant",
                [TextBlock("a"), TextBlock("b"), ToolUseBlock("call_1", "f", {})],
            )
        ],
    ),
    (
        "tool results come before the user's other blocks, in a separate message",
        [
            Message(
                "user",
                [
                    TextBlock("Here you go:"),
                    ToolResultBlock("call_1", "one"),
                    ImageBlock("image/png", PNG),
                    ToolResultBlock("call_2", "two"),
                ],
            )
        ],
        [
            {"role": "tool", "tool_call_id": "call_1", "content": "one"},
            {"role": "tool", "tool_call_id": "call_2", "content": "two"},
            {"role": "user", "content": [text("Here you go:"), openai_image()]},
        ],
        [
            Message("user", [ToolResultBlock("call_1", "one"), ToolResultBlock("call_2", "two")]),
            Message("user", [TextBlock("Here you go:"), ImageBlock("image/png", PNG)]),
        ],
    ),
    (
        "adjacent tool-result messages come back as one",
        [
            Message("user", [ToolResultBlock("call_1", "one")]),
            Message("user", [ToolResultBlock("call_2", "two")]),
        ],
        [
            {"role": "tool", "tool_call_id": "call_1", "content": "one"},
            {"role": "tool", "tool_call_id": "call_2", "content": "two"},
        ],
        [Message("user", [ToolResultBlock("call_1", "one"), ToolResultBlock("call_2", "two")])],
    ),
]


@pytest.mark.parametrize(
    ("messages", "openai", "back"),
    [case[1:] for case in OPENAI_LOSSY],
    ids=[case[0] for case in OPENAI_LOSSY],
)
def test_openai_degrades_what_it_cannot_carry_as_documented(
    messages: list[Message], openai: Wire, back: list[Message]
) -> None:
    assert to_openai(messages) == openai
    assert from_openai(openai) == back
    assert to_openai(back) == openai


# What users send that is not in the form to_openai writes, and what it reads as.
OPENAI_ACCEPTED: list[tuple[str, Wire, list[Message]]] = [
    (
        "developer role is a system message",
        [{"role": "developer", "content": "Be brief."}],
        [Message("system", "Be brief.")],
    ),
    (
        "developer role with text parts",
        [{"role": "developer", "content": [text("a"), text("b")]}],
        [Message("system", [TextBlock("a"), TextBlock("b")])],
    ),
    (
        "a message name is kept, a tool message's name is not",
        [
            {"role": "user", "content": "Hi", "name": "ada"},
            {"role": "assistant", "content": "Hello", "name": "bot"},
            {"role": "tool", "tool_call_id": "call_1", "content": "ok", "name": "search"},
        ],
        [
            Message("user", "Hi", name="ada"),
            Message("assistant", "Hello", name="bot"),
            Message("user", [ToolResultBlock("call_1", "ok")]),
        ],
    ),
    (
        "a list with one text part",
        [{"role": "user", "content": [text("Hi")]}],
        [Message("user", "Hi")],
    ),
    (
        "assistant content left out beside tool calls",
        [{"role": "assistant", "tool_calls": [openai_call("call_1", "f", '{"a": 1}')]}],
        [Message("assistant", [ToolUseBlock("call_1", "f", {"a": 1})])],
    ),
    (
        "an SDK-dumped assistant message with null extras",
        [
            {
                "role": "assistant",
                "content": "Hi",
                "refusal": None,
                "annotations": [],
                "audio": None,
                "function_call": None,
                "tool_calls": None,
            }
        ],
        [Message("assistant", "Hi")],
    ),
    (
        "a refusal is text",
        [{"role": "assistant", "content": None, "refusal": "I can't help with that."}],
        [Message("assistant", "I can't help with that.")],
    ),
    (
        "a refusal part is text",
        [
            {
                "role": "assistant",
                "content": [text("Well,"), {"type": "refusal", "refusal": "no."}],
            }
        ],
        [Message("assistant", [TextBlock("Well,"), TextBlock("no.")])],
    ),
    (
        "image detail is ignored",
        [
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": PNG_URL, "detail": "low"}}],
            }
        ],
        [Message("user", [ImageBlock("image/png", PNG)])],
    ),
    (
        "an image URL given as a bare string",
        [{"role": "user", "content": [{"type": "image_url", "image_url": PNG_URL}]}],
        [Message("user", [ImageBlock("image/png", PNG)])],
    ),
    (
        "a tool call without a type",
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}],
            }
        ],
        [Message("assistant", [ToolUseBlock("c", "f", {})])],
    ),
    (
        "pretty-printed arguments",
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [openai_call("c", "f", '{\n  "q": "x",\n  "n": 2.5\n}')],
            }
        ],
        [Message("assistant", [ToolUseBlock("c", "f", {"q": "x", "n": 2.5})])],
    ),
    (
        "a tool message between user messages ends the group",
        [
            {"role": "tool", "tool_call_id": "a", "content": "1"},
            {"role": "user", "content": "next"},
            {"role": "tool", "tool_call_id": "b", "content": "2"},
        ],
        [
            Message("user", [ToolResultBlock("a", "1")]),
            Message("user", "next"),
            Message("user", [ToolResultBlock("b", "2")]),
        ],
    ),
    ("a tuple of messages", ({"role": "user", "content": "Hi"},), [Message("user", "Hi")]),  # type: ignore[list-item]
]


@pytest.mark.parametrize(
    ("openai", "messages"),
    [case[1:] for case in OPENAI_ACCEPTED],
    ids=[case[0] for case in OPENAI_ACCEPTED],
)
def test_from_openai_accepts_what_users_send(openai: Wire, messages: list[Message]) -> None:
    assert from_openai(openai) == messages


def test_from_openai_reads_what_to_openai_wrote_for_an_error_as_plain_text() -> None:
    # OpenAI has no is_error, so nothing marks the result as an error on the way back.
    [result] = from_openai(
        to_openai([Message("user", [ToolResultBlock("c", "boom", is_error=True)])])
    )[0].tool_results

    assert result.is_error is False
    assert result.text == "Error: boom"


# Blocks OpenAI has no place for: (messages, the path named in the error).
OPENAI_CANNOT_CARRY: list[tuple[str, list[Message], str]] = [
    (
        "image in a system message",
        [Message("system", [TextBlock("a"), ImageBlock("image/png", PNG)])],
        "messages[0].content[1]",
    ),
    (
        "tool call in a system message",
        [Message("system", [ToolUseBlock("c", "f", {})])],
        "messages[0].content[0]",
    ),
    (
        "image in an assistant message",
        [Message("user", "hi"), Message("assistant", [ImageBlock("image/png", PNG)])],
        "messages[1].content[0]",
    ),
    (
        "tool result in an assistant message",
        [Message("assistant", [TextBlock("x"), ToolResultBlock("c", "ok")])],
        "messages[0].content[1]",
    ),
    (
        "tool call in a user message",
        [Message("user", [ToolUseBlock("c", "f", {})])],
        "messages[0].content[0]",
    ),
    (
        "image in a tool result",
        [
            Message(
                "user",
                [
                    ToolResultBlock("a", "ok"),
                    ToolResultBlock("b", [TextBlock("shot:"), ImageBlock("image/png", PNG)]),
                ],
            )
        ],
        "messages[0].content[1].content[1]",
    ),
    (
        "image in an error result",
        [Message("user", [ToolResultBlock("b", [ImageBlock("image/png", PNG)], is_error=True)])],
        "messages[0].content[0].content[0]",
    ),
    (
        "tool input that is not JSON",
        [Message("assistant", [ToolUseBlock("c", "f", {"when": {1, 2}})])],
        "messages[0].content[0].input.when",
    ),
    (
        "tool input with an integer JSON cannot hold",
        [Message("assistant", [ToolUseBlock("c", "f", {"n": 2**70})])],
        "messages[0].content[0].input.n",
    ),
]


@pytest.mark.parametrize(
    ("messages", "path"),
    [case[1:] for case in OPENAI_CANNOT_CARRY],
    ids=[case[0] for case in OPENAI_CANNOT_CARRY],
)
def test_to_openai_refuses_what_openai_cannot_carry(messages: list[Message], path: str) -> None:
    with raises_at(path):
        to_openai(messages)


def test_to_openai_error_for_an_image_in_a_tool_result_says_how_to_fix_it() -> None:
    messages = [Message("user", [ToolResultBlock("c", [ImageBlock("image/png", PNG)])])]

    with pytest.raises(ValueError, match=r"image block.*tool message.*user message"):
        to_openai(messages)


ANY_CALL = openai_call("call_1", "f", "{}")
# Malformed OpenAI input: (messages, the path named in the error).
OPENAI_MALFORMED: list[tuple[str, Any, str]] = [
    ("not a list", "Hi", "messages"),
    ("a dict, not a list", {"role": "user", "content": "Hi"}, "messages"),
    ("a message that is not a dict", [{"role": "user", "content": "a"}, "b"], "messages[1]"),
    ("no role", [{"content": "Hi"}], "messages[0].role"),
    ("unknown role", [{"role": "function", "content": "Hi"}], "messages[0].role"),
    ("role not a string", [{"role": 1, "content": "Hi"}], "messages[0].role"),
    ("user without content", [{"role": "user"}], "messages[0].content"),
    ("user content null", [{"role": "user", "content": None}], "messages[0].content"),
    ("system content a number", [{"role": "system", "content": 3}], "messages[0].content"),
    ("part not a dict", [{"role": "user", "content": ["Hi"]}], "messages[0].content[0]"),
    (
        "part without type",
        [{"role": "user", "content": [{"text": "a"}]}],
        "messages[0].content[0].type",
    ),
    (
        "audio part",
        [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}],
        "messages[0].content[0].type",
    ),
    (
        "file part",
        [{"role": "user", "content": [text("a"), {"type": "file", "file": {}}]}],
        "messages[0].content[1].type",
    ),
    (
        "text part without text",
        [{"role": "user", "content": [{"type": "text"}]}],
        "messages[0].content[0].text",
    ),
    (
        "text part with a number",
        [{"role": "user", "content": [{"type": "text", "text": 5}]}],
        "messages[0].content[0].text",
    ),
    (
        "image in a system message",
        [{"role": "system", "content": [openai_image()]}],
        "messages[0].content[0].type",
    ),
    (
        "image in an assistant message",
        [{"role": "assistant", "content": [openai_image()]}],
        "messages[0].content[0].type",
    ),
    (
        "image URL on the web",
        [{"role": "user", "content": [openai_image("https://example.com/cat.png")]}],
        "messages[0].content[0].image_url.url",
    ),
    (
        "image part without url",
        [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
        "messages[0].content[0].image_url.url",
    ),
    (
        "image part without image_url",
        [{"role": "user", "content": [{"type": "image_url"}]}],
        "messages[0].content[0].image_url",
    ),
    (
        "image with bad base64",
        [{"role": "user", "content": [openai_image("data:image/png;base64,not base64!")]}],
        "messages[0].content[0].image_url.url",
    ),
    (
        "image of an unsupported type",
        [{"role": "user", "content": [openai_image(f"data:image/bmp;base64,{PNG_B64}")]}],
        "messages[0].content[0].image_url.url",
    ),
    (
        "tool_calls not a list",
        [{"role": "assistant", "content": None, "tool_calls": ANY_CALL}],
        "messages[0].tool_calls",
    ),
    (
        "tool call not a dict",
        [{"role": "assistant", "content": None, "tool_calls": [ANY_CALL, "call"]}],
        "messages[0].tool_calls[1]",
    ),
    (
        "custom tool call",
        [{"role": "assistant", "content": None, "tool_calls": [{**ANY_CALL, "type": "custom"}]}],
        "messages[0].tool_calls[0].type",
    ),
    (
        "tool call without id",
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"function": ANY_CALL["function"]}],
            }
        ],
        "messages[0].tool_calls[0].id",
    ),
    (
        "tool call without function",
        [{"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function"}]}],
        "messages[0].tool_calls[0].function",
    ),
    (
        "function without name",
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}],
            }
        ],
        "messages[0].tool_calls[0].function.name",
    ),
    (
        "function without arguments",
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "function": {"name": "f"}}],
            }
        ],
        "messages[0].tool_calls[0].function.arguments",
    ),
    (
        "arguments given as a dict",
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}],
            }
        ],
        "messages[0].tool_calls[0].function.arguments",
    ),
    (
        "arguments that are not JSON",
        [
            {"role": "user", "content": "Hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [ANY_CALL, openai_call("c", "f", "{'a': 1}")],
            },
        ],
        "messages[1].tool_calls[1].function.arguments",
    ),
    (
        "empty arguments",
        [{"role": "assistant", "content": None, "tool_calls": [openai_call("c", "f", "")]}],
        "messages[0].tool_calls[0].function.arguments",
    ),
    (
        "arguments that are a JSON array",
        [{"role": "assistant", "content": None, "tool_calls": [openai_call("c", "f", "[1, 2]")]}],
        "messages[0].tool_calls[0].function.arguments",
    ),
    (
        "arguments that are a JSON string",
        [{"role": "assistant", "content": None, "tool_calls": [openai_call("c", "f", '"x"')]}],
        "messages[0].tool_calls[0].function.arguments",
    ),
    (
        "deprecated function_call",
        [
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "f", "arguments": "{}"},
            }
        ],
        "messages[0].function_call",
    ),
    (
        "refusal not a string",
        [{"role": "assistant", "content": None, "refusal": 1}],
        "messages[0].refusal",
    ),
    (
        "tool message without tool_call_id",
        [{"role": "tool", "content": "ok"}],
        "messages[0].tool_call_id",
    ),
    (
        "tool message content null",
        [{"role": "tool", "tool_call_id": "c", "content": None}],
        "messages[0].content",
    ),
    (
        "image in a tool message",
        [{"role": "tool", "tool_call_id": "c", "content": [text("a"), openai_image()]}],
        "messages[0].content[1].type",
    ),
]


@pytest.mark.parametrize(
    ("openai", "path"),
    [case[1:] for case in OPENAI_MALFORMED],
    ids=[case[0] for case in OPENAI_MALFORMED],
)
def test_from_openai_names_the_malformed_field(openai: Any, path: str) -> None:
    with raises_at(path):
        from_openai(openai)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ("{'a': 1}", "is not valid JSON"),
        ("[1, 2]", "must encode a JSON object, not list"),
        ("null", "must encode a JSON object, not None"),
    ],
)
def test_bad_arguments_errors_say_what_is_wrong(arguments: str, expected: str) -> None:
    openai = [
        {"role": "assistant", "content": None, "tool_calls": [openai_call("c", "f", arguments)]}
    ]

    with pytest.raises(ValueError, match=re.escape(expected)):
        from_openai(openai)


def test_web_image_url_error_says_the_converter_does_not_download() -> None:
    openai = [{"role": "user", "content": [openai_image("https://example.com/cat.png")]}]

    with pytest.raises(ValueError, match="does not download images"):
        from_openai(openai)


# ============================================================================ Anthropic

ToolInput = dict[str, Any]
NESTED_INPUT: ToolInput = {"query": "café", "filters": {"year": [2023, 2024], "exact": None}}

# Conversations Anthropic carries whole: (messages, system, messages in Anthropic form).
ANTHROPIC_EXACT: list[tuple[str, list[Message], Any, Wire]] = [
    ("empty", [], None, []),
    ("no system prompt", [Message("user", "Hi")], None, [{"role": "user", "content": "Hi"}]),
    (
        "system prompt as a string",
        [Message("system", "Be brief."), Message("user", "Hi")],
        "Be brief.",
        [{"role": "user", "content": "Hi"}],
    ),
    (
        "system prompt as text blocks",
        [Message("system", [TextBlock("Be brief."), TextBlock("Use metric units.")])],
        [text("Be brief."), text("Use metric units.")],
        [],
    ),
    ("system message with no blocks", [Message("system", [])], [], []),
    (
        "user text blocks",
        [Message("user", [TextBlock("a"), TextBlock("b")])],
        None,
        [{"role": "user", "content": [text("a"), text("b")]}],
    ),
    (
        "user text and images",
        [
            Message(
                "user",
                [
                    TextBlock("Compare:"),
                    ImageBlock("image/png", PNG),
                    ImageBlock("image/jpeg", JPEG),
                ],
            )
        ],
        None,
        [
            {
                "role": "user",
                "content": [
                    text("Compare:"),
                    anthropic_image(),
                    anthropic_image(JPEG_B64, "image/jpeg"),
                ],
            }
        ],
    ),
    (
        "parallel tool calls and their results, an error and an image among them",
        [
            Message(
                "assistant",
                [
                    TextBlock("Looking."),
                    ToolUseBlock("toolu_1", "search", NESTED_INPUT),
                    ToolUseBlock("toolu_2", "screenshot", {}),
                    ToolUseBlock("toolu_3", "delete", {"path": "/"}),
                ],
            ),
            Message(
                "user",
                [
                    ToolResultBlock("toolu_1", "3 hits"),
                    ToolResultBlock("toolu_2", [TextBlock("Here:"), ImageBlock("image/png", PNG)]),
                    ToolResultBlock("toolu_3", "permission denied", is_error=True),
                    TextBlock("Also, hurry."),
                ],
            ),
        ],
        None,
        [
            {
                "role": "assistant",
                "content": [
                    text("Looking."),
                    {"type": "tool_use", "id": "toolu_1", "name": "search", "input": NESTED_INPUT},
                    {"type": "tool_use", "id": "toolu_2", "name": "screenshot", "input": {}},
                    {"type": "tool_use", "id": "toolu_3", "name": "delete", "input": {"path": "/"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "3 hits"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": [text("Here:"), anthropic_image()],
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_3",
                        "content": "permission denied",
                        "is_error": True,
                    },
                    text("Also, hurry."),
                ],
            },
        ],
    ),
    (
        "error result with no blocks",
        [Message("user", [ToolResultBlock("t", [], is_error=True)])],
        None,
        [
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": [], "is_error": True}
                ],
            }
        ],
    ),
    (
        "text after a tool call keeps its place",
        [Message("assistant", [ToolUseBlock("t", "f", {}), TextBlock("done")])],
        None,
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t", "name": "f", "input": {}},
                    text("done"),
                ],
            }
        ],
    ),
]


@pytest.mark.parametrize(
    ("messages", "system", "anthropic"),
    [case[1:] for case in ANTHROPIC_EXACT],
    ids=[case[0] for case in ANTHROPIC_EXACT],
)
def test_anthropic_conversion_is_exact_both_ways(
    messages: list[Message], system: Any, anthropic: Wire
) -> None:
    assert to_anthropic(messages) == (system, anthropic)
    assert from_anthropic(anthropic, system) == messages


def test_several_leading_system_messages_merge_into_one_prompt() -> None:
    messages = [
        Message("system", "Be brief."),
        Message("system", [TextBlock("Use metric units."), TextBlock("No emoji.")]),
        Message("user", "Hi"),
    ]
    system = [text("Be brief."), text("Use metric units."), text("No emoji.")]

    assert to_anthropic(messages) == (system, [{"role": "user", "content": "Hi"}])
    assert from_anthropic([{"role": "user", "content": "Hi"}], system=system) == [
        Message("system", [TextBlock(b["text"]) for b in system]),
        Message("user", "Hi"),
    ]


# What users send that is not in the form to_anthropic writes: (messages, system, result).
ANTHROPIC_ACCEPTED: list[tuple[str, Wire, Any, list[Message]]] = [
    (
        "a list with one text block",
        [{"role": "assistant", "content": [text("Hi")]}],
        None,
        [Message("assistant", "Hi")],
    ),
    (
        "cache_control is kept, citations are not",
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}},
                    {"type": "text", "text": "there", "citations": []},
                ],
            }
        ],
        [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        [
            Message("system", [TextBlock("Be brief.", cache_control={"type": "ephemeral"})]),
            Message(
                "user",
                [TextBlock("Hi", cache_control={"type": "ephemeral"}), TextBlock("there")],
            ),
        ],
    ),
    (
        "a tool result without content is empty",
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}],
        None,
        [Message("user", [ToolResultBlock("t", "")])],
    ),
    (
        "an explicit is_error false",
        [
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": "ok", "is_error": False}
                ],
            }
        ],
        None,
        [Message("user", [ToolResultBlock("t", "ok")])],
    ),
    (
        "an empty system string",
        [],
        "",
        [Message("system", "")],
    ),
]


@pytest.mark.parametrize(
    ("anthropic", "system", "messages"),
    [case[1:] for case in ANTHROPIC_ACCEPTED],
    ids=[case[0] for case in ANTHROPIC_ACCEPTED],
)
def test_from_anthropic_accepts_what_users_send(
    anthropic: Wire, system: Any, messages: list[Message]
) -> None:
    assert from_anthropic(anthropic, system=system) == messages


ANTHROPIC_CANNOT_CARRY: list[tuple[str, list[Message], str]] = [
    (
        "system message after the conversation started",
        [Message("system", "a"), Message("user", "Hi"), Message("system", "b")],
        "messages[2]",
    ),
    (
        "system message after an assistant message",
        [Message("assistant", "Hi"), Message("system", "b")],
        "messages[1]",
    ),
    (
        "image in the system prompt",
        [Message("system", [TextBlock("a"), ImageBlock("image/png", PNG)])],
        "messages[0].content[1]",
    ),
    (
        "tool result in a second leading system message",
        [Message("system", "a"), Message("system", [ToolResultBlock("t", "ok")])],
        "messages[1].content[0]",
    ),
    (
        "tool input that is not JSON",
        [Message("user", "Hi"), Message("assistant", [ToolUseBlock("t", "f", {"x": object()})])],
        "messages[1].content[0].input.x",
    ),
]


@pytest.mark.parametrize(
    ("messages", "path"),
    [case[1:] for case in ANTHROPIC_CANNOT_CARRY],
    ids=[case[0] for case in ANTHROPIC_CANNOT_CARRY],
)
def test_to_anthropic_refuses_what_anthropic_cannot_carry(
    messages: list[Message], path: str
) -> None:
    with raises_at(path):
        to_anthropic(messages)


def test_a_system_message_in_the_middle_error_says_how_to_fix_it() -> None:
    messages = [Message("user", "Hi"), Message("system", "b")]

    with pytest.raises(ValueError, match="move it to the start or make it a user message"):
        to_anthropic(messages)


def result_with(*blocks: Any) -> Wire:
    return [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t", "content": list(blocks)}],
        }
    ]


def use_with(**fields: Any) -> Wire:
    block = {"type": "tool_use", "id": "t", "name": "f", "input": {}} | fields
    return [{"role": "assistant", "content": [{k: v for k, v in block.items() if v is not None}]}]


# Malformed Anthropic input: (messages, system, the path named in the error).
ANTHROPIC_MALFORMED: list[tuple[str, Any, Any, str]] = [
    ("not a list", "Hi", None, "messages"),
    ("a message that is not a dict", [["user", "Hi"]], None, "messages[0]"),
    ("no role", [{"content": "Hi"}], None, "messages[0].role"),
    ("system role in messages", [{"role": "system", "content": "Hi"}], None, "messages[0].role"),
    ("tool role", [{"role": "tool", "content": "Hi"}], None, "messages[0].role"),
    ("no content", [{"role": "user"}], None, "messages[0].content"),
    ("content null", [{"role": "assistant", "content": None}], None, "messages[0].content"),
    ("block not a dict", [{"role": "user", "content": ["Hi"]}], None, "messages[0].content[0]"),
    (
        "block without type",
        [{"role": "user", "content": [{"text": "Hi"}]}],
        None,
        "messages[0].content[0].type",
    ),
    (
        "thinking block without its text",
        [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": [{"type": "thinking", "signature": "x"}]},
        ],
        None,
        "messages[1].content[0].thinking",
    ),
    (
        "document block",
        [{"role": "user", "content": [text("a"), {"type": "document", "source": {}}]}],
        None,
        "messages[0].content[1].type",
    ),
    (
        "text block without text",
        [{"role": "user", "content": [{"type": "text"}]}],
        None,
        "messages[0].content[0].text",
    ),
    (
        "image without source",
        [{"role": "user", "content": [{"type": "image"}]}],
        None,
        "messages[0].content[0].source",
    ),
    (
        "image from a URL",
        [
            {
                "role": "user",
                "content": [{"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}],
            }
        ],
        None,
        "messages[0].content[0].source.type",
    ),
    (
        "image of an unsupported type",
        [{"role": "user", "content": [anthropic_image(media_type="image/tiff")]}],
        None,
        "messages[0].content[0].source.media_type",
    ),
    (
        "image without data",
        [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png"}}
                ],
            }
        ],
        None,
        "messages[0].content[0].source.data",
    ),
    (
        "image with bad base64",
        [{"role": "user", "content": [anthropic_image("@@@")]}],
        None,
        "messages[0].content[0].source.data",
    ),
    ("tool use without id", use_with(id=None), None, "messages[0].content[0].id"),
    ("tool use name not a string", use_with(name=7), None, "messages[0].content[0].name"),
    ("tool use without input", use_with(input=None), None, "messages[0].content[0].input"),
    ("tool use input a string", use_with(input='{"a": 1}'), None, "messages[0].content[0].input"),
    (
        "tool use input holding a set",
        use_with(input={"a": {1}}),
        None,
        "messages[0].content[0].input.a",
    ),
    (
        "tool result without tool_use_id",
        [{"role": "user", "content": [{"type": "tool_result", "content": "ok"}]}],
        None,
        "messages[0].content[0].tool_use_id",
    ),
    (
        "tool result content a number",
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": 3}]}],
        None,
        "messages[0].content[0].content",
    ),
    (
        "tool use inside a tool result",
        result_with(text("a"), {"type": "tool_use", "id": "x", "name": "f", "input": {}}),
        None,
        "messages[0].content[0].content[1].type",
    ),
    (
        "search result inside a tool result",
        result_with({"type": "search_result"}),
        None,
        "messages[0].content[0].content[0].type",
    ),
    (
        "is_error not a bool",
        [
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": "", "is_error": "yes"}
                ],
            }
        ],
        None,
        "messages[0].content[0].is_error",
    ),
    ("system a dict", [], {"type": "text", "text": "a"}, "system"),
    ("system a number", [], 1, "system"),
    ("system block an image", [], [text("a"), anthropic_image()], "system[1].type"),
    ("system block without text", [], [{"type": "text"}], "system[0].text"),
    ("system block not a dict", [], ["Be brief."], "system[0]"),
]


@pytest.mark.parametrize(
    ("anthropic", "system", "path"),
    [case[1:] for case in ANTHROPIC_MALFORMED],
    ids=[case[0] for case in ANTHROPIC_MALFORMED],
)
def test_from_anthropic_names_the_malformed_field(anthropic: Any, system: Any, path: str) -> None:
    with raises_at(path):
        from_anthropic(anthropic, system=system)


def test_unknown_block_error_names_the_type_and_the_fix() -> None:
    anthropic = [{"role": "assistant", "content": [{"type": "document", "source": {}}]}]

    with pytest.raises(ValueError, match=r"'document' is not supported.*Filter such entries out"):
        from_anthropic(anthropic)


def test_a_system_role_error_points_to_the_system_argument() -> None:
    with pytest.raises(ValueError, match="pass the system prompt as the `system` argument"):
        from_anthropic([{"role": "system", "content": "Be brief."}])


# ============================================================================ both formats


@pytest.mark.parametrize("convert", [to_openai, to_anthropic])
@pytest.mark.parametrize(
    ("messages", "path"),
    [
        ("Hi", "messages"),
        ({"role": "user"}, "messages"),
        (5, "messages"),
        ([Message("user", "a"), {"role": "user", "content": "b"}], "messages[1]"),
    ],
    ids=["a string", "a dict", "a number", "a dict among messages"],
)
def test_to_converters_take_only_messages(convert: Any, messages: Any, path: str) -> None:
    with raises_at(path):
        convert(messages)


@pytest.mark.parametrize("convert", [to_openai, to_anthropic])
def test_to_converters_take_any_iterable(convert: Any) -> None:
    messages = [Message("user", "Hi"), Message("assistant", "Hello")]

    assert convert(iter(messages)) == convert(messages)


def test_from_converters_do_not_change_or_share_their_input() -> None:
    openai = [
        {"role": "user", "content": [text("Hi"), openai_image()]},
        {"role": "assistant", "content": None, "tool_calls": [openai_call("c", "f", '{"a": [1]}')]},
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
    ]
    anthropic = [
        {"role": "user", "content": "Hi"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {"a": [1]}}],
        },
    ]
    system = [text("Be brief.")]
    before = copy.deepcopy((openai, anthropic, system))

    from_openai(openai)
    converted = from_anthropic(anthropic, system)

    assert (openai, anthropic, system) == before
    anthropic[1]["content"][0]["input"]["a"].append(2)
    assert converted[2].tool_uses[0].input == {"a": [1]}


def test_to_anthropic_output_does_not_share_tool_input_with_the_message() -> None:
    message = Message("assistant", [ToolUseBlock("c", "f", {"a": [1]})])

    _, anthropic = to_anthropic([message])
    anthropic[0]["content"][0]["input"]["a"].append(2)

    assert message.tool_uses[0].input == {"a": [1]}


# -- what the APIs refuse is never sent ----------------------------------------------------


def test_blank_text_and_empty_messages_are_never_sent() -> None:
    call = ToolUseBlock("call_1", "search", {"q": "tides"})
    messages = [
        Message("user", [TextBlock(""), TextBlock("Tides?")]),
        Message("assistant", [TextBlock("\n\n"), call]),  # Claude may open a blank block
        Message("user", [ToolResultBlock("call_1", "2 results")]),
        Message("assistant", []),
        Message("assistant", [TextBlock("")]),
        Message("user", ""),
        Message("user", "and the Moon?"),
    ]

    openai = to_openai(messages)
    _, anthropic = to_anthropic(messages)

    assert openai == [
        {"role": "user", "content": "Tides?"},
        {
            "role": "assistant",
            "tool_calls": [openai_call("call_1", "search", '{"q":"tides"}')],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "2 results"},
        {"role": "user", "content": "and the Moon?"},
    ]
    assert anthropic == [
        {"role": "user", "content": "Tides?"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "call_1", "name": "search", "input": {"q": "tides"}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "2 results"}],
        },
        {"role": "user", "content": "and the Moon?"},
    ]


def test_thinking_goes_back_to_anthropic_signed_and_in_place_and_never_to_openai() -> None:
    signed = ThinkingBlock("Search first.", signature="sig-1")
    call = ToolUseBlock("call_1", "search", {"q": "tides"})
    messages = [
        Message("user", "Tides?"),
        Message("assistant", [signed, RedactedThinkingBlock("ENCRYPTED"), call]),
        Message("user", [ToolResultBlock("call_1", "2 results")]),
        Message("assistant", [ThinkingBlock("local reasoning"), TextBlock("The Moon.")]),
    ]

    _, anthropic = to_anthropic(messages)
    openai = to_openai(messages)

    assert anthropic[1]["content"] == [
        {"type": "thinking", "thinking": "Search first.", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "ENCRYPTED"},
        {"type": "tool_use", "id": "call_1", "name": "search", "input": {"q": "tides"}},
    ]
    assert anthropic[3] == {"role": "assistant", "content": "The Moon."}  # unsigned: not sent
    assert "thinking" not in json.dumps(openai)
    assert openai[3] == {"role": "assistant", "content": "The Moon."}
    assert from_anthropic(anthropic[:3]) == messages[:3]
    with pytest.raises(ValueError, match=r"messages\[0\].content\[0\] is a thinking block"):
        to_anthropic([Message("user", [signed])])
    with pytest.raises(ValueError, match=r"messages\[0\].content\[0\] is a thinking block"):
        to_openai([Message("user", [signed])])
