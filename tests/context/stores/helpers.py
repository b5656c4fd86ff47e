"""Small builders shared by the store tests."""

from __future__ import annotations

from pygents_ctx import Message


def texts(messages: list[Message]) -> list[str]:
    return [message.text for message in messages]


def numbered(count: int, prefix: str = "m") -> list[Message]:
    """`count` messages alternating user/assistant, with texts m0, m1, ..."""
    roles = ("user", "assistant")
    return [Message(roles[i % 2], f"{prefix}{i}") for i in range(count)]
