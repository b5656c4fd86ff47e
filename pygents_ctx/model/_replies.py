"""Getting a reply for the model loop: the call with its retries, what a reply must be to be
stored, and closing what the loop reads."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

from pygents_ctx.context.config import PromptWindow
from pygents_ctx.context.messages import Message, TextBlock
from pygents_ctx.errors import ModelAPIError, ModelError
from pygents_ctx.model._observers import OBSERVERS, watch_model_call
from pygents_ctx.model.base import Model, ModelResponse, ModelSettings
from pygents_ctx.model.events import ModelRetry
from pygents_ctx.model.retry import RetryPolicy
from pygents_ctx.tools import Tool

__all__ = [
    "REFUSAL_MARK",
    "call_model",
    "check_reply",
    "closing",
    "has_answer",
    "is_refusal",
    "kept_of_cut_reply",
    "stored_refusal",
]

# The metadata of a stored refusal: a step that runs again, or a run that continues,
# finds it the end of the conversation rather than an answer to check.
REFUSAL_MARK: Final = "refusal"


@asynccontextmanager
async def closing(values: AsyncIterator[Any]) -> AsyncIterator[AsyncIterator[Any]]:
    """`values`, closed on leaving the block: a generator left midway cleans up now.

    Leaving an `async for` does not close the generator it read; unclosed, it
    would clean up (store what finished) only when collected, after the run.
    """
    try:
        yield values
    finally:
        close = getattr(values, "aclose", None)
        if close is not None:
            await close()


def check_reply(model: Model, response: object) -> None:
    """Refuse a reply that is not one, and treat an empty one as a failed call.

    Raises:
        TypeError: `response` is not a `ModelResponse` holding an assistant message.
        ModelAPIError: The reply has no text and no tool calls (and was not cut
            by its token limit, nor refused): transient, as a provider's hiccup,
            so retried.
    """
    if not isinstance(response, ModelResponse) or response.message.role != "assistant":
        raise TypeError(
            f"{model!r} must reply with a ModelResponse holding an assistant "
            f"message, not {response!r}"
        )
    if (
        not has_answer(response.message)
        and not response.hit_length_limit
        and response.refusal is None
    ):
        raise ModelAPIError(
            f"{model!r} replied with no text and no tool calls; "
            f"an empty reply is not stored (finish reason: {response.finish_reason!r})",
            transient=True,
        )


def has_answer(message: Message) -> bool:
    return bool(message.tool_uses) or any(
        isinstance(block, TextBlock) and block.text.strip() for block in message.content
    )


def kept_of_cut_reply(message: Message) -> Message | None:
    """What is stored of a reply its token limit cut: its text and thinking, not its calls.

    The calls are left out (the last one's arguments are cut, and none will
    run: the run ends), so no call is stored without its result. None when no
    text is left: an empty message is never stored.
    """
    kept = Message("assistant", [block for block in message.content if block.type != "tool_use"])
    return kept if has_answer(kept) else None


def stored_refusal(refusal: str) -> Message:
    """What is stored of a refused reply: the refusal's text as the assistant's message.

    Its tool calls are left out (none will run: the run ends), so no call is
    stored without its result, and so is the rest of the reply (an Anthropic
    refusal cuts the reply short: its partial text and thinking, unsigned,
    would not be taken back).
    """
    return Message("assistant", [TextBlock(refusal)], metadata={REFUSAL_MARK: True})


def is_refusal(message: Message) -> bool:
    """Whether `message` is a refusal the loop stored (`stored_refusal`)."""
    return message.role == "assistant" and (message.metadata or {}).get(REFUSAL_MARK) is True


async def call_model(
    model: Model,
    window: PromptWindow,
    tools: list[Tool[..., Any]],
    settings: ModelSettings | None,
    retry: RetryPolicy,
    *,
    streaming: bool,
    step: int,
    owner: object,
) -> AsyncIterator[Any]:
    """The model's events for `window`, then its `ModelResponse`; transient failures retried.

    A `ModelRetry` event comes before each wait; streamed deltas of a failed
    attempt are void (the reply starts over). Observers (tracing) watch each
    attempt, told it is `owner`'s (the `ModelLoop`).
    """
    failures = 0
    while True:
        watch = watch_model_call(owner, step, window) if OBSERVERS else None
        try:
            if streaming:
                response = None
                async with closing(model.stream(window, tools, settings=settings)) as events:
                    async for event in events:
                        if isinstance(event, ModelResponse):
                            response = event
                        else:
                            yield event
            else:
                response = await model.complete(window, tools, settings=settings)
            check_reply(model, response)
        except ModelError as error:
            if watch is not None:
                watch.end(None, error)
            failures += 1
            delay = retry.delay(failures, error)
            if delay is None or not isinstance(error, ModelAPIError):
                raise
            yield ModelRetry(step, failures, delay, error)
            await asyncio.sleep(delay)
            continue
        except BaseException as error:  # cancelled, or the stream was left
            if watch is not None:
                watch.end(None, error)
            raise
        assert isinstance(response, ModelResponse)  # check_reply saw to it
        if watch is not None:
            watch.end(response, None)
        yield response
        return
