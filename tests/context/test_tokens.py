"""Token counting: counters, the message formula, the per-message cache, tiktoken."""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

import pytest
import tiktoken

from pygents_ctx import (
    HeuristicTokenCounter,
    ImageBlock,
    Message,
    TextBlock,
    TiktokenCounter,
    TokenCounter,
    ToolResultBlock,
    ToolUseBlock,
    count_message_tokens,
    count_tokens,
)

IMAGE = ImageBlock("image/png", b"\x89PNG" + bytes(64))
# Byte-level ranks plus one merge ("ab"), built locally: named encodings need a download.
PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
BYTES_AB = tiktoken.Encoding(
    name="test-bytes-ab",
    pat_str=PATTERN,
    mergeable_ranks={**{bytes([i]): i for i in range(256)}, b"ab": 256},
    special_tokens={"<|endoftext|>": 257},
)
BYTES_ONLY = tiktoken.Encoding(
    name="test-bytes",
    pat_str=PATTERN,
    mergeable_ranks={bytes([i]): i for i in range(256)},
    special_tokens={},
)


class Recorder:
    """A counter that counts characters and records every text it is asked about."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, text: str) -> int:
        self.seen.append(text)
        return len(text)


# -- HeuristicTokenCounter --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chars_per_token", "text", "expected"),
    [
        (4.0, "", 0),
        (4.0, "a", 1),
        (4.0, "abcd", 1),
        (4.0, "abcde", 2),
        (4.0, "hello world", 3),
        (1, "hello", 5),
        (2.5, "abcdef", 3),
        (3, "é" * 7, 3),
    ],
)
def test_heuristic_counter_is_ceil_of_length_over_chars_per_token(
    chars_per_token: float, text: str, expected: int
) -> None:
    counter = HeuristicTokenCounter(chars_per_token)

    assert counter(text) == expected == math.ceil(len(text) / chars_per_token)


def test_heuristic_counter_defaults_to_four_characters_per_token() -> None:
    assert HeuristicTokenCounter().chars_per_token == 4.0
    assert HeuristicTokenCounter()("x" * 400) == 100


@pytest.mark.parametrize("bad", [0, 0.0, -1, -0.5, True, False, "4", None, float("nan")])
def test_heuristic_counter_rejects_a_non_positive_or_non_number_ratio(bad: Any) -> None:
    error = ValueError if isinstance(bad, int | float) and not isinstance(bad, bool) else TypeError
    with pytest.raises(error, match="chars_per_token must be a"):
        HeuristicTokenCounter(bad)


def test_heuristic_counters_with_the_same_ratio_are_equal() -> None:
    assert HeuristicTokenCounter(4) == HeuristicTokenCounter(4.0)
    assert HeuristicTokenCounter(3.0) != HeuristicTokenCounter(4.0)


@pytest.mark.parametrize(
    "counter", [HeuristicTokenCounter(), TiktokenCounter(BYTES_ONLY), len, lambda text: 1]
)
def test_any_str_to_int_callable_is_a_token_counter(counter: Any) -> None:
    assert isinstance(counter, TokenCounter)
    assert count_message_tokens(Message("user", "hi"), counter) >= 4


# -- count_message_tokens ---------------------------------------------------------------------

EVERYTHING = Message(
    "assistant",
    [
        TextBlock("hello"),
        ToolUseBlock("call-1", "search", {"query": "café ☕", "n": 2}),
        ToolResultBlock("call-1", "done"),
        ToolResultBlock("call-2", [TextBlock("ab"), IMAGE, TextBlock("cd")]),
        IMAGE,
        TextBlock("bye"),
    ],
)


@pytest.mark.parametrize(("overhead", "media"), [(4, 600), (0, 0), (10, 85)])
def test_a_message_counts_overhead_text_tool_name_and_input_results_and_images(
    overhead: int, media: int
) -> None:
    counter = Recorder()

    total = count_message_tokens(
        EVERYTHING, counter, per_message_overhead=overhead, tokens_per_media=media
    )

    text, name, arguments, result, part_one, part_two, last = counter.seen
    assert (text, name, result, part_one, part_two, last) == (
        "hello",
        "search",
        "done",
        "ab",
        "cd",
        "bye",
    )
    assert json.loads(arguments) == {"query": "café ☕", "n": 2}
    assert "café ☕" in arguments  # as the model sees it, not \u-escaped
    # Two images: one in the tool result, one on its own.
    assert total == overhead + sum(len(piece) for piece in counter.seen) + 2 * media


def test_the_default_count_uses_the_estimate_and_600_per_image() -> None:
    assert count_message_tokens(Message("user", "hello world")) == 4 + 2
    assert count_message_tokens(Message("user", [IMAGE])) == 4 + 600
    assert count_message_tokens(Message("system", [])) == 4


@pytest.mark.parametrize(
    "message",
    [Message("user", "héllo wörld ☕"), Message("system", "rules"), Message("assistant", "ok")],
    ids=lambda m: m.role,
)
def test_every_role_is_counted_alike(message: Message) -> None:
    assert count_message_tokens(message, len) == 4 + len(message.text)


def test_non_ascii_tool_input_is_counted_as_is_not_escaped() -> None:
    escaped = ToolUseBlock("c", "f", {"city": "Zürich"})
    plain = ToolUseBlock("c", "f", {"city": "Zurich"})

    # "ü" escaped would be six characters (\u00fc); kept as is it is one, like "u".
    assert count_message_tokens(Message("assistant", [escaped]), len) == count_message_tokens(
        Message("assistant", [plain]), len
    )


def test_a_tool_input_json_cannot_hold_is_still_counted_with_non_ascii_as_is() -> None:
    counter = Recorder()
    # An int key and a set: no JSON for them, yet the call must still be counted.
    message = Message("assistant", [ToolUseBlock("c", "f", {1: "Zürich", "ids": {7}})])  # type: ignore[dict-item]

    total = count_message_tokens(message, counter)

    name, arguments = counter.seen
    assert name == "f"
    assert all(part in arguments for part in ("Zürich", "1", "7"))
    assert total == 4 + 1 + len(arguments)


@pytest.mark.parametrize("field", ["per_message_overhead", "tokens_per_media"])
@pytest.mark.parametrize("bad", [-1, 1.5, True, "4", None])
def test_negative_or_non_int_amounts_are_refused(field: str, bad: Any) -> None:
    if isinstance(bad, int) and not isinstance(bad, bool):
        expected: tuple[type[Exception], str] = (ValueError, f"{field} must be at least 0")
    else:
        expected = (TypeError, f"{field} must be an int")
    with pytest.raises(expected[0], match=re.escape(expected[1])):
        count_message_tokens(Message("user", "hi"), **{field: bad})


def test_count_tokens_sums_the_message_counts() -> None:
    messages = [Message("user", "hello"), EVERYTHING, Message("assistant", [IMAGE])]

    assert count_tokens(messages, len) == sum(count_message_tokens(m, len) for m in messages)
    assert count_tokens(iter(messages), len, per_message_overhead=0, tokens_per_media=1) == sum(
        count_message_tokens(m, len, per_message_overhead=0, tokens_per_media=1) for m in messages
    )
    assert count_tokens([]) == 0


# -- the cache --------------------------------------------------------------------------------


def test_a_message_is_counted_once_however_often_it_is_asked() -> None:
    counter = Recorder()
    message = Message("user", [TextBlock("one"), TextBlock("two")])

    first = count_message_tokens(message, counter)
    calls = len(counter.seen)
    repeats = [count_message_tokens(message, counter) for _ in range(5)]
    in_sums = count_tokens([message, message], counter)

    assert calls == 2
    assert len(counter.seen) == calls
    assert repeats == [first] * 5
    assert in_sums == 2 * first


@pytest.mark.parametrize(
    ("other_counter", "settings"),
    [(True, {}), (False, {"per_message_overhead": 0}), (False, {"tokens_per_media": 1})],
    ids=["other counter", "other overhead", "other media"],
)
def test_a_different_counter_or_setting_recounts(
    other_counter: bool, settings: dict[str, int]
) -> None:
    first, second = Recorder(), Recorder()
    message = Message("user", [TextBlock("hello"), IMAGE])
    count_message_tokens(message, first)
    counter = second if other_counter else first

    recount = count_message_tokens(message, counter, **settings)

    assert (first.seen + second.seen).count("hello") == 2
    fresh = Message("user", [TextBlock("hello"), IMAGE])
    assert recount == count_message_tokens(fresh, counter, **settings)


def test_an_equal_counter_reuses_the_count() -> None:
    class SameEverywhere(Recorder):
        def __eq__(self, other: object) -> bool:
            return isinstance(other, SameEverywhere)

        __hash__ = None  # type: ignore[assignment]

    first, second = SameEverywhere(), SameEverywhere()
    message = Message("user", "hello")

    assert count_message_tokens(message, first) == count_message_tokens(message, second)
    assert second.seen == []


def test_equal_messages_are_counted_each_once_and_the_cache_does_not_change_equality() -> None:
    counter = Recorder()
    counted, fresh = Message("user", "hello"), Message("user", "hello")
    count_message_tokens(counted, counter)

    assert counted == fresh
    assert hash(counted) == hash(fresh)
    assert repr(counted) == repr(fresh)
    count_message_tokens(fresh, counter)
    assert counter.seen == ["hello", "hello"]


# -- TiktokenCounter --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("hello", 5),
        ("héllo", 6),  # é is two bytes
        ("abab", 2),  # the "ab" merge
        ("ab ab", 3),
        ("<|endoftext|>", 13),  # special-token text is ordinary text
    ],
)
def test_tiktoken_counter_counts_the_encodings_tokens(text: str, expected: int) -> None:
    assert TiktokenCounter(BYTES_AB)(text) == expected


def test_tiktoken_counter_counts_messages_exactly() -> None:
    message = Message("assistant", [TextBlock("abab"), ToolUseBlock("c", "ab", {"k": "é"})])

    # 4 overhead + "abab" (2) + "ab" (1) + '{"k":"é"}' (2 + 1 + 2 + 2 bytes for é + 2 = 9 bytes).
    assert count_message_tokens(message, TiktokenCounter(BYTES_AB)) == 4 + 2 + 1 + len(
        '{"k":"é"}'.encode()
    )


def test_tiktoken_counters_compare_by_encoding() -> None:
    counter = TiktokenCounter(BYTES_AB)

    assert counter == TiktokenCounter(BYTES_AB)
    assert hash(counter) == hash(TiktokenCounter(BYTES_AB))
    assert counter != TiktokenCounter(BYTES_ONLY)
    assert counter != HeuristicTokenCounter()
    assert counter.encoding_name == "test-bytes-ab"
    assert repr(counter) == "TiktokenCounter('test-bytes-ab')"


def test_tiktoken_counter_takes_an_encoding_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(tiktoken.registry.ENCODINGS, "test-bytes-ab", BYTES_AB)

    counter = TiktokenCounter("test-bytes-ab")

    assert counter == TiktokenCounter(BYTES_AB)
    assert counter("abab") == 2


def test_for_model_picks_the_models_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    # Stand in for the real o200k_base, which would need a download.
    monkeypatch.setitem(tiktoken.registry.ENCODINGS, "o200k_base", BYTES_AB)

    assert TiktokenCounter.for_model("gpt-4o")("abab") == 2


def test_for_model_of_an_unknown_model_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        TiktokenCounter.for_model("no-such-model")


def test_a_count_under_one_encoding_is_not_reused_for_another() -> None:
    message = Message("user", "abab")

    assert count_message_tokens(message, TiktokenCounter(BYTES_AB)) == 6
    assert count_message_tokens(message, TiktokenCounter(BYTES_ONLY)) == 8


@pytest.mark.parametrize(
    "build",
    [lambda: TiktokenCounter(), lambda: TiktokenCounter.for_model("gpt-4o")],
    ids=["TiktokenCounter()", "for_model"],
)
def test_without_tiktoken_the_counter_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, build: Any
) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)

    with pytest.raises(ImportError, match=re.escape("pip install tiktoken (the tiktoken extra)")):
        build()
