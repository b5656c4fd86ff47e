"""PinnedWindow: a byte-stable prefix across calls, re-pinned only over budget, pairs kept."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    count_message_tokens,
    count_tokens,
    from_dict,
    to_dict,
)
from pygents_ctx.context.strategies.base import ContextStrategy
from pygents_ctx.context.strategies.budget import FitTokens
from pygents_ctx.context.strategies.pinned import PinnedWindow, Window
from pygents_ctx.context.strategies.summarize import Summarize, is_summary
from pygents_ctx.testing import FixedTokenCounter, ScriptedSummarizer

# Characters are tokens and messages have no overhead: sizes are easy to read.
EXACT: dict[str, Any] = {"counter": len, "per_message_overhead": 0}


def user(text: str) -> Message:
    return Message("user", text)


def assistant(text: str) -> Message:
    return Message("assistant", text)


def call(*ids: str) -> Message:
    return Message("assistant", [ToolUseBlock(i, "search", {"q": i}) for i in ids])


def results(*ids: str) -> Message:
    return Message("user", [ToolResultBlock(i, f"result {i}") for i in ids])


def agentic(steps: int) -> list[Message]:
    """The task, then `steps` tool rounds: a call and its result, 30 characters each."""
    messages = [user("task")]
    for step in range(steps):
        messages += [call(f"c{step:02}"), results(f"c{step:02}")]
    return messages


def dumps(messages: list[Message]) -> bytes:
    return orjson.dumps([to_dict(message) for message in messages])


def orphan_results(messages: list[Message]) -> set[str]:
    calls = {use.id for message in messages for use in message.tool_uses}
    return {r.tool_use_id for message in messages for r in message.tool_results} - calls


class Spy:
    """A strategy that records what it was given and applies another."""

    def __init__(self, inner: ContextStrategy) -> None:
        self.inner = inner
        self.seen: list[int] = []

    async def compact(self, messages: list[Message]) -> list[Message]:
        self.seen.append(len(messages))
        return await self.inner.compact(messages)


class Identity:
    async def compact(self, messages: list[Message]) -> list[Message]:
        return messages


class DropPendingCalls:
    """Drops tool calls that have no result yet (as an aggressive strategy may)."""

    async def compact(self, messages: list[Message]) -> list[Message]:
        answered = {r.tool_use_id for m in messages for r in m.tool_results}
        out = []
        for message in messages:
            kept = [b for b in message.content if type(b) is not ToolUseBlock or b.id in answered]
            if kept:
                out.append(
                    message if len(kept) == len(message.content) else Message("assistant", kept)
                )
        return out


async def grow(builder: PinnedWindow, history: list[Message], new: list[Message]) -> list[Window]:
    """Append `new` one message at a time, building a window after each."""
    windows = []
    for message in new:
        history.append(message)
        windows.append(await builder.build(history))
    return windows


# ----------------------------------------------------------------------------- stability


async def test_the_prefix_is_byte_identical_until_a_re_pin_then_stable_again() -> None:
    builder = PinnedWindow(FitTokens(150, **EXACT), 300, **EXACT)
    history: list[Message] = []
    windows = await grow(builder, history, agentic(30))

    repins = [number for number, window in enumerate(windows) if window.repinned]
    assert repins[0] == 0
    assert len(repins) >= 3  # the budget forces a few re-pins over 60 messages
    for number, (before, after) in enumerate(itertools.pairwise(windows), 1):
        if after.repinned:
            continue
        shared = len(before.messages)
        assert dumps(after.messages[:shared]) == dumps(before.messages)
        assert after.messages[shared:] == [history[number]]  # the new message, as it is


async def test_a_re_pin_happens_only_when_the_window_would_exceed_the_budget() -> None:
    builder = PinnedWindow(FitTokens(150, **EXACT), 300, **EXACT)
    history: list[Message] = []
    previous: Window | None = None

    for message in agentic(30):
        history.append(message)
        window = await builder.build(history)

        size = count_message_tokens(message, len, per_message_overhead=0)
        assert window.repinned == (previous is None or previous.tokens + size > 300)
        assert window.tokens <= 300
        previous = window


async def test_tokens_are_those_of_the_window_returned() -> None:
    counter = FixedTokenCounter(3)
    options: dict[str, Any] = {"counter": counter, "per_message_overhead": 2}
    builder = PinnedWindow(FitTokens(60, **options), 90, **options)
    history: list[Message] = []

    for window in await grow(builder, history, agentic(25)):
        assert window.tokens == count_tokens(window.messages, counter, per_message_overhead=2)


async def test_each_message_is_counted_once_between_re_pins() -> None:
    counter = FixedTokenCounter(1)
    builder = PinnedWindow(Identity(), 10**6, counter=counter)
    history = agentic(10)
    await builder.build(history)
    before = counter.calls

    history += [user("more"), assistant("text")]
    window = await builder.build(history)

    assert not window.repinned
    assert counter.calls - before == 2


async def test_strategy_runs_over_the_whole_history_at_each_re_pin() -> None:
    spy = Spy(FitTokens(150, **EXACT))
    builder = PinnedWindow(spy, 300, **EXACT)
    history: list[Message] = []

    windows = await grow(builder, history, agentic(20))

    repinned_at = [w.pin for w in windows if w.repinned]
    assert spy.seen == repinned_at
    pin = None
    for window in windows:  # every window reports the pin of the last re-pin
        pin = window.pin if window.repinned else pin
        assert window.pin == pin


async def test_the_same_history_twice_gives_the_same_window_without_re_pinning() -> None:
    spy = Spy(FitTokens(150, **EXACT))
    builder = PinnedWindow(spy, 300, **EXACT)
    history = agentic(6)

    first = await builder.build(history)
    second = await builder.build(history)

    assert first.repinned
    assert not second.repinned
    assert second.messages == first.messages
    assert len(spy.seen) == 1


async def test_over_budget_with_nothing_new_since_the_pin_does_not_run_the_strategy_again() -> None:
    spy = Spy(Identity())
    builder = PinnedWindow(spy, 10, **EXACT)
    history = agentic(3)

    windows = [await builder.build(history) for _ in range(3)]

    assert [w.repinned for w in windows] == [True, False, False]
    assert windows[-1].tokens > 10
    assert len(spy.seen) == 1


async def test_a_summarizing_window_keeps_its_prefix() -> None:
    summarizer = ScriptedSummarizer()
    strategy = Summarize(summarizer, keep_recent_tokens=60, min_old_tokens=0, **EXACT)
    builder = PinnedWindow(strategy, 200, **EXACT)
    history: list[Message] = []

    windows = await grow(builder, history, agentic(20))

    assert sum(w.repinned for w in windows) == len(summarizer.calls) + 1
    for before, after in itertools.pairwise(windows):
        if not after.repinned:
            assert dumps(after.messages[: len(before.messages)]) == dumps(before.messages)
    assert sum(is_summary(m) for m in windows[-1].messages) == 1


# ----------------------------------------------------------------------------- pairing


async def test_a_call_before_the_pin_keeps_its_result_after_it() -> None:
    builder = PinnedWindow(Identity(), 10**6, **EXACT)
    history = [user("task"), call("c1")]
    await builder.build(history)

    history.append(results("c1"))
    window = await builder.build(history)

    assert window.messages == history
    assert orphan_results(window.messages) == set()


async def test_a_result_whose_call_the_strategy_dropped_is_left_out() -> None:
    builder = PinnedWindow(DropPendingCalls(), 10**6, **EXACT)
    history = [
        user("task"),
        Message("assistant", [TextBlock("looking"), ToolUseBlock("c1", "search", {})]),
        call("c2"),
    ]
    first = await builder.build(history)
    assert [m.tool_uses for m in first.messages[1:]] == [()]  # both pending calls dropped

    history += [
        results("c1"),
        Message("user", [ToolResultBlock("c2", "two"), TextBlock("and a question")]),
        assistant("answer"),
    ]
    window = await builder.build(history)

    assert not window.repinned
    assert orphan_results(window.messages) == set()
    assert window.messages[-2:] == [user("and a question"), assistant("answer")]
    assert window.tokens == count_tokens(window.messages, len, per_message_overhead=0)


async def test_orphan_results_arriving_after_the_pin_are_left_out() -> None:
    builder = PinnedWindow(Identity(), 10**6, **EXACT)
    history = [user("task")]
    await builder.build(history)

    history += [results("never-called"), assistant("ok")]
    window = await builder.build(history)

    assert window.messages == [user("task"), assistant("ok")]


# ----------------------------------------------------------------------------- history changes


def _cleared(history: list[Message]) -> list[Message]:
    return history[:1]


def _first_replaced(history: list[Message]) -> list[Message]:
    return [user("another task"), *history[1:]]


def _pinned_replaced(history: list[Message]) -> list[Message]:
    return [*history[:6], Message("user", [ToolResultBlock("c02", "changed")]), *history[7:]]


def _last_replaced(history: list[Message]) -> list[Message]:
    return [*history[:-1], assistant("rewritten")]


@pytest.mark.parametrize(
    "rewrite",
    [_cleared, _first_replaced, _pinned_replaced, _last_replaced],
    ids=["cleared", "first", "pinned", "last-seen"],
)
async def test_a_rewritten_history_is_re_pinned(rewrite: Any) -> None:
    spy = Spy(Identity())
    builder = PinnedWindow(spy, 10**6, **EXACT)
    history = agentic(3)  # 7 messages: the pin is at 7
    await builder.build(history)
    history += [user("more"), assistant("text")]
    await builder.build(history)

    changed = rewrite(history)
    window = await builder.build(changed)

    assert window.repinned
    assert window.messages == changed
    assert spy.seen[-1] == len(changed)


async def test_equal_copies_of_the_history_are_not_a_rewrite() -> None:
    builder = PinnedWindow(Identity(), 10**6, **EXACT)
    history = agentic(3)
    await builder.build(history)

    copies = [from_dict(to_dict(message)) for message in [*history, user("more")]]
    window = await builder.build(copies)

    assert not window.repinned
    assert window.messages == copies


async def test_reset_forces_a_re_pin() -> None:
    builder = PinnedWindow(Identity(), 10**6, **EXACT)
    history = agentic(2)
    await builder.build(history)
    assert builder.pin == 5

    builder.reset()
    history.append(user("more"))
    window = await builder.build(history)

    assert builder.pin == window.pin == 6
    assert window.repinned


async def test_an_empty_history_then_growth() -> None:
    builder = PinnedWindow(Identity(), 10**6, **EXACT)
    history: list[Message] = []
    assert builder.pin is None

    empty = await builder.build(history)
    history.append(user("task"))
    window = await builder.build(history)

    assert empty == Window([], 0, 0, repinned=True)
    assert window == Window([user("task")], 4, 0, repinned=False)


async def test_the_returned_list_belongs_to_the_caller() -> None:
    builder = PinnedWindow(Identity(), 10**6, **EXACT)
    history = agentic(2)
    window = await builder.build(history)

    window.messages.clear()
    history.append(user("more"))
    again = await builder.build(history)

    assert again.messages == history


# ----------------------------------------------------------------------------- as a strategy


async def test_compact_returns_the_input_when_the_window_is_the_history() -> None:
    builder = PinnedWindow(Identity(), 10**6, **EXACT)
    history = agentic(2)

    assert await builder.compact(history) is history
    history.append(user("more"))
    assert await builder.compact(history) is history
    assert isinstance(builder, ContextStrategy)


async def test_compact_returns_the_window_when_it_differs() -> None:
    builder = PinnedWindow(FitTokens(40, **EXACT), 10**6, **EXACT)
    history = agentic(4)

    window = await builder.compact(history)

    assert window is not history
    assert window == [history[0], *history[-2:]]


# ----------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((object(), 10), {}, TypeError, "must have an async compact"),
        ((FitTokens, 10), {}, TypeError, r"not the class FitTokens; write FitTokens\(\.\.\.\)"),
        ((Identity(), 0), {}, ValueError, "max_tokens must be at least 1, not 0"),
        ((Identity(), True), {}, TypeError, "max_tokens must be an int"),
        ((Identity(), "10"), {}, TypeError, "max_tokens must be an int"),
        ((Identity(), 10), {"counter": 3}, TypeError, "counter must be a callable"),
        ((Identity(), 10), {"tokens_per_media": -1}, ValueError, "tokens_per_media"),
    ],
)
def test_bad_configuration_is_rejected(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        PinnedWindow(*args, **kwargs)


def test_repr_shows_the_strategy_and_budget() -> None:
    strategy = FitTokens(100)

    assert repr(PinnedWindow(strategy, 500)) == f"PinnedWindow({strategy!r}, max_tokens=500)"


# ----------------------------------------------------------------------------- invariants


@st.composite
def steps(draw: st.DrawFn) -> list[Message]:
    """Messages of chat and tool rounds, some calls answered late."""
    messages: list[Message] = [user("task")]
    pending: list[str] = []
    for number in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["chat", "tools", "late", "answer"]))
        size = draw(st.integers(1, 60))
        if kind == "chat":
            messages += [user("q" * size), assistant("a" * size)]
        elif kind == "tools":
            messages += [call(f"c{number}"), results(f"c{number}")]
        elif kind == "late":
            messages.append(call(f"c{number}"))
            pending.append(f"c{number}")
        elif pending:
            messages.append(results(*pending))
            pending = []
    return messages


@settings(max_examples=60, deadline=None)
@given(messages=steps(), budget=st.integers(1, 400), fit=st.integers(1, 400))
def test_every_window_is_counted_right_paired_and_extends_the_last_unless_re_pinned(
    messages: list[Message], budget: int, fit: int
) -> None:
    builder = PinnedWindow(FitTokens(fit, **EXACT), budget, **EXACT)
    history: list[Message] = []

    async def run() -> list[Window]:
        return await grow(builder, history, messages)

    windows = asyncio.run(run())
    for before, after in zip([None, *windows], windows, strict=False):
        assert after.tokens == count_tokens(after.messages, len, per_message_overhead=0)
        assert orphan_results(after.messages) == set()
        if before is not None and not after.repinned:
            assert dumps(after.messages[: len(before.messages)]) == dumps(before.messages)
            assert after.tokens <= budget  # one more message each time: over budget re-pins
