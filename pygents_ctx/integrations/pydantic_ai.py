"""pydantic-ai conversations kept in a `ContextStore`, and our strategies as a history processor.

pydantic-ai keeps no conversation of its own: a run takes `message_history=`
and gives back `result.new_messages()`, for you to store. `ContextStoreHistory`
stores them in any of our stores (SQLite, PostgreSQL, memory), one typed
`Message` per `ModelMessage` (a request is a user message, or a system message
when it holds only system prompts; a response an assistant message; tool calls
and returns `ToolUseBlock`s and `ToolResultBlock`s, thinking `ThinkingBlock`s),
with the `ModelMessage` itself kept beside it in the message's metadata
(`"pydantic_ai_message"`), so `load()` returns every message exactly as it was
added: text, tool calls and returns, thinking, files. Messages another writer
put in the session (a summary from our compaction, a `ModelLoop`'s turns) load
as the requests and responses that say the same.

`history_window(strategy)` is a pydantic-ai history processor that applies
any of our strategies (budgets, pair-safe trimming, tool-result clearing,
summaries, pinning) to the messages of a run: pass it as
`capabilities=[ProcessHistory(history_window(FitTokens(16_000)))]`.

Needs `pydantic-ai` (the `pydantic-ai` extra), imported when first used.

Example:
    ```python
    from pydantic_ai import Agent
    from pygents_ctx.context.stores import SQLiteContextStore, connect
    from pygents_ctx.integrations.pydantic_ai import ContextStoreHistory

    agent = Agent("openai:gpt-5-mini")
    async with connect("chat.db") as conn:
        history = ContextStoreHistory(SQLiteContextStore(conn, session_id="user-42"))
        result = await history.run(agent, "What is the weather in Paris?")
    ```
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, cast

from pygents_ctx.context.messages import (
    IMAGE_MEDIA_TYPES,
    ContentBlock,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from pygents_ctx.context.stores.base import ContextStore
from pygents_ctx.context.strategies.base import check_strategy

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from pydantic_ai import Agent
    from pydantic_ai.agent import AgentRunResult
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse

    from pygents_ctx.context.strategies.base import ContextStrategy

__all__ = ["ContextStoreHistory", "history_window"]

# Where the ModelMessage a message stands for is kept, in the message's metadata.
MESSAGE_KEY: Final = "pydantic_ai_message"


def _require_pydantic_ai() -> None:
    try:
        import pydantic_ai.messages  # noqa: F401
    except ImportError:
        raise ImportError(
            "pygents_ctx.integrations.pydantic_ai needs pydantic-ai: "
            "pip install -e '.[pydantic-ai]' (or pip install pydantic-ai-slim)"
        ) from None


class ContextStoreHistory:
    """A pydantic-ai conversation's messages, kept in one session of a `ContextStore`.

    Args:
        store: The store; its `session_id` is the conversation's.

    Raises:
        TypeError: `store` is not a `ContextStore`.
    """

    def __init__(self, store: ContextStore) -> None:
        if not isinstance(store, ContextStore):
            raise TypeError(
                "ContextStoreHistory needs a ContextStore (SQLiteContextStore, "
                f"PostgresContextStore, MemoryContextStore...), not {type(store).__name__}"
            )
        self.store = store

    @property
    def session_id(self) -> str:
        """The store's session id."""
        return self.store.session_id

    def __repr__(self) -> str:
        return f"ContextStoreHistory({self.store!r})"

    async def load(self) -> list[ModelMessage]:
        """The conversation, oldest first, for `agent.run(..., message_history=...)`."""
        return model_messages(await self.store.get_history())

    async def add(self, messages: Sequence[ModelMessage]) -> None:
        """Add `messages` (a run's `result.new_messages()`) at the end, in one write.

        Raises:
            TypeError: Something in `messages` is not a pydantic-ai
                `ModelRequest` or `ModelResponse` (nothing is added).
        """
        if not isinstance(messages, list | tuple):
            raise TypeError(
                f"add needs a list of pydantic-ai messages (result.new_messages()), "
                f"not {type(messages).__name__}"
            )
        ours = [stored_message(message, f"messages[{i}]") for i, message in enumerate(messages)]
        await self.store.append_many(ours)

    async def run(
        self, agent: Agent[Any, Any], prompt: Any = None, **options: Any
    ) -> AgentRunResult[Any]:
        """`agent.run(prompt, message_history=<the conversation>, **options)`, then `add` its news.

        Nothing is added when the run fails.
        """
        if "message_history" in options:
            raise TypeError(
                "ContextStoreHistory.run gives the agent this conversation as its "
                "message_history; call agent.run yourself to pass another"
            )
        result = await agent.run(prompt, message_history=await self.load(), **options)
        await self.add(result.new_messages())
        return result

    async def fork(self, *, session_id: str | None = None) -> ContextStoreHistory:
        """A new conversation that starts as a copy of this one (see `ContextStore.fork`)."""
        return ContextStoreHistory(await self.store.fork(session_id=session_id))

    async def clear(self) -> None:
        """Remove every message of the conversation."""
        await self.store.clear()


def stored_message(message: object, path: str = "message") -> Message:
    """Our typed message for a pydantic-ai `ModelMessage`, the message itself in its metadata.

    Raises:
        TypeError: `message` is not a `ModelRequest` or `ModelResponse`.
    """
    from pydantic_ai import messages

    if not isinstance(message, messages.ModelRequest | messages.ModelResponse):
        raise TypeError(
            f"{path} must be a pydantic-ai ModelRequest or ModelResponse, "
            f"not {type(message).__name__}"
        )
    typed = _typed(message)
    (kept,) = messages.ModelMessagesTypeAdapter.dump_python([message], mode="json")
    return Message(typed.role, typed.content, metadata={MESSAGE_KEY: kept})


def _typed(message: ModelMessage) -> Message:
    from pydantic_ai import messages as parts

    blocks: list[ContentBlock] = []
    if isinstance(message, parts.ModelResponse):
        for part in message.parts:
            if isinstance(part, parts.TextPart):
                blocks.append(TextBlock(part.content))
            elif isinstance(part, parts.ToolCallPart):
                blocks.append(ToolUseBlock(part.tool_call_id, part.tool_name, part.args_as_dict()))
            elif isinstance(part, parts.ThinkingPart):
                blocks.append(ThinkingBlock(part.content, part.signature))
            else:
                blocks.append(TextBlock(f"[{part.part_kind}]"))
        return Message("assistant", blocks)
    system = True
    for piece in message.parts:
        system = system and isinstance(piece, parts.SystemPromptPart)
        if isinstance(piece, parts.SystemPromptPart):
            blocks.append(TextBlock(piece.content))
        elif isinstance(piece, parts.UserPromptPart):
            blocks.extend(_user_blocks(piece.content))
        elif isinstance(piece, parts.ToolReturnPart):
            blocks.append(ToolResultBlock(piece.tool_call_id, piece.model_response_str()))
        elif isinstance(piece, parts.RetryPromptPart) and piece.tool_name is not None:
            blocks.append(
                ToolResultBlock(piece.tool_call_id, piece.model_response(), is_error=True)
            )
        elif isinstance(piece, parts.RetryPromptPart):
            blocks.append(TextBlock(piece.model_response()))
        else:
            blocks.append(TextBlock(f"[{piece.part_kind}]"))
    return Message("system" if system and blocks else "user", blocks)


def _user_blocks(content: Any) -> list[ContentBlock]:
    from pydantic_ai import messages as parts

    if isinstance(content, str):
        return [TextBlock(content)]
    blocks: list[ContentBlock] = []
    for item in content:
        if isinstance(item, str):
            blocks.append(TextBlock(item))
        elif isinstance(item, parts.BinaryContent) and item.media_type in IMAGE_MEDIA_TYPES:
            blocks.append(ImageBlock(item.media_type, item.data))
        else:
            blocks.append(TextBlock(f"[{getattr(item, 'kind', type(item).__name__)}]"))
    return blocks


def model_messages(history: Sequence[Message]) -> list[ModelMessage]:
    """pydantic-ai's messages for a stored history, oldest first.

    A message `stored_message` made gives back its `ModelMessage` exactly;
    any other (a summary, a `ModelLoop`'s turn) the request or response that
    says the same.
    """
    from pydantic_ai import messages as parts

    kept = [message.metadata.get(MESSAGE_KEY) if message.metadata else None for message in history]
    if all(data is not None for data in kept):  # the common case: one validation for all
        return list(parts.ModelMessagesTypeAdapter.validate_python(kept))
    names = _tool_names(history)
    result: list[ModelMessage] = []
    for message, data in zip(history, kept, strict=True):
        if data is not None:
            result.extend(parts.ModelMessagesTypeAdapter.validate_python([data]))
        else:
            result.append(_rebuilt(message, names))
    return result


def _tool_names(history: Sequence[Message]) -> dict[str, str]:
    return {
        block.id: block.name
        for message in history
        for block in message.content
        if isinstance(block, ToolUseBlock)
    }


def _rebuilt(message: Message, names: dict[str, str]) -> ModelRequest | ModelResponse:
    from pydantic_ai import messages as parts

    if message.role == "assistant":
        response_parts: list[Any] = []
        for block in message.content:
            if isinstance(block, TextBlock):
                response_parts.append(parts.TextPart(block.text))
            elif isinstance(block, ToolUseBlock):
                response_parts.append(parts.ToolCallPart(block.name, dict(block.input), block.id))
            elif isinstance(block, ThinkingBlock):
                response_parts.append(parts.ThinkingPart(block.thinking, signature=block.signature))
        return parts.ModelResponse(parts=response_parts)
    request_parts: list[Any] = []
    texts = [block.text for block in message.content if isinstance(block, TextBlock)]
    if texts and message.role == "system":
        request_parts.append(parts.SystemPromptPart("\n".join(texts)))
    elif texts:
        request_parts.append(parts.UserPromptPart("\n".join(texts)))
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            name = names.get(block.tool_use_id, "tool")
            kind = parts.RetryPromptPart if block.is_error else parts.ToolReturnPart
            request_parts.append(
                kind(tool_name=name, content=block.text, tool_call_id=block.tool_use_id)
            )
    return parts.ModelRequest(parts=request_parts)


def history_window(
    strategy: ContextStrategy,
) -> Callable[[list[ModelMessage]], Awaitable[list[ModelMessage]]]:
    """A pydantic-ai history processor that sends the window `strategy` builds.

    Use it as `Agent(..., capabilities=[ProcessHistory(history_window(FitTokens(16_000)))])`.
    The messages the strategy keeps as they were are sent as they were; one it
    edited (a cleared tool result, trimmed arguments) is sent with those parts
    changed and the rest as it was; one it made (a summary) as a new request.
    The conversation you store is not changed.

    Raises:
        TypeError: `strategy` has no `compact` method.
    """
    check_strategy(strategy, "history_window strategy")
    _require_pydantic_ai()

    # Plain annotations: pydantic-ai reads a processor's at run time to choose how to call it.
    async def process(messages: list[Any]) -> list[Any]:
        typed = [_typed(message) for message in messages]
        window = await strategy.compact(typed)
        if window is typed:
            return messages
        position = {id(message): index for index, message in enumerate(typed)}
        holder = {
            _tool_id(block): index
            for index, message in enumerate(typed)
            for block in message.content
            if isinstance(block, ToolUseBlock | ToolResultBlock)
        }
        names = _tool_names(typed)
        result: list[ModelMessage] = []
        for message in window:
            index = position.get(id(message))
            if index is None:
                ids = [
                    _tool_id(b)
                    for b in message.content
                    if isinstance(b, ToolUseBlock | ToolResultBlock)
                ]
                index = holder.get(ids[0]) if ids else None
                if index is None:
                    result.append(_rebuilt(message, names))
                    continue
                result.append(_edited(messages[index], message))
            else:
                result.append(messages[index])
        return result

    return process


def _tool_id(block: ToolUseBlock | ToolResultBlock) -> str:
    return block.id if isinstance(block, ToolUseBlock) else block.tool_use_id


def _edited(original: ModelMessage, edited: Message) -> ModelMessage:
    """`original` with the tool parts `edited` changed, and those it dropped, left out."""
    from pydantic_ai import messages as parts

    blocks = {
        _tool_id(block): block
        for block in edited.content
        if isinstance(block, ToolUseBlock | ToolResultBlock)
    }
    kept: list[Any] = []
    part: Any  # the SDK's parts are a wide union; only the plain call and return are edited
    for part in original.parts:
        if not isinstance(part, parts.ToolCallPart | parts.ToolReturnPart | parts.RetryPromptPart):
            kept.append(part)
            continue
        block = blocks.get(part.tool_call_id)
        if block is None:
            continue
        if type(part) is parts.ToolCallPart and isinstance(block, ToolUseBlock):
            same = block.input == part.args_as_dict()
            kept.append(part if same else dataclasses.replace(part, args=dict(block.input)))
        elif type(part) is parts.ToolReturnPart and isinstance(block, ToolResultBlock):
            same = block.text == part.model_response_str()
            kept.append(part if same else dataclasses.replace(part, content=block.text))
        else:
            kept.append(part)
    changed: Any = original
    return cast("ModelMessage", dataclasses.replace(changed, parts=kept))
