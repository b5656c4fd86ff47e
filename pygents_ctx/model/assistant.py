"""`Assistant`: an agent with a model, defined once and run per session.

A definition holds what does not change between requests (name,
instructions, tools, model, strategy, output type, the loop's options) and is
immutable, so one module-level definition serves any number of concurrent
requests. Each call names the session and builds what belongs to that run
alone, on the public pieces: an `Agent` inside its own `AgentScope`, a
`ContextConfig` over the session's store, a `ModelLoop` with the
definition's options. Nothing of one call is seen by another.

The store is a database: the SQLite file `pygents_ctx.db` by default (the
command line's default, so `pygents-ctx view` shows the sessions; the
`PYGENTS_CTX_DB` variable names another, as for the command line), a path,
or an open `SQLiteConnection` / `PostgresConnection` (`store=`, on the
definition or the call). A path is opened for the call and closed after it.
"""

from __future__ import annotations

import contextlib
import copy
import os
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final, TypeVar, cast

from pygents_ctx._checks import storable_text, strings
from pygents_ctx.agent import Agent
from pygents_ctx.context.config import ContextConfig
from pygents_ctx.context.messages import Message
from pygents_ctx.context.stores import (
    ContextStore,
    HistoryRecall,
    MemoryContextStore,
    PostgresConnection,
    PostgresContextStore,
    SQLiteConnection,
    SQLiteContextStore,
    connect,
)
from pygents_ctx.context.stores._common import check_erase
from pygents_ctx.context.strategies.base import ContextStrategy
from pygents_ctx.memory.recall import SemanticRecall
from pygents_ctx.model._output import StructuredOutput
from pygents_ctx.model._replies import closing
from pygents_ctx.model._subagent import Keep, check_subagent, run_subagent, subagent_as_tool
from pygents_ctx.model.base import Model, ModelResponse, ModelSettings, ModelStreamEvent
from pygents_ctx.model.events import LoopEvent, LoopFinished
from pygents_ctx.model.loop import ModelLoop
from pygents_ctx.model.options import LeasePolicy, LoopLimits, ToolPolicy
from pygents_ctx.model.retry import RetryPolicy
from pygents_ctx.registry import AgentScope
from pygents_ctx.tools import Tool

__all__ = ["Assistant"]

T = TypeVar("T")

DEFAULT_DATABASE: Final = "pygents_ctx.db"
_DATABASE_ENV: Final = "PYGENTS_CTX_DB"

Database = str | os.PathLike[str] | SQLiteConnection | PostgresConnection
"""Where an `Assistant` keeps its sessions: a SQLite file's path, or an open connection."""


@dataclass(frozen=True, slots=True)
class _Running:
    """The database, session and owner of the `Assistant` call running now (its sub-agents')."""

    connection: SQLiteConnection | PostgresConnection
    session: str
    owner: str | None


_RUNNING: ContextVar[_Running | None] = ContextVar("pygents_assistant_call", default=None)


class _NoModel:
    """Stands in for a definition's missing model while its options are checked."""

    async def complete(self, *args: Any, **kwargs: Any) -> ModelResponse:
        raise AssertionError("never called: a call without a model is refused first")

    def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ModelStreamEvent]:
        raise AssertionError("never called: a call without a model is refused first")


class Assistant:
    """An agent with a model, defined once (module level is fine) and run per session.

    Each call (`run`, `stream`, `ask`, `resume`) names the session, builds its
    own `Agent` (in its own `AgentScope`), `ContextConfig` and `ModelLoop`
    with this definition's options, and runs it: concurrent calls share
    nothing but the definition, which never changes. The conversation is kept
    in the session's store, so the next call, in any process, goes on from it.

    Args:
        name: The agent's name (as `Agent`), shown in traces and the viewer.
        model: The `Model` to call; None here means each call gives `model=`.
        instructions: The system prompt (not stored), as `ModelLoop(instructions=...)`.
        tools: Every tool the model may call, given once: `@tool` tools and
            sub-agents (`other.as_tool(name, description)`).
        description: What the agent does (`Agent.description`).
        strategy: How each window is built (`ContextConfig`'s strategy; default
            `StableWindow()`); each call works on a shallow copy of it.
        recall: What `search_history` searches a session with (`ContextConfig`'s
            `recall`): `SemanticRecall(vectors, embedder)` adds a search by
            meaning; None, the store's full-text search.
        output_type: The type of every answer (a dataclass, `TypedDict` or
            pydantic model), as `ModelLoop(output_type=...)`.
        settings: Settings for every model call, as for `ModelLoop`.
        retry: How transient model failures are retried, as for `ModelLoop`.
        limits: Steps, tokens and cost per run (`LoopLimits`), as for `ModelLoop`.
        tool_policy: How the calls of one reply run (`ToolPolicy`), as for `ModelLoop`.
        lease: The session's lease for each run (`LeasePolicy`; None: none),
            as for `ModelLoop`.
        store: Where the sessions live (a `Database`): a SQLite file's path
            (default `pygents_ctx.db`, or the `PYGENTS_CTX_DB` variable's), or an
            open `SQLiteConnection` / `PostgresConnection`; a call's `store=`
            overrides it.

    Raises:
        TypeError, ValueError: An argument is wrong (as `Agent` and
            `ModelLoop` check them), two tools share a name, or `output_type`
            cannot be made a JSON schema; each error names the fix.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import connect
        >>> from pygents_ctx.testing import ScriptedModel
        >>> helper = Assistant("helper", model=ScriptedModel(["Hello!"]), instructions="Be brief.")
        >>> async def main():
        ...     async with connect(":memory:") as db:
        ...         done = await helper.run("Hi", session="ann", store=db)
        ...     return done.text
        >>> asyncio.run(main())
        'Hello!'
    """

    __slots__ = (
        "description",
        "instructions",
        "lease",
        "limits",
        "model",
        "name",
        "output_type",
        "recall",
        "retry",
        "settings",
        "store",
        "strategy",
        "tool_policy",
        "tools",
    )

    name: str
    model: Model | None
    instructions: str | None
    tools: tuple[Tool[..., Any], ...]
    description: str
    strategy: ContextStrategy | None
    recall: HistoryRecall | None
    output_type: type[Any] | None
    settings: ModelSettings | None
    retry: RetryPolicy | None
    limits: LoopLimits
    tool_policy: ToolPolicy | None
    lease: LeasePolicy | None
    store: Database | None

    def __init__(
        self,
        name: str,
        *,
        model: Model | None = None,
        instructions: str | None = None,
        tools: Iterable[Tool[..., Any]] = (),
        description: str = "",
        strategy: ContextStrategy | None = None,
        recall: HistoryRecall | None = None,
        output_type: type[Any] | None = None,
        settings: ModelSettings | None = None,
        retry: RetryPolicy | None = None,
        limits: LoopLimits = LoopLimits(),  # noqa: B008 - frozen, shared
        tool_policy: ToolPolicy | None = None,
        lease: LeasePolicy | None = LeasePolicy(),  # noqa: B008 - frozen, shared
        store: Database | None = None,
    ) -> None:
        if isinstance(tools, Tool):
            raise TypeError(f"Assistant {name!r} tools must be a list of tools: tools=[{tools!r}]")
        chosen = tuple(tools)
        _check_tool_names(name, chosen)
        _check_database(store, "Assistant store")
        for field, value in (
            ("name", name),
            ("model", model),
            ("instructions", instructions),
            ("tools", chosen),
            ("description", description),
            ("strategy", strategy),
            ("recall", recall),
            ("output_type", output_type),
            ("settings", settings),
            ("retry", retry),
            ("limits", limits),
            ("tool_policy", tool_policy),
            ("lease", lease),
            ("store", store),
        ):
            object.__setattr__(self, field, value)
        # Every other argument is checked as Agent and ModelLoop check it, now, once.
        with AgentScope():
            self._loop(self._context(MemoryContextStore()), model)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(
            f"an Assistant is immutable (it is shared by every call); make another "
            f"Assistant(...) to change {name!r}"
        )

    def __repr__(self) -> str:
        return f"<Assistant {self.name} model={self.model!r}>"

    # -- the calls -------------------------------------------------------------

    async def run(
        self,
        prompt: str | Message | None,
        *,
        session: str,
        owner: str | None = None,
        store: Database | None = None,
        model: Model | None = None,
    ) -> LoopFinished:
        """Run the session's conversation with `prompt` until the model answers; how it ended.

        As `ModelLoop.run`: the prompt and everything the run adds are kept in
        the session's store, under its lease (`lease=`).

        Args:
            prompt: The user's message; None continues the stored conversation.
            session: The session's id (a non-empty str): the conversation to go on with.
            owner: The user or tenant the session belongs to (the store's
                `owner`): a session another owner holds is refused.
            store: Where the session lives, over the definition's `store`.
            model: The model for this call, over the definition's `model`.

        Raises:
            TypeError: `session` or `owner` is not a str.
            ValueError: `session` is empty, or neither the definition nor the
                call gives a model; raised before anything is stored.
            SessionBusyError, ModelError, ...: As for `ModelLoop.run`.
        """
        async with self._session(session, owner, store, model) as (context, chosen):
            return await self._loop(context, chosen).run(prompt)

    async def stream(
        self,
        prompt: str | Message | None,
        *,
        session: str,
        owner: str | None = None,
        store: Database | None = None,
        model: Model | None = None,
    ) -> AsyncIterator[LoopEvent]:
        """Run as `run()` does, yielding every event as it happens (`ModelLoop.stream`).

        Stopping early (`break`) stops the run, as for `ModelLoop.stream`.

        Raises:
            TypeError, ValueError, SessionBusyError, ModelError: As for `run()`.
        """
        async with (
            self._session(session, owner, store, model) as (context, chosen),
            closing(self._loop(context, chosen).stream(prompt)) as events,
        ):
            async for event in events:
                yield event

    async def ask(
        self,
        output_type: type[T],
        question: str,
        *,
        session: str,
        owner: str | None = None,
        store: Database | None = None,
        model: Model | None = None,
    ) -> T:
        """A typed answer to `question` about the session's stored conversation; it stays unchanged.

        The model sees the conversation (through the definition's strategy and
        instructions) and the question, and answers as an `output_type`
        (checked and sent back as `ModelLoop(output_type=...)` does). It runs on
        an unsaved branch (`ContextConfig.unsaved_branch`) with no tools: the
        question and the answer are not stored, and nothing runs. The model
        call's usage is recorded in the session, as every call's is.

        Args:
            output_type: A dataclass, `TypedDict` or pydantic model.
            question: What to ask about the conversation.
            session: The session's id, as for `run()`.
            owner: The session's owner, as for `run()`.
            store: Where the session lives, as for `run()`.
            model: The model for this call, as for `run()`.

        Raises:
            TypeError: `output_type` cannot be made a JSON schema, or as for `run()`.
            ValueError: The session holds no conversation, or as for `run()`.
            OutputValidationError: The answers did not fit (`LoopLimits.output_retries`).
        """
        StructuredOutput.of(output_type, self.settings)  # refused before anything else
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"Assistant.ask question must be a non-empty str, not {question!r}")
        async with self._session(session, owner, store, model) as (context, chosen):
            if not await context.history():
                raise ValueError(
                    f"session {session!r} has no conversation to ask about; run() it first, "
                    "or check the session id"
                )
            if owner is not None and session not in {
                info.session_id for info in await context.store.list_sessions(owner=owner)
            }:
                raise ValueError(f"session {session!r} is not owner {owner!r}'s: ask about its own")
            branch = await context.unsaved_branch()
            finished = await self._loop(branch, chosen, asking=output_type).run(question)
        if finished.output is None:
            raise ValueError(
                f"the model gave no {output_type.__name__} ({finished.reason.value}): "
                f"{finished.refusal or finished.text!r}"
            )
        return cast("T", finished.output)

    async def resume(
        self,
        *,
        session: str,
        approve: Iterable[str] = (),
        reject: Iterable[str] | Mapping[str, str | None] = (),
        owner: str | None = None,
        store: Database | None = None,
        model: Model | None = None,
    ) -> LoopFinished:
        """Decide the calls waiting for approval, then continue the run; how it ended.

        Each decision is `ModelLoop.approve` / `ModelLoop.reject`, kept in the
        store; then the loop runs on without a prompt (the approved calls run,
        a rejected call reaches the model as its error result). Calls not
        named stay waiting, and the run ends again with `LoopStop.APPROVAL`.

        Args:
            session: As for `run()`.
            approve: The ids of the calls to run (`LoopFinished.pending`).
            reject: The ids of the calls to refuse, or a mapping of id to the
                reason the model reads.
            owner: The session's owner, as for `run()`.
            store: Where the session lives, as for `run()`.
            model: The model for this call, as for `run()`.

        Raises:
            TypeError: `approve` or `reject` is a single str (give a list), or
                as for `run()`.
            ValueError: A call id is both approved and rejected.
            ApprovalError: A call id does not wait for a decision; checked
                before any decision is kept.
        """
        approved = _call_ids("approve", approve)
        reasons: Mapping[str, str | None] = (
            reject if isinstance(reject, Mapping) else dict.fromkeys(_call_ids("reject", reject))
        )
        both = sorted(set(approved) & set(reasons))
        if both:
            raise ValueError(f"call(s) {both} are both approved and rejected: decide each once")
        async with self._session(session, owner, store, model) as (context, chosen):
            loop = self._loop(context, chosen)
            waiting = {call.id for call in await loop.pending_approvals()}
            # A call that does not wait is refused (ApprovalError) or a repeat (no-op):
            # decided first, so a refusal comes before any new decision is kept.
            order = sorted([*approved, *reasons], key=lambda call_id: call_id in waiting)
            for call_id in order:
                if call_id in reasons:
                    await loop.reject(call_id, reasons[call_id])
                else:
                    await loop.approve(call_id)
            return await loop.run()

    async def erase(
        self,
        *,
        owner: str | None = None,
        session: str | None = None,
        older_than: timedelta | None = None,
        store: Database | None = None,
    ) -> int:
        """Remove sessions for good: `owner`'s, the one named `session`, or both.

        `ContextStore.erase` on the assistant's database (`store=` overrides
        it, as for `run()`): messages, archive, usage, approvals and offloaded
        blobs. With `recall=SemanticRecall(...)` the erased sessions' vectors
        go too (`SemanticRecall.erase`), which a bare `store.erase` cannot
        reach. Returns how many sessions were erased.

        Raises:
            ValueError, TypeError: As `ContextStore.erase` (neither `owner` nor
                `session` given, an empty one, a negative `older_than`):
                nothing is erased.
        """
        check_erase(owner, session, older_than)
        _check_database(store, "store")
        async with _connected(self.store if store is None else store) as connection:
            sessions = _store(connection, None, None)  # erase names its sessions itself
            if isinstance(self.recall, SemanticRecall):
                return await self.recall.erase(
                    sessions, owner=owner, session=session, older_than=older_than
                )
            return await sessions.erase(owner=owner, session=session, older_than=older_than)

    # -- as a tool -------------------------------------------------------------

    def as_tool(self, name: str, description: str, *, keep: Keep = "transcript") -> Tool[..., Any]:
        """This definition as a tool another agent's model can call: a sub-agent.

        Made once (module level is fine) and given in another definition's
        `tools`. Each call builds this definition's agent and loop in an
        `AgentScope` of its own and runs it as `ModelLoop.as_tool` does: on a
        branch, with the one argument `task`, answering with the text (or the
        `output`); usage recorded in the caller's session, linked to the call.
        Called inside an `Assistant` call, the sub-agent's transcript goes in
        the caller's database with the caller's owner; otherwise in this
        definition's `store`.

        Args:
            name: The tool's name, as the calling model calls it.
            description: When to use it, as the calling model reads it.
            keep: `"transcript"` keeps each call's conversation in a session
                of its own; `"none"` keeps only its usage (as `ModelLoop.as_tool`).

        Raises:
            ValueError: `name` is not 1-64 letters, digits, `_` or `-`,
                `description` is empty, `keep` is unknown, or the definition
                has no model (a sub-agent runs without a caller's `model=`).
        """
        check_subagent("Assistant.as_tool", name, description, merge=False, keep=keep)
        if self.model is None:
            raise ValueError(
                f"Assistant {self.name!r} has no model to run as the sub-agent {name!r}; "
                "give it one: Assistant(..., model=...)"
            )

        async def subagent(task: str) -> Any:
            caller = _RUNNING.get()
            if caller is None:
                where, base, owner = self.store, f"{self.name}-{uuid.uuid4().hex}", None
            else:
                where, base, owner = caller.connection, f"{caller.session}/{name}", caller.owner
            async with _connected(where) as connection, AgentScope():
                context = self._context(_store(connection, base, owner))
                loop = self._loop(context, self.model)
                return await run_subagent(loop, name, task, merge=False, keep=keep)

        return subagent_as_tool(subagent, name, description)

    # -- per call ----------------------------------------------------------------

    def _context(self, store: ContextStore) -> ContextConfig:
        """A call's context over `store`: its own copy of the strategy, and the recall."""
        strategy = None if self.strategy is None else copy.copy(self.strategy)
        return ContextConfig(store, strategy, recall=self.recall)

    def _loop(
        self, context: ContextConfig, model: Model | None, *, asking: type[Any] | None = None
    ) -> ModelLoop:
        """This definition's agent and loop over `context` (in the caller's `AgentScope`).

        `asking`: the output type of `ask()`, whose loop offers no tools and
        takes no lease (its branch is never written).
        """
        agent = Agent(self.name, self.description, [], context=context)
        return ModelLoop(
            agent,
            _NoModel() if model is None else model,
            tools=self.tools if asking is None else (),
            instructions=self.instructions,
            output_type=self.output_type if asking is None else asking,
            settings=self.settings,
            retry=self.retry,
            limits=self.limits,
            tool_policy=self.tool_policy,
            lease=self.lease if asking is None else None,
        )

    @contextlib.asynccontextmanager
    async def _session(
        self, session: str, owner: str | None, store: Database | None, model: Model | None
    ) -> AsyncIterator[tuple[ContextConfig, Model]]:
        """The call's context over `session` and its model, in its connection and scope."""
        _check_session(session, owner)
        _check_database(store, "store")
        chosen = self.model if model is None else model
        if chosen is None:
            raise ValueError(
                f"Assistant {self.name!r} has no model: give one to the definition "
                "(Assistant(..., model=OpenAIModel('gpt-4.1-mini'))) or to this call (model=...)"
            )
        where = self.store if store is None else store
        async with _connected(where) as connection, AgentScope():
            context = self._context(_store(connection, session, owner))
            token = _RUNNING.set(_Running(connection, session, owner))
            try:
                yield context, chosen
            finally:
                # A stream closed by the garbage collector ends in another context,
                # where the token cannot be reset (nor needs to be).
                with contextlib.suppress(ValueError):
                    _RUNNING.reset(token)


# -- checks and stores ---------------------------------------------------------------


def _check_tool_names(name: str, tools: tuple[Tool[..., Any], ...]) -> None:
    seen: set[str] = set()
    for tool in tools:
        if not isinstance(tool, Tool):
            raise TypeError(
                f"Assistant {name!r} tools must be Tools (@tool functions, or "
                f"Assistant.as_tool(...) sub-agents), not {tool!r}"
            )
        if tool.metadata.name in seen:
            raise ValueError(
                f"Assistant {name!r} has two tools named {tool.metadata.name!r}; rename one "
                "(a sub-agent's name is the first argument of as_tool(name, description))"
            )
        seen.add(tool.metadata.name)


def _check_session(session: object, owner: object) -> None:
    example = "the session's id, e.g. session='alice'"
    if not storable_text(session, "session", fix=example).strip():
        raise ValueError(f"session must not be blank, not {session!r}; {example}")
    if owner is not None:
        storable_text(owner, "owner", fix="the user or tenant id, or None")


def _check_database(store: object, what: str) -> None:
    if store is not None and not isinstance(
        store, str | os.PathLike | SQLiteConnection | PostgresConnection
    ):
        raise TypeError(
            f"{what} must be a SQLite file's path, or an open connection (await "
            f"connect(path), await connect_postgres(dsn)), not {store!r}"
        )


@contextlib.asynccontextmanager
async def _connected(
    where: Database | None,
) -> AsyncIterator[SQLiteConnection | PostgresConnection]:
    """An open connection to `where`: itself, or a path opened for the block."""
    if isinstance(where, SQLiteConnection | PostgresConnection):
        yield where
        return
    path = where if where is not None else os.environ.get(_DATABASE_ENV) or DEFAULT_DATABASE
    async with connect(path) as connection:
        yield connection


def _store(
    connection: SQLiteConnection | PostgresConnection, session: str | None, owner: str | None
) -> ContextStore:
    """A store of `session` (None: a new id) on `connection`, SQLite or PostgreSQL."""
    if isinstance(connection, PostgresConnection):
        return PostgresContextStore(connection, session_id=session, owner=owner)
    return SQLiteContextStore(connection, session_id=session, owner=owner)


def _call_ids(what: str, ids: object) -> list[str]:
    return strings(ids, what, fix=f"pass a list of call ids ({what}=['call_1'])")
