"""pygents_ctx.testing: the scripted summarizer and the fixed token counter."""

from __future__ import annotations

from typing import Any

import pytest

from pygents_ctx import Message, TokenCounter, count_message_tokens
from pygents_ctx.context.strategies.summarize import Summarizer
from pygents_ctx.testing import FixedTokenCounter, ScriptedSummarizer, SummarizerCall

HELLO = [Message("user", "hello")]


async def test_replies_come_in_script_order_and_every_call_is_recorded() -> None:
    summarizer = ScriptedSummarizer(["first", "second"])

    replies = [await summarizer(HELLO, None), await summarizer([], "first")]

    assert replies == ["first", "second"]
    assert summarizer.calls == [
        SummarizerCall(tuple(HELLO), None),
        SummarizerCall((), "first"),
    ]


async def test_the_default_script_numbers_its_replies() -> None:
    summarizer = ScriptedSummarizer()

    assert [await summarizer(HELLO, None) for _ in range(3)] == [
        "summary 1",
        "summary 2",
        "summary 3",
    ]


async def _async_reply(messages: list[Message], previous: str | None) -> str:
    return f"{previous or 'none'} + {len(messages)}"


def _sync_reply(messages: list[Message], previous: str | None) -> str:
    return f"{previous or 'none'} + {len(messages)}"


@pytest.mark.parametrize("function", [_async_reply, _sync_reply], ids=["async", "sync"])
async def test_a_function_writes_each_reply(function: Any) -> None:
    summarizer = ScriptedSummarizer(function)

    assert await summarizer(HELLO, None) == "none + 1"
    assert await summarizer(HELLO * 2, "old") == "old + 2"
    assert len(summarizer.calls) == 2


@pytest.mark.parametrize(
    "failure", [ConnectionError("down"), ConnectionError], ids=["instance", "class"]
)
async def test_an_exception_in_the_script_is_raised_for_that_call(failure: Any) -> None:
    summarizer = ScriptedSummarizer(["first", failure, "third"])

    assert await summarizer(HELLO, None) == "first"
    with pytest.raises(ConnectionError):
        await summarizer(HELLO, "first")
    assert await summarizer(HELLO, "first") == "third"
    assert len(summarizer.calls) == 3


async def test_error_makes_every_call_fail_until_cleared() -> None:
    summarizer = ScriptedSummarizer(["only"], error=TimeoutError("slow"))

    with pytest.raises(TimeoutError, match="slow"):
        await summarizer(HELLO, None)
    summarizer.error = None

    assert await summarizer(HELLO, None) == "only"  # the failed call used no reply
    assert len(summarizer.calls) == 2


async def test_a_script_that_runs_out_says_so() -> None:
    summarizer = ScriptedSummarizer(["only"])
    await summarizer(HELLO, None)

    with pytest.raises(RuntimeError, match="no reply for call 2: the script has 1"):
        await summarizer(HELLO, None)


async def test_calls_keep_what_was_passed_even_if_the_caller_changes_its_list() -> None:
    summarizer = ScriptedSummarizer()
    messages = list(HELLO)
    await summarizer(messages, None)

    messages.append(Message("assistant", "later"))

    assert summarizer.calls[0].messages == tuple(HELLO)


@pytest.mark.parametrize(
    ("script", "match"),
    [("one summary", r"not one string; write \['one summary'\]"), (42, "not int")],
)
def test_a_script_must_be_replies_or_a_function(script: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        ScriptedSummarizer(script)


def test_scripted_summarizer_is_a_summarizer_with_a_short_repr() -> None:
    summarizer = ScriptedSummarizer()

    assert isinstance(summarizer, Summarizer)
    assert repr(summarizer) == "ScriptedSummarizer(calls=0)"


def test_fixed_counter_gives_every_text_the_same_count_and_counts_calls() -> None:
    counter = FixedTokenCounter(5)

    assert [counter("a"), counter(""), counter("a much longer text")] == [5, 5, 5]
    assert counter.calls == 3
    assert isinstance(counter, TokenCounter)
    assert repr(counter) == "FixedTokenCounter(5)"


def test_fixed_counter_shows_that_message_counts_are_cached() -> None:
    counter = FixedTokenCounter(2)
    message = Message("user", "hi")

    counts = [count_message_tokens(message, counter, per_message_overhead=1) for _ in range(3)]

    assert counts == [3, 3, 3]
    assert counter.calls == 1


@pytest.mark.parametrize("tokens", [-1, True, 1.5, "3"])
def test_fixed_counter_rejects_a_bad_count(tokens: Any) -> None:
    error = ValueError if tokens == -1 else TypeError
    with pytest.raises(error, match="FixedTokenCounter tokens must be"):
        FixedTokenCounter(tokens)
