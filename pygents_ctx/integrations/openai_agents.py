"""A `Session` of the OpenAI Agents SDK whose transcript lives in a `ContextStore`.

`ContextStoreSession(store)` is what `Runner.run(agent, input, session=...)`
takes in place of the SDK's `SQLiteSession`: the items the SDK stores go into
any of our stores (SQLite, PostgreSQL, memory), one typed `Message` per item,
so the transcript is ours to read, search, compact, lease and view
(`pygents-ctx view`), and the SDK gets back exactly the items it added.

How an item is kept. Each item becomes the message a model would read:
a user, system or developer message its role's text (`developer` becomes
`system`), an assistant message its text, a `function_call` a `ToolUseBlock`,
a `function_call_output` a `ToolResultBlock` (other `*_call` and
`*_call_output` items likewise, by `call_id`, so our pair-safe strategies
never split a call from its output), a `reasoning` item a `ThinkingBlock` of
its summary, and any other item a one-line `TextBlock` naming its type. Where
the message cannot give the item back as it came (ids, statuses, annotations,
encrypted reasoning, arguments that are not a JSON object...), the item itself
is kept beside it in the message's metadata (`"openai_agents_item"`), so
`get_items` returns every item exactly as it was added, whatever its type.
Messages that another writer added to the same session (a summary from our
compaction, a `ModelLoop`'s turns) are given to the SDK as the items the
Responses API reads for them.

Needs no import of the SDK itself: the `Session` protocol is duck-typed.

Example:
    ```python
    from agents import Agent, Runner
    from pygents_ctx.context.stores.sqlite import SQLiteContextStore, connect
    from pygents_ctx.integrations.openai_agents import ContextStoreSession

    async with connect("chat.db") as conn:
        session = ContextStoreSession(SQLiteContextStore(conn, session_id="user-42"))
        result = await Runner.run(Agent(name="Assistant"), "Hi", session=session)
    ```
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import orjson

from pygents_ctx._checks import whole_number
from pygents_ctx.context.messages import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from pygents_ctx.context.strategies.base import check_strategy

if TYPE_CHECKING:
    from pygents_ctx.context.stores.base import ContextStore
    from pygents_ctx.context.strategies.base import ContextStrategy

__all__ = ["ContextStoreSession", "item_message", "message_items"]

# Where an item that its message cannot give back exactly is kept, in the message's metadata.
ITEM_KEY: Final = "openai_agents_item"
_ROLES: Final = {
    "user": "user",
    "system": "system",
    "developer": "system",
    "assistant": "assistant",
}
_TEXT_PARTS: Final = frozenset({"input_text", "output_text", "text"})


class ContextStoreSession:
    """The OpenAI Agents SDK's `Session` protocol over one session of a `ContextStore`.

    Args:
        store: The store; its `session_id` is the session's.
        window: A strategy (`FitTokens(16_000)`, `StableWindow()`, a
            `Pipeline`...) that builds what `get_items` returns from the
            stored history, pair-safe; None (the default) returns it all,
            as the SDK's own sessions do. The store keeps every item either way.
        session_settings: The SDK's `SessionSettings` (its `limit` is used
            when `get_items` is given none), or None.

    Raises:
        TypeError: `store` is not a `ContextStore`, or `window` has no
            `compact` method.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx.context.stores import MemoryContextStore
        >>> async def main():
        ...     session = ContextStoreSession(MemoryContextStore(session_id="chat"))
        ...     await session.add_items([{"role": "user", "content": "Hi"}])
        ...     return session.session_id, await session.get_items()
        >>> asyncio.run(main())
        ('chat', [{'role': 'user', 'content': 'Hi'}])
    """

    def __init__(
        self,
        store: ContextStore,
        *,
        window: ContextStrategy | None = None,
        session_settings: Any = None,
    ) -> None:
        from pygents_ctx.context.stores.base import ContextStore

        if not isinstance(store, ContextStore):
            raise TypeError(
                f"ContextStoreSession needs a ContextStore (SQLiteContextStore, "
                f"PostgresContextStore, MemoryContextStore...), not {type(store).__name__}"
            )
        if window is not None:
            check_strategy(window, "ContextStoreSession window")
        self.store = store
        self.window = window
        self.session_settings = session_settings

    @property
    def session_id(self) -> str:
        """The store's session id."""
        return self.store.session_id

    def __repr__(self) -> str:
        return f"ContextStoreSession({self.store!r})"

    async def get_items(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The session's items, oldest first: the newest `limit` of them when given.

        Without `limit`, the `session_settings`' limit applies, and without
        either every item (or, with a `window`, the window's). `limit=0`
        returns none.

        Raises:
            TypeError: `limit` is not an int or None.
            ValueError: `limit` is negative.
        """
        wanted = _check_limit(self._limit(limit))
        if wanted == 0:
            return []
        if self.window is not None:
            history = await self.store.get_history()
            window = await self.window.compact(history)
            items = _window_items(window, history)
            return items if wanted is None else items[-wanted:]
        if wanted is None:
            return [
                item
                for message in await self.store.get_history()
                for item in message_items(message)
            ]
        # Most messages are one item: read the newest `wanted`, more only if that falls short.
        reading = wanted
        while True:
            messages = await self.store.get_history(limit=reading)
            items = [item for message in messages for item in message_items(message)]
            if len(items) >= wanted or len(messages) < reading:
                return items[-wanted:]
            reading *= 2

    async def add_items(self, items: list[dict[str, Any]]) -> None:
        """Add `items` at the end, in order, in one write.

        Raises:
            TypeError: `items` is not a list of dicts, or an item holds a value
                JSON cannot hold (nothing is added).
            ValueError: An item is not one the Responses API takes (a message
                with no role, a call with no `call_id`...; nothing is added).
        """
        if not isinstance(items, list | tuple):
            raise TypeError(f"add_items needs a list of items, not {type(items).__name__}")
        messages = [item_message(item, f"items[{index}]") for index, item in enumerate(items)]
        await self.store.append_many(messages)

    async def pop_item(self) -> dict[str, Any] | None:
        """Remove the newest message and return its item, or None when the session is empty.

        A message that holds several items (one a `ModelLoop` wrote with text
        and tool calls) is removed whole, and its last item returned. The read
        and the removal are two steps: hold the store's lease (`store.lease()`)
        when another writer may append to the session meanwhile.
        """
        count = await self.store.count()
        if not count:
            return None
        (newest,) = await self.store.get_history(limit=1)
        await self.store.rewind(count - 1)
        items = message_items(newest)
        return items[-1] if items else None

    async def clear_session(self) -> None:
        """Remove every message of the session, live and archived."""
        await self.store.clear()

    async def close(self) -> None:
        """Close the store (the connection you gave it stays yours to close)."""
        await self.store.close()

    def _limit(self, limit: int | None) -> int | None:
        if limit is not None or self.session_settings is None:
            return limit
        if isinstance(self.session_settings, Mapping):
            return self.session_settings.get("limit")
        return getattr(self.session_settings, "limit", None)


def _check_limit(limit: object) -> int | None:
    if limit is None:
        return None
    return whole_number(limit, "get_items limit", fix="None for all")


def item_message(item: object, path: str = "item") -> Message:
    """The message that holds `item`, an item of the OpenAI Agents SDK (a Responses API item).

    The message is what a model reads for the item; when `message_items`
    of it would not give `item` back exactly, the item is kept in its
    metadata under `"openai_agents_item"`.

    Raises:
        TypeError: `item` is not a dict, or holds a value JSON cannot hold.
        ValueError: `item` has no role and no type, or a call or output has no `call_id`.
    """
    if not isinstance(item, dict):
        raise TypeError(f"{path} must be a dict (a Responses API item), not {type(item).__name__}")
    try:
        kept = orjson.loads(orjson.dumps(item))
    except TypeError as exc:
        raise TypeError(
            f"{path} holds a value JSON cannot hold ({exc}): store plain data"
        ) from None
    message = _typed(kept, path)
    if message_items(message) == [kept]:
        return message
    return Message(message.role, message.content, metadata={ITEM_KEY: kept})


def _typed(item: dict[str, Any], path: str) -> Message:
    kind = item.get("type")
    role = item.get("role")
    if kind in (None, "message"):
        if role not in _ROLES:
            raise ValueError(
                f"{path} is a message with role {role!r}: the Responses API takes 'user', "
                "'assistant', 'system' or 'developer'"
            )
        return Message(_ROLES[role], _content_blocks(item.get("content")))  # type: ignore[arg-type]
    if not isinstance(kind, str):
        raise ValueError(f"{path} has no 'type' or 'role': it is not a Responses API item")
    call_id = item.get("call_id")
    if kind == "reasoning":
        return Message("assistant", [ThinkingBlock(_summary(item.get("summary")))])
    if kind.endswith("_call_output") or kind == "function_call_output":
        return Message(
            "user", [ToolResultBlock(_call_id(call_id, path), _text(item.get("output")))]
        )
    if kind.endswith("_call") and "call_id" in item:
        call_id = _call_id(call_id, path)
        name = item.get("name")
        arguments = _arguments(item.get("arguments"))
        block = ToolUseBlock(call_id, name if isinstance(name, str) and name else kind, arguments)
        return Message("assistant", [block])
    return Message("assistant", [TextBlock(f"[{kind}]")])


def _call_id(call_id: object, path: str) -> str:
    if not isinstance(call_id, str) or not call_id:
        raise ValueError(f"{path}.call_id must be the id of the call it answers, not {call_id!r}")
    return call_id


def _content_blocks(content: object) -> list[TextBlock]:
    if isinstance(content, str):
        return [TextBlock(content)]
    if not isinstance(content, list):
        return []
    blocks = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
            blocks.append(TextBlock(part["text"]))
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            blocks.append(TextBlock(part["refusal"]))
        else:
            blocks.append(TextBlock(f"[{kind}]"))
    return blocks


def _summary(summary: object) -> str:
    if not isinstance(summary, list):
        return ""
    texts = (part.get("text") for part in summary if isinstance(part, dict))
    return "\n".join(text for text in texts if isinstance(text, str))


def _text(output: object) -> str:
    if isinstance(output, str):
        return output
    return "\n".join(block.text for block in _content_blocks(output))


def _arguments(arguments: object) -> dict[str, Any]:
    if isinstance(arguments, str):
        try:
            parsed = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def message_items(message: Message) -> list[dict[str, Any]]:
    """The Responses API items for `message`, as the OpenAI Agents SDK stores them.

    A message made by `item_message` gives back its item exactly; any other
    (a summary, a `ModelLoop`'s turn) gives its text as a message item, each
    tool call a `function_call` and each result a `function_call_output`.
    Unsigned reasoning is left out, as it is never sent back.
    """
    content = message.content
    if not message.metadata and len(content) == 1 and type(content[0]) is TextBlock:
        return [{"role": message.role, "content": content[0].text}]  # plain text, the usual
    kept = message.metadata.get(ITEM_KEY) if message.metadata else None
    if isinstance(kept, dict):
        return [kept]
    items: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            parts.append({"type": "input_text", "text": block.text})
        elif isinstance(block, ImageBlock):
            url = f"data:{block.media_type};base64,{base64.b64encode(block.data).decode()}"
            parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
        elif isinstance(block, ToolUseBlock):
            arguments = orjson.dumps(block.input).decode()
            items.append(
                {
                    "type": "function_call",
                    "call_id": block.id,
                    "name": block.name,
                    "arguments": arguments,
                }
            )
        elif isinstance(block, ToolResultBlock):
            items.append(
                {"type": "function_call_output", "call_id": block.tool_use_id, "output": block.text}
            )
        # Thinking and reasoning blocks give no item: they are never sent back.
    if parts:
        items.insert(0, {"role": message.role, "content": _content(parts)})
    return items


def _content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if len(parts) == 1 and parts[0]["type"] == "input_text":
        return str(parts[0]["text"])
    return parts


def _window_items(window: Sequence[Message], history: Sequence[Message]) -> list[dict[str, Any]]:
    # A message the strategy kept as it was gives its item; one it edited (a cleared
    # tool result, a summary) gives what it now says.
    stored = {id(message) for message in history}
    items: list[dict[str, Any]] = []
    for message in window:
        if id(message) in stored:
            items.extend(message_items(message))
        else:
            edited = Message(message.role, message.content, name=message.name)
            items.extend(message_items(edited))
    return items
