"""Invariant: a branch is independent of its parent in both directions.

`Agent.branch()` copies the queued turns and shares the queue's and pool's
items until a write: random programs of changes on a family of branches are
checked against a model in which every branch copies everything at once.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    Agent,
    AgentRegistry,
    ContextItem,
    ContextPool,
    ContextQueue,
    HeuristicTokenCounter,
    HookRegistry,
    StopReason,
    ToolRegistry,
    Turn,
    tool,
)

SETTINGS = settings(max_examples=300, deadline=None)
LIMIT = 3  # of every context queue and pool: programs reach it and evict
COUNTER = HeuristicTokenCounter()  # so that the queues keep a running total of tokens

member = st.integers(min_value=0, max_value=3)  # which branch (modulo the family's size)
position = st.integers(min_value=0, max_value=4)  # which queued turn (modulo the queue's length)
small = st.integers(min_value=0, max_value=9)
item_id = st.sampled_from("abcde")

_everywhere = [
    st.tuples(st.just("branch"), member, st.booleans()),
    st.tuples(st.just("look"), member),
    st.tuples(st.just("save"), member),
]
# Two alphabets, so that short programs reach the interesting interleavings often.
turn_ops = st.lists(
    st.one_of(
        *_everywhere,
        st.tuples(st.just("put"), member, small),
        st.tuples(st.just("run"), member),
        st.tuples(st.just("set_kwargs"), member, position, small),
        st.tuples(st.just("set_timeout"), member, position, st.integers(1, 9)),
        st.tuples(st.just("set_tags"), member, position, st.sampled_from(["x", "y"])),
        st.tuples(st.just("hook"), member, position),
        st.tuples(st.just("unhook"), member, position),
        st.tuples(st.just("retool"), member),
    ),
    max_size=30,
)
context_ops = st.lists(
    st.one_of(
        *_everywhere,
        st.tuples(st.just("put"), member, small),
        *[st.tuples(st.just("append"), member, small)] * 3,  # enough to fill and evict
        st.tuples(st.just("clear_queue"), member),
        st.tuples(st.just("add"), member, item_id, small),
        st.tuples(st.just("remove"), member, item_id),
        st.tuples(st.just("clear_pool"), member),
        st.tuples(st.just("narrow"), member),
    ),
    max_size=30,
)


@dataclass(frozen=True)
class ModelTurn:
    value: int
    timeout: float = 60
    tags: frozenset[str] = frozenset()
    hooked: bool = False


@dataclass
class Model:
    """An agent as eager copying would make it: its turns, notes (queue) and docs (pool)."""

    turns: list[ModelTurn] = field(default_factory=list)
    notes: list[int] = field(default_factory=list)  # their sizes (see _note)
    docs: OrderedDict[str, int] = field(default_factory=OrderedDict)
    note_limit: int = LIMIT
    doc_limit: int = LIMIT

    def copy(self) -> Model:
        return replace(
            self, turns=list(self.turns), notes=list(self.notes), docs=OrderedDict(self.docs)
        )

    def seen(self) -> tuple[list[ModelTurn], list[int], list[tuple[str, int]]]:
        return self.turns, self.notes, list(self.docs.items())


def _seen(agent: Agent) -> tuple[list[ModelTurn], list[int], list[tuple[str, int]]]:
    """What a user sees of an agent (which makes a branch copy its turns)."""
    turns = [ModelTurn(t.kwargs["value"], t.timeout, t.tags, bool(t.hooks)) for t in agent.queue]
    notes = [len(item.content) // 5 for item in agent.context_queue]
    assert agent.context_queue.tokens == sum(map(_count, notes))  # the running total
    return turns, notes, [(str(item.id), item.content) for item in agent.context_pool]


def _note(size: int) -> ContextItem[str]:
    return ContextItem(content="word " * size)  # so that notes differ in tokens


def _count(size: int) -> int:
    return COUNTER("word " * size)


async def noop_after_append(*args: Any) -> None:
    return None


async def noop_before_add(*args: Any) -> None:
    return None


@SETTINGS
@given(ops=turn_ops)
# The paths a copy could get wrong, always tried: the parent changes a copied turn
# through a setter or in place (its hooks), runs it, or a branch of a branch copies.
@example(ops=[("put", 0, 1), ("branch", 0, True), ("set_kwargs", 0, 0, 2), ("look", 1)])
@example(ops=[("put", 0, 1), ("branch", 0, True), ("hook", 0, 0), ("run", 1), ("run", 0)])
@example(ops=[("put", 0, 1), ("hook", 0, 0), ("branch", 0, True), ("unhook", 0, 0), ("run", 1)])
@example(ops=[("put", 0, 1), ("branch", 0, True), ("run", 0), ("look", 1), ("run", 1)])
@example(ops=[("put", 0, 1), ("branch", 0, False), ("branch", 1, True), ("set_timeout", 0, 0, 5)])
@example(ops=[("put", 0, 1), ("branch", 0, True), ("branch", 0, True), ("set_tags", 1, 0, "x")])
@example(ops=[("put", 0, 1), ("branch", 0, True), ("retool", 1), ("put", 1, 2), ("save", 1)])
def test_branches_keep_their_queued_turns_apart(ops: list[tuple[Any, ...]]) -> None:
    asyncio.run(_run_program(ops, hooked=False))


@SETTINGS
@given(ops=context_ops, hooked=st.booleans())
@example(ops=[("append", 0, 1), ("branch", 0, True), ("append", 0, 2), ("look", 1)], hooked=False)
@example(ops=[("append", 0, 1), ("branch", 0, True), ("clear_queue", 1), ("look", 0)], hooked=False)
@example(
    ops=[("add", 0, "a", 1), ("branch", 0, True), ("add", 1, "b", 2), ("look", 0)], hooked=True
)
@example(
    ops=[("add", 0, "a", 1), ("branch", 0, True), ("remove", 0, "a"), ("look", 1)], hooked=False
)
@example(
    ops=[("add", 0, "a", 1), ("branch", 0, True), ("clear_pool", 0), ("look", 1)], hooked=False
)
@example(ops=[("append", 0, 1), ("append", 0, 2), ("narrow", 0), ("append", 0, 3)], hooked=True)
@example(ops=[*[("append", 0, n) for n in range(5)], ("narrow", 0), ("look", 0)], hooked=False)
@example(
    ops=[*[("append", 0, n) for n in range(5)], ("branch", 0, True), ("append", 0, 7), ("look", 0)],
    hooked=False,
)
def test_branches_keep_their_context_queues_and_pools_apart(
    ops: list[tuple[Any, ...]], hooked: bool
) -> None:
    asyncio.run(_run_program(ops, hooked))


async def _run_program(ops: list[tuple[Any, ...]], hooked: bool) -> None:
    """Run `ops` on a family of branches and on eager-copy models, comparing as it goes.

    `hooked`: the root's context queue and pool have a hook (their slower paths).
    """
    AgentRegistry.clear()
    ToolRegistry.clear()
    HookRegistry.clear()

    @tool
    async def echo(value: int) -> int:
        return value

    @tool
    async def other() -> None:
        return None

    fired: list[int] = []

    async def record(turn: Turn, output: Any) -> None:
        fired.append(output)

    on_done = Turn(echo, kwargs={"value": 0}).after_run(record)
    root = Agent(
        "a0",
        "root",
        [echo, other],
        context_queue=ContextQueue(limit=LIMIT, counter=COUNTER),
        context_pool=ContextPool(limit=LIMIT),
    )
    if hooked:
        root.context_queue.after_append(noop_after_append)
        root.context_pool.before_add(noop_before_add)
    family, models = [root], [Model()]

    for op, index, *args in ops:
        agent, model = family[index % len(family)], models[index % len(family)]
        at = args[0] % len(model.turns) if model.turns and op in _TURN_CHANGES else None
        if op == "branch":
            kept = {} if args[0] else {"tools": [echo]}
            family.append(agent.branch(f"a{len(family)}", **kept))
            models.append(model.copy())
        elif op == "put":
            await agent.put(Turn(echo, kwargs={"value": args[0]}))
            model.turns.append(ModelTurn(args[0]))
        elif op == "run":
            fired.clear()
            assert [value async for _, value in agent.run()] == [t.value for t in model.turns]
            assert fired == [t.value for t in model.turns if t.hooked]
            model.turns.clear()
        elif op == "retool":
            try:
                agent.tools = [other]
            except ValueError:
                assert model.turns  # refused: a queued turn needs echo, and nothing changed
            else:
                assert not model.turns
            agent.tools = [echo, other]
        elif at is not None:
            model.turns[at] = _change_turn(agent.queue[at], model.turns[at], op, args[1:], on_done)
        elif op == "append":
            await agent.context_queue.append(_note(args[0]))
            model.notes = [*model.notes, args[0]][-model.note_limit :]
        elif op == "clear_queue":
            await agent.context_queue.clear()
            model.notes = []
        elif op == "add":
            await agent.context_pool.add(ContextItem(content=args[1], description="d", id=args[0]))
            model.docs[args[0]] = args[1]
            if len(model.docs) > model.doc_limit:
                model.docs.popitem(last=False)
        elif op == "remove" and args[0] in model.docs:
            await agent.context_pool.remove(args[0])
            del model.docs[args[0]]
        elif op == "clear_pool":
            await agent.context_pool.clear()
            model.docs.clear()
        elif op == "narrow":  # a smaller window of its own, still sharing with the rest
            agent.context_queue = agent.context_queue.branch(limit=2)
            agent.context_pool = agent.context_pool.branch(limit=2)
            model.note_limit = model.doc_limit = 2
            model.notes = model.notes[-2:]
            model.docs = OrderedDict(list(model.docs.items())[-2:])
        elif op == "look":
            assert _seen(agent) == model.seen()
        elif op == "save":
            saved = agent.to_dict()
            assert [t["kwargs"]["value"] for t in saved["queue"]] == [t.value for t in model.turns]
            assert [len(i["content"]) // 5 for i in saved["context_queue"]["items"]] == model.notes

    for agent, model in zip(family, models, strict=True):
        assert _seen(agent) == model.seen()
        for turn in agent.queue:  # copies are unrun, whatever their originals did
            assert turn.output is None
            assert turn.metadata.stop_reason is None
    held = [id(turn) for agent in family for turn in agent.queue]
    assert len(held) == len(set(held))  # no turn object is in two queues


_TURN_CHANGES = {"set_kwargs", "set_timeout", "set_tags", "hook", "unhook"}


def _change_turn(turn: Turn, model: ModelTurn, op: str, args: list[Any], hook: Any) -> ModelTurn:
    """Change a queued turn as `op` says; the model turn changed alike."""
    if op == "set_kwargs":
        turn.kwargs = {"value": args[0]}
        return replace(model, value=args[0])
    if op == "set_timeout":
        turn.timeout = args[0]
        return replace(model, timeout=args[0])
    if op == "set_tags":
        turn.tags = [args[0]]
        return replace(model, tags=frozenset(args))
    if op == "hook":
        if hook not in turn.hooks:
            turn.hooks.append(hook)  # in place: no setter sees it
        return replace(model, hooked=True)
    turn.hooks.clear()
    return replace(model, hooked=False)


def test_a_branch_of_an_unchanged_queue_shares_the_turns_until_it_needs_them() -> None:
    """The mechanism the property above checks, seen from outside: the parent's
    turns are not copied when branching, but as soon as the branch shows its queue."""

    async def scenario() -> None:
        @tool
        async def echo(value: int) -> int:
            return value

        parent = Agent("parent", "p", [echo])
        for i in range(3):
            await parent.put(Turn(echo, kwargs={"value": i}))
        first, second = parent.branch("first"), parent.branch("second")
        originals = parent.queue
        first_copies = first.queue

        assert [t.kwargs for t in first_copies] == [t.kwargs for t in originals]
        assert not {id(t) for t in first_copies} & {id(t) for t in originals}
        assert second.queue[0] is not first_copies[0]
        assert [v async for _, v in first.run()] == [0, 1, 2]
        assert [t.metadata.stop_reason for t in originals] == [None, None, None]
        assert first_copies[0].metadata.stop_reason is StopReason.COMPLETED

    asyncio.run(scenario())


def test_branches_taken_while_the_parent_runs_get_the_turns_still_queued() -> None:
    """A run takes turns off the queue as it goes: each branch sees the queue of its moment."""

    async def scenario() -> list[list[int]]:
        children = []  # referenced: an unreferenced branch gives its name up

        @tool
        async def fork(i: int) -> int:
            children.append(parent.branch(f"child{i}"))
            return i

        parent = Agent("parent", "p", [fork])
        for i in range(3):
            await parent.put(Turn(fork, kwargs={"i": i}))
        assert [v async for _, v in parent.run()] == [0, 1, 2]
        return [[t.kwargs["i"] for t in AgentRegistry.get(f"child{i}").queue] for i in range(3)]

    assert asyncio.run(scenario()) == [[1, 2], [2], []]
