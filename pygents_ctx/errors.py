"""Every exception `pygents_ctx` raises on purpose.

All of them derive from `PygentsError`, so one `except` clause catches anything
the library raises deliberately. Each also inherits the builtin a caller would
reach for first:

```
PygentsError
├── SafeExecutionError            a running object was changed or re-run
├── WrongRunMethodError (TypeError)   returning() on a generator tool, or the reverse
├── TurnTimeoutError (TimeoutError)   a turn ran past its timeout
├── UnregisteredToolError (KeyError)  no tool under that name
├── UnregisteredAgentError (KeyError) no agent under that name
├── UnregisteredHookError (KeyError)  no hook under that name
├── UnknownModelError (KeyError)      no context window known for a model name
├── UnserializableHookError (ValueError) a hook that cannot be saved by name
├── ContextOverflowError (ValueError)  even the newest round is over a token budget
├── SummarizationError (RuntimeError)  a summarizer failed; nothing was changed
├── StoreClosedError (RuntimeError)    a store's connection was used after close()
└── StoreSchemaError (RuntimeError)    a store file's schema is newer than this version
```

Validation errors (a bad limit, a sync function given to `@tool`, a duplicate
name) are plain `ValueError` / `TypeError`, as Python users expect.
"""

from __future__ import annotations

__all__ = [
    "ContextOverflowError",
    "PygentsError",
    "SafeExecutionError",
    "StoreClosedError",
    "StoreSchemaError",
    "SummarizationError",
    "TurnTimeoutError",
    "UnknownModelError",
    "UnregisteredAgentError",
    "UnregisteredHookError",
    "UnregisteredToolError",
    "UnserializableHookError",
    "WrongRunMethodError",
]


class PygentsError(Exception):
    """Base class of every exception the library raises on purpose."""


class SafeExecutionError(PygentsError):
    """An object was changed, or started again, while it was running."""


class WrongRunMethodError(PygentsError, TypeError):
    """A turn was run with the method that does not match its tool.

    Coroutine tools run with `Turn.returning()`, async-generator tools with
    `Turn.yielding()`.
    """


class TurnTimeoutError(PygentsError, TimeoutError):
    """A turn did not finish within its `timeout`."""


class _UnregisteredError(PygentsError, KeyError):
    # KeyError.__str__ shows the repr of its argument; a sentence reads better.
    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnregisteredToolError(_UnregisteredError):
    """No tool is registered under the requested name."""


class UnregisteredAgentError(_UnregisteredError):
    """No agent is registered under the requested name."""


class UnregisteredHookError(_UnregisteredError):
    """No hook is registered under the requested name."""


class UnknownModelError(_UnregisteredError):
    """No context window is known for a model name; `register_model` adds one."""


class UnserializableHookError(PygentsError, ValueError):
    """A hook could not be registered by name, so its owner cannot be saved."""


class ContextOverflowError(PygentsError, ValueError):
    """A window cannot fit its token budget, even with only what must stay.

    Raised by budgeted strategies created with `on_overflow="raise"`.

    Attributes:
        tokens: The size of the smallest window the strategy could build.
        budget: The tokens it had to fit in.
    """

    def __init__(self, message: str, *, tokens: int, budget: int) -> None:
        super().__init__(message)
        self.tokens = tokens
        self.budget = budget


class SummarizationError(PygentsError, RuntimeError):
    """A summarizer failed; the messages it was given are unchanged.

    The summarizer's own exception is the `__cause__`.
    """


class StoreClosedError(PygentsError, RuntimeError):
    """A store's SQLite connection was used after `close()`."""


class StoreSchemaError(PygentsError, RuntimeError):
    """A store file holds a schema newer than this version of pygents_ctx knows."""
