"""Summarize: one summary of the old part, updated (never stacked), cached, failures reported."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    ImageBlock,
    Message,
    PygentsError,
    SummarizationError,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    from_dict,
    to_dict,
)
from pygents_ctx.context.strategies.base import ContextStrategy
from pygents_ctx.context.strategies.summarize import (
    SUMMARY_PREFIX,
    Summarize,
    Summarizer,
    bridge_message,
    is_bridge,
    is_summary,
    render_transcript,
    summary_message,
    summary_text,
)
from pygents_ctx.testing import FixedTokenCounter, ScriptedSummarizer

# Every text costs 10 tokens and messages have no overhead: a text message is
# 10 tokens, a tool call 20 (its name and its input), a one-result message 10.
TEN = 10


def make(summarizer: Any = None, **options: Any) -> Summarize:
    options = {"keep_recent_tokens": 20, "min_old_tokens": 0, **options}
    options.setdefault("counter", FixedTokenCounter(TEN))
    options.setdefault("per_message_overhead", 0)
    return Summarize(summarizer if summarizer is not None else ScriptedSummarizer(), **options)


def user(text: str) -> Message:
    return Message("user", text)


def assistant(text: str) -> Message:
    return Message("assistant", text)


def call(*ids: str, name: str = "search") -> Message:
    return Message("assistant", [ToolUseBlock(i, name, {"q": i}) for i in ids])


def results(*ids: str) -> Message:
    return Message("user", [ToolResultBlock(i, f"result {i}") for i in ids])


def chat(rounds: int, start: int = 1) -> list[Message]:
    """`rounds` question/answer rounds: u1, a1, u2, a2, ..."""
    messages = []
    for number in range(start, start + rounds):
        messages += [user(f"u{number}"), assistant(f"a{number}")]
    return messages


def summaries(messages: list[Message]) -> list[str]:
    return [text for message in messages if (text := summary_text(message)) is not None]


def roles(messages: list[Message]) -> str:
    return " ".join(message.role for message in messages)


def orphan_results(messages: list[Message]) -> set[str]:
    calls = {use.id for message in messages for use in message.tool_uses}
    return {r.tool_use_id for message in messages for r in message.tool_results} - calls


def snapshot(messages: list[Message]) -> bytes:
    return orjson.dumps([to_dict(message) for message in messages])


# ----------------------------------------------------------------------------- the window


async def test_old_part_becomes_one_summary_after_the_task_and_recent_rounds_stay() -> None:
    summarizer = ScriptedSummarizer(["They planned."])
    system, task = Message("system", "sys"), user("task")
    history = [system, task, assistant("a0"), *chat(3)]

    window = await make(summarizer).compact(history)

    assert window[:2] == [system, task]
    assert summaries(window) == ["They planned."]
    assert window[3:] == history[-2:]  # the newest round, 20 tokens, as it was
    assert [call.messages for call in summarizer.calls] == [tuple(history[2:-2])]
    assert summarizer.calls[0].previous_summary is None


@pytest.mark.parametrize(
    ("head", "recent", "expected"),
    [
        # After the task (a user message) the summary speaks as the assistant.
        ([user("task")], [user("q"), assistant("a")], "user assistant user assistant"),
        # ... and a user bridge separates it from an assistant message.
        (
            [user("task")],
            [call("c9"), results("c9")],
            "user assistant user assistant user",
        ),
        # With no task the summary is a user message ...
        ([Message("system", "sys")], [call("c9"), results("c9")], "system user assistant user"),
        # ... followed by an assistant bridge before a user message.
        (
            [Message("system", "sys")],
            [user("q"), assistant("a")],
            "system user assistant user assistant",
        ),
    ],
    ids=["task-then-user", "task-then-assistant", "no-task-then-assistant", "no-task-then-user"],
)
async def test_roles_alternate_around_the_summary(
    head: list[Message], recent: list[Message], expected: str
) -> None:
    old = [assistant("a0"), user("u1"), assistant("a1"), call("c0"), results("c0")]

    window = await make(keep_recent_tokens=30).compact([*head, *old, *recent])

    assert roles(window) == expected
    assert len(summaries(window)) == 1
    assert window[-len(recent) :] == recent


@pytest.mark.parametrize(
    ("keep_recent_tokens", "kept"),
    [(0, 2), (19, 2), (20, 2), (39, 2), (40, 4), (60, 6)],
)
async def test_recent_part_is_the_newest_whole_rounds_within_budget_and_at_least_one(
    keep_recent_tokens: int, kept: int
) -> None:
    history = [user("task"), assistant("a0"), *chat(4)]

    window = await make(keep_recent_tokens=keep_recent_tokens).compact(history)

    assert window[2:] == history[-kept:]


async def test_a_tool_round_is_kept_or_summarized_whole() -> None:
    summarizer = ScriptedSummarizer()
    parallel = [call("c1", "c2"), results("c2", "c1")]  # 40 + 20 tokens
    history = [user("task"), assistant("a0"), *parallel, assistant("done")]

    window = await make(summarizer, keep_recent_tokens=50).compact(history)

    assert window[-1:] == [history[-1]]
    assert summarizer.calls[0].messages == (history[1], *parallel)
    assert orphan_results(window) == set()


@pytest.mark.parametrize(("min_old_tokens", "summarized"), [(41, False), (40, True), (0, True)])
async def test_nothing_happens_while_the_old_part_is_under_min_old_tokens(
    min_old_tokens: int, summarized: bool
) -> None:
    summarizer = ScriptedSummarizer()
    history = [user("task"), *chat(3)]  # old part: u1 a1 u2 a2, 40 tokens

    window = await make(summarizer, min_old_tokens=min_old_tokens).compact(history)

    assert (window is history) is not summarized
    assert len(summarizer.calls) == int(summarized)


@pytest.mark.parametrize(
    "history",
    [[], [Message("system", "sys")], [user("task")], [user("task"), *chat(1)]],
    ids=["empty", "head", "task", "one-round"],
)
async def test_nothing_old_returns_the_input(history: list[Message]) -> None:
    summarizer = ScriptedSummarizer()

    assert await make(summarizer).compact(history) is history
    assert summarizer.calls == []


async def test_input_and_its_messages_are_not_changed() -> None:
    history = [user("task"), call("c1"), results("c1"), *chat(3)]
    copy, frozen = list(history), snapshot(history)

    window = await make().compact(history)

    assert window is not history
    assert history == copy
    assert all(a is b for a, b in zip(history, copy, strict=True))
    assert snapshot(history) == frozen


def test_summarize_is_a_context_strategy() -> None:
    assert isinstance(make(), ContextStrategy)


# ----------------------------------------------------------------------------- updates


async def test_a_later_pass_updates_the_summary_with_only_the_newly_old_messages() -> None:
    summarizer = ScriptedSummarizer(["first", "second"])
    strategy = make(summarizer)
    history = [user("task"), *chat(3)]
    await strategy.compact(history)

    history += chat(2, start=4)
    window = await strategy.compact(history)

    assert summaries(window) == ["second"]
    assert window[2:] == history[-2:]
    second = summarizer.calls[1]
    assert second.previous_summary == "first"
    assert second.messages == tuple(history[5:9])  # u3 a3 u4 a4: old since the first pass


async def test_a_summary_in_the_input_is_the_previous_summary_never_conversation() -> None:
    first = await make(ScriptedSummarizer(["earlier"])).compact(
        [user("task"), call("c1"), results("c1"), *chat(2)]
    )
    assert roles(first) == "user assistant user assistant"
    # A store keeps the window; a fresh strategy (no cache) reads it back later.
    stored = [from_dict(orjson.loads(orjson.dumps(to_dict(m)))) for m in first]
    summarizer = ScriptedSummarizer(["updated"])

    window = await make(summarizer).compact([*stored, *chat(2, start=3)])

    (seen,) = summarizer.calls
    assert seen.previous_summary == "earlier"
    assert seen.messages == tuple(stored[2:]) + tuple(chat(1, start=3))
    assert not any(is_summary(message) for message in seen.messages)
    assert summaries(window) == ["updated"]


async def test_a_bridge_after_a_summary_is_dropped_not_summarized() -> None:
    first = await make(ScriptedSummarizer(["earlier"])).compact(
        [user("task"), *chat(2), call("c1"), results("c1")]
    )
    assert roles(first) == "user assistant user assistant user"  # summary, bridge, round
    summarizer = ScriptedSummarizer(["updated"])

    window = await make(summarizer).compact([*first, *chat(1, start=5)])

    assert summarizer.calls[0].messages == tuple(first[3:])
    assert roles(window) == "user assistant user assistant"


async def test_summaries_inside_the_old_part_are_folded_into_the_previous_summary() -> None:
    summarizer = ScriptedSummarizer(["merged"])
    history = [
        user("task"),
        *chat(1),
        summary_message("stray", role="user"),
        Message("assistant", "Understood. I will continue from this summary."),
        *chat(2, start=2),
    ]

    window = await make(summarizer).compact(history)

    (seen,) = summarizer.calls
    assert seen.previous_summary == "stray"
    assert seen.messages == (*chat(1), *chat(1, start=2))
    assert summaries(window) == ["merged"]


async def test_a_task_less_summary_is_found_again() -> None:
    summarizer = ScriptedSummarizer(["first", "second"])
    history = [Message("system", "sys"), call("c0"), results("c0"), *chat(2)]
    first = await make(ScriptedSummarizer(["first"])).compact(history)
    assert roles(first) == "system user assistant user assistant"

    window = await make(summarizer).compact([*first, *chat(2, start=3)])

    assert summarizer.calls[0].previous_summary == "first"
    assert roles(window) == "system user assistant user assistant"
    assert summaries(window) == ["first"]  # the scripted reply, now the only summary


# ----------------------------------------------------------------------------- cache


async def test_the_same_old_part_is_summarized_once() -> None:
    summarizer = ScriptedSummarizer()
    strategy = make(summarizer)
    history = [user("task"), *chat(4)]

    first = await strategy.compact(history)
    again = await strategy.compact(list(history))
    copies = await strategy.compact([from_dict(to_dict(message)) for message in history])

    assert len(summarizer.calls) == 1
    assert again == first
    assert copies == first
    assert again[1] is first[1]  # the same summary object: a stable prompt prefix


async def test_while_newly_old_messages_are_few_the_summary_and_prefix_stay() -> None:
    summarizer = ScriptedSummarizer()
    strategy = make(summarizer, min_old_tokens=40)
    history = [user("task"), *chat(5)]
    first = await strategy.compact(history)

    history += chat(1, start=6)
    second = await strategy.compact(history)

    assert len(summarizer.calls) == 1
    assert second[: len(first)] == first
    assert all(a is b for a, b in zip(first, second, strict=False))
    assert second[2:] == history[-4:]  # u5 a5 kept verbatim after the summary


async def test_the_cache_holds_a_few_conversations() -> None:
    summarizer = ScriptedSummarizer()
    strategy = make(summarizer)
    one = [user("task"), *chat(4)]
    other = [user("task"), *chat(4, start=10)]

    windows = [await strategy.compact(history) for history in (one, other, one, other)]

    assert len(summarizer.calls) == 2
    assert windows[2] == windows[0]
    assert windows[3] == windows[1]
    assert windows[0] != windows[1]


async def test_a_reused_summary_that_would_keep_everything_verbatim_is_left_out() -> None:
    # The late result makes one round of everything after the task, so reusing
    # the summary would add it in front of every message it covers.
    summarizer = ScriptedSummarizer()
    strategy = make(summarizer, min_old_tokens=40)
    history = [user("task"), call("c9"), *chat(2), user("u3"), assistant("a3")]
    await strategy.compact(history)

    history += [results("c9"), assistant("a4")]
    window = await strategy.compact(history)

    assert window is history
    assert len(summarizer.calls) == 1


async def test_concurrent_calls_share_one_summarizer_call() -> None:
    release = asyncio.Event()

    async def slow(messages: list[Message], previous: str | None) -> str:
        await release.wait()
        return "shared"

    summarizer = ScriptedSummarizer(slow)
    strategy = make(summarizer)
    history = [user("task"), *chat(4)]

    first = asyncio.ensure_future(strategy.compact(history))
    second = asyncio.ensure_future(strategy.compact(list(history)))
    await asyncio.sleep(0)
    release.set()

    assert await first == await second
    assert len(summarizer.calls) == 1


async def test_a_cancelled_caller_does_not_waste_the_summary() -> None:
    release = asyncio.Event()

    async def slow(messages: list[Message], previous: str | None) -> str:
        await release.wait()
        return "kept"

    summarizer = ScriptedSummarizer(slow)
    strategy = make(summarizer)
    history = [user("task"), *chat(4)]
    waiting = asyncio.ensure_future(strategy.compact(history))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting

    release.set()
    window = await strategy.compact(history)

    assert summaries(window) == ["kept"]
    assert len(summarizer.calls) == 1


@pytest.mark.parametrize(("min_old_tokens", "calls"), [(40, 1), (30, 2)])
async def test_a_late_result_pulls_its_summarized_call_back_without_a_second_summary(
    min_old_tokens: int, calls: int
) -> None:
    # c9 is answered only after a plain user message. The first pass summarizes
    # the call; when its result arrives, call and result must stay together.
    summarizer = ScriptedSummarizer()
    strategy = make(summarizer, min_old_tokens=min_old_tokens)
    history = [user("task"), *chat(2), call("c9"), user("u3"), assistant("a3")]
    first = await strategy.compact(history)
    assert first[2:] == history[-2:]

    history += [results("c9"), assistant("a4")]
    window = await strategy.compact(history)

    assert orphan_results(window) == set()
    assert len(summarizer.calls) == calls
    assert summaries(window) == [f"summary {calls}"]
    if calls == 2:  # the newly old messages only: nothing is summarized twice
        assert summarizer.calls[1].messages == tuple(history[6:9])
    else:  # the summary is reused; the call is back, verbatim, before its result
        assert window[-5:] == history[-5:]


async def test_counts_are_not_taken_again_for_messages_already_seen() -> None:
    counter = FixedTokenCounter(TEN)
    strategy = make(counter=counter, min_old_tokens=40)
    history = [user("task"), *chat(5)]
    await strategy.compact(history)
    before = counter.calls

    history += chat(2, start=6)
    await strategy.compact(history)

    assert counter.calls - before == 4  # the four new messages, once each


# ----------------------------------------------------------------------------- failures


def failing(error: BaseException) -> ScriptedSummarizer:
    return ScriptedSummarizer(error=error)


async def test_a_failing_summarizer_raises_summarization_error_and_changes_nothing() -> None:
    cause = ConnectionError("model down")
    history = [user("task"), *chat(4)]
    frozen = snapshot(history)

    with pytest.raises(SummarizationError, match="model down") as caught:
        await make(failing(cause)).compact(history)

    assert caught.value.__cause__ is cause
    assert isinstance(caught.value, PygentsError | RuntimeError)
    assert snapshot(history) == frozen


async def test_on_error_log_logs_and_returns_the_input(caplog: pytest.LogCaptureFixture) -> None:
    history = [user("task"), *chat(4)]

    with caplog.at_level(logging.WARNING, logger="pygents_ctx"):
        window = await make(failing(ConnectionError("model down")), on_error="log").compact(history)

    assert window is history
    (record,) = caplog.records
    assert record.name == "pygents_ctx"
    assert "model down" in record.getMessage()
    assert record.exc_info is not None


async def test_a_failure_is_not_cached() -> None:
    summarizer = failing(ConnectionError("down"))
    strategy = make(summarizer, on_error="log")
    history = [user("task"), *chat(4)]
    await strategy.compact(history)

    summarizer.error = None
    window = await strategy.compact(history)

    assert len(summarizer.calls) == 2
    assert len(summaries(window)) == 1


async def _empty(messages: list[Message], previous: str | None) -> str:
    return "  "


async def _not_text(messages: list[Message], previous: str | None) -> Any:
    return {"summary": "x"}


def _sync(messages: list[Message], previous: str | None) -> str:
    return "not awaited"


@pytest.mark.parametrize(
    ("summarizer", "match"),
    [(_empty, "returned '  '"), (_not_text, "returned {"), (_sync, "not an awaitable")],
    ids=["blank", "not-text", "sync"],
)
async def test_a_summarizer_that_returns_no_summary_is_a_failure(
    summarizer: Any, match: str
) -> None:
    history = [user("task"), *chat(4)]

    with pytest.raises(SummarizationError, match=match):
        await make(summarizer).compact(history)


# ----------------------------------------------------------------------------- marks


def test_the_summary_mark_survives_dict_and_json() -> None:
    message = summary_message("Three files changed.", role="assistant")

    back = from_dict(orjson.loads(orjson.dumps(to_dict(message))))

    assert is_summary(back)
    assert summary_text(back) == "Three files changed."
    assert back.text.startswith(SUMMARY_PREFIX)


@pytest.mark.parametrize(
    "message",
    [
        user("hello"),
        Message("user", []),
        Message("user", [ToolResultBlock("c1", SUMMARY_PREFIX + "x")]),
        user("quoting: " + SUMMARY_PREFIX),
    ],
    ids=["text", "empty", "tool-result", "prefix-not-first"],
)
def test_other_messages_are_not_summaries(message: Message) -> None:
    assert not is_summary(message)
    assert summary_text(message) is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"text": ""}, "non-empty string"),
        ({"text": 3}, "non-empty string"),
        ({"text": "x", "role": "system"}, "'user' or 'assistant'"),
    ],
)
def test_summary_message_rejects_bad_input(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        summary_message(**kwargs)


@pytest.mark.parametrize("role", ["user", "assistant"])
def test_bridges_are_recognised_after_a_round_trip(role: Any) -> None:
    bridge = bridge_message(role)

    back = from_dict(orjson.loads(orjson.dumps(to_dict(bridge))))

    assert back.role == role
    assert is_bridge(back)
    assert not is_summary(back)


@pytest.mark.parametrize(
    "message",
    [
        user("Continue."),
        Message("assistant", bridge_message("user").text),  # a user bridge's text, wrong role
        Message("user", [TextBlock(bridge_message("user").text), TextBlock("and more")]),
        Message("user", []),
    ],
    ids=["other-text", "other-role", "more-blocks", "empty"],
)
def test_other_messages_are_not_bridges(message: Message) -> None:
    assert not is_bridge(message)


def test_bridge_message_rejects_a_system_role() -> None:
    with pytest.raises(ValueError, match="bridge_message role must be 'user' or 'assistant'"):
        bridge_message("system")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (
            [user("find tides"), call("c1", name="search"), results("c1")],
            'user: find tides\n\nassistant: [tool call search({"q":"c1"})]\n\n'
            "user: [tool result for search: result c1]",
        ),
        (
            [
                call("c1", name="run"),
                Message("user", [ToolResultBlock("c1", "boom", is_error=True)]),
            ],
            'assistant: [tool call run({"q":"c1"})]\n\nuser: [tool error for run: boom]',
        ),
        ([results("c7")], "user: [tool result for call c7: result c7]"),
        (
            [
                Message(
                    "user",
                    [
                        TextBlock("look"),
                        ImageBlock("image/png", b"png"),
                        ToolResultBlock("c2", [TextBlock("chart"), ImageBlock("image/png", b"")]),
                    ],
                )
            ],
            "user: look\n[image]\n[tool result for call c2: chart\n[image]]",
        ),
        (
            [Message("assistant", [ToolUseBlock("c3", "put", {"city": "Zürich", "n": {1}})])],
            'assistant: [tool call put({"city": "Zürich", "n": "{1}"})]',
        ),
    ],
    ids=["call-and-result", "error", "unknown-call", "images", "not-json"],
)
def test_render_transcript_shows_tool_calls_and_results(
    messages: list[Message], expected: str
) -> None:
    assert render_transcript(messages) == expected


# ----------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"summarizer": "not callable"}, TypeError, "summarizer must be an async callable"),
        ({"keep_recent_tokens": -1}, ValueError, "keep_recent_tokens must be at least 0"),
        ({"keep_recent_tokens": True}, TypeError, "keep_recent_tokens must be an int"),
        ({"min_old_tokens": -1}, ValueError, "min_old_tokens must be at least"),
        ({"on_error": "ignore"}, ValueError, "on_error must be 'raise' or 'log'"),
        ({"counter": 4}, TypeError, "counter must be a callable"),
        ({"per_message_overhead": -1}, ValueError, "per_message_overhead"),
    ],
)
def test_bad_configuration_is_rejected(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    options: dict[str, Any] = {"summarizer": ScriptedSummarizer(), "keep_recent_tokens": 10}
    options.update(kwargs)
    summarizer = options.pop("summarizer")

    with pytest.raises(error, match=match):
        Summarize(summarizer, **options)


def test_repr_shows_the_parameters() -> None:
    strategy = Summarize(ScriptedSummarizer(), keep_recent_tokens=2000, on_error="log")

    assert repr(strategy) == (
        "Summarize(ScriptedSummarizer(calls=0), keep_recent_tokens=2000, "
        "min_old_tokens=1000, on_error='log')"
    )


def test_scripted_summarizer_is_a_summarizer() -> None:
    assert isinstance(ScriptedSummarizer(), Summarizer)


# ----------------------------------------------------------------------------- invariants


@st.composite
def growth(draw: st.DrawFn) -> list[list[Message]]:
    """A history built in steps: chat rounds and tool rounds (some parallel, some late)."""
    ids = iter(range(10_000))
    steps: list[list[Message]] = []
    pending: list[str] = []
    for _ in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(["chat", "tools", "late"]))
        size = draw(st.integers(1, 40))
        if kind == "chat":
            step = [user("q" * size), assistant("a" * size)]
        else:
            made = [f"c{next(ids)}" for _ in range(draw(st.integers(1, 3)))]
            step = [call(*made), results(*made)] if kind == "tools" else [call(*made)]
            if kind == "late":
                pending += made
        if pending and draw(st.booleans()):
            step.append(results(*pending))
            pending = []
        steps.append(step)
    return steps


@settings(max_examples=60, deadline=None)
@given(steps=growth(), keep=st.integers(0, 200), least=st.integers(0, 150))
def test_a_growing_history_keeps_one_summary_pairs_and_each_message_once(
    steps: list[list[Message]], keep: int, least: int
) -> None:
    summarizer = ScriptedSummarizer()
    strategy = Summarize(summarizer, keep_recent_tokens=keep, min_old_tokens=least)
    history = [Message("system", "sys"), user("task")]

    async def grow() -> None:
        for step in steps:
            history.extend(step)
            window = await strategy.compact(history)

            assert window[:2] == history[:2]
            assert len(summaries(window)) <= 1
            assert orphan_results(window) <= orphan_results(history)
            assert window[-1] is history[-1]

    asyncio.run(grow())
    summarized = [id(m) for call in summarizer.calls for m in call.messages]
    assert len(summarized) == len(set(summarized))  # no message summarized twice
    assert not any(is_summary(m) for call in summarizer.calls for m in call.messages)


# -- a budget: nothing is summarized while the conversation fits it ---------------------


def test_with_a_budget_nothing_is_summarized_while_the_conversation_fits_it() -> None:
    summarizer = ScriptedSummarizer()
    strategy = make(summarizer, max_tokens=200)  # keeps 20 tokens recent, as the others here
    history, first_call = [user("task")], None
    for number in range(1, 13):  # 10 tokens a message: 250 tokens at the end
        history += [user(f"u{number}"), assistant(f"a{number}")]
        window = asyncio.run(strategy.compact(history))
        if len(history) * TEN <= 200:
            assert window is history  # it all fits: shown whole, whatever min_old_tokens says
            assert summarizer.calls == []
        else:
            assert summaries(window)  # over the budget: the old part is summarized
            first_call = first_call or len(history)
    assert summarizer.calls
    assert first_call == 21  # the first history over 200 tokens


def test_without_a_budget_min_old_tokens_alone_decides() -> None:
    history = [user("task"), *chat(3)]  # 70 tokens

    assert summaries(asyncio.run(make().compact(history)))
    assert asyncio.run(make(max_tokens=70).compact(history)) is history


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"max_tokens": 0}, "Summarize max_tokens must be at least 1, not 0"),
        (
            {"max_tokens": 20},
            r"Summarize keep_recent_tokens \(20\) must be less than max_tokens \(20\)",
        ),
    ],
)
def test_a_budget_it_cannot_keep_is_refused(options: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        make(**options)
