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
├── ToolArgumentsError (ValueError, TypeError)  a tool call's arguments do not fit its signature
├── UnregisteredAgentError (KeyError) no agent under that name
├── UnregisteredHookError (KeyError)  no hook under that name
├── UnknownModelError (KeyError)      no context window known for a model name
├── UnserializableHookError (ValueError) a hook that cannot be saved by name
├── ContextOverflowError (ValueError)  even the newest round is over a token budget
├── SummarizationError (RuntimeError)  a summarizer failed; nothing was changed
├── StoreClosedError (RuntimeError)    a store's connection was used after close()
├── StoreSchemaError (RuntimeError)    a store file's schema is newer than this version
├── ConcurrentModificationError (RuntimeError)  another writer changed what a write expected
├── SessionNotFoundError (KeyError)    a lease on a session the store never created
├── SessionBusyError (RuntimeError)    another holder has the session's lease
├── LeaseLostError (RuntimeError)      a lease ran out or another holder took it
├── CollectionNotFoundError (KeyError) no vector collection under that name
├── EntityNotFoundError (KeyError)     no entity with that id in the graph
├── BlobNotFoundError (KeyError)       no blob under that name
├── ToolResultNotFoundError (KeyError) no offloaded tool result under that handle in the session
├── TaskNotFoundError (KeyError)       no task with that id on the board
├── ApprovalError (ValueError)         a decision on a tool call that does not wait for one
├── TaskTransitionError (ValueError)   a task status change the board does not allow
│   └── RetryLimitError                a task has used all of its attempts
├── MissingExtensionError (RuntimeError) a database extension a store needs is missing
└── ModelError (RuntimeError)          a model call failed
    ├── ModelAPIError                  the provider refused the call or could not be reached
    │   └── ModelFallbackError         every model of a FallbackModel failed
    ├── ModelResponseError             the provider's reply cannot be read as a Message
    ├── OutputValidationError          the answers did not fit ModelLoop's output_type
    └── SubagentError                  a sub-agent's run (ModelLoop.as_tool) ended without an answer
```

Validation errors (a bad limit, a sync function given to `@tool`, a duplicate
name) are plain `ValueError` / `TypeError`, as Python users expect. The one
exception is a tool call's arguments: a model makes those mistakes, and
`ToolArgumentsError` lists each one as an `ArgumentProblem` it can act on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

__all__ = [
    "ArgumentProblem",
    "BlobNotFoundError",
    "CollectionNotFoundError",
    "ConcurrentModificationError",
    "ContextOverflowError",
    "EntityNotFoundError",
    "LeaseLostError",
    "MissingExtensionError",
    "ModelAPIError",
    "ModelError",
    "ModelFallbackError",
    "ModelResponseError",
    "OutputValidationError",
    "PygentsError",
    "RetryLimitError",
    "SafeExecutionError",
    "SessionBusyError",
    "SessionNotFoundError",
    "StoreClosedError",
    "StoreSchemaError",
    "SubagentError",
    "SummarizationError",
    "TaskNotFoundError",
    "TaskTransitionError",
    "ToolArgumentsError",
    "ToolResultNotFoundError",
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


@dataclass(frozen=True)
class ArgumentProblem:
    """One thing wrong with the arguments of a tool call (see `ToolArgumentsError`).

    Attributes:
        path: Where: a parameter's name, and inside its value `.field` or
            `[index]` (`"address.city"`, `"ids[2]"`); `"args"` for too many
            positional arguments.
        kind: `"missing"` (a required argument or field was not given),
            `"unknown"` (a name the tool or the object does not take) or
            `"invalid"` (a value of the wrong type, or not one of those allowed).
        message: What is wrong, in words (`"expected integer, got string '3'"`).
        suggestion: For an unknown name, the name it probably meant, else None.
    """

    path: str
    kind: Literal["missing", "unknown", "invalid"]
    message: str
    suggestion: str | None = None

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ToolArgumentsError(PygentsError, ValueError, TypeError):
    """A tool was called with arguments its signature refuses; the tool did not run.

    Raised before the tool's function starts (and before its `before_invoke`
    hooks), listing every problem at once: wrong types, missing required
    arguments and, when something required is missing, the names the tool
    does not take, each with the parameter it probably meant. A `ValueError`,
    as a refused value is, and a `TypeError`, as Python's own error for a
    missing argument is.

    Attributes:
        tool: The tool's registry key.
        problems: Every problem found, as `ArgumentProblem`s.
    """

    def __init__(self, tool: str, problems: Iterable[ArgumentProblem]) -> None:
        self.tool = tool
        self.problems = tuple(problems)
        count = len(self.problems)
        listed = "".join(f"\n  - {problem}" for problem in self.problems)
        super().__init__(
            f"tool {tool!r} was called with invalid arguments "
            f"({count} problem{'' if count == 1 else 's'}); it did not run:{listed}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.tool, self.problems)


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


class ConcurrentModificationError(PygentsError, RuntimeError):
    """Another writer changed the messages a compare-and-swap write expected; nothing was written.

    Raised by `replace_prefix(..., expected=...)` when the oldest live
    messages are no longer the ones the caller read (another process or task
    compacted, cleared or removed them meanwhile). Appends by other writers do
    not cause it: they land after the prefix. Read the history again and
    decide afresh.
    """


class SessionNotFoundError(_UnregisteredError):
    """A lease was asked for on a session the store has never created.

    A database store creates a session's row with its first write; leasing
    a session id that has no row is most likely a typo. `lease(create=True)`
    creates the session instead (what `ModelLoop` does for a new conversation).

    Attributes:
        session_id: The session asked for.
    """

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), self.args, {"session_id": self.session_id})


class SessionBusyError(PygentsError, RuntimeError):
    """Another holder has the session's lease: one writer per session at a time.

    Raised by `store.lease(...)` (and so by a `ModelLoop` run) when the
    session is leased by someone else and `wait` ran out (or was `False`).

    Attributes:
        session_id: The session.
        holder: The `owner` the current lease was taken with.
        expires_at: When the holder's lease runs out unless it renews it
            (UTC); a holder that crashed is gone by then.
        waited: Seconds this call waited before giving up (0 without `wait`).
    """

    def __init__(
        self,
        message: str,
        *,
        session_id: str,
        holder: str,
        expires_at: datetime,
        waited: float = 0.0,
    ) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.holder = holder
        self.expires_at = expires_at
        self.waited = waited

    def __reduce__(self) -> tuple[Any, ...]:
        fields = {
            "session_id": self.session_id,
            "holder": self.holder,
            "expires_at": self.expires_at,
            "waited": self.waited,
        }
        return _rebuild, (type(self), self.args, fields)


class LeaseLostError(PygentsError, RuntimeError):
    """A held lease ran out and could not be renewed: another holder may be writing now.

    Raised by `SessionLease.renew()` and `SessionLease.check()`, and by the
    `async with store.lease()` block (which is cancelled when the lease is
    lost), when the lease expired before it was renewed (the process was
    stalled or the database unreachable for a whole `ttl`) or was taken over
    by another holder, or the session was deleted. Raised too by a store
    write made under such a lease: the store refuses it, in the write's own
    transaction, and stores nothing of it.

    Attributes:
        session_id: The session.
        owner: The owner of the lease that was lost.
    """

    def __init__(self, message: str, *, session_id: str, owner: str) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.owner = owner

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (
            type(self),
            self.args,
            {"session_id": self.session_id, "owner": self.owner},
        )


def _rebuild(cls: type[Exception], args: tuple[Any, ...], fields: dict[str, Any]) -> Exception:
    # Errors with keyword-only fields pickle through here (to cross process pools).
    return cls(*args, **fields)


class CollectionNotFoundError(_UnregisteredError):
    """A vector store has no collection under the requested name; create it first."""


class EntityNotFoundError(_UnregisteredError):
    """A graph store has no entity with the id asked for (or that a relationship names)."""


class BlobNotFoundError(_UnregisteredError):
    """A blob store has no blob under the name asked for.

    Also raised by a stream whose blob was replaced or deleted before it was
    read to the end, by the stores that cannot keep the old content for it.
    """


class ToolResultNotFoundError(_UnregisteredError):
    """No offloaded tool result under the handle asked for, in this session.

    Raised (and, through the `read_tool_result` tool, shown to the model) for
    a handle that no stub of the session's history names (a typo, or another
    session's), or whose blob is no longer in the blob store.
    """


class TaskNotFoundError(_UnregisteredError):
    """A task board has no task with the id asked for."""


class ApprovalError(PygentsError, ValueError):
    """A decision (`ModelLoop.approve` / `reject`) on a tool call that does not wait for one.

    The call is unknown, needs no approval, was decided the other way
    already, or no longer waits: a newer message answered it. Nothing was
    changed. `loop.pending_approvals()` lists the calls that do wait.

    Attributes:
        call_id: The call the decision named.
        pending: The ids of the calls waiting for a decision now, in the
            order the model made them (empty when none waits).
    """

    def __init__(self, message: str, *, call_id: str, pending: tuple[str, ...]) -> None:
        super().__init__(message)
        self.call_id = call_id
        self.pending = pending


class TaskTransitionError(PygentsError, ValueError):
    """A task's status cannot change that way; the board is unchanged.

    Attributes:
        task_id: The task's id on its board.
        status: Its status now, as a string (`"pending"`, ...).
    """

    def __init__(self, message: str, *, task_id: int, status: str) -> None:
        super().__init__(message)
        self.task_id = task_id
        self.status = status


class RetryLimitError(TaskTransitionError):
    """A failed task has used all of its attempts; `retry(..., force=True)` overrides."""


class ModelError(PygentsError, RuntimeError):
    """A model call failed. The SDK's own exception, if any, is the `__cause__`."""


class ModelAPIError(ModelError):
    """The provider refused the call, or could not be reached.

    A `ModelLoop` retries the call when `transient` is true (rate limits,
    server errors, timeouts, lost connections), waiting `retry_after` seconds
    when the provider said how long.

    Attributes:
        status_code: The HTTP status, or None when no response came.
        transient: Whether trying again later may succeed.
        retry_after: Seconds the provider asked to wait before trying again, if it said.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        transient: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.transient = transient
        self.retry_after = retry_after


class ModelFallbackError(ModelAPIError):
    """Every model of a `FallbackModel` failed; `failures` holds each model and its error.

    It is `transient` when every failure was (the loop's `RetryPolicy` then
    tries the models again, the first one first), and its `retry_after` is the
    shortest wait any of them asked for. Its `__cause__` is an
    `ExceptionGroup` of the errors, so a traceback shows each.

    Attributes:
        failures: `(model, error)` for each model tried, in order.
    """

    def __init__(self, message: str, failures: Sequence[tuple[object, ModelError]]) -> None:
        errors = [error for _, error in failures]
        transient = bool(errors) and all(
            isinstance(error, ModelAPIError) and error.transient for error in errors
        )
        waits = [
            error.retry_after
            for error in errors
            if isinstance(error, ModelAPIError) and error.retry_after is not None
        ]
        super().__init__(
            message, transient=transient, retry_after=min(waits) if transient and waits else None
        )
        self.failures = tuple(failures)


class ModelResponseError(ModelError):
    """The provider's reply cannot be read as a `Message` (no choice, an unknown block kind)."""


class OutputValidationError(ModelError):
    """The model's answers did not fit the loop's `output_type`, after every retry.

    `ModelLoop(output_type=T)` sends each answer that does not fit back to the
    model with what was wrong and asks again, `output_retries` times; then
    this is raised. The answers and the corrections stay in the conversation.

    Attributes:
        text: The last answer's text.
        problems: What was wrong with it, as `ArgumentProblem`s whose paths
            point into the JSON document (`"where.city"`; `""` for the document).
        attempts: How many answers were refused.
    """

    def __init__(self, text: str, problems: Iterable[ArgumentProblem], attempts: int) -> None:
        self.text = text
        self.problems = tuple(problems)
        self.attempts = attempts
        listed = "".join(f"\n  - {p.path or '(the document)'}: {p.message}" for p in self.problems)
        super().__init__(
            f"the model's answer did not fit the output type after {attempts} "
            f"attempt{'' if attempts == 1 else 's'}; raise output_retries or make the "
            f"type easier to fill:{listed}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.text, self.problems, self.attempts)


class SubagentError(ModelError):
    """A sub-agent's run ended without an answer (at a limit, waiting for approval, cut short).

    Raised by a call of a `ModelLoop.as_tool()` tool; in a model loop the
    calling model reads it as that call's error result.
    """


class MissingExtensionError(PygentsError, RuntimeError):
    """A database extension a store needs is not installed or cannot be loaded.

    `PostgresVectorStore` needs pgvector on the server;
    `SQLiteVectorStore(sqlite_vec=True)` needs the sqlite-vec package and a
    Python whose `sqlite3` can load extensions.
    """
