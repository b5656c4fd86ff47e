"""SlidingWindow, TrimRounds and Truncate: windows by count, cut only between rounds."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    ContextOverflowError,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    to_dict,
)
from pygents_ctx.context.strategies.window import SlidingWindow, TrimRounds, Truncate

PNG = ImageBlock("image/png", b"\x89PNG\r\n\x1a\n")

# ----------------------------------------------------------------------------- transcripts


def call(*ids: str, text: str | None = None) -> Message:
    """An assistant message calling `search` once per id (parallel calls if several)."""
    uses = [ToolUseBlock(i, "search", {"q": i}) for i in ids]
    return Message("assistant", [TextBlock(text), *uses] if text else uses)


def results(*ids: str, error: str = "") -> Message:
    """The user message answering the calls `ids`; the call `error` failed."""
    return Message("user", [ToolResultBlock(i, f"result {i}", is_error=i == error) for i in ids])


def transcript() -> list[Message]:
    """An agentic run whose rounds are A=[2], B=[3, 4], C=[5], D=[6, 7, 8], E=[9].

    Characters (as Truncate counts them): head 7; A 4, B 25, C 8, D 59, E 4; 107 in all.
    """
    return [
        Message("system", "sys"),
        Message("user", "task"),
        Message("assistant", "plan"),  # A: the first message after the task
        call("c1"),  # B: an assistant message that does not follow a question
        results("c1"),
        Message("assistant", "found it"),  # C: follows a tool result
        Message("user", "and then?"),  # D: a follow-up question, with its answer
        call("c2", "c3"),
        results("c3", "c2", error="c2"),
        Message("assistant", "done"),  # E
    ]


def label(message: Message) -> str:
    if message.tool_uses:
        return "call " + " ".join(use.id for use in message.tool_uses)
    if message.tool_results:
        return "result " + " ".join(sorted(r.tool_use_id for r in message.tool_results))
    return message.text


def labels(messages: list[Message]) -> list[str]:
    return [label(message) for message in messages]


def snapshot(messages: list[Message]) -> bytes:
    return orjson.dumps([to_dict(message) for message in messages])


ROUND_STARTS = {2, 3, 5, 6, 9, 10}  # where a window over transcript() may begin after the head
FROM_C = ["sys", "task", "found it", "and then?", "call c2 c3", "result c2 c3", "done"]
FROM_D = ["sys", "task", "and then?", "call c2 c3", "result c2 c3", "done"]
ONLY_E = ["sys", "task", "done"]

WINDOWS = [
    SlidingWindow(4),
    SlidingWindow(1),
    TrimRounds(2),
    Truncate(max_messages=4),
    Truncate(max_chars=60),
    Truncate(max_messages=1, max_chars=1),
]


def run_fit(strategy: Any, messages: list[Message]) -> list[Message]:
    out: list[Message] = strategy.fit(messages)
    return out


# ----------------------------------------------------------------------------- the contract


@pytest.mark.parametrize("strategy", WINDOWS, ids=repr)
async def test_window_leaves_its_input_untouched_and_reuses_its_messages(strategy: Any) -> None:
    messages = transcript()
    copy, frozen = list(messages), snapshot(messages)

    window = await strategy.compact(messages)

    assert messages == copy
    assert all(a is b for a, b in zip(messages, copy, strict=True))
    assert snapshot(messages) == frozen
    assert window is not messages
    assert window[:2] == messages[:2]
    cut = len(messages) - (len(window) - 2)
    assert cut in ROUND_STARTS
    assert all(a is b for a, b in zip(window, [*messages[:2], *messages[cut:]], strict=True))


@pytest.mark.parametrize("strategy", WINDOWS, ids=repr)
@pytest.mark.parametrize(
    "messages",
    [
        [],
        [Message("system", "sys")],
        [Message("system", "sys"), Message("system", "more"), Message("user", "task")],
        [Message("user", "task"), Message("assistant", "answer")],
    ],
    ids=["empty", "system only", "system and task", "task and one round"],
)
async def test_window_with_nothing_to_drop_returns_its_input(
    strategy: Any, messages: list[Message]
) -> None:
    assert await strategy.compact(messages) is messages


@pytest.mark.parametrize(
    "strategy",
    [
        SlidingWindow(10),
        SlidingWindow(),
        TrimRounds(5),
        TrimRounds(100),
        Truncate(max_messages=10),
        Truncate(max_chars=107),
        Truncate(max_messages=99),
    ],
    ids=repr,
)
def test_window_that_holds_the_whole_history_returns_it(strategy: Any) -> None:
    messages = transcript()

    assert run_fit(strategy, messages) is messages


@pytest.mark.parametrize(
    "build",
    [SlidingWindow, lambda n: Truncate(max_messages=n), lambda n: Truncate(max_chars=n * 10)],
    ids=["SlidingWindow", "Truncate(max_messages)", "Truncate(max_chars)"],
)
@pytest.mark.parametrize("limit", range(1, 12))
def test_window_never_splits_a_call_from_its_result(build: Any, limit: int) -> None:
    messages = transcript()

    window = run_fit(build(limit), messages)

    cut = len(messages) - (len(window) - 2)
    assert cut in ROUND_STARTS
    calls = {use.id for m in window for use in m.tool_uses}
    answered = {r.tool_use_id for m in window for r in m.tool_results}
    assert calls == answered


@pytest.mark.parametrize("strategy", WINDOWS, ids=repr)
def test_window_keeps_a_call_still_waiting_for_its_result(strategy: Any) -> None:
    messages = [*transcript(), call("c4")]

    window = run_fit(strategy, messages)

    assert labels(window)[:2] == ["sys", "task"]
    assert window[-1] is messages[-1]
    assert labels(window)[-1] == "call c4"


@pytest.mark.parametrize("strategy", WINDOWS, ids=repr)
def test_window_is_the_same_on_every_call(strategy: Any) -> None:
    messages = transcript()

    assert run_fit(strategy, messages) == run_fit(strategy, messages)


# ----------------------------------------------------------------------------- SlidingWindow


@pytest.mark.parametrize(
    ("max_messages", "expected"),
    [
        (9, ["sys", "task", "call c1", "result c1", *FROM_C[2:]]),
        (8, FROM_C),
        (7, FROM_C),
        (6, FROM_D),
        (5, ONLY_E),
        (3, ONLY_E),
    ],
)
def test_sliding_window_keeps_newest_whole_rounds_within_the_count(
    max_messages: int, expected: list[str]
) -> None:
    window = SlidingWindow(max_messages).fit(transcript())

    assert labels(window) == expected
    assert len(window) <= max_messages


@pytest.mark.parametrize("max_messages", [1, 2, 3, 4])
def test_sliding_window_keeps_the_newest_round_whole_even_over_the_count(
    max_messages: int,
) -> None:
    messages = transcript()[:9]  # ends with round D: a question, parallel calls, results

    window = SlidingWindow(max_messages).fit(messages)

    assert labels(window) == FROM_D[:-1]


def test_sliding_window_keeps_a_head_longer_than_the_count() -> None:
    messages = [Message("system", f"rule {i}") for i in range(5)] + [
        Message("user", "task"),
        Message("assistant", "a1"),
        Message("user", "u2"),
        Message("assistant", "a2"),
    ]

    window = SlidingWindow(3).fit(messages)

    assert labels(window) == ["rule 0", "rule 1", "rule 2", "rule 3", "rule 4", "task", "u2", "a2"]


def test_sliding_window_defaults_to_100_messages() -> None:
    history = [Message("user", "task")] + [
        Message("assistant" if i % 2 else "user", f"turn {i}") for i in range(200)
    ]

    window = SlidingWindow().fit(history)

    assert len(window) == 99  # the task and the newest 49 question-answer rounds
    assert labels(window)[:2] == ["task", "turn 102"]
    assert repr(SlidingWindow()) == "SlidingWindow(max_messages=100)"


# ----------------------------------------------------------------------------- TrimRounds


def test_trim_rounds_keeps_a_follow_up_question_with_its_answer() -> None:
    system, task, a1, u2, a2, u3, a3 = (
        Message(role, text)
        for role, text in [
            ("system", "system"),
            ("user", "task"),
            ("assistant", "a1"),
            ("user", "u2"),
            ("assistant", "a2"),
            ("user", "u3"),
            ("assistant", "a3"),
        ]
    )

    window = TrimRounds(1).fit([system, task, a1, u2, a2, u3, a3])

    assert window == [system, task, u3, a3]


@pytest.mark.parametrize(
    ("max_rounds", "expected"),
    [
        (1, ONLY_E),
        (2, FROM_D),
        (3, FROM_C),
        (4, ["sys", "task", "call c1", "result c1", *FROM_C[2:]]),
    ],
)
def test_trim_rounds_keeps_the_newest_rounds(max_rounds: int, expected: list[str]) -> None:
    assert labels(TrimRounds(max_rounds).fit(transcript())) == expected


def test_trim_rounds_counts_each_tool_step_as_a_round() -> None:
    messages = [Message("user", "task")]
    for step in range(5):
        messages += [call(f"c{step}"), results(f"c{step}")]

    window = TrimRounds(2).fit(messages)

    assert labels(window) == ["task", "call c3", "result c3", "call c4", "result c4"]


def test_trim_rounds_without_a_task_counts_rounds_from_the_first_message() -> None:
    messages = [Message("system", "sys"), Message("assistant", "hello"), Message("user", "hi")]

    assert labels(TrimRounds(1).fit(messages)) == ["sys", "hi"]


def test_trim_rounds_repr_shows_its_count() -> None:
    assert repr(TrimRounds(3)) == "TrimRounds(3)"


# ----------------------------------------------------------------------------- Truncate


@pytest.mark.parametrize("max_messages", range(1, 11))
def test_truncate_by_count_keeps_what_sliding_window_keeps(max_messages: int) -> None:
    messages = transcript()

    assert Truncate(max_messages=max_messages).fit(messages) == SlidingWindow(max_messages).fit(
        messages
    )


@pytest.mark.parametrize(
    ("max_chars", "expected"),
    [
        (106, ["sys", "task", "call c1", "result c1", *FROM_C[2:]]),  # 103 characters
        (103, ["sys", "task", "call c1", "result c1", *FROM_C[2:]]),
        (102, FROM_C),  # 78
        (78, FROM_C),
        (77, FROM_D),  # 70
        (70, FROM_D),
        (69, ONLY_E),  # 11
        (11, ONLY_E),
    ],
)
def test_truncate_by_characters_keeps_newest_whole_rounds_within_them(
    max_chars: int, expected: list[str]
) -> None:
    assert labels(Truncate(max_chars=max_chars).fit(transcript())) == expected


@pytest.mark.parametrize(
    ("newest_round", "chars"),
    [
        ([Message("assistant", "hello")], 5),
        ([Message("assistant", "日本語")], 3),
        ([Message("user", [TextBlock("hi"), PNG])], 2),
        ([Message("assistant", [TextBlock("ab"), ToolUseBlock("c", "ls", {})])], 6),
        ([Message("assistant", [ToolUseBlock("c", "ls", {"q": "é"})])], 11),
        (
            [
                Message("assistant", [ToolUseBlock("c", "ls", {})]),
                Message("user", [ToolResultBlock("c", "12345")]),
            ],
            9,
        ),
        (
            [
                Message("assistant", [ToolUseBlock("c", "ls", {})]),
                Message("user", [ToolResultBlock("c", [TextBlock("abc"), PNG], is_error=True)]),
            ],
            7,
        ),
    ],
    ids=["text", "non-ascii", "image", "text and call", "call input", "result", "result blocks"],
)
def test_truncate_counts_text_tool_names_inputs_and_results_but_not_images(
    newest_round: list[Message], chars: int
) -> None:
    messages = [Message("user", "t"), Message("assistant", "a"), *newest_round]

    assert Truncate(max_chars=2 + chars).fit(messages) is messages
    assert Truncate(max_chars=1 + chars).fit(messages) == [messages[0], *newest_round]


def test_truncate_counts_an_input_orjson_cannot_encode_by_its_repr() -> None:
    class Point:
        def __repr__(self) -> str:
            return "P"

    messages = [
        Message("user", "t"),
        Message("assistant", "a"),
        Message("assistant", [ToolUseBlock("c", "ls", {"p": Point()})]),
    ]
    chars = len("ls") + len('{"p": "P"}')

    assert Truncate(max_chars=2 + chars).fit(messages) is messages
    assert Truncate(max_chars=1 + chars).fit(messages) == [messages[0], messages[2]]


def test_truncate_applies_both_limits() -> None:
    messages = transcript()

    assert labels(Truncate(max_messages=9, max_chars=102).fit(messages)) == FROM_C
    assert labels(Truncate(max_messages=6, max_chars=1000).fit(messages)) == FROM_D


@pytest.mark.parametrize(
    ("limits", "size", "limit", "unit"),
    [
        ({"max_messages": 2}, 3, 2, "messages, over max_messages=2"),
        ({"max_chars": 10}, 11, 10, "characters, over max_chars=10"),
        ({"max_messages": 2, "max_chars": 10}, 3, 2, "messages, over max_messages=2"),
        ({"max_messages": 5, "max_chars": 10}, 11, 10, "characters, over max_chars=10"),
    ],
)
def test_truncate_raises_when_even_the_newest_round_is_over_a_limit(
    limits: dict[str, int], size: int, limit: int, unit: str
) -> None:
    with pytest.raises(ContextOverflowError, match=unit) as caught:
        Truncate(**limits, on_overflow="raise").fit(transcript())

    assert (caught.value.tokens, caught.value.budget) == (size, limit)


@pytest.mark.parametrize("limits", [{"max_messages": 2}, {"max_chars": 10}])
def test_truncate_keeps_the_newest_round_over_a_limit_by_default(limits: dict[str, int]) -> None:
    assert labels(Truncate(**limits).fit(transcript())) == ONLY_E


def test_truncate_with_a_head_over_the_limit_keeps_it_or_raises() -> None:
    messages = [Message("system", "sys"), Message("user", "task")]

    assert Truncate(max_messages=1).fit(messages) is messages
    with pytest.raises(ContextOverflowError) as caught:
        Truncate(max_chars=6, on_overflow="raise").fit(messages)
    assert (caught.value.tokens, caught.value.budget) == (7, 6)


def test_truncate_repr_shows_its_limits() -> None:
    assert repr(Truncate(max_chars=500, on_overflow="raise")) == (
        "Truncate(max_messages=None, max_chars=500, on_overflow='raise')"
    )


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: SlidingWindow(0), "SlidingWindow max_messages must be at least 1, not 0"),
        (lambda: SlidingWindow(2.5), "SlidingWindow max_messages must be an int"),  # type: ignore[arg-type]
        (lambda: SlidingWindow(True), "SlidingWindow max_messages must be an int"),
        (lambda: TrimRounds(0), "TrimRounds max_rounds must be at least 1, not 0"),
        (lambda: TrimRounds("3"), "TrimRounds max_rounds must be an int"),  # type: ignore[arg-type]
        (lambda: Truncate(), "give max_messages, max_chars, or both"),
        (lambda: Truncate(max_messages=0), "Truncate max_messages must be at least 1, not 0"),
        (lambda: Truncate(max_chars=-5), "Truncate max_chars must be at least 1, not -5"),
        (lambda: Truncate(max_chars=1.0), "Truncate max_chars must be an int"),  # type: ignore[arg-type]
        (
            lambda: Truncate(max_chars=10, on_overflow="drop"),  # type: ignore[arg-type]
            "Truncate on_overflow must be 'keep' or 'raise'",
        ),
    ],
)
def test_window_rejects_bad_parameters(build: Any, message: str) -> None:
    # A value of the wrong type is a TypeError, one out of range a ValueError.
    error = TypeError if "must be an int" in message else ValueError
    with pytest.raises(error, match=message):
        build()


# ----------------------------------------------------------------------------- properties


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Head, task, then text answers, follow-ups and (parallel) tool steps."""
    messages = [Message("system", "sys")] * draw(st.integers(0, 2)) + [Message("user", "task")]
    for step, kind in enumerate(draw(st.lists(st.sampled_from("tfc"), max_size=20))):
        if kind == "t":
            messages.append(Message("assistant", "x" * draw(st.integers(0, 50))))
        elif kind == "f":
            messages.append(Message("user", "why?"))
        else:
            ids = [f"c{step}.{i}" for i in range(draw(st.integers(1, 3)))]
            messages += [call(*ids), results(*reversed(ids))]
    return messages


def plain_user(message: Message) -> bool:
    return message.role == "user" and not message.tool_results


def head_size(messages: list[Message]) -> int:
    return next(i for i, m in enumerate(messages) if m.role == "user") + 1


def newest_round_size(messages: list[Message]) -> int:
    """From the spec's rule (results here always directly follow their calls)."""
    head = head_size(messages)
    starts = [
        i
        for i in range(head, len(messages))
        if i == head
        or plain_user(messages[i])
        or (messages[i].role == "assistant" and not plain_user(messages[i - 1]))
    ]
    return len(messages) - starts[-1] if starts else 0


@settings(max_examples=100, deadline=None)
@given(messages=histories(), max_messages=st.integers(1, 30))
def test_sliding_window_holds_at_most_max_messages_unless_one_round_is_more(
    messages: list[Message], max_messages: int
) -> None:
    smallest = head_size(messages) + newest_round_size(messages)

    window = SlidingWindow(max_messages).fit(messages)

    assert len(window) <= max(max_messages, smallest)
    assert (window is messages) == (len(messages) <= max_messages or len(window) == len(messages))


@settings(max_examples=100, deadline=None)
@given(messages=histories(), max_rounds=st.integers(1, 10))
def test_trim_rounds_keeps_one_more_round_for_each_more_allowed(
    messages: list[Message], max_rounds: int
) -> None:
    head = head_size(messages)
    fewer = TrimRounds(max_rounds).fit(messages)
    more = TrimRounds(max_rounds + 1).fit(messages)

    tail = fewer[head:]
    assert more[:head] == fewer[:head] == messages[:head]
    assert more[len(more) - len(tail) :] == tail
    assert len(more) >= len(fewer)
