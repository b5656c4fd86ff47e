"""Small builders shared by the store tests."""

from __future__ import annotations

import sqlite3

from pygents_ctx import Message
from pygents_ctx.context.stores import ContextStore


def texts(messages: list[Message]) -> list[str]:
    return [message.text for message in messages]


def numbered(count: int, prefix: str = "m") -> list[Message]:
    """`count` messages alternating user/assistant, with texts m0, m1, ..."""
    roles = ("user", "assistant")
    return [Message(roles[i % 2], f"{prefix}{i}") for i in range(count)]


def unaccounted(db: sqlite3.Connection) -> tuple[int, int, int]:
    """(data rows no row points at, rows pointing at no data, data pointed at twice)."""
    pointers = (
        "SELECT data_id FROM pygents_live_rows UNION ALL SELECT data_id FROM pygents_archive_rows"
    )
    orphans = db.execute(
        f"SELECT count(*) FROM pygents_message_data WHERE id NOT IN ({pointers})"
    ).fetchone()[0]
    dangling = db.execute(
        f"SELECT count(*) FROM ({pointers}) WHERE data_id NOT IN "
        "(SELECT id FROM pygents_message_data)"
    ).fetchone()[0]
    shared = db.execute(
        f"SELECT count(*) FROM (SELECT data_id FROM ({pointers}) GROUP BY data_id "
        "HAVING count(*) > 1)"
    ).fetchone()[0]
    return orphans, dangling, shared


class ListStore(ContextStore):
    """A store of your own, as the seed's minimal one: `append` and `get_history`, no more."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def append(self, message: Message, *, run_id: str | None = None) -> None:
        self.messages.append(message)

    async def get_history(
        self, *, limit: int | None = None, offset: int = 0, include_archived: bool = False
    ) -> list[Message]:
        return list(self.messages)
