"""TruncateToolResults, ClearToolResults, ClearToolInputs, DropToolRounds: edits of tool traffic."""

from __future__ import annotations

import gc
import random
import weakref
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    to_dict,
)
from pygents_ctx.context.strategies._rounds import head_end
from pygents_ctx.context.strategies.budget import FitTokens
from pygents_ctx.context.strategies.edits import (
    ClearToolInputs,
    ClearToolResults,
    DropToolRounds,
    TruncateToolResults,
)

Edit = TruncateToolResults | ClearToolResults | ClearToolInputs | DropToolRounds

PNG = ImageBlock("image/png", b"\x89PNG\r\n\x1a\n")
SYSTEM = Message("system", "You are an agent.")
TASK = Message("user", "Do the task.")

# ----------------------------------------------------------------------------- transcripts


def call(*ids: str, name: str = "search", text: str | None = None) -> Message:
    """An assistant message calling `name` once per id (parallel calls if several)."""
    uses = [ToolUseBlock(i, name, {"query": f"query for {i}"}) for i in ids]
    return Message("assistant", [TextBlock(text), *uses] if text else uses)


def results(*ids: str, content: str | None = None, error: str = "") -> Message:
    """The user message answering `ids`, each with a long text; the call `error` failed."""
    return Message(
        "user",
        [
            ToolResultBlock(i, content or f"output of {i} " + "x" * 100, is_error=i == error)
            for i in ids
        ],
    )


def steps(count: int, *, first: int = 0) -> list[Message]:
    """`count` tool steps: a call `c<n>` and its result."""
    out: list[Message] = []
    for n in range(first, first + count):
        out += [call(f"c{n}"), results(f"c{n}")]
    return out


def run_of(count: int) -> list[Message]:
    return [SYSTEM, TASK, *steps(count)]


def result_contents(messages: list[Message]) -> list[Any]:
    return [block.content for m in messages for block in m.tool_results]


def call_inputs(messages: list[Message]) -> list[dict[str, Any]]:
    return [block.input for m in messages for block in m.tool_uses]


def snapshot(messages: list[Message]) -> list[Any]:
    return [to_dict(m) for m in messages]


async def compact(strategy: Edit, messages: list[Message]) -> list[Message]:
    """Run the strategy, checking it left its input alone."""
    before, objects = snapshot(messages), list(messages)
    out = await strategy.compact(messages)
    assert all(a is b for a, b in zip(messages, objects, strict=True))
    assert snapshot(messages) == before
    return out


ALL_KINDS: list[Callable[[], Edit]] = [
    lambda: TruncateToolResults(20, keep_recent=1),
    lambda: ClearToolResults(1),
    lambda: ClearToolInputs(1),
    lambda: DropToolRounds(1),
]
KIND_IDS = ["TruncateToolResults", "ClearToolResults", "ClearToolInputs", "DropToolRounds"]


# ----------------------------------------------------------------------------- the contract


@pytest.mark.parametrize("make", ALL_KINDS, ids=KIND_IDS)
@pytest.mark.parametrize(
    "messages",
    [
        [],
        [SYSTEM],
        [SYSTEM, TASK],
        [TASK, Message("assistant", "Hello.")],
        [SYSTEM, TASK, call("c0")],  # a call still waiting for its result
    ],
    ids=["empty", "only system", "head and task", "chat", "pending call"],
)
async def test_nothing_to_edit_returns_the_input_itself(
    make: Callable[[], Edit], messages: list[Message]
) -> None:
    strategy = make()
    assert await compact(strategy, messages) is messages
    assert await compact(strategy, messages) is messages  # and again, from memory


@pytest.mark.parametrize(
    "strategy",
    [
        TruncateToolResults(20, keep_recent=10),
        ClearToolResults(10),
        ClearToolInputs(10),
        DropToolRounds(10),
    ],
    ids=KIND_IDS,
)
async def test_keep_recent_larger_than_the_history_changes_nothing(strategy: Edit) -> None:
    messages = run_of(4)
    assert await compact(strategy, messages) is messages


@pytest.mark.parametrize("make", ALL_KINDS, ids=KIND_IDS)
async def test_head_and_task_are_kept_and_old_tool_traffic_is_edited(
    make: Callable[[], Edit],
) -> None:
    messages = run_of(4)
    out = await compact(make(), messages)
    assert out is not messages
    assert out[0] is SYSTEM
    assert out[1] is TASK
    assert out[-2:] == messages[-2:]  # the newest step is whole


@pytest.mark.parametrize("make", ALL_KINDS, ids=KIND_IDS)
async def test_editing_twice_gives_what_editing_once_does(make: Callable[[], Edit]) -> None:
    messages = [*run_of(4), call("p", "q", text="Two at once."), results("p", "q", error="q")]
    once = await compact(make(), messages)
    assert await compact(make(), once) == once
    assert await compact(make(), once) is once  # nothing left to change


@pytest.mark.parametrize("make", ALL_KINDS, ids=KIND_IDS)
async def test_compact_and_edit_agree(make: Callable[[], Edit]) -> None:
    messages = run_of(4)
    assert await make().compact(messages) == make().edit(messages)


@pytest.mark.parametrize(
    ("strategy", "text"),
    [
        (
            TruncateToolResults(),
            "TruncateToolResults(500, keep_recent=0, marker='… [truncated {cut:,} characters]')",
        ),
        (
            ClearToolResults(2, placeholder="-", keep_tools=["b", "a"], min_tokens=5),
            "ClearToolResults(2, placeholder='-', keep_tools=('a', 'b'), min_tokens=5)",
        ),
        (ClearToolInputs(), "ClearToolInputs(3)"),
        (DropToolRounds(), "DropToolRounds(5)"),
    ],
)
def test_repr_shows_the_parameters(strategy: Edit, text: str) -> None:
    assert repr(strategy) == text


@pytest.mark.parametrize(
    ("build", "error", "words"),
    [
        (lambda: TruncateToolResults(0), ValueError, "max_chars must be at least 1, not 0"),
        (lambda: TruncateToolResults(True), TypeError, "max_chars must be an int, not bool"),
        (lambda: TruncateToolResults(10, keep_recent=-1), ValueError, "keep_recent"),
        (lambda: TruncateToolResults(marker="[cut]"), ValueError, "must contain {cut}"),
        (lambda: TruncateToolResults(marker="{cut} of {total}"), ValueError, "not {total}"),
        (lambda: TruncateToolResults(marker="{cut:x} cut"), ValueError, "plain digits"),
        (lambda: TruncateToolResults(marker="{cut:>9} cut"), ValueError, "plain digits"),
        (lambda: TruncateToolResults(marker="{cut"), ValueError, "not a format string"),
        (lambda: TruncateToolResults(marker="{cut:s}"), ValueError, "cannot show a number"),
        (lambda: TruncateToolResults(marker="{cut!z}"), ValueError, "cannot show a number"),
        (lambda: TruncateToolResults(marker=None), TypeError, "marker must be a str"),  # type: ignore[arg-type]
        (lambda: ClearToolResults(-1), ValueError, "keep_recent must be at least 0, not -1"),
        (lambda: ClearToolResults(1.5), TypeError, "keep_recent must be an int"),  # type: ignore[arg-type]
        (lambda: ClearToolResults(placeholder=1), TypeError, "placeholder must be a str"),  # type: ignore[arg-type]
        (lambda: ClearToolResults(keep_tools="search"), TypeError, "keep_tools=('search',)"),
        (lambda: ClearToolResults(keep_tools=[1]), TypeError, "must hold only strings, not int"),  # type: ignore[list-item]
        (lambda: ClearToolResults(keep_tools=3), TypeError, "collection of strings"),  # type: ignore[arg-type]
        (lambda: ClearToolResults(min_tokens=0), ValueError, "min_tokens must be at least 1"),
        (lambda: ClearToolResults(counter=4), TypeError, "counter must be a callable"),  # type: ignore[arg-type]
        (lambda: ClearToolInputs(-2), ValueError, "ClearToolInputs keep_recent"),
        (lambda: DropToolRounds("5"), TypeError, "DropToolRounds keep_recent"),  # type: ignore[arg-type]
    ],
)
def test_bad_parameters_are_refused_by_name(
    build: Callable[[], object], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        build()


# ----------------------------------------------------------------------------- TruncateToolResults


async def test_truncate_clips_long_results_and_says_how_much_was_cut() -> None:
    messages = [TASK, call("c0"), Message("user", [ToolResultBlock("c0", "a" * 1500)])]
    out = await compact(TruncateToolResults(100), messages)
    (block,) = out[2].tool_results
    assert block.content == "a" * 100 + "… [truncated 1,400 characters]"
    assert block.tool_use_id == "c0"
    assert block.is_error is False
    assert out[1] is messages[1]


async def test_truncate_never_clips_errors_or_other_text() -> None:
    long = "e" * 1000
    messages = [
        Message("user", long),
        Message("assistant", [TextBlock(long), ToolUseBlock("c0", "run", {"a": long})]),
        Message("user", [ToolResultBlock("c0", long, is_error=True), TextBlock(long)]),
    ]
    assert await compact(TruncateToolResults(10), messages) is messages


async def test_truncate_leaves_a_text_the_marker_would_not_shorten() -> None:
    short_over = "a" * 110  # clipping to 100 would add a 31-character marker
    messages = [TASK, call("c0"), Message("user", [ToolResultBlock("c0", short_over)])]
    assert await compact(TruncateToolResults(100), messages) is messages


async def test_truncate_spends_one_budget_over_a_results_text_blocks_and_keeps_images() -> None:
    content = [TextBlock("a" * 60), PNG, TextBlock("b" * 60), TextBlock("c" * 500), PNG]
    messages = [TASK, call("c0"), Message("user", [ToolResultBlock("c0", content)])]
    out = await compact(TruncateToolResults(100, marker=" [{cut} cut]"), messages)
    (block,) = out[2].tool_results
    assert block.content == (
        content[0],
        PNG,
        TextBlock("b" * 40 + " [520 cut]"),
        PNG,
    )
    assert block.content[0] is content[0]  # the text block within budget is the same object


async def test_truncate_is_idempotent_for_every_shape() -> None:
    shapes: list[Any] = [
        "z" * 5000,
        [TextBlock("a" * 70), TextBlock("b" * 70)],
        [TextBlock("a" * 100), TextBlock("b" * 900)],  # budget spent exactly at a block's end
        [PNG, TextBlock("x" * 900), PNG],
        "1234567890" * 50,  # digits right before the marker
    ]
    for marker in ("… [truncated {cut:,} characters]", "{cut}", "{cut:_} more"):
        strategy = TruncateToolResults(100, marker=marker)
        for content in shapes:
            messages = [TASK, call("c0"), Message("user", [ToolResultBlock("c0", content)])]
            once = await compact(strategy, messages)
            assert once is not messages
            assert await compact(TruncateToolResults(100, marker=marker), once) is once


async def test_truncate_again_with_a_smaller_budget_counts_from_the_original() -> None:
    messages = [TASK, call("c0"), Message("user", [ToolResultBlock("c0", "a" * 1000)])]
    once = await compact(TruncateToolResults(300), messages)
    twice = await compact(TruncateToolResults(100), once)
    assert result_contents(twice) == ["a" * 100 + "… [truncated 900 characters]"]


async def test_truncate_keeps_the_newest_results_per_block() -> None:
    messages = [TASK, call("a", "b", "c"), results("a", "b", "c", content="r" * 300)]
    out = await compact(TruncateToolResults(10, keep_recent=2), messages)
    assert result_contents(out) == ["r" * 10 + "… [truncated 290 characters]", "r" * 300, "r" * 300]


# ----------------------------------------------------------------------------- ClearToolResults


async def test_clear_results_keeps_the_newest_three_by_default() -> None:
    messages = run_of(5)
    out = await compact(ClearToolResults(), messages)
    contents = result_contents(out)
    assert contents[:2] == ["Done", "Done"]
    assert contents[2:] == result_contents(messages)[2:]
    assert all(a is b for a, b in zip(out[-6:], messages[-6:], strict=True))
    assert [m.tool_results[0].tool_use_id for m in out[3::2]] == ["c0", "c1", "c2", "c3", "c4"]


async def test_clear_results_counts_parallel_results_one_each() -> None:
    messages = [TASK, call("a", "b", "c"), results("a", "b", "c")]
    out = await compact(ClearToolResults(2, placeholder="[cleared]"), messages)
    assert result_contents(out)[0] == "[cleared]"
    assert result_contents(out)[1:] == result_contents(messages)[1:]


async def test_clear_results_keeps_text_next_to_the_results() -> None:
    answer = Message("user", [TextBlock("Here you go:"), ToolResultBlock("a", "y" * 90)])
    out = await compact(ClearToolResults(1), [TASK, call("a"), answer, *steps(1)])
    assert out[2] == Message("user", [TextBlock("Here you go:"), ToolResultBlock("a", "Done")])
    assert out[2].content[0] is answer.content[0]


async def test_clear_results_clears_errors_but_keeps_the_error_flag() -> None:
    messages = [TASK, call("a"), results("a", error="a"), *steps(1)]
    out = await compact(ClearToolResults(1), messages)
    (block,) = out[2].tool_results
    assert block == ToolResultBlock("a", "Done", is_error=True)


async def test_clear_results_replaces_images_too() -> None:
    content = [TextBlock("see"), PNG]
    messages = [TASK, call("a"), Message("user", [ToolResultBlock("a", content)]), *steps(1)]
    out = await compact(ClearToolResults(1), messages)
    assert result_contents(out)[0] == "Done"


async def test_clear_results_keeps_the_results_of_listed_tools() -> None:
    messages = [
        TASK,
        call("a", name="read_plan"),
        results("a"),
        call("b", name="search"),
        results("b"),
        Message("user", [ToolResultBlock("ghost", "y" * 50)]),  # its call is not in the input
        *steps(1),
    ]
    out = await compact(ClearToolResults(1, keep_tools=["read_plan"]), messages)
    assert result_contents(out)[:3] == [result_contents(messages)[0], "Done", "Done"]


@pytest.mark.parametrize(
    ("content", "cleared"),
    [
        ("x" * 39, False),  # 39 characters: 3 tokens of 13
        ("x" * 52, True),  # 4 tokens
        ([TextBlock("x" * 13), TextBlock("x" * 13)], False),  # 2 tokens
        ([TextBlock("x" * 26), TextBlock("x" * 26)], True),  # 4 tokens
        ([TextBlock("xxxxx"), PNG], True),  # an image is never small
    ],
)
async def test_clear_results_keeps_results_under_min_tokens(content: Any, cleared: bool) -> None:
    messages = [TASK, call("a"), Message("user", [ToolResultBlock("a", content)]), *steps(1)]
    strategy = ClearToolResults(1, min_tokens=4, counter=lambda text: len(text) // 13)
    out = await compact(strategy, messages)
    assert (result_contents(out)[0] == "Done") is cleared


@pytest.mark.parametrize("content", ["ok", "Done", [TextBlock("ok")]])
async def test_clear_results_leaves_results_no_longer_than_the_placeholder(content: Any) -> None:
    messages = [TASK, call("a"), Message("user", [ToolResultBlock("a", content)]), *steps(1)]
    assert await compact(ClearToolResults(1), messages) is messages


async def test_clear_results_with_keep_recent_zero_clears_the_newest_too() -> None:
    out = await compact(ClearToolResults(0), run_of(2))
    assert result_contents(out) == ["Done", "Done"]


# ----------------------------------------------------------------------------- ClearToolInputs


async def test_clear_inputs_empties_older_calls_and_keeps_ids_and_names() -> None:
    messages = [TASK, call("a", "b", text="Both."), results("a", "b"), *steps(2)]
    out = await compact(ClearToolInputs(3), messages)
    assert call_inputs(out) == [{}, *call_inputs(messages)[1:]]
    assert [(u.id, u.name) for u in out[1].tool_uses] == [("a", "search"), ("b", "search")]
    assert out[1].text == "Both."
    assert out[2] is messages[2]


async def test_clear_inputs_keeps_a_pending_call_and_skips_empty_inputs() -> None:
    messages = [
        TASK,
        Message("assistant", [ToolUseBlock("e", "now", {})]),
        Message("user", [ToolResultBlock("e", "t")]),
        *steps(1),
        call("pending"),
    ]
    out = await compact(ClearToolInputs(1), messages)
    assert out[1] is messages[1]  # its input was already empty
    assert call_inputs(out) == [{}, {}, {"query": "query for pending"}]


# ----------------------------------------------------------------------------- DropToolRounds


async def test_drop_rounds_removes_old_calls_with_their_results_and_keeps_the_text() -> None:
    messages = [
        TASK,
        call("a", text="Looking."),
        Message("user", [ToolResultBlock("a", "found"), TextBlock("Also check b.")]),
        call("b"),
        results("b"),
        *steps(1),
    ]
    out = await compact(DropToolRounds(1), messages)
    assert out == [
        TASK,
        Message("assistant", "Looking."),
        Message("user", "Also check b."),
        *messages[-2:],
    ]


async def test_drop_rounds_counts_rounds_with_calls_and_keeps_parallel_calls_together() -> None:
    chat = [Message("user", "Any news?"), Message("assistant", "None.")]
    messages = [TASK, *steps(1), call("p", "q"), results("p", "q"), *chat]
    out = await compact(DropToolRounds(1), messages)
    assert out == [TASK, call("p", "q"), results("p", "q"), *chat]


async def test_drop_rounds_does_not_merge_the_messages_left_next_to_each_other() -> None:
    messages = [TASK, call("a", text="One."), results("a"), call("b", text="Two."), results("b")]
    out = await compact(DropToolRounds(1), messages)
    assert [m.role for m in out] == ["user", "assistant", "assistant", "user"]


async def test_drop_rounds_keeps_a_round_whose_result_came_late() -> None:
    # `a`'s result arrives after `b`'s round: the rounds merge, nothing is orphaned.
    messages = [TASK, call("a", "b"), results("b"), call("c"), results("c", "a")]
    assert await compact(DropToolRounds(1), messages) is messages


async def test_drop_rounds_with_keep_recent_zero_drops_every_tool_round() -> None:
    out = await compact(DropToolRounds(0), [SYSTEM, TASK, *steps(2), call("pending")])
    assert out == [SYSTEM, TASK]


# ----------------------------------------------------------------------------- cost and memory


@pytest.mark.parametrize("make", ALL_KINDS, ids=KIND_IDS)
async def test_old_messages_map_to_the_same_output_objects_as_the_history_grows(
    make: Callable[[], Edit],
) -> None:
    strategy, history = make(), run_of(3)
    previous = await compact(strategy, history)
    for n in range(3, 30):
        history = [*history, *steps(1, first=n)]
        out = await compact(strategy, history)
        assert all(a is b for a, b in zip(out[:-4], previous, strict=False))
        assert out == await compact(make(), history)
        previous = out


async def test_a_message_once_partly_old_keeps_its_output_object_when_wholly_old() -> None:
    # Parallel results: `a` is long, `b` an error (never clipped). With keep_recent=1 the
    # message is first partly old (only `a` clipped), then wholly old: the same output.
    strategy = TruncateToolResults(10, keep_recent=1)
    history = [TASK, call("a", "b"), results("a", "b", error="b")]
    partly = (await compact(strategy, history))[2]
    wholly = (await compact(strategy, [*history, *steps(1)]))[2]
    assert partly is wholly
    assert result_contents([wholly])[1] == result_contents(history)[1]


async def test_each_result_is_measured_once_over_a_growing_run() -> None:
    measured: list[str] = []

    def counter(text: str) -> int:
        measured.append(text)
        return len(text) // 4

    strategy, history = ClearToolResults(2, min_tokens=5, counter=counter), run_of(0)
    for n in range(200):
        history = [*history, *steps(1, first=n)]
        await compact(strategy, history)
    assert len(measured) == 198  # every result but the two newest, once


async def test_a_sliding_window_reuses_the_edits_of_messages_it_saw_before() -> None:
    # FitTokens first: the input is a different window every call, not an extension.
    window, strategy, history = FitTokens(600), ClearToolResults(1), run_of(0)
    seen: dict[int, Message] = {}
    for n in range(40):
        history = [*history, *steps(1, first=n)]
        out = await compact(strategy, await window.compact(history))
        assert out == ClearToolResults(1).edit(window.fit(history))
        for message, output in zip(history, out, strict=False):
            if id(message) in seen:
                assert seen[id(message)] is output
        for message in out:
            if message.tool_results and message.tool_results[0].content == "Done":
                seen.setdefault(id(message), message)


async def test_a_changed_old_message_is_edited_afresh() -> None:
    strategy = TruncateToolResults(10)
    history = run_of(5)
    await compact(strategy, history)
    changed = Message("user", [ToolResultBlock("c1", "new " * 50)])
    edited = [*history[:5], changed, *history[6:]]
    out = await compact(strategy, edited)
    assert result_contents(out)[1] == "new new ne… [truncated 190 characters]"
    assert out == TruncateToolResults(10).edit(edited)


async def test_a_list_changed_in_place_between_calls_is_not_mistaken_for_the_old_one() -> None:
    strategy, history = ClearToolInputs(1), run_of(4)
    await compact(strategy, history)
    history[2] = call("c0", text="Replaced.")  # the same list object, edited by its owner
    out = await compact(strategy, history)
    assert out[2].text == "Replaced."
    assert out == ClearToolInputs(1).edit(history)


async def test_one_instance_shared_by_two_histories_stays_correct() -> None:
    strategy, first, second = ClearToolResults(1), run_of(3), run_of(6)
    for _ in range(3):
        assert await compact(strategy, first) == ClearToolResults(1).edit(first)
        assert await compact(strategy, second) == ClearToolResults(1).edit(second)


async def test_a_failing_counter_leaves_the_strategy_usable() -> None:
    fail = [True]

    def counter(text: str) -> int:
        if fail[0]:
            raise RuntimeError("tokenizer down")
        return len(text)

    strategy, history = ClearToolResults(1, min_tokens=3, counter=counter), run_of(3)
    with pytest.raises(RuntimeError, match="tokenizer down"):
        await compact(strategy, history)
    fail[0] = False
    assert await compact(strategy, history) == ClearToolResults(1).edit(history)


class TrackedMessage(Message):
    """A message that can be watched for being freed."""

    __slots__ = ("__weakref__",)


async def test_messages_of_an_abandoned_history_are_not_kept_alive() -> None:
    strategy = ClearToolResults(1)
    old = TrackedMessage("user", [ToolResultBlock("c0", "y" * 200)])
    gone = weakref.ref(old)
    await compact(strategy, [TASK, call("c0"), old, *steps(2, first=1)])
    await compact(strategy, run_of(3))  # a different history: not an extension
    del old
    gc.collect()
    assert gone() is None


# ----------------------------------------------------------------------------- invariants

SETTINGS = settings(max_examples=80, deadline=None)


def _random_history(seed: int, length: int) -> list[Message]:
    """An agentic history, with the odd late result, orphan and user follow-up."""
    rng = random.Random(seed)
    messages = [SYSTEM] * rng.randint(0, 1) + [TASK]
    ids = iter(range(10**6))
    open_calls: list[str] = []
    for _ in range(length):
        kind = rng.choice(["calls", "calls", "calls", "chat", "late", "orphan", "pending"])
        if kind == "chat":
            messages += [Message("user", "Follow-up?"), Message("assistant", "Sure.")]
        elif kind == "late" and open_calls:
            late = open_calls.pop(0)
            messages.append(Message("user", [ToolResultBlock(late, "late " * 20)]))
        elif kind == "orphan":
            messages.append(Message("user", [ToolResultBlock(f"x{next(ids)}", "lost " * 9)]))
        else:
            uses = [f"c{next(ids)}" for _ in range(rng.choice([1, 1, 2, 3]))]
            name = rng.choice(["keep", "search"])
            text = rng.choice([None, "Thinking."])
            messages.append(call(*uses, name=name, text=text))
            answered = uses if kind != "pending" else uses[1:]
            open_calls += [u for u in uses if u not in answered]
            if answered:
                blocks = [
                    ToolResultBlock(
                        u,
                        rng.choice(["ok", "r" * rng.randint(1, 300), [TextBlock("t" * 90), PNG]]),
                        is_error=rng.random() < 0.2,
                    )
                    for u in answered
                ]
                messages.append(Message("user", blocks))
    return messages


def _changed(message: Message, rng: random.Random) -> Message:
    """An equal copy of `message`, or one with its results' text changed."""
    if not message.tool_results or rng.random() < 0.5:
        return Message(message.role, message.content)
    return Message(
        message.role,
        [
            ToolResultBlock(b.tool_use_id, "changed " * rng.randint(1, 40), b.is_error)
            if isinstance(b, ToolResultBlock)
            else b
            for b in message.content
        ],
    )


def _fresh(kind: int, keep: int) -> Edit:
    return [
        lambda: TruncateToolResults(40, keep_recent=keep),
        lambda: ClearToolResults(keep, keep_tools=("keep",), min_tokens=3),
        lambda: ClearToolResults(keep),
        lambda: ClearToolInputs(keep),
        lambda: DropToolRounds(keep),
    ][kind]()


def _check_pairing(before: list[Message], after: list[Message]) -> None:
    calls = {b.id for m in after for b in m.tool_uses}
    answered = {b.tool_use_id for m in after for b in m.tool_results}
    orphans_before = {b.tool_use_id for m in before for b in m.tool_results} - {
        b.id for m in before for b in m.tool_uses
    }
    assert answered - calls <= orphans_before
    had_result = {b.tool_use_id for m in before for b in m.tool_results}
    assert not ((calls - answered) & had_result)


@SETTINGS
@given(
    kind=st.integers(0, 4),
    keep=st.integers(0, 4),
    seed=st.integers(0, 10**9),
    ops=st.lists(st.sampled_from(["grow", "grow", "grow", "same", "edit", "window"]), max_size=12),
)
def test_a_remembering_instance_answers_like_a_fresh_one(
    kind: int, keep: int, seed: int, ops: list[str]
) -> None:
    rng = random.Random(seed)
    full = _random_history(seed, 40)
    strategy, size, history = _fresh(kind, keep), rng.randint(1, 6), full[:1]
    for op in ops:
        if op == "grow":
            size = min(len(full), size + rng.randint(1, 4))
            history = full[:size]
        elif op == "edit" and len(history) > 2:
            at = rng.randrange(len(history))
            history = [*history[:at], _changed(history[at], rng), *history[at + 1 :]]
        elif op == "window":
            start = head_end(history)
            history = [*history[:start], *history[start + rng.randint(0, 3) :]]
        out = strategy.edit(history)
        expected = _fresh(kind, keep).edit(history)
        assert out == expected
        assert (out is history) == (expected is history)
        assert out[: head_end(history)] == history[: head_end(history)]
        _check_pairing(history, out)
        assert _fresh(kind, keep).edit(out) == out  # idempotent
