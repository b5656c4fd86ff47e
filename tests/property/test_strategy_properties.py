"""Invariants every context strategy keeps, over generated agentic transcripts.

A transcript is what an agent run produces: system prompts, the task (or a
summary in its place), then steps of assistant text, (parallel) tool calls
answered by one user message of results (errors, images, long and short
outputs), user follow-ups, sometimes a summary from an earlier compaction, and
sometimes a call still waiting for its result at the end.

Every strategy, and every composition of them, must: never orphan a result,
never drop a result whose call it keeps, keep parallel calls together, leave
its input untouched, return its input object exactly when it changed nothing,
keep the head and the task, and give the same output for the same input.
Limited strategies fit whenever the smallest window they may build fits.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    ClearToolInputs,
    ClearToolResults,
    ContextConfig,
    ContextOverflowError,
    ContextStrategy,
    DropToolRounds,
    FitTokens,
    HeuristicTokenCounter,
    ImageBlock,
    MemoryContextStore,
    Message,
    MiddleOut,
    PinnedWindow,
    Pipeline,
    SlidingWindow,
    StableWindow,
    SummarizationError,
    Summarize,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    TrimRounds,
    Truncate,
    TruncateToolResults,
    UntilFits,
    count_tokens,
    from_dict,
    is_summary,
    summary_message,
    to_dict,
)
from pygents_ctx.testing import ScriptedSummarizer

T = TypeVar("T")

SETTINGS = settings(max_examples=50, deadline=None)

# ----------------------------------------------------------------------------- transcripts

TOOLS = ("read_file", "search", "run_tests", "fetch_url")
WORDS = ("alpha ", "beta ", "gamma ", "delta ", "lorem ipsum ", "x", "naïve ", "日本 ")
PNG = ImageBlock("image/png", b"\x89PNG\r\n\x1a\n" + bytes(24))


def _text(word: str, size: int) -> str:
    return (word * (size // len(word) + 1))[:size]


@functools.cache  # one strategy object per size range: hypothesis validates each new one
def texts(min_size: int = 1, max_size: int = 300) -> st.SearchStrategy[str]:
    """Text of a drawn size, built from a word (drawing characters one by one is slow)."""
    return st.builds(_text, st.sampled_from(WORDS), st.integers(min_size, max_size))


# Drawn as plain data by static strategies, then built into messages by `_build`:
# a few strategy objects drawn from are much faster than composites drawing many.
outputs = st.one_of(texts(1, 80), texts(1, 80), texts(400, 3000))  # long ones: what edits target
result_contents = st.one_of(
    outputs,
    outputs,
    outputs,
    st.just((PNG,)),
    st.builds(lambda a, b: (TextBlock(a), PNG, TextBlock(b)), outputs, outputs),
)
tool_inputs = st.one_of(
    st.builds(lambda path: {"path": f"src/{path}.py"}, texts(1, 30)),
    st.builds(lambda q, n: {"query": q, "limit": n}, texts(1, 600), st.integers(1, 100)),
    st.builds(dict),
)
# (preamble text or None, [(tool, input, result content, is_error)], results in reverse order)
calls = st.tuples(
    st.none() | texts(),
    st.lists(
        st.tuples(
            st.sampled_from(TOOLS), tool_inputs, result_contents, st.integers(0, 4).map(bool)
        ),
        min_size=1,
        max_size=3,
    ),
    st.booleans(),
)
steps = st.one_of(
    st.tuples(st.just("text"), texts()),
    st.tuples(st.just("follow-up"), texts(1, 200), st.booleans()),
    st.tuples(st.just("calls"), calls),
    st.tuples(st.just("calls"), calls),
)
_plans = st.tuples(
    st.lists(texts(1, 400), max_size=2),
    st.sampled_from(["none", "none", "none", "none", "after task", "as task"]),
    texts(),
    st.lists(steps, max_size=14),
    st.one_of(*[st.none()] * 5, calls),  # a call still pending at the end, now and then
)


def _build(plan: tuple[Any, ...]) -> list[Message]:
    systems, summary, task, planned, pending = plan
    serial = itertools.count()

    def tag(text: str) -> str:  # no two messages of a transcript are equal by chance
        return f"{text} (#{next(serial)})"

    messages = [Message("system", tag(text)) for text in systems]
    if summary == "as task":  # what a store's compaction leaves: the summary replaced the task
        messages += [summary_message(tag(task), role="user"), Message("assistant", "Noted.")]
    else:
        messages.append(Message("user", tag(task)))
        if summary == "after task":  # what an earlier Summarize left
            messages.append(summary_message(tag(task), role="assistant"))
    for step in planned:
        if step[0] == "text":
            messages.append(Message("assistant", tag(step[1])))
        elif step[0] == "follow-up":
            image = [PNG] if step[2] else []
            messages.append(Message("user", [TextBlock(tag(step[1])), *image]))
        else:
            messages += _calls(step[1], tag, serial)
    if pending is not None:
        messages += _calls(pending, tag, serial)[:1]
    return messages


def _calls(
    planned: tuple[Any, ...], tag: Callable[[str], str], serial: itertools.count[int]
) -> list[Message]:
    """An assistant message of one or more (parallel) calls, and the message of their results."""
    preamble, specs, reverse = planned
    ids = [f"call_{next(serial)}" for _ in specs]
    uses = [
        ToolUseBlock(i, tool, tool_input)
        for i, (tool, tool_input, _, _) in zip(ids, specs, strict=True)
    ]
    results = [
        ToolResultBlock(i, content, is_error=not ok)
        for i, (_, _, content, ok) in zip(ids, specs, strict=True)
    ]
    text = [] if preamble is None else [TextBlock(tag(preamble))]
    return [
        Message("assistant", [*text, *uses]),
        Message("user", results[::-1] if reverse else results),
    ]


def transcripts() -> st.SearchStrategy[list[Message]]:
    """Realistic agentic transcripts. Results always directly follow their calls."""
    return _plans.map(_build)


# ----------------------------------------------------------------------------- oracles
# Written from the spec's definitions, independently of the package's helpers.


def head_size(messages: Sequence[Message]) -> int:
    """Leading system messages plus the task (the first user message without results)."""
    size = 0
    while size < len(messages) and messages[size].role == "system":
        size += 1
    if size < len(messages) and _plain_user(messages[size]):
        size += 1
    return size


def _plain_user(message: Message) -> bool:
    return message.role == "user" and not message.tool_results


def round_starts(messages: Sequence[Message]) -> list[int]:
    """Start of every round (for transcripts whose results follow their calls)."""
    start = head_size(messages)
    return [
        index
        for index in range(start, len(messages))
        if index == start
        or _plain_user(messages[index])
        or (messages[index].role == "assistant" and not _plain_user(messages[index - 1]))
    ]


def smallest_window(messages: list[Message]) -> list[Message]:
    """The head, the task and the newest round: what a window must keep."""
    starts = round_starts(messages)
    if not starts:
        return messages
    return [*messages[: head_size(messages)], *messages[starts[-1] :]]


def chars(messages: Sequence[Message]) -> int:
    """Characters as `Truncate` documents them: text, result text, call name and input JSON."""
    total = 0
    for message in messages:
        for block in message.content:
            if isinstance(block, TextBlock):
                total += len(block.text)
            elif isinstance(block, ToolResultBlock):  # each text part, as token counters see it
                parts = [block.content] if isinstance(block.content, str) else block.content
                total += sum(
                    len(p) if isinstance(p, str) else len(getattr(p, "text", "")) for p in parts
                )
            elif isinstance(block, ToolUseBlock):
                total += len(block.name) + len(orjson.dumps(block.input).decode())
    return total


def snapshot(messages: Sequence[Message]) -> bytes:
    """A deep, comparable copy of messages (tool inputs are dicts that could be mutated)."""
    return orjson.dumps([to_dict(message) for message in messages])


def scale(messages: Sequence[Message]) -> int:
    """Roughly the transcript's tokens: its JSON's length over four."""
    return len(snapshot(messages)) // 4


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def growing(strategy: ContextStrategy, messages: list[Message]) -> list[list[Message]]:
    """The windows one instance builds as the history grows message by message."""
    return [
        await strategy.compact(messages[:size])
        for size in range(head_size(messages), len(messages) + 1)
    ]


# ----------------------------------------------------------------------------- limits


Size = Callable[[Sequence[Message]], int]


@dataclass(frozen=True)
class Limit:
    """What a limited strategy's window must fit: sizes in some unit, each with its limit."""

    sizes: tuple[tuple[Size, int], ...]
    on_overflow: str = "keep"

    def fits(self, messages: Sequence[Message]) -> bool:
        return all(size(messages) <= limit for size, limit in self.sizes)

    def check_error(self, messages: list[Message], error: ContextOverflowError) -> None:
        """The error carries the size of the smallest window in the unit that overflowed."""
        smallest = smallest_window(messages)
        assert any(
            error.budget == limit and error.tokens == size(smallest) > limit
            for size, limit in self.sizes
        ), f"{error} (tokens={error.tokens}, budget={error.budget})"


def token_size(kwargs: dict[str, Any]) -> Size:
    def size(messages: Sequence[Message]) -> int:
        return count_tokens(
            messages,
            kwargs.get("counter", DEFAULT),
            per_message_overhead=kwargs.get("per_message_overhead", 4),
            tokens_per_media=kwargs.get("tokens_per_media", 600),
        )

    return size


def token_limit(kwargs: dict[str, Any]) -> Limit:
    budget = kwargs["max_tokens"] - kwargs.get("reserve_tokens", 0)
    return Limit(((token_size(kwargs), budget),), kwargs.get("on_overflow", "keep"))


def count_rounds(messages: Sequence[Message]) -> int:
    return len(round_starts(messages))


def truncate_limit(kwargs: dict[str, Any]) -> Limit:
    sizes: list[tuple[Size, int]] = []
    if kwargs["max_messages"] is not None:
        sizes.append((len, kwargs["max_messages"]))
    if kwargs["max_chars"] is not None:
        sizes.append((chars, kwargs["max_chars"]))
    return Limit(tuple(sizes), kwargs["on_overflow"])


# ----------------------------------------------------------------------------- parameters

DEFAULT = HeuristicTokenCounter()


def words(text: str) -> int:
    """A counter unlike the heuristic one: one token per whitespace-separated word."""
    return len(text.split())


counters = st.sampled_from([DEFAULT, HeuristicTokenCounter(1.5), HeuristicTokenCounter(6.0), words])
# Counters for which fewer characters never means more tokens.
monotone_counters = st.sampled_from(
    [DEFAULT, HeuristicTokenCounter(1.5), HeuristicTokenCounter(6.0)]
)


@st.composite
def measures(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "counter": draw(counters),
        "per_message_overhead": draw(st.sampled_from([0, 4, 7])),
        "tokens_per_media": draw(st.sampled_from([0, 85, 600])),
    }


@st.composite
def budgets(draw: st.DrawFn, size: int) -> dict[str, Any]:
    """Arguments of a token-budgeted strategy. `size` (the transcript's rough tokens)
    puts budgets where the strategy has to choose."""
    max_tokens = draw(st.integers(1, max(1, size + size // 4)))
    return {
        "max_tokens": max_tokens,
        "reserve_tokens": draw(st.sampled_from([0, 0, max_tokens // 10, max_tokens // 2])),
        **draw(measures()),
        "on_overflow": draw(st.sampled_from(["keep", "keep", "raise"])),
    }


@st.composite
def stable_params(draw: st.DrawFn, size: int) -> dict[str, Any]:
    return {
        "max_tokens": draw(st.integers(1, max(1, size + size // 4))),
        "low_water": draw(st.sampled_from([0.1, 0.5, 0.5, 0.9])),
        **draw(measures()),
        "on_overflow": draw(st.sampled_from(["keep", "keep", "raise"])),
    }


def sliding_params(size: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"max_messages": st.integers(1, 40)})


def trim_params(size: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"max_rounds": st.integers(1, 10)})


def truncate_params(size: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "max_messages": st.none() | st.integers(1, 40),
            "max_chars": st.none() | st.integers(1, max(1, 5 * size)),
            "on_overflow": st.sampled_from(["keep", "keep", "raise"]),
        }
    ).filter(lambda kw: kw["max_messages"] is not None or kw["max_chars"] is not None)


def truncate_results_params(size: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "max_chars": st.integers(1, 2000),
            "keep_recent": st.integers(0, 4),
            "marker": st.sampled_from(
                ["… [truncated {cut:,} characters]", "[{cut} chars cut]", "{cut:,}"]
            ),
        }
    )


def clear_results_params(size: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "keep_recent": st.integers(0, 5),
            "placeholder": st.sampled_from(["Done", "", "[tool output removed to save space]"]),
            "keep_tools": st.sampled_from([(), ("search",), ("search", "fetch_url")]),
            "min_tokens": st.none() | st.integers(1, 300),
            "counter": counters,
        }
    )


def keep_recent_params(size: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"keep_recent": st.integers(0, 6)})


@st.composite
def summarize_params(draw: st.DrawFn, size: int) -> dict[str, Any]:
    keep_recent = draw(st.integers(0, max(0, size)))
    return {
        "summarizer": draw(st.sampled_from(["digest", "digest", "digest", "fails"])),
        "keep_recent_tokens": keep_recent,
        "min_old_tokens": draw(st.sampled_from([0, 1, max(1, size // 8), 1000])),
        "max_tokens": draw(st.none() | st.integers(keep_recent + 1, keep_recent + 1 + 2 * size)),
        **draw(measures()),
        "on_error": draw(st.sampled_from(["raise", "log"])),
    }


def digest(messages: list[Message], previous: str | None) -> str:
    """A deterministic summary that tells what it covered."""
    calls = sum(len(message.tool_uses) for message in messages)
    text = f"{len(messages)} messages, {calls} tool calls"
    return text if previous is None else f"{previous}; then {text}"


def build_summarize(kwargs: dict[str, Any]) -> Summarize:
    options = dict(kwargs)
    if options.pop("summarizer") == "digest":
        summarizer = ScriptedSummarizer(digest)
    else:
        summarizer = ScriptedSummarizer(error=RuntimeError("the model is down"))
    return Summarize(summarizer, **options)


# ----------------------------------------------------------------------------- kinds


@dataclass(frozen=True)
class Kind:
    """One strategy class: how to draw its parameters and what its docs promise."""

    name: str
    params: Callable[[int], st.SearchStrategy[dict[str, Any]]]  # given the transcript's size
    build: Callable[[dict[str, Any]], ContextStrategy]
    limit: Callable[[dict[str, Any]], Limit] | None = None
    # Output is the head, the task and the newest whole rounds within the limit.
    newest_rounds: bool = False
    # Output is the input message by message, with blocks of this type edited.
    edits: type | None = None
    idempotent: bool = True
    never_grows: bool = True
    # A reused instance gives what a new one would (no cache that changes output).
    stateless: bool = True

    def errors(self, kwargs: dict[str, Any]) -> tuple[type[Exception], ...]:
        """The errors this configuration may raise."""
        if self.name == "Summarize":
            fails = kwargs["summarizer"] == "fails" and kwargs["on_error"] == "raise"
            return (SummarizationError,) if fails else ()
        if self.name in COMPOSITES:
            return COMPOSITES[self.name](kwargs)
        return (ContextOverflowError,) if kwargs.get("on_overflow") == "raise" else ()


def leaf(cls: type[Any], params: Any, **promises: Any) -> Kind:
    return Kind(cls.__name__, params, lambda kwargs: cls(**kwargs), **promises)


def count_limit(size: Size, name: str) -> Callable[[dict[str, Any]], Limit]:
    return lambda kwargs: Limit(((size, kwargs[name]),))


# Idempotent: the edits' docs say so; for windows it follows from returning a window
# that fits as is, for DropToolRounds from leaving no old tool round. None of them
# can grow a window (counted by a counter that never gives fewer tokens for more text).
LEAVES = [
    leaf(FitTokens, budgets, limit=token_limit, newest_rounds=True),
    leaf(MiddleOut, budgets, limit=token_limit),
    leaf(StableWindow, stable_params, limit=token_limit),
    leaf(SlidingWindow, sliding_params, limit=count_limit(len, "max_messages"), newest_rounds=True),
    leaf(
        TrimRounds, trim_params, limit=count_limit(count_rounds, "max_rounds"), newest_rounds=True
    ),
    leaf(Truncate, truncate_params, limit=truncate_limit, newest_rounds=True),
    leaf(TruncateToolResults, truncate_results_params, edits=ToolResultBlock),
    leaf(ClearToolResults, clear_results_params, edits=ToolResultBlock),
    leaf(ClearToolInputs, keep_recent_params, edits=ToolUseBlock),
    leaf(DropToolRounds, keep_recent_params),
    Kind(
        "Summarize",
        summarize_params,
        build_summarize,
        idempotent=False,
        never_grows=False,
        stateless=False,
    ),
]
LEAF = {kind.name: kind for kind in LEAVES}

Stage = tuple[str, dict[str, Any]]


@st.composite
def stages(draw: st.DrawFn, size: int, min_size: int, max_size: int) -> list[Stage]:
    names = draw(st.lists(st.sampled_from(sorted(LEAF)), min_size=min_size, max_size=max_size))
    return [(name, draw(LEAF[name].params(size))) for name in names]


def build_stages(staged: list[Stage]) -> list[ContextStrategy]:
    return [LEAF[name].build(kwargs) for name, kwargs in staged]


def stage_errors(staged: list[Stage]) -> tuple[type[Exception], ...]:
    return tuple(error for name, kwargs in staged for error in LEAF[name].errors(kwargs))


def pipeline_params(size: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"stages": stages(size, 1, 4)})


@st.composite
def until_fits_params(draw: st.DrawFn, size: int) -> dict[str, Any]:
    return {
        "max_tokens": draw(st.integers(1, max(1, size + size // 4))),
        **draw(measures()),
        "on_overflow": draw(st.sampled_from(["keep", "raise"])),
        "stages": draw(stages(size, 0, 3)),
    }


def build_until_fits(kwargs: dict[str, Any]) -> UntilFits:
    options = dict(kwargs)
    return UntilFits(options.pop("max_tokens"), build_stages(options.pop("stages")), **options)


@st.composite
def pinned_params(draw: st.DrawFn, size: int) -> dict[str, Any]:
    return {
        "stages": draw(stages(size, 1, 1)),
        "max_tokens": draw(st.integers(1, max(1, size + size // 4))),
        **draw(measures()),
    }


def build_pinned(kwargs: dict[str, Any]) -> PinnedWindow:
    options = dict(kwargs)
    (strategy,) = build_stages(options.pop("stages"))
    return PinnedWindow(strategy, **options)


def _until_fits_errors(kwargs: dict[str, Any]) -> tuple[type[Exception], ...]:
    own = (ContextOverflowError,) if kwargs["on_overflow"] == "raise" else ()
    return own + stage_errors(kwargs["stages"])


COMPOSITES: dict[str, Callable[[dict[str, Any]], tuple[type[Exception], ...]]] = {
    "Pipeline": lambda kw: stage_errors(kw["stages"]),
    "UntilFits": _until_fits_errors,
    "PinnedWindow": lambda kw: stage_errors(kw["stages"]),
}
# What compositions promise is checked against their stages in the tests below.
_COMPOSED = {"idempotent": False, "never_grows": False}
KINDS = [
    *LEAVES,
    Kind("Pipeline", pipeline_params, lambda kw: Pipeline(build_stages(kw["stages"])), **_COMPOSED),
    Kind("UntilFits", until_fits_params, build_until_fits, **_COMPOSED),
    Kind("PinnedWindow", pinned_params, build_pinned, stateless=False, **_COMPOSED),
]
BY_NAME = {kind.name: kind for kind in KINDS}


def names(keep: Callable[[Kind], object]) -> list[str]:
    return [kind.name for kind in KINDS if keep(kind)]


def draw_params(data: st.DataObject, kind: Kind, messages: list[Message]) -> dict[str, Any]:
    return data.draw(kind.params(scale(messages)), label=f"{kind.name} parameters")


# ----------------------------------------------------------------------------- contract checks


def check_pairing(before: Sequence[Message], after: Sequence[Message]) -> None:
    """No orphaned result, no call losing a result it had, parallel calls together."""
    call_at = {b.id: i for i, m in enumerate(after) for b in m.content if type(b) is ToolUseBlock}
    result_at = {
        b.tool_use_id: i
        for i, m in enumerate(after)
        for b in m.content
        if type(b) is ToolResultBlock
    }
    answered = {b.tool_use_id for m in before for b in m.tool_results}

    orphans = result_at.keys() - call_at.keys()
    assert not orphans, f"results without their call: {sorted(orphans)}"
    lost = (call_at.keys() - result_at.keys()) & answered
    assert not lost, f"calls that lost their result: {sorted(lost)}"
    for call_id, index in result_at.items():
        assert index == call_at[call_id] + 1, f"result {call_id} does not follow its call"
    for message in before:
        group = {use.id for use in message.tool_uses}
        kept = group & call_at.keys()
        assert kept in (set(), group), f"parallel calls split: kept {kept} of {group}"
        assert len({call_at[i] for i in kept}) <= 1, f"parallel calls {group} spread over messages"
        assert len({result_at[i] for i in kept & result_at.keys()}) <= 1, (
            f"results of parallel calls {group} spread over messages"
        )


def check_untouched(messages: list[Message], copy: list[Message], frozen: bytes) -> None:
    assert len(messages) == len(copy), "the input list was changed"
    assert all(a is b for a, b in zip(messages, copy, strict=True)), "the input list was changed"
    assert snapshot(messages) == frozen, "a message of the input was changed"


def check_identity(messages: list[Message], out: list[Message]) -> None:
    unchanged = len(out) == len(messages) and snapshot(out) == snapshot(messages)
    assert (out is messages) == unchanged, (
        "returned the input itself although it changed something"
        if out is messages
        else "returned a new list although it changed nothing"
    )


def check_reuse(earlier: Sequence[Message], out: Sequence[Message]) -> None:
    """An output message equal to an earlier one is that very object (its count stays cached).

    Summaries and the message after one (the bridge `Summarize` may add) are exempt:
    they are the strategy's own messages, not the history's.
    """
    by_content: dict[bytes, set[int]] = {}
    for message in earlier:
        by_content.setdefault(snapshot([message]), set()).add(id(message))
    for index, message in enumerate(out):
        if is_summary(message) or (index and is_summary(out[index - 1])):
            continue
        same = by_content.get(snapshot([message]))
        assert same is None or id(message) in same, f"an unchanged message was rebuilt: {message}"


def check_head(messages: list[Message], out: list[Message]) -> None:
    """System prompts and the task are kept as they are (a summary in the task's place is not
    the task: `Summarize` updates it)."""
    head = head_size(messages)
    if head and is_summary(messages[head - 1]):
        head -= 1
    assert out[:head] == messages[:head], "the system prompts or the task were not kept"
    assert all(a is b for a, b in zip(out, messages[:head], strict=False)), "the head was rebuilt"


async def apply(strategy: ContextStrategy, messages: list[Message]) -> list[Message]:
    """Run `strategy` and check what holds for every strategy, whatever it does."""
    copy, frozen = list(messages), snapshot(messages)
    out = await strategy.compact(messages)
    check_untouched(messages, copy, frozen)
    assert isinstance(out, list)
    assert all(isinstance(m, Message) for m in out)
    check_identity(messages, out)
    check_pairing(messages, out)
    check_reuse(messages, out)
    return out


def outcome(kind: Kind, kwargs: dict[str, Any], messages: list[Message]) -> list[Message] | None:
    """The checked output, or None when the strategy raised one of the errors it may raise."""
    try:
        return run(apply(kind.build(kwargs), messages))
    except (ContextOverflowError, SummarizationError) as exc:
        error = exc
    assert isinstance(error, kind.errors(kwargs)), f"{kind.name} raised {error!r}"
    if isinstance(error, ContextOverflowError) and kind.limit is not None:
        kind.limit(kwargs).check_error(messages, error)
    return None


# ----------------------------------------------------------------------------- every strategy


@pytest.mark.parametrize("name", names(lambda kind: True))
@SETTINGS
@given(data=st.data(), messages=transcripts())
def test_strategy_keeps_the_contract(
    name: str, data: st.DataObject, messages: list[Message]
) -> None:
    kind = BY_NAME[name]
    kwargs = draw_params(data, kind, messages)
    out = outcome(kind, kwargs, messages)
    if out is None:
        return
    check_head(messages, out)
    again = run(kind.build(kwargs).compact(messages))
    assert snapshot(again) == snapshot(out), "two instances with the same parameters disagree"
    if kind.idempotent:
        assert run(kind.build(kwargs).compact(out)) is out, "it changed its own output"
    if kind.never_grows:
        counter = data.draw(monotone_counters, label="counter")
        assert count_tokens(out, counter) <= count_tokens(messages, counter), "the window grew"


@pytest.mark.parametrize("name", names(lambda kind: kind.limit is not None))
@SETTINGS
@given(data=st.data(), messages=transcripts())
def test_limited_strategy_fits_whenever_the_smallest_window_fits(
    name: str, data: st.DataObject, messages: list[Message]
) -> None:
    kind = BY_NAME[name]
    assert kind.limit is not None
    kwargs = draw_params(data, kind, messages)
    limit = kind.limit(kwargs)
    smallest = smallest_window(messages)
    strategy = kind.build(kwargs)

    if not limit.fits(smallest) and limit.on_overflow == "raise":
        with pytest.raises(ContextOverflowError) as caught:
            run(strategy.compact(messages))
        limit.check_error(messages, caught.value)
        return
    out = run(strategy.compact(messages))
    if limit.fits(smallest):
        assert limit.fits(out)
    else:  # kept anyway, over the limit: nothing but the head, the task and the newest round
        assert len(out) == len(smallest)
        assert all(a is b for a, b in zip(out, smallest, strict=True))
    if kind.newest_rounds:  # and as many of the newest whole rounds as fit
        head = head_size(messages)
        windows = [[*messages[:head], *messages[start:]] for start in round_starts(messages)]
        expected = next((w for w in windows if limit.fits(w)), smallest)
        expected = messages if limit.fits(messages) else expected
        assert len(out) == len(expected)
        assert all(a is b for a, b in zip(out, expected, strict=True))


@SETTINGS
@given(data=st.data(), messages=transcripts())
def test_middle_out_removes_one_stretch_of_rounds_and_no_more_than_needed(
    data: st.DataObject, messages: list[Message]
) -> None:
    kind = LEAF["MiddleOut"]
    kwargs = draw_params(data, kind, messages)
    limit = token_limit(kwargs)
    out = outcome(kind, kwargs, messages)
    if out is None or out is messages:
        return
    starts = round_starts(messages)
    bounds = [*starts, len(messages)]
    cuts = [
        (a, b)
        for a, b in itertools.combinations(range(len(starts)), 2)
        if out == [*messages[: bounds[a]], *messages[bounds[b] :]]
    ]
    assert cuts, "the window is not the input less one stretch of whole rounds"
    first, last = cuts[0]
    if not limit.fits(out):  # over budget: only the head, the task and the newest round
        assert (first, last) == (0, len(starts) - 1)
    else:  # neither neighbour of the removed stretch would have fit as well
        for start, stop in ((bounds[first], bounds[first + 1]), (bounds[last - 1], bounds[last])):
            assert not limit.fits([*out, *messages[start:stop]])


@pytest.mark.parametrize("name", names(lambda kind: kind.edits is not None))
@SETTINGS
@given(data=st.data(), messages=transcripts())
def test_edits_change_only_their_blocks_and_spare_the_newest(
    name: str, data: st.DataObject, messages: list[Message]
) -> None:
    kind = BY_NAME[name]
    kwargs = draw_params(data, kind, messages)
    out = outcome(kind, kwargs, messages)
    assert out is not None
    assert len(out) == len(messages)
    targets = [
        (i, j)
        for i, m in enumerate(messages)
        for j, b in enumerate(m.content)
        if type(b) is kind.edits
    ]
    recent = set(targets[len(targets) - kwargs["keep_recent"] :] if kwargs["keep_recent"] else [])
    for i, (before, after) in enumerate(zip(messages, out, strict=True)):
        assert after.role == before.role
        assert [type(b) for b in after.content] == [type(b) for b in before.content]
        for j, (was, now) in enumerate(zip(before.content, after.content, strict=True)):
            if type(was) is not kind.edits or (i, j) in recent:
                assert now == was, f"{kind.name} changed {was!r}"
            elif isinstance(was, ToolUseBlock):
                assert isinstance(now, ToolUseBlock)
                assert (now.id, now.name) == (was.id, was.name)
                assert now.input in ({}, was.input)
            elif isinstance(was, ToolResultBlock):
                assert isinstance(now, ToolResultBlock)
                assert (now.tool_use_id, now.is_error) == (was.tool_use_id, was.is_error)


@pytest.mark.parametrize("name", names(lambda kind: kind.name != "PinnedWindow"))
@SETTINGS
@given(data=st.data(), messages=transcripts())
def test_over_a_growing_history_unchanged_messages_stay_the_same_objects(
    name: str, data: st.DataObject, messages: list[Message]
) -> None:
    """What an agent run does: one instance, called before every step. Its windows equal
    a new instance's (unless it caches summaries), and what it built before is reused."""
    kind = BY_NAME[name]
    kwargs = draw_params(data, kind, messages)
    staged = [stage for stage, _ in kwargs.get("stages", [])]
    # A StableWindow after a stage that rewrites old messages sees a history rewritten
    # in place, not one that grows: it keeps what it read (see its docs).
    stateless = kind.stateless and "Summarize" not in staged and "StableWindow" not in staged[1:]

    async def scenario() -> None:
        strategy, previous = kind.build(kwargs), []
        for size in range(head_size(messages), len(messages) + 1):
            history = messages[:size]
            window = await strategy.compact(history)
            check_pairing(history, window)
            # A composition may rebuild an equal message: when an early stage starts to
            # edit it, a later stage sees a new input. Each strategy alone must not.
            check_reuse([*history, *previous] if name in LEAF else history, window)
            if stateless:
                fresh = await kind.build(kwargs).compact(history)
                assert snapshot(window) == snapshot(fresh), (
                    "a reused instance differs from a new one"
                )
            previous = window

    try:
        run(scenario())
    except (ContextOverflowError, SummarizationError) as error:
        assert isinstance(error, kind.errors(kwargs))  # noqa: PT017


# What a history does between two windows: grow by some messages, lose its newest
# (a rewind, then the same messages again), have one replaced by an equal copy (a
# store that reloads it) or, where it holds no tool block, by another text.
edits_between = st.lists(
    st.one_of(
        st.tuples(st.just("grow"), st.integers(1, 4)),
        st.tuples(st.just("grow"), st.integers(1, 4)),
        st.tuples(st.just("rewind"), st.integers(1, 5)),
        st.tuples(st.sampled_from(["copy", "reword"]), st.integers(0, 10**6)),
    ),
    min_size=1,
    max_size=16,
)


def _change(history: list[Message], pool: list[Message], grown: int, edit: tuple[Any, int]) -> int:
    """Apply one edit to `history` (in place); return how much of `pool` it holds now."""
    kind, amount = edit
    head = head_size(pool)
    if kind == "grow":
        history += pool[grown : grown + amount]
        return min(len(pool), grown + amount)
    if kind == "rewind":
        cut = min(amount, len(history) - head)
        del history[len(history) - cut :]
        return grown - cut
    if len(history) <= head:
        return grown
    index = head + amount % (len(history) - head)
    message = history[index]
    if kind == "copy":
        history[index] = from_dict(to_dict(message))
    elif not message.tool_uses and not message.tool_results:
        history[index] = Message(message.role, f"reworded message {amount}")
    return grown


def _measure_of(strategy: ContextStrategy) -> Any:
    if isinstance(strategy, Pipeline):
        return _measure_of(strategy.strategies[-1]) if strategy.strategies else None
    return getattr(strategy, "measure", None)


STATEFUL = {"Summarize", "StableWindow"}


@pytest.mark.parametrize("name", names(lambda kind: kind.stateless and kind.name not in STATEFUL))
@SETTINGS
@given(data=st.data(), messages=transcripts(), edits=edits_between)
def test_a_reused_instance_builds_what_a_new_one_does_whatever_the_history_does(
    name: str, data: st.DataObject, messages: list[Message], edits: list[tuple[Any, int]]
) -> None:
    """One instance called through `compact`, one through `compact_since` with the
    true count of unchanged messages, and one through a `ContextConfig` (which counts
    only what its strategy says changed), over a history that grows, rewinds and has
    messages replaced: each window equals a new instance's, what `compact_since`
    says of its window (unchanged part, token count) holds, and the config's window
    and token count are a new config's."""
    kind = BY_NAME[name]
    kwargs = draw_params(data, kind, messages)
    if "stages" in kwargs:  # these keep what they built, and say so in their docs
        kwargs["stages"] = [
            (stage, options) for stage, options in kwargs["stages"] if stage not in STATEFUL
        ]

    async def scenario() -> None:
        plain, vouched = kind.build(kwargs), kind.build(kwargs)
        since = getattr(vouched, "compact_since", None)
        config = ContextConfig(MemoryContextStore(), kind.build(kwargs))
        history, grown = messages[: head_size(messages)], head_size(messages)
        previous: list[Message] = []
        step = None
        for edit in edits:
            grown = _change(history, messages, grown, edit)
            current = list(history)  # a new list each time, as a store returns it
            fresh = await kind.build(kwargs).compact(current)
            window = await plain.compact(current)
            assert snapshot(window) == snapshot(fresh), "a reused instance differs from a new one"
            assert (window is current) == (fresh is current)
            check_pairing(current, window)
            reused = await config.window_of(current)
            new = await ContextConfig(MemoryContextStore(), kind.build(kwargs)).window_of(current)
            assert snapshot(reused.messages) == snapshot(fresh)
            assert reused.tokens == new.tokens, "the config counted its window wrong"
            if since is None:
                continue
            unchanged = next(
                (i for i, (a, b) in enumerate(zip(current, previous, strict=False)) if a is not b),
                min(len(current), len(previous)),
            )
            earlier = list(step.messages) if step is not None else []
            step = await since(current, step, unchanged)
            assert snapshot(step.messages) == snapshot(fresh), "compact_since differs from compact"
            assert (step.messages is current) == (fresh is current)
            assert step.unchanged <= min(len(step.messages), len(earlier))
            kept = step.unchanged
            assert snapshot(step.messages[:kept]) == snapshot(earlier[:kept]), "not unchanged"
            measure = _measure_of(vouched)
            if step.tokens is not None and measure is not None:
                assert step.tokens == measure.total(step.messages), "a wrong token count"
            previous = current

    try:
        run(scenario())
    except (ContextOverflowError, SummarizationError) as error:
        assert isinstance(error, kind.errors(kwargs))  # noqa: PT017


# ----------------------------------------------------------------------------- summaries


@SETTINGS
@given(data=st.data(), messages=transcripts())
def test_summaries_are_updated_never_nested_and_never_redone(
    data: st.DataObject, messages: list[Message]
) -> None:
    kwargs = {**draw_params(data, LEAF["Summarize"], messages), "summarizer": "digest"}
    strategy = build_summarize(kwargs)
    windows = run(growing(strategy, messages))
    calls = strategy.summarizer.calls  # type: ignore[attr-defined]

    for window in windows:
        assert sum(map(is_summary, window)) <= 1, "summaries stacked up"
    seen: set[int] = set()
    had_summary = any(map(is_summary, messages))
    for number, call in enumerate(calls):
        assert not any(map(is_summary, call.messages)), "a summary was summarized"
        assert seen.isdisjoint(map(id, call.messages)), "a message was summarized twice"
        seen.update(map(id, call.messages))
        check_pairing(messages, call.messages)
        assert (call.previous_summary is not None) == (number > 0 or had_summary)


@SETTINGS
@given(data=st.data(), messages=transcripts())
def test_a_failing_summarizer_leaves_the_history_whole(
    data: st.DataObject, messages: list[Message]
) -> None:
    kwargs = {**draw_params(data, LEAF["Summarize"], messages), "summarizer": "fails"}
    strategy = build_summarize(kwargs)
    out: list[Message] | None = None
    try:
        out = run(strategy.compact(messages))
    except SummarizationError as exc:
        failure: SummarizationError | None = exc
    else:
        failure = None
    asked = bool(strategy.summarizer.calls)  # type: ignore[attr-defined]
    if asked and kwargs["on_error"] == "raise":
        assert failure is not None
        assert isinstance(failure.__cause__, RuntimeError)
    else:  # logged, or never asked: the history as it was
        assert out is messages


# ----------------------------------------------------------------------------- compositions


@SETTINGS
@given(data=st.data(), messages=transcripts())
def test_pipeline_feeds_each_stage_the_previous_output(
    data: st.DataObject, messages: list[Message]
) -> None:
    staged = data.draw(stages(scale(messages), 1, 4), label="stages")
    try:
        out = run(Pipeline(build_stages(staged)).compact(messages))
    except (ContextOverflowError, SummarizationError):
        return
    expected = messages
    for strategy in build_stages(staged):
        expected = run(strategy.compact(expected))
    assert snapshot(out) == snapshot(expected)
    assert (out is messages) == (expected is messages)


@SETTINGS
@given(data=st.data(), messages=transcripts())
def test_until_fits_stops_at_the_first_output_that_fits(
    data: st.DataObject, messages: list[Message]
) -> None:
    kwargs = draw_params(data, BY_NAME["UntilFits"], messages)
    size = token_size(kwargs)
    budget = kwargs["max_tokens"]
    outputs = [messages]
    try:
        for strategy in build_stages(kwargs["stages"]):
            if size(outputs[-1]) <= budget:
                break
            outputs.append(run(strategy.compact(outputs[-1])))
    except (ContextOverflowError, SummarizationError):
        return
    expected = next((out for out in outputs if size(out) <= budget), outputs[-1])
    if size(expected) > budget and kwargs["on_overflow"] == "raise":
        with pytest.raises(ContextOverflowError):
            run(build_until_fits(kwargs).compact(messages))
        return
    out = run(build_until_fits(kwargs).compact(messages))
    assert snapshot(out) == snapshot(expected)
    assert (out is messages) == (expected is messages)


@SETTINGS
@given(data=st.data(), messages=transcripts())
def test_pinned_window_keeps_its_prefix_until_it_must_repin(
    data: st.DataObject, messages: list[Message]
) -> None:
    kwargs = draw_params(data, BY_NAME["PinnedWindow"], messages)
    builder = build_pinned(kwargs)
    size = token_size(kwargs)
    previous, previous_stop = None, 0
    for stop in range(head_size(messages), len(messages) + 1):
        history = messages[:stop]
        try:
            window = run(builder.build(history))
        except (ContextOverflowError, SummarizationError):
            return
        check_pairing(history, window.messages)
        assert window.tokens == size(window.messages)
        if previous is None or window.repinned:
            assert window.pin == len(history)
        else:  # over budget only when nothing came since the pin
            assert window.tokens <= kwargs["max_tokens"] or window.pin == len(history)
        if previous is not None and window.repinned:  # growing past the budget forced it
            assert previous.tokens + size(history[previous_stop:]) > kwargs["max_tokens"]
        elif previous is not None:  # the previous window is a prefix, object for object
            assert window.pin == previous.pin
            head = window.messages[: len(previous.messages)]
            assert all(a is b for a, b in zip(head, previous.messages, strict=True))
        previous, previous_stop = window, stop


@SETTINGS
@given(data=st.data(), messages=transcripts())
def test_stable_window_only_appends_between_compactions_and_rebuilds_byte_for_byte(
    data: st.DataObject, messages: list[Message]
) -> None:
    kwargs = draw_params(data, BY_NAME["StableWindow"], messages)
    kwargs["on_overflow"] = "keep"
    builder = StableWindow(**kwargs)
    size = token_size(kwargs)
    # The model is called after some of the messages only, as in a run.
    stops = sorted(set(data.draw(st.lists(st.integers(0, len(messages)), max_size=12))))
    previous, previous_stop = None, 0
    for stop in [*stops, len(messages)]:
        history, compactions = messages[:stop], builder.compactions
        window = run(builder.build(history))
        check_pairing(history, window.messages)
        assert window.tokens == size(window.messages)
        assert window.messages[: head_size(history)] == history[: head_size(history)]
        if previous is not None and not window.repinned:
            shared = len(previous.messages)
            assert window.stable_prefix == shared
            assert all(a is b for a, b in zip(window.messages, previous.messages, strict=False))
        elif previous is not None and builder.compactions > compactions:
            # A compaction: whole rounds went, from the front.
            grown = previous.tokens + size(history[previous_stop:])
            assert grown > kwargs["max_tokens"]
            assert window.tokens < grown
            assert window.messages[head_size(history) :] == history[window.pin :]
        previous, previous_stop = window, stop
    # Reloaded (equal copies, as a store gives back) and read once by a new builder:
    # the same bytes as the window the first builder built step by step.
    reloaded = [from_dict(to_dict(message)) for message in messages]
    again = run(StableWindow(**kwargs).build(reloaded))
    assert previous is not None
    assert snapshot(again.messages) == snapshot(previous.messages)


@SETTINGS
@given(data=st.data(), messages=transcripts())
def test_summarize_never_fires_while_the_conversation_fits_its_budget(
    data: st.DataObject, messages: list[Message]
) -> None:
    kwargs = draw_params(data, BY_NAME["Summarize"], messages)
    if kwargs["max_tokens"] is None:
        return
    strategy = build_summarize(kwargs)
    size = token_size(kwargs)
    for stop in range(head_size(messages), len(messages) + 1):  # one instance, a growing history
        history = messages[:stop]
        if size(history) > kwargs["max_tokens"]:
            break
        assert run(strategy.compact(history)) is history
        assert strategy.summarizer.calls == []  # type: ignore[attr-defined]
