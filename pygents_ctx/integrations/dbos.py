"""A `ModelLoop` (or `Assistant`) run as a DBOS workflow, each model call and tool call a step.

    from dbos import DBOS
    from pygents_ctx.integrations.dbos import durable_run

    @DBOS.workflow()
    async def answer(session: str, question: str) -> str:
        finished = await durable_run(support, question, session=session)
        return finished.text

Inside a DBOS workflow, `durable_run` runs the loop with its model calls
and its tool calls as DBOS steps. When the process dies, DBOS runs the
workflow again when it recovers it (at the next launch, or in another
process DBOS hands the dead one's workflows to), and the run goes on where
it stopped: a model call DBOS recorded is not made again, even when its
reply had not reached the store; a tool call DBOS recorded, or the step
journal finished, is not run again and is answered with its result; one that
started and was not recorded shows the model `INTERRUPTED` (it may have
run), as in any resumed run. Needs the `dbos` extra
(`pip install -e '.[dbos]'` from a checkout).

How a run matches DBOS's records. DBOS knows a step by its place in the
workflow (the first step, the second, ...), and re-runs the workflow's code,
which must call its steps in the same order. A resumed loop does not: it
reads the conversation from the store and skips what is there. So every step
of a durable run is recorded under one name, with what it was (a model call
and its request's digest, a tool call and its id); a run that starts again
first reads back every step it recorded, in order, then answers a model call
DBOS holds from that record. Steps are only ever added at the end, in the
order they run, which is the order DBOS checks. The prompt is stored with a
mark of the run (in its message's metadata), so a run started again does
not add it twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

import orjson

from pygents_ctx.context.messages import Message, ToolResultBlock, ToolUseBlock, to_dict
from pygents_ctx.context.stores import (
    AutoCompactStore,
    HistoryRetention,
    PostgresContextStore,
    SQLiteContextStore,
)
from pygents_ctx.errors import SessionBusyError
from pygents_ctx.model import Assistant, ModelLoop
from pygents_ctx.model._acting import CALL_RUNNER, CallWork
from pygents_ctx.model.assistant import _connected as connected
from pygents_ctx.model.assistant import _store as session_store
from pygents_ctx.model.base import (
    Model,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    Tools,
    Window,
    window_parts,
)
from pygents_ctx.model.events import LoopFinished
from pygents_ctx.model.options import LeasePolicy

if TYPE_CHECKING:
    from pygents_ctx.context.stores import ContextStore

__all__ = ["STEP_NAME", "durable_run"]

STEP_NAME: Final = "pygents_ctx.step"
"""The name DBOS lists every step of a durable run under (`DBOS.list_workflow_steps`)."""

# The metadata key of a durable run's prompt: the run's id, so a run started again finds it.
_PROMPT_MARK: Final = "dbos_run"
# How often a recovered run tries the session's lease again while the dead holder's runs out.
_LEASE_RETRY_SECONDS: Final = 0.2


def _dbos() -> Any:
    """The `DBOS` class, or an ImportError naming the extra to install."""
    try:
        from dbos import DBOS
    except ImportError as exc:
        raise ImportError(
            "durable runs on DBOS need the dbos package: pip install -e '.[dbos]' "
            "(the dbos extra), or pip install 'dbos>=3.4'"
        ) from exc
    return DBOS


# Read back by DBOS from its records (pickled), across restarts and upgrades: keep its
# module, name and fields.
@dataclass(frozen=True)
class _Record:
    """What one step of a durable run recorded: its kind, its identity, and its output.

    `kind` is "run" (the run's first step; `key` is the run's id), "model"
    (`key` the request's digest, `value` the `ModelResponse`, None if the
    call failed), "tool" (`key` the call's id, `value` its `ToolResultBlock`)
    or "end" (`value` the run's `LoopFinished`).
    """

    kind: str
    key: str
    value: Any = None


class _Replay:
    """One execution of a durable run: its steps, and what the earlier executions recorded."""

    def __init__(self) -> None:
        self.run_id = ""
        self.recovered = False
        self.finished: LoopFinished | None = None
        self.responses: dict[str, ModelResponse] = {}
        self.results: dict[str, ToolResultBlock] = {}

    def _file(self, record: _Record) -> None:
        if record.kind == "model" and record.value is not None:
            self.responses[record.key] = record.value
        elif record.kind == "tool" and record.value is not None:
            self.results[record.key] = record.value
        elif record.kind == "end":
            self.finished = record.value

    async def start(self) -> None:
        """Read back the steps earlier executions recorded, up to the first one not recorded.

        The run's first step is its id: made by the first execution, read
        back by the others. Stops at the run's end, if it was recorded (the
        workflow's later steps are its own code's).
        """
        DBOS = _dbos()
        made = uuid.uuid4().hex
        while True:
            ran = False

            async def begin() -> _Record:
                nonlocal ran
                ran = True
                return _Record("run", made)

            record = await DBOS.run_step_async({"name": STEP_NAME}, begin)
            if ran:
                self.run_id = self.run_id or made
                return
            if not isinstance(record, _Record):
                raise RuntimeError(
                    f"the DBOS workflow recorded {record!r} where a durable run's step was "
                    "expected; run durable_run() at the same place in the workflow every time"
                )
            self.recovered = True
            self.run_id = self.run_id or record.key  # the first record is the run's id
            self._file(record)
            if record.kind == "end":
                return

    async def step(self, kind: str, key: str, work: Callable[[], Awaitable[Any]]) -> Any:
        """`work()` as the workflow's next step, recorded as (`kind`, `key`) with its output.

        Steps an earlier execution recorded after one it did not finish (calls
        run at once) are met on the way: each is read back, and one with this
        identity is this step's output. An exception `work` raises is not
        recorded (the step is recorded with no output) and is raised again.
        """
        DBOS = _dbos()
        while True:
            ran = False
            failure: Exception | None = None

            async def body() -> _Record:
                nonlocal ran, failure
                ran = True
                try:
                    return _Record(kind, key, await work())
                except Exception as error:  # raised below, not kept by DBOS
                    failure = error
                    return _Record(kind, key)

            record = await DBOS.run_step_async({"name": STEP_NAME}, body)
            if ran:
                if failure is not None:
                    raise failure
                return record.value
            self._file(record)
            if (record.kind, record.key) == (kind, key) and record.value is not None:
                self.responses.pop(key, None)  # this call's: no later call takes it
                return record.value


def _digest(window: Window, tools: Tools) -> str:
    """What identifies a model call within its run: the messages and the tools' names."""
    messages, _ = window_parts(window)
    shown = [to_dict(message) for message in messages], [t.metadata.name for t in tools]
    return hashlib.sha256(orjson.dumps(shown, default=str)).hexdigest()


class _StepModel:
    """A `Model` whose every call is a step of the durable run `replay`."""

    def __init__(self, model: Model, replay: _Replay) -> None:
        self.model = model
        self.replay = replay

    def __repr__(self) -> str:
        return f"<durable {self.model!r}>"

    async def complete(
        self, window: Window, tools: Tools = (), *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        key = _digest(window, tools)
        recorded = self.replay.responses.pop(key, None)
        if recorded is not None:  # DBOS has its reply: the call is not made again
            return recorded
        response: ModelResponse = await self.replay.step(
            "model", key, lambda: self.model.complete(window, tools, settings=settings)
        )
        return response

    async def stream(
        self, window: Window, tools: Tools = (), *, settings: ModelSettings | None = None
    ) -> AsyncIterator[ModelStreamEvent]:
        # A step's output is recorded whole: the reply comes at once, without deltas.
        yield await self.complete(window, tools, settings=settings)


def _tool_runner(
    replay: _Replay,
) -> Callable[[ToolUseBlock, CallWork], Awaitable[tuple[ToolResultBlock, list[Any]]]]:
    async def run(call: ToolUseBlock, work: CallWork) -> tuple[ToolResultBlock, list[Any]]:
        routed: list[Any] = []

        async def result() -> ToolResultBlock:
            block, values = await work()
            routed.extend(values)  # routed here, in this execution: DBOS keeps the result
            return block

        block: ToolResultBlock = await replay.step("tool", call.id, result)
        return block, routed

    return run


def _durable_store(store: ContextStore) -> bool:
    while isinstance(store, AutoCompactStore):
        store = store.inner
    return isinstance(store, SQLiteContextStore | PostgresContextStore)


def _check(runner: object, prompt: object, session: object) -> None:
    """Refuse what cannot run durably, before anything runs or is recorded."""
    DBOS = _dbos()
    if isinstance(runner, ModelLoop):
        if session is not None:
            raise TypeError(
                "durable_run(loop, ...) takes no session: the loop's ContextConfig names "
                "it; session= is for an Assistant"
            )
        context = runner.agent.context
        assert context is not None  # a ModelLoop refuses an agent without one
        if context.retention is HistoryRetention.NONE or not _durable_store(context.store):
            raise ValueError(
                f"durable_run needs the loop's conversation in a database the next process "
                f"reads: give agent {runner.agent.name!r} ContextConfig(SQLiteContextStore(...)) "
                f"or a PostgresContextStore, with history kept (not {context.store!r}, "
                f"retention {context.retention.name})"
            )
    elif isinstance(runner, Assistant):
        if not isinstance(session, str):
            raise TypeError(
                "durable_run(assistant, prompt, session=...) needs the session's id, a str "
                f"(e.g. session='alice'), not {session!r}"
            )
    else:
        raise TypeError(f"durable_run runs a ModelLoop or an Assistant, not {runner!r}")
    if not (
        prompt is None
        or isinstance(prompt, str)
        or (isinstance(prompt, Message) and prompt.role == "user")
    ):
        raise TypeError(f"durable_run prompt must be a str, a user Message or None, not {prompt!r}")
    if DBOS.workflow_id is None or DBOS.step_id is not None:
        raise RuntimeError(
            "durable_run runs inside a DBOS workflow, in the workflow's own code: call it "
            "from an @DBOS.workflow() function (after DBOS(config=...) and DBOS.launch()), "
            "not from a step and not outside a workflow"
        )


def _marked(prompt: str | Message, run_id: str) -> Message:
    message = prompt if isinstance(prompt, Message) else Message("user", prompt)
    return replace(message, metadata={**(message.metadata or {}), _PROMPT_MARK: run_id})


async def _recovered(
    store: ContextStore, lease: LeasePolicy | None, prompt: Message | str | None, replay: _Replay
) -> Message | str | None:
    """Before a recovered run: the journal told what DBOS recorded; the prompt, unless stored.

    A tool call whose step DBOS recorded, but which the process died before
    the journal finished, is finished in the journal with the recorded result
    (so the run answers it with that, not as interrupted). Under the session's
    lease, as the loop's writes are (`SessionBusyError` while the dead
    process's lease lasts).
    """
    async with (
        contextlib.nullcontext() if lease is None else store.lease(ttl=lease.ttl, create=True)
    ):
        kept = await store.get_journal(replay.results)
        for call_id, result in replay.results.items():
            if call_id in kept and kept[call_id] is None:
                await store.journal_finish(call_id, result)
        if prompt is not None and any(
            message.metadata is not None and message.metadata.get(_PROMPT_MARK) == replay.run_id
            for message in reversed(await store.get_history())
        ):
            return None  # stored before the process died
    return prompt


async def durable_run(
    runner: ModelLoop | Assistant,
    prompt: str | Message | None,
    *,
    session: str | None = None,
    owner: str | None = None,
) -> LoopFinished:
    """Run `runner` on `prompt` as part of the DBOS workflow calling it; how the run ended.

    Call it from an `@DBOS.workflow()` function. The run is `runner.run()`
    (`ModelLoop.run`, or `Assistant.run` on `session`), with each model call
    and each tool call a DBOS step (all named `STEP_NAME`). If the process
    dies, DBOS runs the workflow again, and this call goes on from where the
    run stopped: it never makes a model call DBOS recorded again, never runs a
    finished tool call again (one DBOS or the step journal recorded is
    answered with its result, one that only started is `INTERRUPTED`), and
    stores the prompt once. A run started again before the
    dead process's session lease ran out waits for it (up to the lease's
    `ttl`). Once the run ended, the workflow started again returns the same
    `LoopFinished` without running anything.

    The loop is built by the workflow's code, so a process that recovers the
    workflow builds it again: build it (and open its store) inside the
    workflow. Model calls are made with `complete` (no streamed deltas).
    Bad input (the ImportError, RuntimeError, ValueError and TypeError below)
    is refused before anything is recorded or stored.

    Args:
        runner: A `ModelLoop` whose conversation is in a SQLite or PostgreSQL
            store, or an `Assistant` (its store is always a database).
        prompt: The user's message; None continues the stored conversation.
        session: The session's id: for an `Assistant` only (a loop's
            `ContextConfig` names its own).
        owner: The session's owner, for an `Assistant` (`Assistant.run`).

    Returns:
        The run's `LoopFinished`, as `run()` returns it.

    Raises:
        ImportError: DBOS is not installed (the `dbos` extra).
        RuntimeError: Not called from a DBOS workflow's own code (outside any
            workflow, or from a step).
        ValueError: The loop's conversation is not kept in a database (a
            `MemoryContextStore`, or `HistoryRetention.NONE`): no other
            process could go on with it.
        TypeError: `runner` is neither a `ModelLoop` nor an `Assistant`,
            `session` is missing (an `Assistant`) or given (a loop), or
            `prompt` is not user text.
        SessionBusyError, ModelError, ...: As for `ModelLoop.run`.

    Examples:
        A workflow answering a question in a session, with the `Assistant`
        `support` (the durable runs guide runs this, with DBOS launched)::

            @DBOS.workflow()
            async def answer(session: str, question: str) -> str:
                finished = await durable_run(support, question, session=session)
                return finished.text
    """
    _check(runner, prompt, session)
    replay = _Replay()
    await replay.start()
    if replay.finished is not None:  # recorded: the run ended before the process died
        return replay.finished
    finished = await _run(runner, prompt, session, owner, replay)
    return await replay.step("end", replay.run_id, lambda: _value(finished))  # type: ignore[no-any-return]


async def _value(finished: LoopFinished) -> LoopFinished:
    return finished


async def _run(
    runner: ModelLoop | Assistant,
    prompt: str | Message | None,
    session: str | None,
    owner: str | None,
    replay: _Replay,
) -> LoopFinished:
    """The run, its tool calls as steps; recovered, it waits out the dead process's lease."""
    lease = runner.lease
    deadline = time.monotonic() + (0.0 if lease is None else lease.ttl + 1.0)
    token = CALL_RUNNER.set(_tool_runner(replay))
    try:
        while True:
            try:
                return await _once(runner, prompt, session, owner, replay)
            except SessionBusyError:  # nothing was stored: the lease is taken first
                if not replay.recovered or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(_LEASE_RETRY_SECONDS)  # the dead process's lease runs out
    finally:
        CALL_RUNNER.reset(token)


async def _once(
    runner: ModelLoop | Assistant,
    prompt: str | Message | None,
    session: str | None,
    owner: str | None,
    replay: _Replay,
) -> LoopFinished:
    if isinstance(runner, Assistant):
        assert session is not None  # _check saw to it
        if replay.recovered:
            async with connected(runner.store) as connection:
                store = session_store(connection, session, owner)
                prompt = await _recovered(store, runner.lease, prompt, replay)
        model = runner.model
        if model is None:
            raise ValueError(
                f"Assistant {runner.name!r} has no model: give one to the definition "
                "(Assistant(..., model=OpenAIModel('gpt-4.1-mini')))"
            )
        marked = None if prompt is None else _marked(prompt, replay.run_id)
        return await runner.run(
            marked, session=session, owner=owner, model=_StepModel(model, replay)
        )
    context = runner.agent.context
    assert context is not None
    if replay.recovered:
        prompt = await _recovered(await context.ready(), runner.lease, prompt, replay)
    inner = runner.model
    runner.model = _StepModel(inner, replay)
    try:
        return await runner.run(None if prompt is None else _marked(prompt, replay.run_id))
    finally:
        runner.model = inner
