"""Invariants of the token-bounded ContextQueue under random conversations and budgets."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    ContextItem,
    ContextQueue,
    HeuristicTokenCounter,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    count_message_tokens,
)

SETTINGS = settings(max_examples=200, deadline=None)

# -- strategies -------------------------------------------------------------------------------

words = st.text(st.sampled_from("abc xyzé☕"), max_size=40)
tool_names = st.sampled_from(["search", "fetch", "calculate"])
IMAGE = ImageBlock("image/png", b"\x89PNG" + bytes(16))


@st.composite
def tool_round(draw: st.DrawFn, unit: int) -> list[Message]:
    """An assistant message with one or more (parallel) calls, then their result messages."""
    ids = [f"call-{unit}-{n}" for n in range(draw(st.integers(min_value=1, max_value=3)))]
    preface = [TextBlock(draw(words))] if draw(st.booleans()) else []
    calls = [ToolUseBlock(i, draw(tool_names), {"arg": draw(words)}) for i in ids]

    def result(call_id: str) -> ToolResultBlock:
        if draw(st.integers(min_value=0, max_value=9)) == 0:
            return ToolResultBlock(call_id, [TextBlock(draw(words)), IMAGE])
        return ToolResultBlock(call_id, draw(words), is_error=draw(st.booleans()))

    if draw(st.booleans()):
        answers = [Message("user", [result(i) for i in ids])]
    else:
        answers = [Message("user", [result(i)]) for i in ids]
    return [Message("assistant", [*preface, *calls]), *answers]


@st.composite
def conversations(draw: st.DrawFn) -> list[Any]:
    """Messages (user, assistant, system, tool rounds) and a few plain strings, in order."""
    kinds = draw(
        st.lists(
            st.sampled_from(["user", "assistant", "system", "tools", "tools", "str"]), max_size=12
        )
    )
    contents: list[Any] = []
    for unit, kind in enumerate(kinds):
        if kind == "tools":
            contents += draw(tool_round(unit))
        elif kind == "str":
            contents.append(draw(words))
        else:
            contents.append(Message(kind, draw(words)))
    return contents


@st.composite
def batches(draw: st.DrawFn) -> list[list[Any]]:
    """A conversation cut into appends of one or more items (a tool round may be split)."""
    contents = draw(conversations())
    cuts = draw(st.lists(st.booleans(), min_size=len(contents), max_size=len(contents)))
    groups: list[list[Any]] = []
    for content, cut in zip(contents, cuts, strict=True):
        if cut or not groups:
            groups.append([])
        groups[-1].append(content)
    return groups


counters = st.sampled_from(
    [HeuristicTokenCounter(1), HeuristicTokenCounter(2.5), HeuristicTokenCounter()]
)


# -- helpers ----------------------------------------------------------------------------------


def fresh_count(content: Any, counter: HeuristicTokenCounter) -> int:
    """Count from scratch, bypassing any count cached on a message."""
    if isinstance(content, Message):
        return count_message_tokens(Message(content.role, list(content.content)), counter)
    return counter(content)


def protected_unit(held: list[Any]) -> list[Any]:
    """The newest item, with the call message and result messages it belongs with."""
    newest = held[-1]
    if not isinstance(newest, Message) or not newest.tool_results:
        return [newest]
    wanted = {block.tool_use_id for block in newest.tool_results}
    for index, content in enumerate(held):
        if isinstance(content, Message) and wanted & {b.id for b in content.tool_uses}:
            return held[index:]
    return [newest]


def orphan_results(held: list[Any]) -> list[str]:
    """Ids of tool results held without the message that made the call before them."""
    called: set[str] = set()
    orphans = []
    for content in held:
        if isinstance(content, Message):
            orphans += [b.tool_use_id for b in content.tool_results if b.tool_use_id not in called]
            called |= {b.id for b in content.tool_uses}
    return orphans


# -- properties -------------------------------------------------------------------------------


@SETTINGS
@given(
    groups=batches(),
    limit=st.integers(min_value=1, max_value=10),
    max_tokens=st.integers(min_value=1, max_value=400),
    counter=counters,
)
def test_every_append_keeps_the_count_the_budget_the_pairs_and_the_limit(
    groups: list[list[Any]], limit: int, max_tokens: int, counter: HeuristicTokenCounter
) -> None:
    async def scenario() -> None:
        queue: ContextQueue[Any] = ContextQueue(limit, max_tokens=max_tokens, counter=counter)
        evicted: list[Any] = []

        @queue.on_evict
        async def record(q: Any, item: ContextItem[Any]) -> None:
            evicted.append(item.content)

        appended: list[Any] = []
        for group in groups:
            before = [item.content for item in queue]
            evicted_before = len(evicted)
            await queue.append(*(ContextItem(content=c) for c in group))
            appended += group
            held = [item.content for item in queue]

            # (a) the running total is what a fresh count gives
            assert queue.tokens == sum(fresh_count(c, counter) for c in held)
            # (b) within budget, unless only the protected newest unit is left
            assert queue.tokens <= max_tokens or held == protected_unit(held)
            # (c) no tool result without its call, unless the newest item is alone
            assert not orphan_results(held) or held == [appended[-1]]
            # (d) within the limit
            assert len(held) <= limit
            # evictions are from the oldest end, each reported once, in order
            assert evicted + held == appended
            # nothing is evicted when everything fits (and nothing was left orphaned)
            incoming = sum(fresh_count(c, counter) for c in before + group)
            fits = incoming <= max_tokens and len(before) + len(group) <= limit
            if fits and not orphan_results(before):
                assert len(evicted) == evicted_before
                assert held == before + group

    asyncio.run(scenario())


@SETTINGS
@given(
    groups=batches(),
    limit=st.integers(min_value=1, max_value=10),
    max_tokens=st.integers(min_value=1, max_value=400),
    counter=counters,
)
def test_saving_and_branching_keep_items_budget_and_count(
    groups: list[list[Any]], limit: int, max_tokens: int, counter: HeuristicTokenCounter
) -> None:
    async def scenario() -> None:
        queue: ContextQueue[Any] = ContextQueue(limit, max_tokens=max_tokens, counter=counter)
        for group in groups:
            await queue.append(*(ContextItem(content=c) for c in group))

        for copy in (ContextQueue.from_json(queue.to_json()), queue.branch()):
            assert copy.items == queue.items
            assert (copy.limit, copy.max_tokens, copy.counter) == (limit, max_tokens, counter)
            assert copy.tokens == queue.tokens

    asyncio.run(scenario())
