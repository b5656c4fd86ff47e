"""FitTokens and MiddleOut: windows within a token budget, cut only between rounds."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    ContextOverflowError,
    HeuristicTokenCounter,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    count_tokens,
    to_dict,
)
from pygents_ctx.context.strategies._rounds import round_starts
from pygents_ctx.context.strategies.budget import FitTokens, MiddleOut

# Counting characters with no per-message overhead makes every size below easy to check.
EXACT: dict[str, Any] = {"counter": len, "per_message_overhead": 0}

# ----------------------------------------------------------------------------- transcripts


def call(*ids: str) -> Message:
    return Message("assistant", [ToolUseBlock(i, "search", {"q": i}) for i in ids])


def results(*ids: str, error: str = "") -> Message:
    return Message("user", [ToolResultBlock(i, f"result {i}", is_error=i == error) for i in ids])


def transcript() -> list[Message]:
    """Rounds A=[2], B=[3, 4], C=[5], D=[6, 7, 8], E=[9].

    Tokens with EXACT counting: head 7; A 4, B 25, C 8, D 59, E 4; 107 in all.
    """
    return [
        Message("system", "sys"),
        Message("user", "task"),
        Message("assistant", "plan"),
        call("c1"),
        results("c1"),
        Message("assistant", "found it"),
        Message("user", "and then?"),
        call("c2", "c3"),
        results("c3", "c2", error="c2"),
        Message("assistant", "done"),
    ]


def questions(*sizes: int) -> list[Message]:
    """The task, then one round per size: question `q<n>` and an answer of `size - 2` chars."""
    messages = [Message("user", "task")]
    for number, size in enumerate(sizes, 1):
        messages += [Message("user", f"q{number}"), Message("assistant", "x" * (size - 2))]
    return messages


def label(message: Message) -> str:
    if message.tool_uses:
        return "call " + " ".join(use.id for use in message.tool_uses)
    if message.tool_results:
        return "result " + " ".join(sorted(r.tool_use_id for r in message.tool_results))
    return message.text


def labels(messages: list[Message]) -> list[str]:
    return [label(message) for message in messages]


def asked(messages: list[Message]) -> list[str]:
    return [m.text for m in messages if m.role == "user" and m.text.startswith("q")]


def snapshot(messages: list[Message]) -> bytes:
    return orjson.dumps([to_dict(message) for message in messages])


class CountingCounter:
    """A character counter that records the texts it was asked to count."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, text: str) -> int:
        self.seen.append(text)
        return len(text)


FROM_B = ["sys", "task", "call c1", "result c1", "found it", "and then?"]
FROM_B += ["call c2 c3", "result c2 c3", "done"]
FROM_C = ["sys", "task", "found it", "and then?", "call c2 c3", "result c2 c3", "done"]
FROM_D = ["sys", "task", "and then?", "call c2 c3", "result c2 c3", "done"]
ONLY_E = ["sys", "task", "done"]

BUDGETED = [FitTokens, MiddleOut]

# ----------------------------------------------------------------------------- shared


@pytest.mark.parametrize("cls", BUDGETED)
@pytest.mark.parametrize(
    "messages",
    [
        [],
        [Message("system", "sys")],
        [Message("system", "sys"), Message("user", "task")],
        [Message("user", "task"), Message("assistant", "answer")],
    ],
    ids=["empty", "system only", "system and task", "task and one round"],
)
async def test_budgeted_window_with_nothing_to_drop_returns_its_input(
    cls: Any, messages: list[Message]
) -> None:
    assert await cls(1000).compact(messages) is messages


@pytest.mark.parametrize("cls", BUDGETED)
@pytest.mark.parametrize("max_tokens", [107, 108, 10_000])
def test_budgeted_window_that_holds_the_history_returns_it(cls: Any, max_tokens: int) -> None:
    messages = transcript()

    assert cls(max_tokens, **EXACT).fit(messages) is messages


@pytest.mark.parametrize("cls", BUDGETED)
async def test_budgeted_window_leaves_its_input_untouched(cls: Any) -> None:
    messages = transcript()
    copy, frozen = list(messages), snapshot(messages)

    window = await cls(40, **EXACT).compact(messages)

    assert window is not messages
    assert all(a is b for a, b in zip(messages, copy, strict=True))
    assert snapshot(messages) == frozen
    assert all(any(m is kept for m in messages) for kept in window)


@pytest.mark.parametrize("cls", BUDGETED)
@pytest.mark.parametrize("max_tokens", range(1, 110, 3))
def test_budgeted_window_never_splits_a_call_from_its_result(cls: Any, max_tokens: int) -> None:
    window = cls(max_tokens, **EXACT).fit(transcript())

    calls = {use.id for m in window for use in m.tool_uses}
    answered = {r.tool_use_id for m in window for r in m.tool_results}
    assert calls == answered
    assert labels(window)[:2] == ["sys", "task"]
    assert labels(window)[-1] == "done"


@pytest.mark.parametrize("cls", BUDGETED)
def test_budgeted_window_keeps_a_call_still_waiting_for_its_result(cls: Any) -> None:
    messages = [*transcript(), call("c4")]  # 16 tokens more

    # The head and the pending call are 23 tokens: neither "plan" nor "done" (4) fits too.
    window = cls(26, **EXACT).fit(messages)

    assert labels(window) == ["sys", "task", "call c4"]


@pytest.mark.parametrize("cls", BUDGETED)
@pytest.mark.parametrize("max_tokens", [1, 10])
def test_budgeted_window_keeps_the_newest_round_over_budget_by_default(
    cls: Any, max_tokens: int
) -> None:
    assert labels(cls(max_tokens, **EXACT).fit(transcript())) == ONLY_E


@pytest.mark.parametrize("cls", BUDGETED)
@pytest.mark.parametrize(("max_tokens", "reserve_tokens"), [(10, 0), (30, 20)])
def test_budgeted_window_raises_when_asked_and_the_newest_round_is_over(
    cls: Any, max_tokens: int, reserve_tokens: int
) -> None:
    strategy = cls(max_tokens, reserve_tokens=reserve_tokens, on_overflow="raise", **EXACT)

    with pytest.raises(ContextOverflowError, match="11 tokens, over the budget of 10") as caught:
        strategy.fit(transcript())

    assert (caught.value.tokens, caught.value.budget) == (11, 10)


@pytest.mark.parametrize("cls", BUDGETED)
def test_budgeted_window_with_a_head_over_budget_keeps_it_or_raises(cls: Any) -> None:
    messages = [Message("system", "sys"), Message("user", "task")]

    assert cls(5, **EXACT).fit(messages) is messages
    with pytest.raises(ContextOverflowError) as caught:
        cls(5, on_overflow="raise", **EXACT).fit(messages)
    assert (caught.value.tokens, caught.value.budget) == (7, 5)


@pytest.mark.parametrize("cls", BUDGETED)
def test_budgeted_window_reserve_is_taken_off_the_budget(cls: Any) -> None:
    messages = transcript()

    assert cls(80, reserve_tokens=10, **EXACT).fit(messages) == cls(70, **EXACT).fit(messages)


@pytest.mark.parametrize("cls", BUDGETED)
def test_budgeted_window_counts_with_the_default_estimate(cls: Any) -> None:
    text = "the quick brown fox jumps over the lazy dog"  # 10 tokens
    messages = [Message("user", "task")] + [
        Message("user" if i % 2 else "assistant", text) for i in range(30)
    ]

    window = cls(200).fit(messages)

    assert count_tokens(window) <= 200 < count_tokens(window) + 28  # a round is 2 x 14 tokens
    assert cls(200, counter=HeuristicTokenCounter(2.0)).fit(messages) != window


@pytest.mark.parametrize("cls", BUDGETED)
def test_budgeted_window_counts_images_with_tokens_per_media(cls: Any) -> None:
    png = ImageBlock("image/png", b"\x89PNG")
    messages = [
        Message("user", "task"),
        Message("assistant", "a"),
        Message("user", [TextBlock("see"), png]),
        Message("assistant", [ToolUseBlock("c", "shot", {})]),
        Message("user", [ToolResultBlock("c", [png])]),
    ]
    # newest round: 3 + 100 + (4 + 2) + 100 = 209; the task 4, "a" 1
    strategy = cls(213, tokens_per_media=100, **EXACT)

    assert labels(strategy.fit(messages)) == ["task", "see", "call c", "result c"]
    assert cls(214, tokens_per_media=100, **EXACT).fit(messages) is messages


@pytest.mark.parametrize("cls", BUDGETED)
def test_budgeted_window_counts_per_message_overhead(cls: Any) -> None:
    messages = transcript()  # 10 messages, 107 characters

    assert cls(147, counter=len, per_message_overhead=4).fit(messages) is messages
    assert cls(146, counter=len, per_message_overhead=4).fit(messages) is not messages


@pytest.mark.parametrize("cls", BUDGETED)
def test_budgeted_window_never_counts_a_message_twice(cls: Any) -> None:
    counter = CountingCounter()
    strategy = cls(60, counter=counter, per_message_overhead=0)
    messages = transcript()

    first = strategy.fit(messages)
    counted = len(counter.seen)
    second = strategy.fit(messages)

    assert first == second
    assert counted > 0
    assert len(counter.seen) == counted


def tool_run(steps: int) -> list[Message]:
    """The task, then `steps` rounds of one call and its result (29 tokens each)."""
    messages = [Message("user", "task")]
    for step in range(steps):
        messages += [call(f"c{step:03}"), results(f"c{step:03}")]
    return messages


def test_fit_tokens_counts_only_the_messages_it_keeps() -> None:
    counter = CountingCounter()

    window = FitTokens(70, counter=counter, per_message_overhead=0).fit(tool_run(1000))

    assert labels(window) == ["task", "call c998", "result c998", "call c999", "result c999"]
    assert len(counter.seen) < 20  # the task and the newest three rounds, not 2,001 messages


def test_middle_out_counts_only_the_messages_it_could_keep() -> None:
    counter = CountingCounter()

    window = MiddleOut(70, counter=counter, per_message_overhead=0).fit(tool_run(1000))

    assert labels(window) == ["task", "call c000", "result c000", "call c999", "result c999"]
    assert len(counter.seen) < 30  # the task, the oldest and the newest rounds


@pytest.mark.parametrize("cls", BUDGETED)
@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"max_tokens": 100}, "(100)"),
        ({"max_tokens": 100, "reserve_tokens": 20}, "(100, reserve_tokens=20)"),
        (
            {"max_tokens": 5, "counter": len, "on_overflow": "raise"},
            "(5, counter=<built-in function len>, on_overflow='raise')",
        ),
        (
            {"max_tokens": 5, "per_message_overhead": 0, "tokens_per_media": 85},
            "(5, per_message_overhead=0, tokens_per_media=85)",
        ),
    ],
)
def test_budgeted_window_repr_shows_settings_that_are_not_defaults(
    cls: Any, kwargs: dict[str, Any], text: str
) -> None:
    assert repr(cls(**kwargs)) == cls.__name__ + text


@pytest.mark.parametrize("cls", BUDGETED)
@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"max_tokens": 0}, ValueError, "max_tokens must be at least 1, not 0"),
        ({"max_tokens": 10.5}, TypeError, "max_tokens must be an int, not float"),
        ({"max_tokens": True}, TypeError, "max_tokens must be an int, not bool"),
        ({"max_tokens": 10, "reserve_tokens": -1}, ValueError, "reserve_tokens must be"),
        ({"max_tokens": 10, "reserve_tokens": 10}, ValueError, "less than max_tokens"),
        ({"max_tokens": 10, "on_overflow": "drop"}, ValueError, "'keep' or 'raise'"),
        ({"max_tokens": 10, "counter": "len"}, TypeError, "counter must be a callable"),
        ({"max_tokens": 10, "per_message_overhead": -1}, ValueError, "per_message_overhead"),
        ({"max_tokens": 10, "tokens_per_media": None}, TypeError, "tokens_per_media"),
    ],
)
def test_budgeted_window_rejects_bad_parameters(
    cls: Any, kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        cls(**kwargs)


def test_budgeted_window_names_itself_in_errors() -> None:
    with pytest.raises(ValueError, match=r"^MiddleOut max_tokens"):
        MiddleOut(0)
    with pytest.raises(ContextOverflowError, match=r"^MiddleOut: "):
        MiddleOut(1, on_overflow="raise").fit(transcript())


# ----------------------------------------------------------------------------- FitTokens


@pytest.mark.parametrize(
    ("max_tokens", "expected"),
    [
        (106, FROM_B),  # 103 tokens
        (103, FROM_B),
        (102, FROM_C),  # 78
        (78, FROM_C),
        (77, FROM_D),  # 70
        (70, FROM_D),
        (69, ONLY_E),  # 11
        (11, ONLY_E),
    ],
)
def test_fit_tokens_keeps_the_newest_whole_rounds_that_fit(
    max_tokens: int, expected: list[str]
) -> None:
    assert labels(FitTokens(max_tokens, **EXACT).fit(transcript())) == expected


def test_fit_tokens_stops_at_the_first_round_that_does_not_fit() -> None:
    messages = questions(10, 50, 10, 10)  # an older, smaller round would fit: not taken

    assert asked(FitTokens(35, **EXACT).fit(messages)) == ["q3", "q4"]


# ----------------------------------------------------------------------------- MiddleOut


@pytest.mark.parametrize(
    ("max_tokens", "expected"),
    [
        (14, ["q6"]),
        (23, ["q6"]),
        (24, ["q1", "q6"]),
        (34, ["q1", "q5", "q6"]),
        (44, ["q1", "q2", "q5", "q6"]),
        (53, ["q1", "q2", "q5", "q6"]),
        (54, ["q1", "q2", "q4", "q5", "q6"]),
        (63, ["q1", "q2", "q4", "q5", "q6"]),
    ],
)
def test_middle_out_takes_rounds_from_the_start_and_the_end_in_turn(
    max_tokens: int, expected: list[str]
) -> None:
    # The task is 4 tokens, each round 10: the newest, then the oldest, the
    # second newest, the second oldest, ... while they fit.
    messages = questions(10, 10, 10, 10, 10, 10)

    window = MiddleOut(max_tokens, **EXACT).fit(messages)

    assert asked(window) == expected
    assert window[0] is messages[0]


def test_middle_out_removes_the_middle_round_first() -> None:
    messages = questions(10, 10, 10, 10, 10)

    assert asked(MiddleOut(53, **EXACT).fit(messages)) == ["q1", "q2", "q4", "q5"]


@pytest.mark.parametrize(
    ("sizes", "expected"),
    [
        ((100, 10, 10, 10, 10, 10), ["q3", "q4", "q5", "q6"]),  # the start stops at once
        ((10, 10, 10, 10, 100, 10), ["q1", "q2", "q3", "q6"]),  # the end stops at once
    ],
)
def test_middle_out_goes_on_from_one_side_when_the_other_is_full(
    sizes: tuple[int, ...], expected: list[str]
) -> None:
    assert asked(MiddleOut(50, **EXACT).fit(questions(*sizes))) == expected


A = ["plan"]
B = ["call c1", "result c1"]
C = ["found it"]
D = ["and then?", "call c2 c3", "result c2 c3"]
E = ["done"]


@pytest.mark.parametrize(
    ("max_tokens", "expected"),
    [
        # The head and E are 11 tokens; then A (4), D (59), B (25), C (8) in turn.
        (106, [*A, *B, *D, *E]),  # 99: C does not fit, from either side
        (99, [*A, *B, *D, *E]),
        (98, [*A, *C, *D, *E]),  # 82: B does not fit, the end goes on with C
        (82, [*A, *C, *D, *E]),
        (81, [*A, *D, *E]),  # 74
        (74, [*A, *D, *E]),
        (73, [*A, *B, *C, *E]),  # 48: D does not fit, the start goes on
        (48, [*A, *B, *C, *E]),
        (47, [*A, *B, *E]),  # 40
        (39, [*A, *E]),  # 15
        (15, [*A, *E]),
        (14, E),  # 11: only what must stay
    ],
)
def test_middle_out_keeps_tool_rounds_whole(max_tokens: int, expected: list[str]) -> None:
    assert labels(MiddleOut(max_tokens, **EXACT).fit(transcript())) == ["sys", "task", *expected]


# ----------------------------------------------------------------------------- properties


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Head, task, then text answers, follow-ups and (parallel) tool steps of drawn sizes."""
    messages = [Message("system", "s" * draw(st.integers(1, 30)))] * draw(st.integers(0, 1))
    messages.append(Message("user", "task"))
    for step, kind in enumerate(draw(st.lists(st.sampled_from("tfc"), max_size=20))):
        if kind == "t":
            messages.append(Message("assistant", "x" * draw(st.integers(1, 60))))
        elif kind == "f":
            messages.append(Message("user", "why?"))
        else:
            ids = [f"c{step}.{i}" for i in range(draw(st.integers(1, 3)))]
            messages += [call(*ids), results(*reversed(ids))]
    return messages


@settings(max_examples=150, deadline=None)
@given(messages=histories(), max_tokens=st.integers(1, 600))
def test_middle_out_removes_one_stretch_and_fits_when_it_can(
    messages: list[Message], max_tokens: int
) -> None:
    window = MiddleOut(max_tokens, **EXACT).fit(messages)
    everything = FitTokens(10**9, **EXACT).fit(messages)
    newest = FitTokens(1, **EXACT).fit(messages)  # head, task and the newest round

    assert everything is messages
    kept_start = next(
        (i for i, (a, b) in enumerate(zip(window, messages, strict=False)) if a is not b),
        len(window),
    )
    rest = window[kept_start:]
    assert rest == messages[len(messages) - len(rest) :]  # one stretch is gone, no more
    if count_tokens(newest, len, per_message_overhead=0) <= max_tokens:
        assert count_tokens(window, len, per_message_overhead=0) <= max_tokens
    else:
        assert window == newest
    # Never fewer tokens than the newest rounds FitTokens keeps: both ends are filled.
    assert len(window) >= len(newest)


def middle_out_oracle(messages: list[Message], budget: int) -> list[Message]:
    """MiddleOut as documented, over every round of the history (EXACT counting)."""
    starts = round_starts(messages)
    if not starts:
        return messages
    bounds = [*starts, len(messages)]

    def size(lo: int, hi: int) -> int:
        return count_tokens(messages[bounds[lo] : bounds[hi]], len, per_message_overhead=0)

    used = count_tokens(messages[: starts[0]], len, per_message_overhead=0)
    first, last = 0, len(starts) - 1  # kept: rounds [0, first) and [last, len(starts))
    used += size(last, last + 1)
    if used > budget:
        return messages if last == 0 else [*messages[: bounds[0]], *messages[bounds[last] :]]
    turn, open_ = 0, [True, True]
    while first < last and any(open_):
        side = turn if open_[turn] else 1 - turn
        grown = size(first, first + 1) if side == 0 else size(last - 1, last)
        if used + grown > budget:
            open_[side] = False
        elif side == 0:
            used, first = used + grown, first + 1
        else:
            used, last = used + grown, last - 1
        turn = 1 - side
    if first == last:
        return messages
    return [*messages[: bounds[first]], *messages[bounds[last] :]]


@st.composite
def messy_histories(draw: st.DrawFn) -> list[Message]:
    """Histories with what real ones sometimes hold: calls answered late, in parts or
    never, results whose call is not there, and text between a call and its result."""
    messages = [Message("system", "sys")] * draw(st.integers(0, 1)) + [Message("user", "task")]
    kinds = st.sampled_from(["text", "why", "call", "call", "late", "split", "never", "orphan"])
    for step, kind in enumerate(draw(st.lists(kinds, max_size=24))):
        text = "x" * draw(st.integers(1, 40))
        ids = [f"c{step}.{i}" for i in range(draw(st.integers(1, 3)))]
        if kind == "text":
            messages.append(Message("assistant", text))
        elif kind == "why":
            messages.append(Message("user", text))
        elif kind == "call":
            messages += [call(*ids), results(*ids)]
        elif kind == "late":
            messages += [call(*ids), Message("assistant", text), results(*ids)]
        elif kind == "split":
            messages += [call(*ids, f"s{step}"), results(*ids), results(f"s{step}")]
        elif kind == "never":
            messages.append(call(*ids))
        else:
            messages.append(results(f"gone{step}"))
    return messages


@settings(max_examples=300, deadline=None)
@given(messages=messy_histories(), max_tokens=st.integers(1, 500))
def test_middle_out_finds_the_same_window_as_reading_every_round(
    messages: list[Message], max_tokens: int
) -> None:
    expected = middle_out_oracle(messages, max_tokens)

    window = MiddleOut(max_tokens, **EXACT).fit(messages)

    assert [id(m) for m in window] == [id(m) for m in expected]
    assert (window is messages) == (expected is messages)


def test_middle_out_keeps_pairs_when_a_result_comes_twice() -> None:
    messages = [
        Message("user", "task"),
        call("c1"),
        results("c1"),
        Message("assistant", "x" * 30),
        results("c1"),  # again, much later
        Message("user", "y" * 30),
        Message("assistant", "done"),
    ]

    for max_tokens in range(1, 120):
        window = MiddleOut(max_tokens, **EXACT).fit(messages)
        calls = {use.id for m in window for use in m.tool_uses}
        answered = {r.tool_use_id for m in window for r in m.tool_results}
        assert answered <= calls, max_tokens


def test_middle_out_keeps_a_call_with_a_result_that_comes_after_the_budget_runs_out() -> None:
    messages = [
        Message("user", "task"),  # 4
        call("c1"),  # 16
        Message("assistant", "x" * 30),  # between the call and its result
        results("c1"),  # 9
        Message("assistant", "y" * 20),
        Message("assistant", "done"),
    ]

    window = MiddleOut(30, **EXACT).fit(messages)

    assert labels(window) == ["task", "y" * 20, "done"]


@pytest.mark.parametrize(
    "middle",
    [[call("never")], [results("gone")], [results("early"), call("early")]],
    ids=["call never answered", "result without its call", "result before its call"],
)
def test_middle_out_reads_every_round_of_a_history_with_unpaired_tool_blocks(
    middle: list[Message],
) -> None:
    messages = [*tool_run(3), *middle, *tool_run(30)[1:]]

    window = MiddleOut(100, **EXACT).fit(messages)

    assert [id(m) for m in window] == [id(m) for m in middle_out_oracle(messages, 100)]


def test_middle_out_does_not_read_every_round_of_a_paired_history(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def every_round(messages: list[Message]) -> list[int]:
        raise AssertionError("read the whole history")

    monkeypatch.setattr("pygents_ctx.context.strategies.budget.round_starts", every_round)
    messages = [Message("user", "task")]
    for step in range(300):  # rounds of 4, 16 + 2, 9 + 2 and 16 + 2, 9 + 2 tokens
        messages += [Message("user", "go"), call(f"a{step:02}"), results(f"a{step:02}")]
        messages += [call(f"b{step:02}"), results(f"b{step:02}")]

    for max_tokens in range(40, 200, 7):
        window = MiddleOut(max_tokens, **EXACT).fit(messages)
        assert 0 < len(window) < len(messages)
