"""`FallbackModel`: a model that asks the next of its models when one fails.

Which failures move on to the next model is a choice (`fall_back_on`). By
default every `ModelError` does, transient or not: a provider that is down
answers 5xx or refuses the connection, which are transient errors, and a
model that is missing or a key that is refused (404, 401) are not; a
fallback is for both. When every model failed, the `ModelFallbackError` is
transient if every failure was, so a `ModelLoop`'s `RetryPolicy` tries the
models again, the first one first, after its backoff. To keep retrying the
first model through short outages instead, fall back only on errors that
are not transient: `fall_back_on=lambda error: not getattr(error, "transient", False)`
(a transient error is then raised as it is, for the loop to retry).

Errors that are not `ModelError`s (a `ValueError` for a request a model
cannot make, a cancellation) are raised at once: they are not the model's
failure but the caller's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from pygents_ctx.errors import ModelError, ModelFallbackError, ModelResponseError
from pygents_ctx.model.base import Model, ModelResponse, ModelSettings, ModelStreamEvent

if TYPE_CHECKING:
    from pygents_ctx.model.base import Tools, Window

__all__ = ["FallbackModel"]


def _every_error(error: ModelError) -> bool:
    return True


async def _close(events: AsyncIterator[ModelStreamEvent]) -> None:
    """Close a model's stream (an async generator, as every adapter's is) when left early."""
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        await aclose()


class FallbackModel:
    """A `Model` that tries its models in order, moving to the next when one fails.

    The first model that answers answers the call: its `ModelResponse` is
    returned as it is, so `response.model` names the model that answered
    (as its provider calls it), and a `ModelLoop`'s `ModelReplied` events and
    usage records carry that name. `last_used` is the model behind the latest
    answer (with calls running at once, read `response.model` instead).

    `stream()` moves to the next model only while nothing was yielded: once a
    model's first event is out, a failure of that model is raised (a
    `ModelLoop` then retries the call from the first model, if transient).

    Args:
        *models: The models, the preferred one first.
        fall_back_on: Which failures move to the next model (default: every
            `ModelError`; see the module docstring). A failure it refuses is
            raised as it is.

    Raises:
        ValueError: No model is given.
        TypeError: Something given is not a `Model` (it has no `complete`
            and `stream`), or `fall_back_on` is not callable.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Message, ModelAPIError
        >>> from pygents_ctx.testing import ScriptedModel
        >>> missing = ModelAPIError("HTTP 404: no such model", status_code=404)
        >>> model = FallbackModel(ScriptedModel([missing]), ScriptedModel(["Hello!"]))
        >>> asyncio.run(model.complete([Message("user", "hi")])).message.text
        'Hello!'
    """

    def __init__(
        self, *models: Model, fall_back_on: Callable[[ModelError], bool] | None = None
    ) -> None:
        if not models:
            raise ValueError("FallbackModel needs at least one model: FallbackModel(first, second)")
        for index, model in enumerate(models):
            if not isinstance(model, Model):
                raise TypeError(
                    f"FallbackModel models[{index}] must be a Model (with complete() and "
                    f"stream()), not {type(model).__name__}"
                )
        if fall_back_on is not None and not callable(fall_back_on):
            raise TypeError(
                f"FallbackModel fall_back_on must be a function of the error, not {fall_back_on!r}"
            )
        self.models: tuple[Model, ...] = models
        self.fall_back_on = _every_error if fall_back_on is None else fall_back_on
        self.last_used: Model | None = None

    def __repr__(self) -> str:
        return f"FallbackModel({', '.join(map(repr, self.models))})"

    async def complete(
        self, window: Window, tools: Tools = (), *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        """The first answer among the models, tried in order (see `Model.complete`).

        Raises:
            ModelFallbackError: Every model failed; it lists each failure.
            ModelError: A failure `fall_back_on` does not fall back on.
        """
        failures: list[tuple[Model, ModelError]] = []
        for model in self.models:
            try:
                response = await model.complete(window, tools, settings=settings)
            except ModelError as error:
                self._note(model, error, failures)
                continue
            self.last_used = model
            return response
        raise self._exhausted(failures)

    async def stream(
        self, window: Window, tools: Tools = (), *, settings: ModelSettings | None = None
    ) -> AsyncIterator[ModelStreamEvent]:
        """The stream of the first model whose stream starts (see `Model.stream`).

        Raises:
            ModelFallbackError: Every model failed before its first event.
            ModelError: A failure after the first event was yielded, or one
                `fall_back_on` does not fall back on.
        """
        failures: list[tuple[Model, ModelError]] = []
        for model in self.models:
            events = model.stream(window, tools, settings=settings)
            try:
                try:
                    first = await anext(events)
                except StopAsyncIteration:
                    error: ModelError = ModelResponseError(
                        f"{model!r}: the stream ended without a reply"
                    )
                    self._note(model, error, failures)
                    continue
                except ModelError as failed:
                    self._note(model, failed, failures)
                    continue
                yield first
                async for event in events:
                    if isinstance(event, ModelResponse):
                        self.last_used = model
                    yield event
                if isinstance(first, ModelResponse):
                    self.last_used = model
                return
            finally:
                await _close(events)
        raise self._exhausted(failures)

    def _note(
        self, model: Model, error: ModelError, failures: list[tuple[Model, ModelError]]
    ) -> None:
        """Keep `error` to report, or raise it when it is not one to fall back on."""
        if not self.fall_back_on(error):
            raise error
        failures.append((model, error))

    def _exhausted(self, failures: list[tuple[Model, ModelError]]) -> ModelFallbackError:
        listed = "; ".join(
            f"{number}. {model!r}: {error}" for number, (model, error) in enumerate(failures, 1)
        )
        error = ModelFallbackError(f"every model failed: {listed}", failures)
        error.__cause__ = ExceptionGroup("the models' failures", [failed for _, failed in failures])
        return error
