"""`ModelLoop`: an agent that thinks with a model and acts with its tools, as turns.

Each step of the loop is a turn on the agent, so everything the runtime has
applies to it: hooks, pause and resume, saving and restoring, branching, the
conversation store.

- `model_ask` puts the user's message into the conversation, then queues a
  `model_think`.
- `model_think` builds the window (`ContextConfig.window_of`), calls the model
  (retrying transient failures), stores the reply and its usage, then queues a
  `model_act` for its tool calls, or ends the run with the answer.
- `model_act` runs the calls, each as a `Turn`, several at once (up to
  `ToolPolicy.parallel`), stores all their results as one user message, and queues
  the next `model_think`.

The store is the truth the steps act on: `model_think` answers tool calls the
store holds without results instead of calling the model, and `model_act` runs
only the calls still unanswered. So a step that runs again after an
interruption does not repeat what was done.

A run that stops early leaves no tool call without a result, unless the
agent still holds the step that will produce it:

- cancelled while tools run: the results of the calls that finished are
  stored, and each call that did not gets an error result saying it was
  cancelled (it may have half run; the model decides whether to call again);
- cancelled during a model call: nothing of that call is stored, and the step
  stays on the agent, to run first next time;
- cancelled while paused between steps: the next step stays queued (and is
  saved by `agent.to_json()`); it runs the waiting calls when the loop goes on;
- the caller stops reading `stream()` (closed with `aclosing`, or collected):
  the step it interrupted is gone; as when cancelled, the calls that finished
  keep their results and the others get cancelled results.

A reply with a call whose tool `needs_approval` ends the run at `model_act`,
which stays queued holding the decisions (`pygents_ctx.model._approvals`);
a new prompt drops it, and its calls are answered as not run.

What a reply must be to be stored: an empty reply (no text, no tool calls) is
never stored; it counts as a transient `ModelAPIError`, retried by the
`RetryPolicy`, then raised. A reply cut by its token limit ends the run with
`LoopStop.LENGTH`: its text is stored, its tool calls are not. A refused
reply (`ModelResponse.refusal`) ends the run with `LoopStop.REFUSAL`, never
asked again: its refusal text is stored as the assistant's message (marked in
its metadata), its tool calls are not stored and do not run.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

from pygents_ctx.agent import Agent
from pygents_ctx.agent._checkpoints import auto_checkpoint
from pygents_ctx.context.config import ContextConfig
from pygents_ctx.context.items import ContextItem
from pygents_ctx.context.messages import (
    READ_TOOL_RESULT,
    Message,
    ToolResultBlock,
    ToolUseBlock,
    from_dict,
    to_dict,
)
from pygents_ctx.context.stores.base import ApprovalDecision, HistoryRetention
from pygents_ctx.context.stores.base import check_decision as check_storable
from pygents_ctx.context.stores.lease import SessionLease, current_fence
from pygents_ctx.context.strategies.summarize import SUMMARY_HEAD, is_summary, summary_mark
from pygents_ctx.context.usage import Usage, UsageRecord, WindowRecord
from pygents_ctx.errors import OutputValidationError, SafeExecutionError, ToolResultNotFoundError
from pygents_ctx.model._acting import Journal, cancel_unanswered, run_calls
from pygents_ctx.model._approvals import (
    approval_state,
    check_decision,
    decisions_of,
    pending_of,
    refused_results,
    waiting_step,
)
from pygents_ctx.model._loop_checks import check_options
from pygents_ctx.model._observers import OBSERVERS, watch_run
from pygents_ctx.model._output import StructuredOutput
from pygents_ctx.model._replies import (
    call_model,
    closing,
    is_refusal,
    kept_of_cut_reply,
    stored_refusal,
)
from pygents_ctx.model._steps import ACT, ASK, RUNNING, STEP_TOOLS, THINK, register_step_tools
from pygents_ctx.model._subagent import Keep, UsageSink, subagent_tool
from pygents_ctx.model._tool_calls import NOT_RUN, answer_of, check_call, unanswered_calls
from pygents_ctx.model.base import (
    Model,
    ModelResponse,
    ModelSettings,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from pygents_ctx.model.definitions import to_openai_tools
from pygents_ctx.model.events import (
    AgentValue,
    LoopEvent,
    LoopFinished,
    LoopStop,
    ModelReplied,
    ModelRetry,
    StepStarted,
    ToolApprovalRequired,
    ToolCallFinished,
    ToolCallStarted,
)
from pygents_ctx.model.history_search import names_offloaded, search_history
from pygents_ctx.model.offload import ToolResultOffload, offloaded_handles, read_tool
from pygents_ctx.model.options import LeasePolicy, LoopLimits, ToolPolicy
from pygents_ctx.model.retry import RetryPolicy
from pygents_ctx.tools import Tool
from pygents_ctx.turns import Turn

__all__ = ["ModelLoop"]

# The defaults of the option groups (frozen: one value serves every loop).
SEARCH_HISTORY: Final = search_history.metadata.name
_LIMITS: Final = LoopLimits()
_LEASE: Final = LeasePolicy()
_OWN_EVENTS: Final = (
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    StepStarted,
    ModelRetry,
    ModelReplied,
    ToolCallStarted,
    ToolCallFinished,
    ToolApprovalRequired,
    LoopFinished,
)


@dataclass(slots=True)
class _Run:
    """What one run of the loop counts."""

    streaming: bool
    steps: int = 0
    usage: Usage = field(default_factory=Usage)
    run_id: str | None = None
    finished: LoopFinished | None = None
    # The calls of the reply `model_think` just stored: the `model_act` it queued
    # knows they are unanswered without reading the history again.
    fresh_calls: tuple[ToolUseBlock, ...] = ()
    # The `model_act` step that stopped for approvals: queued when the run ends.
    awaiting: Turn | None = None
    # Answers refused for not fitting the output type, in a row.
    refused_answers: int = 0


class ModelLoop:
    """An agent's model loop: think with `model`, act with the agent's tools, until an answer.

    Construction adds the loop's three step tools (`model_ask`, `model_think`,
    `model_act`) to the agent's tools. Run it with `await loop.run(prompt)`,
    which returns the `LoopFinished` event, or `async for event in
    loop.stream(prompt)`, which yields every event as it happens, the reply's
    text as it is written included. Without a prompt, both continue the
    conversation: a step left pending (paused, restored, interrupted), or a
    model call for the stored conversation.

    Limits count per run (one `run()` or `stream()`; see `LoopLimits`). A run
    that reaches one ends with `LoopFinished(reason=...)` before the call that
    would pass it. A call of a tool that `needs_approval` ends the run with
    `LoopStop.APPROVAL` until `approve()` / `reject()`. A reply the model
    refused ends it with `LoopStop.REFUSAL` (`LoopFinished.refusal`).

    Args:
        agent: The agent; it needs a `context` (`ContextConfig`), whose
            strategy builds each window.
        model: The `Model` to call.
        tools: The tools the model may call (default: the agent's tools).
        instructions: A system prompt put before the history (not stored); the
            strategy builds the window from both, so its budget covers it.
        output_type: The type of the answer (a dataclass, `TypedDict` or pydantic
            model): its JSON schema goes with every model call
            (`settings.output_schema`), and the answer is made a `T`
            (`LoopFinished.output`). None: free text.
        settings: Settings for every model call (over the model's own).
        retry: How transient model failures are retried (default `RetryPolicy()`).
        limits: Steps, tokens and cost per run, the step timeout, and the
            retries of an answer that does not fit `output_type` (`LoopLimits`).
        tool_policy: How the calls of one reply run (how many at once, for how
            long) and whether results too large for the window are offloaded
            (`ToolPolicy`; None: `ToolPolicy()`, which offloads results over
            8,000 tokens to a blob store beside the conversation, a stub in the
            history, and offers the `read_tool_result` tool while the window
            holds a stub).
        lease: Hold the store session's lease for each run, as the
            `LeasePolicy` says, so no other run (in this process or any other
            sharing the database) writes to the session at the same time; a
            new session is created for it. None: take no lease.

    Raises:
        TypeError: `agent` is not an `Agent`, `model` has no `complete` and
            `stream`, a tool is not a `Tool`, an option is not of its type
            (`limits` a `LoopLimits`, ...), or `output_type` is not a
            dataclass, `TypedDict` or pydantic model.
        ValueError: The agent has no context, two tools share a name (or one
            is named `read_tool_result` while offloading is on), or
            `output_type` is given with `settings.output_schema`.
        SafeExecutionError: The agent is running.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Agent, ContextConfig, tool
        >>> from pygents_ctx.testing import ScriptedModel, assistant, tool_call
        >>> @tool
        ... async def add(a: int, b: int) -> int:
        ...     "Add two numbers."
        ...     return a + b
        >>> agent = Agent("calc", "Adds", [add], context=ContextConfig.default())
        >>> model = ScriptedModel([assistant(tool_call("add", a=2, b=3)), "2 + 3 = 5"])
        >>> asyncio.run(ModelLoop(agent, model).run("What is 2 + 3?")).text
        '2 + 3 = 5'
    """

    def __init__(
        self,
        agent: Agent,
        model: Model,
        *,
        tools: Iterable[Tool[..., Any]] | None = None,
        instructions: str | None = None,
        output_type: type[Any] | None = None,
        settings: ModelSettings | None = None,
        retry: RetryPolicy | None = None,
        limits: LoopLimits = _LIMITS,
        tool_policy: ToolPolicy | None = None,
        lease: LeasePolicy | None = _LEASE,
    ) -> None:
        check_options(
            agent,
            model,
            instructions=instructions,
            settings=settings,
            retry=retry,
            limits=limits,
            tool_policy=tool_policy,
            lease=lease,
        )
        output = StructuredOutput.of(output_type, settings)
        policy = ToolPolicy() if tool_policy is None else tool_policy
        chosen = [t for t in (agent.tools if tools is None else tools) if t not in STEP_TOOLS]
        to_openai_tools(chosen)  # checks the tools and their names, as both APIs need them
        offload = policy.offload
        if offload is not None and any(t.metadata.name == READ_TOOL_RESULT for t in chosen):
            raise ValueError(
                f"ModelLoop has a tool named {READ_TOOL_RESULT!r}, the name of the tool that "
                "reads offloaded results; rename yours, or pass "
                "tool_policy=ToolPolicy(offload=None)"
            )
        register_step_tools(agent.registry.tools)  # where the agent's tools are checked
        missing = [step for step in STEP_TOOLS if step not in agent.tools]
        if missing:
            agent.tools = [*agent.tools, *missing]
        self.agent = agent
        self.model = model
        self.tools: list[Tool[..., Any]] = chosen
        self.instructions = instructions
        self.output_type = output_type
        self.settings = settings
        self.retry = RetryPolicy() if retry is None else retry
        self.limits = limits
        self.tool_policy = policy
        self.lease = lease
        self._output = output
        # What every model call is given: the loop's settings, with the output's schema.
        self._call_settings = settings if output is None else output.settings(settings)
        self._read_tool = None if offload is None else read_tool(self._read, offload.page_chars)
        self._by_name = {t.metadata.name: t for t in chosen}
        searching = policy.search_history and SEARCH_HISTORY not in self._by_name
        self._search_tool = search_history if searching else None
        self._instructions = None if instructions is None else Message("system", instructions)
        self._run: _Run | None = None
        # A sub-agent's loop (`as_tool`): where its usage goes, linked to its call.
        self._usage_into: UsageSink | None = None

    def __repr__(self) -> str:
        return f"<ModelLoop {self.agent.name} model={self.model!r}>"

    @staticmethod
    def register_tools() -> None:
        """Register the loop's step tools (`model_ask`, `model_think`, `model_act`) now.

        Not needed in most programs: they are registered when a loop is made,
        and when loading an agent saved mid-loop looks one up by name (importing
        `pygents_ctx` does not register them, so `ToolRegistry.all()` lists the
        program's tools only).
        """
        register_step_tools()

    @property
    def _context(self) -> ContextConfig:
        context = self.agent.context
        if context is None:
            raise ValueError(
                f"agent {self.agent.name!r} lost its context; the model loop needs one"
            )
        return context

    # -- approvals (see pygents_ctx.model._approvals) -------------------------------

    async def pending_approvals(self) -> list[ToolUseBlock]:
        """The tool calls waiting for a person's decision, in the order the model made them.

        Read from the store: the newest reply's calls without results whose
        tool `needs_approval`, less those decided. So a loop made in another
        request or process over the same session lists them too. Empty when
        none waits.
        """
        _, calls, approvals = await self._approval_state()
        return pending_of(calls, approvals)

    async def approve(self, call_id: str) -> None:
        """Let the waiting call `call_id` run when the loop runs again.

        The reply's calls run once every waiting call is decided: run the loop
        again without a prompt. The decision is kept in the store with the
        session (`ContextStore.record_decision`), so any loop over the session
        continues from it; approving a call twice changes nothing. With
        a `LeasePolicy` it is written under the session's lease (taken for the
        write, unless this code holds it already).

        Raises:
            TypeError: `call_id` is not a str.
            ApprovalError: `call_id` does not wait for a decision: unknown,
                needs no approval, rejected already, or answered by a newer
                message. Nothing was changed.
            SessionBusyError: A run holds the session's lease (after `LeasePolicy.wait`).
        """
        await self._decide(call_id, ApprovalDecision(True))

    async def reject(self, call_id: str, reason: str | None = None) -> None:
        """Refuse the waiting call `call_id`: the model reads that, with `reason`, as its result.

        Kept and applied as `approve` says; rejecting a call twice with the
        same reason changes nothing.

        Raises:
            TypeError: `call_id` or `reason` is not a str.
            ValueError: `reason` holds a NUL or a lone surrogate.
            ApprovalError: As for `approve`, or the call was approved, or
                rejected with another reason.
            SessionBusyError: As for `approve`.
        """
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"reject() reason must be a str, not {reason!r}")
        await self._decide(call_id, ApprovalDecision(False, reason))

    async def _approval_state(
        self,
    ) -> tuple[list[Message], list[ToolUseBlock], dict[str, ApprovalDecision | None]]:
        context = self._context
        history = await context.history()
        calls, approvals = await approval_state(history, self._by_name, await context.ready())
        return history, calls, approvals

    async def _decide(self, call_id: str, decision: ApprovalDecision) -> None:
        """Check that `call_id` waits, and record `decision` (under the lease, with `lease`)."""
        call_id, decision = check_storable(call_id, decision)
        store = await self._context.ready()
        checked = await self._approval_state()
        if not check_decision(self.agent, *checked, call_id, decision):
            return
        lease = None
        if self.lease is not None and current_fence(store) is None:
            taking = store.lease(ttl=self.lease.ttl, wait=self.lease.wait)
            lease = await taking.acquire()
        try:
            if lease is not None:  # checked again: a run may have moved on meanwhile
                checked = await self._approval_state()
                if not check_decision(self.agent, *checked, call_id, decision):
                    return
            held = await store.record_decision(call_id, decision)
            if held != decision:  # another person decided it the other way meanwhile
                history, calls, approvals = checked
                check_decision(
                    self.agent, history, calls, {**approvals, call_id: held}, call_id, decision
                )
        finally:
            if lease is not None:
                await lease.release()

    # -- offloaded tool results (see pygents_ctx.model.offload) --------------------

    async def read_tool_result(
        self, handle: str, offset: int = 0, length: int | None = None
    ) -> str:
        """Characters `offset` to `offset + length` of an offloaded tool result of this session.

        What the model reads with the `read_tool_result` tool, without the
        page limit and the note.

        Args:
            handle: The stub's handle (`ToolResultBlock.offloaded.handle`).
            offset: The first character, counted in the whole result.
            length: How many characters (None: to the end).

        Raises:
            ToolResultNotFoundError: No stub of this session's history or
                archive names `handle` (another session's, or a typo), or its
                blob is gone.
            TypeError, ValueError: `offset` or `length` is not an int in range.
            ValueError: The loop has no offload (`ToolPolicy(offload=None)`).
        """
        offload = await self._session_offload(handle)
        return await offload.read(handle, await self._context.ready(), offset=offset, length=length)

    async def _read(self, handle: str, offset: int, length: int) -> str:
        """The `read_tool_result` tool's call: a page, checked against this session."""
        offload = await self._session_offload(handle)
        store = await self._context.ready()
        return await offload.read_page(handle, store, offset=offset, length=length)

    async def _session_offload(self, handle: str) -> ToolResultOffload:
        offload = self.tool_policy.offload
        if offload is None:
            raise ValueError(
                "this ModelLoop does not offload tool results (ToolPolicy(offload=None)); "
                "make it with tool_policy=ToolPolicy(offload=ToolResultOffload(...)) on the "
                "blob store that holds them"
            )
        if handle not in offloaded_handles(await self._context.history()) and (
            handle not in await self._archived_handles()
        ):
            raise ToolResultNotFoundError(
                f"no offloaded tool result {handle!r} in this conversation (session "
                f"{self._context.session_id!r}); use a handle that one of its stubs names"
            )
        return offload

    async def _archived_handles(self) -> set[str]:
        """The handles the session's archive names: a stub compaction archived is still
        the session's (its search finds it), so it stays readable. Read on a miss only."""
        if self._context.retention is HistoryRetention.NONE:
            return set()
        store = await self._context.ready()
        return offloaded_handles([m async for m in store.iter_history(include_archived=True)])

    async def _finish_result(self, call: ToolUseBlock, result: ToolResultBlock) -> ToolResultBlock:
        """`result` as it is kept: offloaded if too large (a page it read never is)."""
        offload = self.tool_policy.offload
        if offload is None or call.name == READ_TOOL_RESULT:
            return result
        return await offload.apply(result, await self._context.ready())

    # -- as a tool -------------------------------------------------------------

    def as_tool(
        self, name: str, description: str, *, merge: bool = True, keep: Keep = "transcript"
    ) -> Tool[..., Any]:
        """This loop as a tool another loop's model can call: a sub-agent.

        The tool takes one argument, `task` (the whole task, as the sub-agent
        sees nothing else), and each call runs this loop on a branch of its
        agent (`async with agent.branch()`): its own name and its own
        conversation, so the calls of one reply run at once. It answers with
        the run's text, or its `output` with an `output_type`; a run that ends
        without an answer raises `SubagentError`, which the calling model
        reads as the call's error. With `merge`, each branch is merged back
        (`agent.merge(branch, on_conflict="branch")`): its pool and queue
        items. The calling loop's `ToolPolicy.timeout` bounds each call.

        The sub-agent's model calls are recorded once, where the calling loop
        records its own (the caller's session), each `UsageRecord` carrying
        `parent_session` and `call_id` (the call that ran it) and
        `subagent_session` (its transcript). The sub-agent takes no lease of
        its own: nothing else writes its transcript, and its records in the
        caller's session are fenced by the caller's lease.

        Args:
            name: The tool's name, as the calling model calls it.
            description: When to use it, as the calling model reads it.
            merge: Merge each branch's pool and queue items back into the agent.
            keep: `"transcript"` keeps each call's conversation, a fork of the
                agent's transcript, in a session of its own (its id is the
                records' `subagent_session`); `"none"` keeps it in memory
                only, for the run: no session is made, and only the usage
                records remain.

        Raises:
            ValueError: `name` is not 1-64 letters, digits, `_` or `-`,
                `description` is empty, or `keep` is not `"transcript"` or
                `"none"`.
            TypeError: `merge` is not a bool.

        Examples:
            >>> from pygents_ctx import Agent, ContextConfig
            >>> from pygents_ctx.testing import ScriptedModel
            >>> agent = Agent("researcher", "Looks up", [], context=ContextConfig.default())
            >>> loop = ModelLoop(agent, ScriptedModel(["The Moon's gravity."]))
            >>> loop.as_tool("research", "Find out one fact").metadata.input_schema["required"]
            ['task']
        """
        return subagent_tool(self, name, description, merge=merge, keep=keep)

    def _for(self, agent: Agent, usage_into: UsageSink | None) -> ModelLoop:
        """A loop like this one (model, tools, limits, ...) for `agent`, a sub-agent's.

        It takes no lease (the branch's conversation is its own), and with
        `usage_into` records its usage there (see `as_tool`).
        """
        loop = ModelLoop(
            agent,
            self.model,
            tools=self.tools,
            instructions=self.instructions,
            output_type=self.output_type,
            settings=self.settings,
            retry=self.retry,
            limits=self.limits,
            tool_policy=self.tool_policy,
            lease=None,
        )
        loop._usage_into = usage_into
        return loop

    # -- running ---------------------------------------------------------------

    async def run(self, prompt: str | Message | None = None) -> LoopFinished:
        """Run until the model answers, refuses, or a limit is reached; return how it ended.

        Args:
            prompt: The user's message; None continues the conversation.

        Raises:
            ValueError: `prompt` is not user text or a user message, or there
                is nothing to continue.
            SafeExecutionError: The agent is already running. (A paused agent's
                run waits for `resume()`, as `Agent.run()` does.)
            SessionBusyError: Another run holds the session's lease (with a `LeasePolicy`),
                still after its `wait`; nothing was changed.
            LeaseLostError: The lease was lost mid-run (this process stalled for
                longer than the lease's `ttl` and another run took it over).
            ModelError: A model call failed and was not (or no longer) retried.
            TurnTimeoutError: A step ran past `LoopLimits.step_timeout`.
        """
        finished: LoopFinished | None = None
        async for event in self._events(prompt, streaming=False):
            if isinstance(event, LoopFinished):
                finished = event
        if finished is None:
            raise RuntimeError(
                f"agent {self.agent.name!r} ended its run without the model loop finishing; "
                "were its loop turns removed?"
            )
        return finished

    def stream(self, prompt: str | Message | None = None) -> AsyncIterator[LoopEvent]:
        """Run as `run()` does, yielding every event as it happens, the text as it is written.

        Stopping early (`break`) stops the run: calls that did not finish get
        cancelled results, and `run()` continues later.

        Raises:
            ValueError, SafeExecutionError, ModelError, TurnTimeoutError: As for `run()`.
        """
        return self._events(prompt, streaming=True)

    async def _events(
        self, prompt: str | Message | None, *, streaming: bool
    ) -> AsyncIterator[LoopEvent]:
        agent = self.agent
        message = None if prompt is None else _user_message(prompt)
        if agent.is_running:
            raise SafeExecutionError(
                f"agent {agent.name!r} is already running; wait for its run to end"
            )
        lease = await self._take_lease()
        try:
            # aclosing: a stream stopped early stops the run now, and only then releases.
            events = self._leased_events(message, streaming, lease)
            async with closing(events):
                async for event in events:
                    yield event
        finally:
            if lease is not None:
                await lease.release()

    async def _take_lease(self) -> SessionLease | None:
        """The session's lease for this run (created with the session if it is new), or None."""
        if self.lease is None:
            return None
        store = await self._context.ready()
        lease = store.lease(ttl=self.lease.ttl, wait=self.lease.wait, create=True)
        return await lease.acquire()

    async def _leased_events(
        self, message: Message | None, streaming: bool, lease: SessionLease | None
    ) -> AsyncGenerator[LoopEvent, None]:
        agent = self.agent
        pending = [agent.current_turn, *agent.queue]
        if message is not None:
            waiting = waiting_step(agent)
            if waiting is not None:  # the new message moves on: `model_ask` answers them
                agent._turns.remove(waiting)
            await agent.put(Turn(ASK, kwargs={"message": to_dict(message)}))
        elif not any(turn is not None and turn.tool in STEP_TOOLS for turn in pending):
            if not await self._context.history():
                raise ValueError(
                    f"agent {agent.name!r} has no conversation to continue; give a prompt"
                )
            await agent.put(self._think_turn())
        run = self._run = _Run(streaming)
        values = cast("AsyncGenerator[tuple[Turn, Any], None]", agent.run())
        completed = False
        watch = watch_run(self) if OBSERVERS else None  # tracing: the run, current in its steps
        ended: BaseException | None = None
        try:
            while True:
                if lease is not None:
                    await lease.check()  # lost (taken over after a stall): stop writing
                token = RUNNING.set(self)
                if watch is not None:
                    watch.resume()
                try:
                    turn, value = await anext(values)
                except StopAsyncIteration:
                    break
                finally:
                    if watch is not None:
                        watch.pause()
                    RUNNING.reset(token)
                yield value if isinstance(value, _OWN_EVENTS) else AgentValue(turn, value)
            completed = True
        except BaseException as error:
            ended = error
            raise
        finally:
            token = RUNNING.set(self)
            try:
                await values.aclose()
                if run.awaiting is not None:  # it waits for decisions, on the agent
                    await agent.put(run.awaiting)
                # A lost lease is another run's now: the store would refuse the write.
                if not completed and not (lease is not None and lease.lost):
                    await cancel_unanswered(self.agent, self._context, run.run_id)
            finally:
                RUNNING.reset(token)
                self._run = None
                if watch is not None:  # last: the closing above belongs to the run
                    watch.end(run.finished, ended)

    def _think_turn(self) -> Turn:
        return Turn(THINK, timeout=self.limits.step_timeout)

    def _state(self) -> _Run:
        run = self._run
        if run is None:
            raise RuntimeError("the model loop is not running")
        run.run_id = self.agent.run_id or run.run_id
        return run

    # -- the steps ---------------------------------------------------------------

    async def _ask(self, data: dict[str, Any]) -> AsyncIterator[Any]:
        self._state()
        await auto_checkpoint(self.agent, self._context)  # at the message before the prompt
        message = from_dict(data)
        waiting = unanswered_calls(await self._context.history())
        if waiting:  # the conversation moves on: those calls are answered without running
            # As the step journal says: a finished call's result, INTERRUPTED for one that
            # started (it may have run), NOT_RUN only for one that never started.
            kept = (await Journal.of(self._context, waiting)).kept
            yield ContextItem(
                content=Message("user", [answer_of(call, kept, NOT_RUN) for call in waiting])
            )
        yield ContextItem(content=message)
        yield self._think_turn()

    async def _think(self) -> AsyncIterator[Any]:
        run = self._state()
        context = self._context
        history = await context.history()
        waiting = unanswered_calls(history)
        if waiting:  # stored calls without results: answer them first
            yield self._act_turn(waiting)
            return
        if not history:
            raise ValueError(f"agent {self.agent.name!r} has no conversation for the model")
        if is_refusal(history[-1]):  # refused already (the step ran again, or a run goes on)
            yield self._finish(run, LoopStop.REFUSAL, history[-1], refusal=history[-1].text)
            return
        if history[-1].role == "assistant":  # answered already (the step ran again)
            for value in self._answer(run, history[-1]):
                yield value
            return
        await auto_checkpoint(self.agent, context)  # what a retry of this call starts from
        sent = self._with_instructions(history)
        window = await context.window_of(sent)
        stop = self._limit(run, window.tokens)
        if stop is not None:
            yield self._finish(run, stop, None)
            return
        run.steps += 1
        step = run.steps
        yield StepStarted(step, window)
        response: ModelResponse | None = None
        tools = self.tools
        # Offered while the model can see a stub, or a search hit that names one (an
        # archived stub): the window's (bounded) messages are scanned, not the whole
        # history (which would cost every step time in its length).
        if self._read_tool is not None and (
            offloaded_handles(window.messages) or names_offloaded(window.messages)
        ):
            tools = [*tools, self._read_tool]
        if self._search_tool is not None and _leaves_out(context, sent, window.messages):
            tools = [*tools, self._search_tool]
        replies = call_model(
            self.model,
            window,
            tools,
            self._call_settings,
            self.retry,
            streaming=run.streaming,
            step=step,
            owner=self,
        )
        async for event in replies:
            if isinstance(event, ModelResponse):
                response = event
            else:
                yield event
        assert response is not None  # call_model ends with one, or raises
        reply: Message | None = response.message
        if response.refusal is not None:
            reply = stored_refusal(response.refusal)
        elif response.hit_length_limit:
            reply = kept_of_cut_reply(response.message)
        if reply is not None:
            yield ContextItem(content=reply)  # stored before anything else can fail
        record = UsageRecord(
            response.usage,
            run_id=self.agent.run_id,
            model=response.model,
            estimated_input_tokens=window.tokens,
            window=WindowRecord.of(
                repr(context.strategy),
                sent,
                window.messages,
                unstored=len(sent) - len(history),
                summary=summary_mark(history),
            ),
        )
        if self._usage_into is None:
            await context.store.record_usage(record)
        else:  # a sub-agent's call: recorded once, in its caller's session, linked
            await self._usage_into.record(record)
        run.usage += response.usage
        yield ModelReplied(step, response, window.tokens)
        if response.refusal is not None:
            yield self._finish(run, LoopStop.REFUSAL, reply, refusal=response.refusal)
        elif reply is None or response.hit_length_limit:
            yield self._finish(run, LoopStop.LENGTH, reply)
        elif reply.tool_uses:
            run.fresh_calls = reply.tool_uses
            yield self._act_turn(reply.tool_uses)
        else:
            for value in self._answer(run, reply):
                yield value

    def _act_turn(self, calls: Sequence[ToolUseBlock]) -> Turn:
        """The step that runs `calls`, named by their ids: the store holds them."""
        return Turn(
            ACT, kwargs={"call_ids": [call.id for call in calls]}, timeout=self.limits.step_timeout
        )

    def _with_instructions(self, history: list[Message]) -> list[Message]:
        # Before the strategy runs: its budget covers the instructions too, and it
        # keeps leading system messages at the head of every window.
        if self._instructions is None:
            return history
        return [self._instructions, *history]

    def _limit(self, run: _Run, window_tokens: int) -> LoopStop | None:
        limits = self.limits
        if limits.max_steps is not None and run.steps >= limits.max_steps:
            return LoopStop.MAX_STEPS
        if (
            limits.max_tokens is not None
            and run.usage.total_tokens + window_tokens > limits.max_tokens
        ):
            return LoopStop.TOKEN_BUDGET
        if limits.max_cost is not None and limits.pricing is not None:
            spent = limits.pricing.cost(run.usage) + limits.pricing.cost(Usage(window_tokens))
            if spent > limits.max_cost:
                return LoopStop.COST_BUDGET
        return None

    def _finish(
        self,
        run: _Run,
        reason: LoopStop,
        message: Message | None,
        *,
        pending: tuple[ToolUseBlock, ...] = (),
        output: Any = None,
        refusal: str | None = None,
    ) -> LoopFinished:
        run.finished = LoopFinished(
            reason, message, run.steps, run.usage, pending=pending, output=output, refusal=refusal
        )
        return run.finished

    def _answer(self, run: _Run, reply: Message) -> list[Any]:
        """What an answer ends with: the finish, or (not fitting `output_type`) a correction.

        A refused answer stays in the conversation, followed by a user message
        saying what was wrong, and the model is asked again.

        Raises:
            OutputValidationError: The answer does not fit, and no retries are left.
        """
        if self._output is None:
            return [self._finish(run, LoopStop.ANSWER, reply)]
        value, problems = self._output.parse(reply.text)
        if not problems:
            run.refused_answers = 0
            return [self._finish(run, LoopStop.ANSWER, reply, output=value)]
        run.refused_answers += 1
        if run.refused_answers > self.limits.output_retries:
            raise OutputValidationError(reply.text, problems, run.refused_answers)
        return [ContextItem(content=self._output.correction(problems)), self._think_turn()]

    async def _act(
        self, call_ids: list[str], approvals: dict[str, Any] | None
    ) -> AsyncGenerator[Any, None]:
        run = self._state()
        context = self._context
        store = await context.ready()
        fresh, run.fresh_calls = run.fresh_calls, ()
        if fresh and [call.id for call in fresh] == call_ids:
            todo = list(fresh)  # this run's think stored them just now: none answered yet
            journal = await Journal.of(context, None)  # nor started
        else:  # restored, or run again after an interruption: the store says what is left
            named = set(call_ids)
            todo = [c for c in unanswered_calls(await context.history()) if c.id in named]
            journal = await Journal.of(context, todo)
        for call_id, held in (approvals or {}).items():  # decisions an older version saved
            if held and any(call.id == call_id for call in todo):
                legacy = ApprovalDecision(bool(held["approved"]), held.get("reason"))
                await store.record_decision(call_id, legacy)
        tools = self._by_name
        if self._read_tool is not None and any(call.name == READ_TOOL_RESULT for call in todo):
            tools = {**tools, READ_TOOL_RESULT: self._read_tool}  # listed only when offered
        if self._search_tool is not None and any(call.name == SEARCH_HISTORY for call in todo):
            tools = {**tools, SEARCH_HISTORY: self._search_tool}
        checked = [check_call(call, tools) for call in todo]
        decided = await decisions_of(checked, store)
        undecided = tuple(pending_of(todo, decided))
        if undecided:  # none of the reply's calls runs until every one is decided
            run.awaiting = Turn(  # kept on the agent: the calls wait, no one has to answer them
                ACT,
                kwargs={
                    "call_ids": [call.id for call in todo],
                    "approvals": dict.fromkeys(decided),
                },
                timeout=self.limits.step_timeout,
            )
            for call in undecided:
                yield ToolApprovalRequired(run.steps, call)
            reply = _reply_of(await context.history(), undecided[0])
            yield self._finish(run, LoopStop.APPROVAL, reply, pending=undecided)
            return
        values = run_calls(
            self.agent,
            checked,
            run.steps,
            parallel=self.tool_policy.parallel,
            seconds=self.tool_policy.timeout,
            finish=self._finish_result,
            journal=journal,
            answered=refused_results(checked, decided),
        )
        async with closing(values):
            async for value in values:
                yield value
        yield self._think_turn()


def _leaves_out(context: ContextConfig, sent: list[Message], window: list[Message]) -> bool:
    """Whether the model cannot see all of a conversation it could search: the window is
    not the stored messages as they are (some left out or edited), or a compaction
    archived some (the history then starts with its summary)."""
    if context.retention is HistoryRetention.NONE:
        return False
    if len(window) != len(sent) or any(a is not b for a, b in zip(window, sent, strict=True)):
        return True
    return any(is_summary(message) for message in sent[:SUMMARY_HEAD])


def _reply_of(history: list[Message], call: ToolUseBlock) -> Message | None:
    """The assistant message that made `call` (the text the model wrote beside it)."""
    for message in reversed(history):
        if message.role == "assistant" and any(c.id == call.id for c in message.tool_uses):
            return message
    return None


def _user_message(prompt: object) -> Message:
    if isinstance(prompt, str):
        return Message("user", prompt)
    if isinstance(prompt, Message) and prompt.role == "user":
        return prompt
    raise ValueError(
        f"a ModelLoop prompt is user text or a user Message, not {prompt!r}; "
        "put instructions in ModelLoop(instructions=...)"
    )
