"""Reading stored rows back: `decode_rows` (a history's read) agrees with `decode` row by row."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import Message, TextBlock, count_message_tokens, to_dict
from pygents_ctx.context.stores._common import decode, decode_rows, encode_message
from tests.property.test_message_properties import messages

plain_messages = st.builds(
    Message,
    st.sampled_from(["user", "assistant", "system"]),
    st.lists(st.builds(TextBlock, st.text(max_size=30)), max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(
    history=st.lists(
        st.tuples(plain_messages | messages, st.integers(min_value=0, max_value=2**31 - 1)),
        max_size=8,
    )
)
def test_decode_rows_gives_each_message_with_its_stored_token_count(
    history: list[tuple[Message, int]],
) -> None:
    rows = [
        (position, tokens, encode_message(message))
        for position, (message, tokens) in enumerate(history)
    ]

    read = decode_rows("s", rows)

    assert read == [message for message, _ in history]
    assert read == [decode("s", *row) for row in rows]
    assert [count_message_tokens(message) for message in read] == [t for _, t in history]


@pytest.mark.parametrize(
    "data",
    [
        b"{not json",
        b'{"type": "text", "text": "a block"}',
        orjson.dumps({"role": "robot", "content": [{"type": "text", "text": "hi"}]}),
    ],
)
def test_decode_rows_names_the_row_that_cannot_be_read(data: bytes) -> None:
    good = encode_message(Message("user", "fine"))
    rows = [(7, 1, good), (8, 1, data), (9, 1, good)]

    with pytest.raises(ValueError, match="position 8 of session 's' cannot be read"):
        decode_rows("s", rows)


def test_decode_rows_reads_what_the_one_pass_read_leaves_to_from_dict() -> None:
    marked = {"role": "user", "content": [{"type": "text", "text": "hi"}], "name": "ann"}
    rows = [(0, 3, orjson.dumps(marked)), (1, 4, orjson.dumps(to_dict(Message("user", "yo"))))]

    first, second = decode_rows("s", rows)

    assert (first.name, first.text, count_message_tokens(first)) == ("ann", "hi", 3)
    assert (second.text, count_message_tokens(second)) == ("yo", 4)
