"""The token-bounded ContextQueue: budget, running total, pair-safe eviction, saving."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
import tiktoken

from pygents_ctx import (
    Agent,
    AgentRegistry,
    ContextItem,
    ContextQueue,
    EstimatedTokenCounter,
    HeuristicTokenCounter,
    Message,
    TiktokenCounter,
    ToolResultBlock,
    ToolUseBlock,
    Turn,
    count_message_tokens,
    tool,
)

ONE_CHAR = HeuristicTokenCounter(1.0)  # a token per character: easy arithmetic


def fresh_count(content: Any, counter: Any) -> int:
    """Count from scratch, bypassing any count cached on a message."""
    if isinstance(content, Message):
        return count_message_tokens(Message(content.role, list(content.content)), counter)
    if isinstance(content, str):
        return int(counter(content))
    return int(counter(orjson.dumps(content).decode()))


def fresh_total(queue: ContextQueue[Any]) -> int:
    return sum(fresh_count(item.content, queue.counter) for item in queue)


def items(*contents: Any) -> list[ContextItem[Any]]:
    return [ContextItem(content=c) for c in contents]


def contents(queue: ContextQueue[Any]) -> list[Any]:
    return [item.content for item in queue]


def track_evictions(queue: ContextQueue[Any]) -> list[Any]:
    evicted: list[Any] = []

    @queue.on_evict
    async def record_eviction(q: Any, item: ContextItem[Any]) -> None:
        evicted.append(item.content)

    return evicted


def call(*ids: str) -> Message:
    """An assistant message calling one tool per id (several ids: parallel calls)."""
    return Message("assistant", [ToolUseBlock(i, "lookup", {"id": i}) for i in ids])


def result(*ids: str) -> Message:
    """A user message carrying the results of the calls `ids`."""
    return Message("user", [ToolResultBlock(i, f"result {i}") for i in ids])


def text(body: str, role: str = "user") -> Message:
    return Message(role, body)  # type: ignore[arg-type]


# -- construction -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"max_tokens": 0}, ValueError, "max_tokens must be at least 1, not 0"),
        ({"max_tokens": -5}, ValueError, "max_tokens must be at least 1"),
        ({"max_tokens": "100"}, TypeError, "max_tokens must be an int, not "),
        ({"max_tokens": 1.5}, TypeError, "max_tokens must be an int, not "),
        ({"max_tokens": True}, TypeError, "max_tokens must be an int, not "),
        ({"counter": "cl100k_base"}, TypeError, "counter must be a callable str -> int"),
        ({"counter": 4}, TypeError, "counter must be a callable"),
    ],
)
def test_bad_budget_or_counter_is_refused(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=re.escape(match)):
        ContextQueue(10, **kwargs)


def test_a_queue_reports_its_budget_and_counter() -> None:
    budgeted: ContextQueue[str] = ContextQueue(5, max_tokens=100, counter=len)
    plain: ContextQueue[str] = ContextQueue(5)

    assert (budgeted.max_tokens, budgeted.counter) == (100, len)
    assert plain.max_tokens is None
    assert plain.counter == EstimatedTokenCounter()
    assert repr(budgeted) == "ContextQueue(limit=5, len=0, tokens=0, max_tokens=100)"


# -- the running total ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"counter": ONE_CHAR}, {"max_tokens": 60, "counter": ONE_CHAR}, {"max_tokens": 60}],
    ids=["no budget, no counter", "counter only", "budget and counter", "budget only"],
)
async def test_tokens_matches_a_fresh_count_after_every_operation(kwargs: dict[str, Any]) -> None:
    queue: ContextQueue[Any] = ContextQueue(4, **kwargs)
    seen: dict[str, tuple[int, int]] = {}

    def check(step: str, q: ContextQueue[Any]) -> None:
        seen[step] = (q.tokens, fresh_total(q))

    check("empty", queue)
    await queue.append(*items(text("hello"), call("a"), result("a")))
    check("append", queue)
    await queue.append(*items("a plain string", {"note": "dict content"}, 42))
    check("evict by limit", queue)
    await queue.append(*items(text("x" * 80)))
    check("evict by budget", queue)
    await queue.append(*items(call("b"), result("b")))
    check("append a pair", queue)
    check("branch", queue.branch())
    check("branch, smaller limit", queue.branch(limit=1))
    check("from_dict", ContextQueue.from_dict(queue.to_dict()))
    check("from_json", ContextQueue.from_json(queue.to_json()))
    await queue.clear()
    check("clear", queue)

    assert all(tokens == fresh for tokens, fresh in seen.values()), seen
    assert seen["clear"] == (0, 0)


async def test_a_queue_without_budget_or_counter_still_answers_tokens() -> None:
    queue: ContextQueue[Message] = ContextQueue(10)
    conversation = [text("hello there"), call("a"), result("a"), text("thanks", "assistant")]
    await queue.append(*items(*conversation))

    assert queue.tokens == sum(count_message_tokens(m) for m in conversation)
    assert len(queue) == 4


async def test_a_counter_without_budget_counts_but_never_evicts_for_tokens() -> None:
    queue: ContextQueue[str] = ContextQueue(3, counter=len)
    await queue.append(*items("a" * 1000, "b" * 1000))

    assert queue.tokens == 2000
    assert contents(queue) == ["a" * 1000, "b" * 1000]


# -- eviction by budget -----------------------------------------------------------------------


async def test_the_oldest_items_are_evicted_until_the_total_fits() -> None:
    queue: ContextQueue[str] = ContextQueue(100, max_tokens=10, counter=len)
    evicted = track_evictions(queue)

    for chunk in ("aaaa", "bbbb", "cccc"):
        await queue.append(ContextItem(content=chunk))
    assert (contents(queue), queue.tokens, evicted) == (["bbbb", "cccc"], 8, ["aaaa"])

    await queue.append(*items("dddddd", "ee"))
    assert (contents(queue), queue.tokens) == (["dddddd", "ee"], 8)
    assert evicted == ["aaaa", "bbbb", "cccc"]


async def test_a_total_exactly_at_the_budget_evicts_nothing() -> None:
    queue: ContextQueue[str] = ContextQueue(100, max_tokens=10, counter=len)
    evicted = track_evictions(queue)
    await queue.append(*items("aaaa", "bbbbbb"))

    assert (contents(queue), queue.tokens, evicted) == (["aaaa", "bbbbbb"], 10, [])


async def test_the_newest_item_stays_even_alone_over_budget() -> None:
    queue: ContextQueue[str] = ContextQueue(100, max_tokens=10, counter=len)
    evicted = track_evictions(queue)
    await queue.append(*items("aa", "bb"))

    await queue.append(ContextItem(content="x" * 50))
    assert (contents(queue), queue.tokens) == (["x" * 50], 50)
    assert evicted == ["aa", "bb"]
    assert repr(queue) == "ContextQueue(limit=100, len=1, tokens=50, max_tokens=10)"

    await queue.append(ContextItem(content="y"))
    assert (contents(queue), queue.tokens) == (["y"], 1)
    assert evicted == ["aa", "bb", "x" * 50]


UNITS = {
    "one call": [call("a"), result("a")],
    "parallel calls, one result message": [call("a", "b"), result("a", "b")],
    "parallel calls, a result message each": [call("a", "b"), result("a"), result("b")],
}


@pytest.mark.parametrize("batched", [True, False], ids=["one append", "one append each"])
@pytest.mark.parametrize("unit", UNITS.values(), ids=UNITS.keys())
async def test_a_newest_tool_result_keeps_its_call_over_budget(
    unit: list[Message], batched: bool
) -> None:
    queue: ContextQueue[Message] = ContextQueue(100, max_tokens=5, counter=ONE_CHAR)
    evicted = track_evictions(queue)
    await queue.append(ContextItem(content=text("earlier")))

    if batched:
        await queue.append(*items(*unit))
    else:
        for message in unit:
            await queue.append(ContextItem(content=message))

    assert contents(queue) == unit
    assert evicted == [text("earlier")]
    assert queue.tokens == fresh_total(queue) > 5

    # Once a newer item arrives, the call and its results go together.
    await queue.append(ContextItem(content=text("next")))
    assert contents(queue) == [text("next")]
    assert evicted == [text("earlier"), *unit]


async def test_budget_eviction_never_leaves_a_result_whose_call_was_evicted() -> None:
    old, recent, new = text("old"), text("recent"), text("z" * 20)
    pair = [call("a"), result("a")]
    sizes = {id(m): fresh_count(m, ONE_CHAR) for m in [old, *pair, recent, new]}
    # Evicting `old` alone is not enough for `new`; evicting the call as well is.
    assert sizes[id(old)] < sizes[id(new)] <= sizes[id(old)] + sizes[id(pair[0])]
    budget = sum(sizes[id(m)] for m in [old, *pair, recent])
    queue: ContextQueue[Message] = ContextQueue(100, max_tokens=budget, counter=ONE_CHAR)
    evicted = track_evictions(queue)
    await queue.append(*items(old, *pair, recent))

    await queue.append(ContextItem(content=new))

    assert contents(queue) == [recent, new]
    assert evicted == [old, *pair]
    assert queue.tokens == fresh_total(queue)


BUDGETS = [{}, {"max_tokens": 10_000}]
BUDGET_IDS = ["items only", "with a token budget"]


@pytest.mark.parametrize("kwargs", BUDGETS, ids=BUDGET_IDS)
async def test_limit_eviction_never_leaves_a_result_whose_call_was_evicted(
    kwargs: dict[str, Any],
) -> None:
    queue: ContextQueue[Message] = ContextQueue(3, **kwargs)
    evicted = track_evictions(queue)
    pair = [call("a"), result("a")]
    await queue.append(*items(*pair, text("t1")))

    await queue.append(ContextItem(content=text("t2")))

    assert contents(queue) == [text("t1"), text("t2")]
    assert evicted == pair


@pytest.mark.parametrize("kwargs", BUDGETS, ids=BUDGET_IDS)
async def test_a_result_kept_alone_by_a_small_limit_goes_when_a_newer_item_arrives(
    kwargs: dict[str, Any],
) -> None:
    # Three messages cannot fit a limit of 2: the newest result stays alone (newest first)...
    queue: ContextQueue[Message] = ContextQueue(2, **kwargs)
    await queue.append(*items(call("a", "b"), result("a"), result("b")))
    assert contents(queue) == [result("b")]

    # ...but once it is not the newest, it is a result whose call was evicted: it must go.
    await queue.append(ContextItem(content=text("next")))

    assert contents(queue) == [text("next")]


async def test_a_hook_sees_every_eviction_in_order() -> None:
    queue: ContextQueue[Message] = ContextQueue(4, max_tokens=40, counter=ONE_CHAR)
    evicted = track_evictions(queue)
    appended = [text("one"), call("a"), result("a"), text("two"), text("three"), text("four" * 5)]

    await queue.append(*items(*appended[:4]))
    await queue.append(*items(*appended[4:]))

    assert evicted  # the budget and the limit both had to evict
    assert evicted + contents(queue) == appended


# -- what is counted --------------------------------------------------------------------------


class Opaque:
    def __str__(self) -> str:
        return "opaque thing"


@pytest.mark.parametrize(
    ("content", "counted"),
    [
        ("plain words", "plain words"),
        ({"city": "Zürich", "n": 2}, '{"city":"Zürich","n":2}'),
        ([1, "two"], '[1,"two"]'),
        (42, "42"),
        (Opaque(), "opaque thing"),
    ],
    ids=["str", "dict", "list", "int", "not JSON"],
)
async def test_non_message_content_is_counted_as_text_or_json(content: Any, counted: str) -> None:
    seen: list[str] = []

    def recording(value: str) -> int:
        seen.append(value)
        return len(value)

    queue: ContextQueue[Any] = ContextQueue(5, counter=recording)
    await queue.append(ContextItem(content=content))

    assert seen == [counted]
    assert queue.tokens == len(counted)


async def test_messages_are_counted_once_when_appended() -> None:
    seen: list[str] = []

    def recording(value: str) -> int:
        seen.append(value)
        return len(value)

    queue: ContextQueue[Message] = ContextQueue(5, max_tokens=1_000, counter=recording)
    message = text("hello")
    await queue.append(ContextItem(content=message))
    for _ in range(3):
        assert queue.tokens == 4 + 5

    assert seen == ["hello"]


async def test_a_failing_counter_leaves_the_queue_unchanged() -> None:
    def picky(value: str) -> int:
        if value == "bad":
            raise RuntimeError("cannot count this")
        return len(value)

    queue: ContextQueue[str] = ContextQueue(2, max_tokens=100, counter=picky)
    await queue.append(*items("one", "two"))

    with pytest.raises(RuntimeError, match="cannot count this"):
        await queue.append(*items("three", "bad"))

    assert (contents(queue), queue.tokens) == (["one", "two"], 6)


# -- saving and branching ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "extra"),
    [
        ({}, {}),
        ({"max_tokens": 50}, {"max_tokens": 50}),
        (
            {"counter": HeuristicTokenCounter(3.0)},
            {"counter": {"type": "heuristic", "chars_per_token": 3.0}},
        ),
        (
            {"max_tokens": 50, "counter": HeuristicTokenCounter()},
            {"max_tokens": 50, "counter": {"type": "heuristic", "chars_per_token": 4.0}},
        ),
        (
            {"counter": EstimatedTokenCounter(1.25)},
            {"counter": {"type": "estimated", "scale": 1.25}},
        ),
    ],
    ids=["neither", "max_tokens", "counter", "both", "estimated"],
)
async def test_to_dict_has_max_tokens_and_counter_only_when_set(
    kwargs: dict[str, Any], extra: dict[str, Any]
) -> None:
    queue: ContextQueue[Message] = ContextQueue(5, **kwargs)
    await queue.append(*items(text("hi"), call("a"), result("a")))

    saved = queue.to_dict()

    assert set(saved) == {"limit", "items", "hooks", "tags", *extra}
    assert {key: saved[key] for key in extra} == extra
    restored = ContextQueue.from_json(queue.to_json())
    assert restored.max_tokens == queue.max_tokens
    assert restored.counter == queue.counter
    assert (restored.items, restored.tokens) == (queue.items, queue.tokens)
    assert restored.to_dict() == saved


async def test_a_tiktoken_counter_is_saved_by_encoding_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    encoding = tiktoken.Encoding(
        name="test-bytes",
        pat_str=r"""\p{L}+|\p{N}+|[^\s\p{L}\p{N}]+|\s+""",
        mergeable_ranks={bytes([i]): i for i in range(256)},
        special_tokens={},
    )
    monkeypatch.setitem(tiktoken.registry.ENCODINGS, "test-bytes", encoding)
    queue: ContextQueue[str] = ContextQueue(5, max_tokens=100, counter=TiktokenCounter(encoding))
    await queue.append(*items("héllo", "wörld"))

    restored = ContextQueue.from_json(queue.to_json())

    assert queue.to_dict()["counter"] == {"type": "tiktoken", "encoding": "test-bytes"}
    assert restored.counter == TiktokenCounter(encoding)
    assert restored.tokens == queue.tokens == 12


async def test_a_custom_counter_cannot_be_saved_and_the_error_names_the_fix() -> None:
    queue: ContextQueue[str] = ContextQueue(5, max_tokens=100, counter=len)
    agent = Agent("keeper", "Keeps notes", [], context_queue=queue)
    fix = (
        "use EstimatedTokenCounter, HeuristicTokenCounter or TiktokenCounter, "
        "or leave counter unset"
    )

    for save in (queue.to_dict, queue.to_json, agent.to_dict, agent.to_json):
        with pytest.raises(TypeError, match=re.escape(fix)):
            save()


@pytest.mark.parametrize(
    ("patch", "match"),
    [
        ({"max_tokens": 0}, "max_tokens must be at least 1"),
        ({"max_tokens": "many"}, "max_tokens must be an int, not "),
        ({"counter": {"type": "words"}}, "is not a known counter"),
        ({"counter": "heuristic"}, "is not a known counter"),
        ({"counter": {"type": "heuristic", "chars_per_token": -1}}, "chars_per_token"),
        ({"counter": {"type": "estimated", "scale": 0}}, "EstimatedTokenCounter.scale"),
    ],
)
async def test_a_badly_saved_budget_or_counter_is_a_value_error(
    patch: dict[str, Any], match: str
) -> None:
    saved = {**ContextQueue(5, max_tokens=10).to_dict(), **patch}

    with pytest.raises(ValueError, match=re.escape(match)):
        ContextQueue.from_dict(saved)


async def test_restoring_keeps_items_as_saved_and_the_next_append_enforces_the_budget() -> None:
    queue: ContextQueue[str] = ContextQueue(10, max_tokens=100, counter=HeuristicTokenCounter(1))
    await queue.append(*items("a" * 30, "b" * 30, "c" * 30))
    saved = {**queue.to_dict(), "max_tokens": 40}  # a budget lowered by hand

    restored: ContextQueue[str] = ContextQueue.from_dict(saved)
    evicted = track_evictions(restored)
    assert (len(restored), restored.tokens, evicted) == (3, 90, [])

    await restored.append(ContextItem(content="d"))
    assert (contents(restored), restored.tokens) == (["c" * 30, "d"], 31)
    assert evicted == ["a" * 30, "b" * 30]


async def test_a_branch_keeps_budget_counter_and_count_and_is_independent() -> None:
    parent: ContextQueue[str] = ContextQueue(10, max_tokens=20, counter=len)
    await parent.append(*items("aaaa", "bbbb"))

    child = parent.branch()
    assert (child.max_tokens, child.counter, child.tokens) == (20, len, 8)
    assert child.items == parent.items

    await child.append(ContextItem(content="c" * 16))
    await parent.append(ContextItem(content="dd"))
    assert (contents(child), child.tokens) == (["bbbb", "c" * 16], 20)
    assert (contents(parent), parent.tokens) == (["aaaa", "bbbb", "dd"], 10)


@pytest.mark.parametrize("kwargs", BUDGETS, ids=BUDGET_IDS)
async def test_a_smaller_branch_keeps_the_newest_items_without_orphan_results(
    kwargs: dict[str, Any],
) -> None:
    parent: ContextQueue[Message] = ContextQueue(10, **kwargs)
    await parent.append(*items(text("old"), call("a"), result("a"), text("new")))

    child = parent.branch(limit=2)

    assert contents(child) == [text("new")]
    assert child.tokens == fresh_total(child)
    assert len(parent) == 4


@pytest.mark.parametrize("kwargs", BUDGETS, ids=BUDGET_IDS)
async def test_a_branch_with_the_same_limit_copies_every_item(kwargs: dict[str, Any]) -> None:
    # A history that starts with a result (its call was never in this queue).
    queue: ContextQueue[Message] = ContextQueue(5, **kwargs)
    await queue.append(*items(result("earlier"), text("and then")))

    assert queue.branch().items == queue.items
    assert ContextQueue.from_dict(queue.to_dict()).items == queue.items


# -- in an agent ------------------------------------------------------------------------------


async def test_a_tool_adds_messages_to_a_token_bounded_agent_window() -> None:
    @tool
    async def say(words: str) -> ContextItem[Message]:
        return ContextItem(content=Message("assistant", words))

    window: ContextQueue[Message] = ContextQueue(100, max_tokens=30, counter=ONE_CHAR)
    agent = Agent("talker", "Talks", [say], context_queue=window)
    for words in ("first remark", "second one", "third remark"):
        await agent.put(Turn(say, kwargs={"words": words}))

    assert [value async for _, value in agent.run()] == []
    assert [item.content.text for item in window] == ["second one", "third remark"]
    assert window.tokens == (4 + 10) + (4 + 12)

    AgentRegistry.unregister("talker")
    restored = Agent.from_json(agent.to_json())
    assert restored.context_queue.items == window.items
    assert (restored.context_queue.max_tokens, restored.context_queue.tokens) == (30, 30)
