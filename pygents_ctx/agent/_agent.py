"""The `Agent`: runs a queue of turns and routes what they produce by type.

| produced value | effect | yielded by `run()`? |
|---|---|---|
| `Turn` | `put()` on this agent, runs in the same `run()` | no |
| `ContextItem` without `id` | appended to `context_queue` | no |
| `ContextItem` with an `id` | added to `context_pool` | no |
| anything else | - | yes, as `(turn, value)` |

Example:
    >>> import asyncio
    >>> from pygents_ctx import Agent, ContextItem, Turn, tool
    >>> @tool
    ... async def note(text: str) -> ContextItem[str]:
    ...     return ContextItem(content=text)
    >>> async def main() -> list[str]:
    ...     agent = Agent("scribe", "Takes notes", [note])
    ...     await agent.put(Turn(note, kwargs={"text": "hello"}))
    ...     async for _ in agent.run():
    ...         pass
    ...     return [item.content for item in agent.context_queue]
    >>> print(*asyncio.run(main()))
    hello
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Iterator, Mapping
from contextlib import aclosing
from contextvars import Token
from typing import Any, Final, TypeAlias, cast

from pygents_ctx._json import JsonSerializable, loads, refuses_deep_nesting
from pygents_ctx._resources import (
    NO_RESOURCES,
    RunScope,
    check_resources,
    close_resources,
    open_resources,
)
from pygents_ctx.agent._branching import (
    BranchMerge,
    Lineage,
    OnConflict,
    merge_branch,
    unique_branch_name,
)
from pygents_ctx.agent._checkpoints import (
    Rewind,
    list_checkpoints,
    rewind_agent,
    save_checkpoint,
)
from pygents_ctx.agent._checks import check_name, index_tools, refused_tool, require_tools
from pygents_ctx.agent._names import (
    AgentNames,
    AgentRegistryBase,
    open_names,
    set_process_default,
)
from pygents_ctx.agent._run_state import RunState
from pygents_ctx.agent._saved import read_saved_agent, save_agent, saved_user_values
from pygents_ctx.context import ContextItem, ContextPool, ContextQueue
from pygents_ctx.context._shared import INHERIT, Inherit
from pygents_ctx.context.config import ContextConfig, PromptWindow
from pygents_ctx.context.messages import Message
from pygents_ctx.context.stores.base import CheckpointInfo
from pygents_ctx.errors import SafeExecutionError
from pygents_ctx.hooks._calls import CONTEXT_READERS, CURRENT_CONTEXT, tag_set
from pygents_ctx.hooks._dispatch import (
    AgentHookList,
    HookSlot,
    TurnHookList,
    enter_hooks,
    fire,
    hooks_given,
    leave_hooks,
)
from pygents_ctx.hooks._hooks import AgentHook, Hook, HookFunction, HookRegistry, TurnHook
from pygents_ctx.tools import Tool, ToolRegistry
from pygents_ctx.tools._errors import OnToolError, check_on_tool_error
from pygents_ctx.turns import Turn

__all__ = ["Agent", "BranchMerge"]


_LET_THE_LOOP_RUN: Final = 256  # turns between two turns of the event loop in `run()`


def _hook_names(agent: Agent) -> HookRegistry:
    """Where an agent's instance decorators name their hooks: its own registry's hooks."""
    return agent.registry.hooks


class Agent(JsonSerializable):
    """Runs turns in order and routes each produced value by its type.

    Args:
        name: A unique name; the agent registers itself in `AgentRegistry`
            (in the current `AgentScope`, if any: names per request).
        description: What the agent does.
        tools: The tools its turns may use (a root tool brings its subtools).
        context_pool: Its keyed store (default: an unbounded `ContextPool()`).
        context_queue: Its working memory (default `ContextQueue(limit=10)`).
        tags: Tags that global hooks can filter on.
        context: Where its conversation is kept (`ContextConfig`): each `Message`
            a tool returns in a `ContextItem` without an id goes to the queue
            *and* to the store, tagged with the run's id, and `prompt_window()`
            builds the model's view of it. None: no conversation store.
        resources: Values its tools and hooks receive by type: a parameter
            annotated with an `@injectable` class gets `resources[cls]` (a
            `RunResource` there gives each run its own value, e.g. a task store
            the board of this agent's conversation). Not saved by `to_dict()`.
        on_tool_error: What a turn that fails (its tool raised, it timed out,
            its arguments were refused) does to `run()`: `"raise"` ends the
            run with the exception; `"return"` yields `(turn, exception)`,
            as if the tool had returned it, and goes on with the next turn.
            A tool's own `on_tool_error` wins over this.
        registry: The `AgentRegistry` to register in, whose `tools` its tools
            must be registered in and whose global hooks its events (and its
            turns') fire, wherever it runs (None: the current one, the process
            default unless `AgentRegistry.use()` says otherwise; in the current
            `AgentScope` when it is that registry's).
        replace: Take the name from an idle agent that holds it (what a re-run
            notebook cell wants), unless another asyncio task that is still
            running registered it; without it a taken name is refused, as in pygents.

    Agent hooks: `before_turn(agent)`, `after_turn(agent, turn)`,
    `on_turn_value(agent, turn, value)` (every produced value, after routing
    and before yielding), `before_put(agent, turn)`, `after_put(agent, turn)`,
    `on_pause(agent)` (when a run stops at the pause), `on_resume(agent)`
    (when it goes on). Turn hooks attached to the agent (`@agent.on_error`,
    ...) apply to every turn it runs.

    While the agent runs or is paused, assigning its attributes raises
    `SafeExecutionError` (as in pygents), and so does starting `run()` again
    while it runs; otherwise it takes any of them, `name` included (the
    registry follows).

    Raises:
        ValueError: The name is empty or taken (see `replace`), `on_tool_error`
            is not one of its values, or a tool is not the registered instance.
        UnregisteredToolError: A tool is not a registered `@tool` tool.
    """

    before_turn = HookSlot(AgentHook.BEFORE_TURN, names=_hook_names)
    after_turn = HookSlot(AgentHook.AFTER_TURN, names=_hook_names)
    on_turn_value = HookSlot(AgentHook.ON_TURN_VALUE, names=_hook_names)
    before_put = HookSlot(AgentHook.BEFORE_PUT, names=_hook_names)
    after_put = HookSlot(AgentHook.AFTER_PUT, names=_hook_names)
    on_pause = HookSlot(AgentHook.ON_PAUSE, names=_hook_names)
    on_resume = HookSlot(AgentHook.ON_RESUME, names=_hook_names)
    before_run = HookSlot(TurnHook.BEFORE_RUN, "turn_hooks", _hook_names)
    after_run = HookSlot(TurnHook.AFTER_RUN, "turn_hooks", _hook_names)
    on_timeout = HookSlot(TurnHook.ON_TIMEOUT, "turn_hooks", _hook_names)
    on_error = HookSlot(TurnHook.ON_ERROR, "turn_hooks", _hook_names)
    on_complete = HookSlot(TurnHook.ON_COMPLETE, "turn_hooks", _hook_names)

    _state: RunState
    _tools: dict[str, Tool[..., Any]]
    _queued: deque[Turn]  # the queued turns, next first
    _names: AgentNames  # the namespace it is registered in (see AgentScope)
    _lineage: Lineage | None = None  # a branch's parent and starting point
    _branches_made = 0
    name: str
    description: str
    tools: list[Tool[..., Any]]
    context_queue: ContextQueue[Any]
    context_pool: ContextPool[Any]
    context: ContextConfig | None
    resources: dict[type, object]
    tags: frozenset[str]
    _on_tool_error: OnToolError = "raise"
    hooks: list[Hook]  # an AgentHookList: __setattr__ makes one of what is given
    turn_hooks: list[Hook]  # a TurnHookList, likewise

    def __init__(
        self,
        name: str,
        description: str,
        tools: Iterable[Tool[..., Any]],
        context_pool: ContextPool[Any] | None = None,
        context_queue: ContextQueue[Any] | None = None,
        tags: Iterable[str] | None = None,
        *,
        context: ContextConfig | None = None,
        resources: Mapping[type, object] | None = None,
        on_tool_error: OnToolError = "raise",
        registry: AgentRegistry | None = None,
        replace: bool = False,
    ) -> None:
        if registry is not None and not isinstance(registry, AgentRegistry):
            raise TypeError(f"Agent registry must be an AgentRegistry, not {registry!r}")
        # Where it will be registered (nothing is until every check has passed).
        names = open_names(registry)
        object.__setattr__(self, "_names", names)
        object.__setattr__(self, "_state", RunState())
        object.__setattr__(self, "_queued", deque())
        check_name(name)
        if not isinstance(description, str):
            raise TypeError(f"Agent description must be a string, not {description!r}")
        if context_queue is not None and not isinstance(context_queue, ContextQueue):
            raise TypeError(f"context_queue must be a ContextQueue, not {context_queue!r}")
        if context_pool is not None and not isinstance(context_pool, ContextPool):
            raise TypeError(f"context_pool must be a ContextPool, not {context_pool!r}")
        self.name = name
        self.description = description
        self.tools = list(tools)  # checked and indexed by __setattr__
        self.context_queue = ContextQueue(limit=10) if context_queue is None else context_queue
        self.context_pool = ContextPool() if context_pool is None else context_pool
        self.tags = tag_set(tags)
        self.context = context
        self.resources = resources  # type: ignore[assignment]  # checked and copied
        self.hooks = AgentHookList()
        self.turn_hooks = TurnHookList()
        # Defaults are class attributes: an agent made often (a branch) sets neither.
        if on_tool_error != "raise":
            checked = check_on_tool_error(on_tool_error, f"agent {name!r}")
            object.__setattr__(self, "_on_tool_error", checked)
        names.registry._add(self, names, weak=False, replace=replace)

    # -- guarded attributes --------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        state: RunState = self._state
        if state.running or state.paused:  # pygents refuses both; its words first
            when = "running" if state.running else "paused"
            fix = "before run() or after it ends" if state.running else "after resume()"
            raise SafeExecutionError(
                f"Cannot change property {name!r} while the agent is {when} "
                f"(agent {self.name!r}); set it {fix}"
            )
        if name == "tools":
            value, index = index_tools(value, self._names.registry.tools)
            pending = {turn._declared.tool for turn in self._queued}
            if state.current_turn is not None:
                pending.add(state.current_turn.tool)
            require_tools(index, pending, f"agent {self.name!r}")
            object.__setattr__(self, "_tools", index)
        elif name == "tags":
            value = tag_set(value)
        elif name == "hooks":
            value = AgentHookList.of(value)
        elif name == "turn_hooks":
            value = TurnHookList.of(value)
        elif name == "context" and value is not None and not isinstance(value, ContextConfig):
            raise TypeError(f"context must be a ContextConfig or None, not {value!r}")
        elif name == "resources":
            value = check_resources(value, f"agent {self.name!r}")
        elif name == "name":
            check_name(value)
            old = self.__dict__.get("name")
            if old is not None and value != old:
                self._names.registry._rename(self, self._names, old, value)
        object.__setattr__(self, name, value)

    @property
    def on_tool_error(self) -> OnToolError:
        """What a failing turn does to `run()`: `"raise"` or `"return"` (see the class)."""
        return self._on_tool_error

    @on_tool_error.setter
    def on_tool_error(self, value: OnToolError) -> None:
        checked = check_on_tool_error(value, f"agent {self.name!r}")
        object.__setattr__(self, "_on_tool_error", checked)

    @property
    def registry(self) -> AgentRegistry:
        """The `AgentRegistry` the agent is registered in (its tools are that registry's)."""
        return cast("AgentRegistry", self._names.registry)

    @property
    def is_paused(self) -> bool:
        """Whether the agent is paused (it then waits before its next turn)."""
        return self._state.paused

    @property
    def is_running(self) -> bool:
        """Whether `run()` is in progress."""
        return self._state.running

    @property
    def current_turn(self) -> Turn | None:
        """The turn in flight, if any."""
        return self._state.current_turn

    @property
    def turns(self) -> list[Turn]:
        """A copy of the queued turns, next first (the current turn not included)."""
        return list(self._turns)

    @property
    def queue(self) -> list[Turn]:
        """The queued turns, as `turns` gives them (the name they are saved under)."""
        return list(self._turns)

    def __iter__(self) -> Iterator[Turn]:
        """The queued turns, next first, as they are now (taking none off the queue)."""
        return iter(list(self._turns))

    @property
    def _turns(self) -> deque[Turn]:
        """The queued turns, next first (the deque itself, not a copy)."""
        return self._queued

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, tools={[t.key for t in self.tools]!r})"

    # -- turns ---------------------------------------------------------------

    def _returns_error(self, turn: Turn) -> bool:
        """Whether a failure of `turn` is its value (else it ends the run): `on_tool_error`."""
        policy = turn._declared.tool.on_tool_error or self.on_tool_error
        return policy == "return"

    def _check_turn(self, turn: Turn) -> None:
        if not isinstance(turn, Turn):
            raise TypeError(f"agent {self.name!r} takes Turn objects, not {turn!r}")
        held = self._tools.get(turn.tool_name)
        if held is not turn.tool:
            raise refused_tool(self.name, held, turn.tool)

    async def put(self, turn: Turn) -> None:
        """Queue `turn` to run after the ones already queued.

        Raises:
            ValueError: The agent does not have the turn's tool.
        """
        self._check_turn(turn)
        events = enter_hooks(self._names.registry.hooks)
        try:
            await fire(AgentHook.BEFORE_PUT, self.hooks, self.tags, self, turn)
            self._turns.append(turn)
            await fire(AgentHook.AFTER_PUT, self.hooks, self.tags, self, turn)
        finally:
            leave_hooks(events)

    async def send(self, name: str, turn: Turn) -> None:
        """Queue `turn` on the agent registered as `name`, as seen from this agent's scope.

        The name is looked up where this agent is registered (its `AgentScope`,
        then the scopes around it, then the global agents), wherever the call
        runs: agents of one request reach each other.

        Raises:
            UnregisteredAgentError: No agent has that name.
            ValueError: That agent does not have the turn's tool.
        """
        await AgentRegistry._find(name, self._names).put(turn)

    def pause(self) -> None:
        """Stop before the next turn (the current one finishes). Idempotent.

        A plain call, legal at any time: an idle agent's next `run()` waits at
        the pause until `resume()`. A run that stops at the pause fires
        `on_pause` there (before the next `before_turn`), and `on_resume` when
        it goes on.
        """
        self._state.pause()

    def resume(self) -> None:
        """Let a paused agent go on. Idempotent."""
        self._state.resume()

    async def _wait_while_paused(self) -> None:
        """A run's stop at the pause: `on_pause`, the wait for `resume()`, `on_resume`."""
        events = enter_hooks(self._names.registry.hooks)
        try:
            await fire(AgentHook.ON_PAUSE, self.hooks, self.tags, self)
            await self._state.gate.wait()
            await fire(AgentHook.ON_RESUME, self.hooks, self.tags, self)
        finally:
            leave_hooks(events)

    @property
    def run_id(self) -> str | None:
        """The id of the run in progress (a fresh one per `run()`), None when idle."""
        return self._state.run_id

    async def prompt_window(self) -> PromptWindow:
        """The window for the next model call: the context strategy's view of the stored history.

        Raises:
            ValueError: The agent has no `context`.
        """
        if self.context is None:
            raise ValueError(
                f"agent {self.name!r} has no context store; "
                "create it with context=ContextConfig(store, strategy)"
            )
        return await self.context.prompt_window()

    async def _route(self, value: Turn | ContextItem[Any]) -> None:
        """Send a `Turn` or `ContextItem` where its type says."""
        if isinstance(value, Turn):
            await self.put(value)
        elif value.id is None:
            context = self.context
            if context is not None and isinstance(value.content, Message):
                # The store first: a message is durable before anything can fail.
                await context.record(value.content, self._state.run_id or "")
            await self.context_queue.append(value)
        else:
            await self.context_pool.add(value)

    async def run(self) -> AsyncIterator[tuple[Turn, Any]]:
        """Run queued turns until none is left, yielding `(turn, value)` pairs.

        Values are routed as they are produced (each yielded value of a
        generator tool on its own); only values that are not a `Turn` or a
        `ContextItem` are yielded. While paused, the agent waits before its
        next turn until `resume()` (a paused agent with nothing to run returns).

        Raises:
            SafeExecutionError: The agent is already running.
            Exception: Whatever a turn raises (`TurnTimeoutError` and
                `ToolArgumentsError` included), unless `on_tool_error` (the
                tool's, else the agent's) is `"return"`: the run then yields
                `(turn, exception)` and goes on.
        """
        state = self._state
        if state.running:
            raise SafeExecutionError(
                f"agent {self.name!r} is running; run() cannot start again until this run ends"
            )
        state.running = True
        state.run_id = run_id = ContextConfig.new_run_id()
        try:
            resources, opened, scope = self._open_resources(run_id)
            context = (self.context_queue, self.context_pool, opened)
            finished = 0
            while (turn := await self._next_turn()) is not None:
                try:
                    if turn._declared.tool.is_generator:
                        async with aclosing(self._generator_turn(turn, context)) as values:
                            async for value in values:
                                yield turn, value
                    else:
                        value = await self._coroutine_turn(turn, context)
                        if value is not _ROUTED_AWAY:
                            yield turn, value
                    await self._after_turn(turn, context)
                    finished += 1
                    if finished % _LET_THE_LOOP_RUN == 0:
                        # A turn's timeout is a timer on the event loop, cancelled when the
                        # turn ends; the loop drops cancelled timers only when it runs, so
                        # turns that never suspend would keep them all until the run ends.
                        await asyncio.sleep(0)
                except asyncio.CancelledError:
                    raise  # interrupted, not finished: it stays current and runs first next time
                except BaseException:
                    state.current_turn = None
                    raise
            if scope is not None:  # a normal end: run resources close (a board settles)
                await close_resources(resources, opened, scope)
            if self.context is not None:  # a normal end: the retention applies
                await self.context.end_run(run_id)
        finally:
            state.running = False
            state.run_id = None

    def _open_resources(
        self, run_id: str
    ) -> tuple[Mapping[type, object], Mapping[type, object], RunScope | None]:
        """This run's resources: as given, as opened for the run, and the run's scope
        (None when no resource is given, then nothing is opened or closed)."""
        resources, opened, scope = self.resources, NO_RESOURCES, None
        if resources:
            conversation = self.name if self.context is None else self.context.session_id
            scope = RunScope(self.name, conversation, run_id)
            opened = open_resources(resources, scope)
        if self.context is not None and ContextConfig not in opened:
            # A parameter annotated ContextConfig receives the agent's conversation.
            opened = {**opened, ContextConfig: self.context}
        return resources, opened, scope

    async def _next_turn(self) -> Turn | None:
        """The turn to run next, made current (waiting at a pause first); None when none is left.

        A turn is current already only when restored (or interrupted) as such.
        """
        state = self._state
        while True:
            turn = state.current_turn
            if turn is None and not self._turns:
                return None  # nothing left: a pause does not hold an idle run open
            if state.paused:
                await self._wait_while_paused()
                continue  # the queue may have changed meanwhile
            if turn is None:
                turn = state.current_turn = self._turns.popleft()
            return turn

    def _enter(self, context: tuple[Any, ...]) -> _Entered | None:
        """Enter this agent's turn: `context` (its queue, pool and resources) becomes what
        tools and hooks reading their agent's find, and its registry the one whose global
        hooks its events and its turns' fire (see `enter_hooks`); None when there is nothing
        to set (nothing in the process reads the context, the registry is current)."""
        read = CURRENT_CONTEXT.set(context) if CONTEXT_READERS.exist else None
        events = enter_hooks(self._names.registry.hooks)
        return None if read is None and events is None else (read, events)

    def _turn_hooks(self, turn: Turn) -> list[Hook]:
        """The hooks watching a run of `turn`: its own, then the agent's turn hooks."""
        own = turn._own_hooks
        return own + self.turn_hooks if self.turn_hooks else own

    async def _coroutine_turn(self, turn: Turn, context: tuple[Any, ...]) -> Any:
        """Run the current turn of a coroutine tool: `before_turn`, the run, its value
        routed and `on_turn_value`; the value for the caller, or `_ROUTED_AWAY`.

        Under `on_tool_error="return"` a failure is the value. The turn is no
        longer current once it has its value: saved then, the agent does not run
        it again.
        """
        entered = self._enter(context)
        try:
            await fire(AgentHook.BEFORE_TURN, self.hooks, self.tags, self)
            try:
                value = await turn._returning(self._turn_hooks(turn))
            except Exception as exc:
                if not self._returns_error(turn):
                    raise
                value = exc
            self._state.current_turn = None
            return value if await self._produced(turn, value) else _ROUTED_AWAY
        finally:
            _leave(entered)

    async def _generator_turn(
        self, turn: Turn, context: tuple[Any, ...]
    ) -> AsyncGenerator[Any, None]:
        """Run the current turn of a generator tool: `before_turn`, then each value
        routed and `on_turn_value`; yields those for the caller.

        Under `on_tool_error="return"` a failure is the last value, given once the
        turn has ended. The caller's code runs outside this agent's context.
        """
        entered = self._enter(context)
        try:
            await fire(AgentHook.BEFORE_TURN, self.hooks, self.tags, self)
            values = turn._yielding(self._turn_hooks(turn))
            async with aclosing(values):
                ended = False
                while not ended:
                    try:
                        value = await anext(values)
                    except StopAsyncIteration:
                        break
                    except Exception as exc:  # the turn's failure (not the routing's)
                        if not self._returns_error(turn):
                            raise
                        value, ended = exc, True
                    if await self._produced(turn, value):
                        _leave(entered)
                        entered = None
                        yield value
                        entered = self._enter(context)
            self._state.current_turn = None
        finally:
            _leave(entered)

    async def _produced(self, turn: Turn, value: Any) -> bool:
        """Route a `Turn` or `ContextItem` where its type says, then fire `on_turn_value`;
        whether the caller gets the value (it was not routed)."""
        routed = isinstance(value, _ROUTED)
        if routed:
            await self._route(value)
        await fire(AgentHook.ON_TURN_VALUE, self.hooks, self.tags, self, turn, value)
        return not routed

    async def _after_turn(self, turn: Turn, context: tuple[Any, ...]) -> None:
        """Fire `after_turn`, in this agent's context."""
        entered = self._enter(context)
        try:
            await fire(AgentHook.AFTER_TURN, self.hooks, self.tags, self, turn)
        finally:
            _leave(entered)

    # -- branching and saving ------------------------------------------------

    def branch(
        self,
        name: str | None = None,
        description: str | None = None,
        tools: Iterable[Tool[..., Any]] | None = None,
        hooks: list[Hook] | Inherit | None = INHERIT,
    ) -> Agent:
        """An independent child agent for a sub-task; `merge()` brings its results back.

        The child gets copies of the queued turns, `context_queue.branch()`,
        `context_pool.branch()`, and this agent's hooks, turn hooks and tags,
        unless overridden. Neither side sees the other's later changes, and no
        hooks fire while copying. With a `context`, the child gets its own fork
        of the transcript (`ContextConfig.branch()`, forked when first used), so
        `ModelLoop(agent.branch(), model)` runs as it is. It shares `resources`.
        It is registered weakly (in the current `AgentScope`): its name is given
        up when nothing references it, or at the end of `async with agent.branch()`.

        Args:
            name: The child's name (None: `"<this agent's name>/<n>"`, `n`
                counting this agent's branches from 1).
            description: Its description (None: this agent's).
            tools: Its tools (None: this agent's).
            hooks: Its agent hooks (default: a copy of this agent's; None or
                `[]`: none).

        A branch copies the queued turns (unrun, with their hooks) and shares
        the queue's and pool's items until it needs its own (see the Performance docs).

        Raises:
            ValueError: `name` is taken, or `tools` lacks a tool of a queued turn.
        """
        registry = self.registry
        # Tools given are checked before anything is named; this agent's own, when they were
        # given to it (with every queued turn's tool among them), and by the child's __init__.
        given = None if tools is None else index_tools(tools, registry.tools)
        names, made = registry._open_names(), self._branches_made
        if name is None:
            name, made = unique_branch_name(self.name, made, names)
        else:
            registry._check_free(name, names)
        if given is not None:
            pending = {turn._declared.tool for turn in self._queued}
            require_tools(given[1], pending, f"branch {name!r}")
        turns = [turn.copy() for turn in self._queued]
        child = Agent(
            name,
            self.description if description is None else description,
            self.tools if given is None else given[0],
            context_queue=self.context_queue.branch(),
            context_pool=self.context_pool.branch(),
            tags=self.tags,
            context=None if self.context is None else self.context.branch(),
            resources=self.resources,
            on_tool_error=self._on_tool_error,
            registry=registry,
        )
        names.put(name, child, weak=True)
        object.__setattr__(self, "_branches_made", made)
        object.__setattr__(child, "_lineage", Lineage(self, child))
        child.hooks = self.hooks if isinstance(hooks, Inherit) else hooks or []  # copied
        child.turn_hooks = self.turn_hooks
        child._queued.extend(turns)
        return child

    async def merge(self, branch: Agent, *, on_conflict: OnConflict = "raise") -> BranchMerge:
        """Bring back what `branch` (made by `self.branch()`) produced since it was made.

        The pool items it added or replaced and the queue items it appended
        (not its transcript's `Message`s), this agent's hooks firing as for
        any add and append. The branch's usage records are reported, not
        moved: a model call counts once, in the session that made it (the
        branch's forked transcript, which starts with none of this agent's).
        An id
        both sides set is a conflict: `on_conflict="raise"` refuses the merge,
        `"branch"` takes the branch's item, `"parent"` keeps this agent's. A
        branch merges once, when idle; this agent may be running.

        Raises:
            TypeError: `branch` is not an `Agent`.
            ValueError: `branch` is not a branch of this agent or was merged
                already, ids conflict under `on_conflict="raise"`, or
                `on_conflict` is not one of its values. Nothing changed.
            SafeExecutionError: `branch` is running.
        """
        if not isinstance(branch, Agent):
            raise TypeError(f"Agent.merge takes a branch (an Agent), not {type(branch).__name__}")
        return await merge_branch(self, branch, on_conflict)

    async def checkpoint(self) -> int:
        """Save the agent's queued turns, queue items and pool items in its conversation's
        store, at the current end of the conversation; the number of messages it holds.

        `rewind(to=that number)` later gives the agent this state back. A
        second checkpoint at the same point replaces the first. The store keeps
        each distinct state once (SQLite and PostgreSQL share its bytes between
        checkpoints and forks); a fork at or after the point has it too, and a
        rewind before it, `clear` or a compaction that archives past it drops it.
        A `ModelLoop` whose context has `checkpoints=True` calls this for you
        before each new prompt and each model call.

        Raises:
            ValueError: The agent has no `context`, or one with
                `HistoryRetention.NONE` (no store); nothing was written.
            TypeError: A turn's arguments or an item's content is not JSON
                (the message names it); nothing was written.
            NotImplementedError: The store keeps no checkpoints (a store of
                your own without `save_checkpoint`).

        Examples:
            >>> import asyncio
            >>> from pygents_ctx import ContextConfig, ContextItem, Message
            >>> async def main():
            ...     agent = Agent("notes", "keeps notes", [], context=ContextConfig.default())
            ...     await agent.context.store.append(Message("user", "note this"))
            ...     await agent.context_pool.add(ContextItem("a note", "the note", id="n1"))
            ...     at = await agent.checkpoint()
            ...     await agent.context.store.append(Message("user", "and forget it"))
            ...     await agent.context_pool.remove("n1")
            ...     rewound = await agent.rewind(at)
            ...     return at, rewound, [item.id for item in agent.context_pool]
            >>> asyncio.run(main())
            (1, Rewind(removed=1, restored=True), ['n1'])
        """
        return await save_checkpoint(self)

    async def checkpoints(self) -> list[CheckpointInfo]:
        """The agent's checkpoints in its conversation's store, oldest message first.

        One per message the agent saved a state at (`checkpoint()`): the one
        `rewind(to=info.at)` restores. Each says its message (`at`), when it
        was taken and the size of the saved state; the states are not read.
        A rewind, `clear` or compaction that drops a checkpoint drops it from
        this list too.

        Raises:
            ValueError: The agent has no `context`, or one with
                `HistoryRetention.NONE` (no store).

        Examples:
            >>> import asyncio
            >>> from pygents_ctx import ContextConfig, Message
            >>> async def main():
            ...     agent = Agent("journal", "keeps a journal", [], context=ContextConfig.default())
            ...     await agent.checkpoint()
            ...     await agent.context.store.append(Message("user", "write this down"))
            ...     await agent.checkpoint()
            ...     return [info.at for info in await agent.checkpoints()]
            >>> asyncio.run(main())
            [0, 1]
        """
        return await list_checkpoints(self)

    async def rewind(self, to: int) -> Rewind:
        """Rewind the conversation to message `to`, and the agent with it where it can.

        The conversation keeps its oldest `to` live messages (`history[:to]`,
        as `ContextStore.rewind` does); the agent gets back the queued turns,
        queue items and pool items its checkpoint at that message saved
        (see `checkpoint()`), and the result says `restored=True`. Where the
        agent saved no checkpoint at message `to`, only the conversation is
        rewound: the agent keeps its turns, queue and pool as they are, and
        the result says `restored=False`; check it.

        Everything is checked before anything changes: `to`, the agent being
        idle, and the checkpoint (its agent, its turns' tools). The store's
        rewind is one transaction; if it fails, the agent is given back what
        it held. The queue and pool keep their limits, hooks, counter and
        selector, and no hook fires. Hold the session's lease (`lease()`)
        when other writers may change the conversation meanwhile.

        Args:
            to: How many of the oldest live messages to keep (0 to the count).

        Returns:
            The messages removed, and whether the agent's state was restored.

        Raises:
            TypeError: `to` is not an int.
            ValueError: `to` is negative or past the conversation's end, the
                agent has no context (or `HistoryRetention.NONE`), or its
                checkpoint at `to` is not one of its states or names a tool
                it no longer has; nothing changed.
            UnregisteredToolError: The checkpoint's turns name a tool no
                longer registered; nothing changed.
            SafeExecutionError: The agent is running or paused; nothing changed.
        """
        return await rewind_agent(self, to)

    async def __aenter__(self) -> Agent:
        """`async with agent.branch() as child:` (any agent works): forks its transcript now."""
        if self.context is not None:
            await self.context.ready()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Give up the agent's name (when it still holds it); the agent stays usable."""
        AgentRegistry._release(self, self._names)

    @classmethod
    def from_json(
        cls,
        data: bytes | str,
        *,
        context: ContextConfig | None = None,
        hooks: Iterable[HookFunction | Hook] | None = None,
        registry: AgentRegistry | None = None,
        replace: bool = False,
    ) -> Agent:
        """Rebuild an agent from `to_json()` output; the keywords as for `from_dict`.

        Raises:
            ValueError: The JSON is invalid or does not describe an agent (as
                for `from_dict`).
            UnregisteredToolError: A tool name is not registered.
            UnregisteredHookError: A hook name is neither given nor registered.
        """
        with hooks_given(hooks, f"Agent.from_json of {cls.__name__}"), _current(registry):
            return cls._from_saved(loads(data, cls.__name__), context, True, replace)

    def to_dict(self) -> dict[str, Any]:
        """The agent as plain data (see the Serialization docs for the shape).

        A turn in flight is saved as `current_turn` and runs first after restore.

        Raises:
            UnserializableHookError: A hook cannot be saved by name.
        """
        return self._saved(fresh=True)

    def _json_data(self) -> dict[str, Any]:
        return self._saved(fresh=False)

    @classmethod
    def _user_values(cls, data: dict[str, Any]) -> list[Any]:
        return saved_user_values(data)

    def _saved(self, fresh: bool) -> dict[str, Any]:
        """`to_dict()`; unless `fresh`, the turns share their containers (see `Turn._saved`).

        Hook names are checked in this agent's registry, where loading it looks them up.
        """
        entered = enter_hooks(self.registry.hooks)
        try:
            return save_agent(self, self._turns, self._state.current_turn, fresh)
        finally:
            leave_hooks(entered)

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        context: ContextConfig | None = None,
        hooks: Iterable[HookFunction | Hook] | None = None,
        registry: AgentRegistry | None = None,
        replace: bool = False,
    ) -> Agent:
        """Rebuild and register an agent saved by `to_dict()`. No hooks fire.

        Only `name`, `description` and `tool_names` are required. Everything is
        checked before the agent is registered, so a failure registers nothing.
        An agent saved with a `context` is given its store again through
        `context`, for the same session: it continues where it stopped.
        Saved hook names resolve to `hooks` (functions or `Hook`s, by name) first,
        then through `HookRegistry`: give here a hook defined inside `main()`.
        Tool and hook names are looked up in `registry` (None: the current
        one), and the agent is registered there; `replace` is as for `Agent`.

        Raises:
            ValueError: The data is malformed, the name is taken, or the saved
                agent had a context and `context` is missing or is for another session.
            UnregisteredToolError: A tool name is not registered.
            UnregisteredHookError: A hook name is neither given nor registered.
            TypeError: An element of `hooks` is not a hook or an async function.
        """
        with hooks_given(hooks, f"Agent.from_dict of {cls.__name__}"), _current(registry):
            return cls._from_saved(data, context, False, replace)

    @classmethod
    @refuses_deep_nesting("Agent")
    def _from_saved(
        cls, data: object, context: ContextConfig | None, parsed: bool, replace: bool
    ) -> Agent:
        """`from_dict`, in the current registry; `parsed` as for `Turn._from_saved`."""
        saved = read_saved_agent(data, context, parsed, ToolRegistry.current())
        # A subclass need not take `replace` (pygents' did not have it) unless it is used.
        replacing: dict[str, Any] = {"replace": True} if replace else {}
        try:
            agent = cls(
                saved.name,
                saved.description,
                saved.tools,
                context_queue=saved.queue,
                context_pool=saved.pool,
                tags=saved.tags,
                context=context,
                on_tool_error=saved.on_tool_error,
                **replacing,
            )
        except TypeError as exc:
            raise ValueError(f"{saved.label}: {exc}") from None
        saved.fill(agent, agent._queued, agent._state)
        return agent


# -- the registry of agents (public through pygents_ctx.registry) -------------


class AgentRegistry(AgentRegistryBase["Agent"]):
    """Every live agent by name, so agents can message each other; and the
    `ToolRegistry` and `HookRegistry` its agents' names are looked up in.

    `AgentRegistry()` makes an empty registry, with empty `tools` and `hooks`
    unless given; `with registry.use():` makes it current. Called on the
    class (`AgentRegistry.get(name)`), as pygents code does, the methods act
    on the current one: the process default, whose names are global as in
    pygents. A taken name is refused, unless `Agent(..., replace=True)` takes
    it from an idle agent (not one another running task registered). Inside
    an `AgentScope`, names are the scope's. Branches are registered weakly:
    unreferenced, they leave it.

    Args:
        tools: The tool registry of its agents (None: a new, empty one).
        hooks: The hook registry of its agents (None: a new, empty one).
    """


def _current(registry: AgentRegistry | None) -> contextlib.AbstractContextManager[object]:
    """`registry.use()`, unless `registry` is None or already current (in its scope, say)."""
    if registry is None or registry is AgentRegistry.current():
        return contextlib.nullcontext()
    if not isinstance(registry, AgentRegistry):
        raise TypeError(f"Agent registry must be an AgentRegistry, not {registry!r}")
    return registry.use()


# The process default: its names are the global ones, its tools and hooks the default
# ToolRegistry and HookRegistry (what pygents' class-level registries were).
set_process_default(AgentRegistry(tools=ToolRegistry.current(), hooks=HookRegistry.current()))

_ROUTED = (Turn, ContextItem)
_ROUTED_AWAY = object()  # what a turn's value is for the caller once routed: nothing


# What `Agent._enter` set, to undo: the context readers' token, and `enter_hooks`'s.
_Entered: TypeAlias = tuple[Token[Any] | None, Token[HookRegistry] | None]


def _leave(entered: _Entered | None) -> None:
    """Undo `Agent._enter`."""
    if entered is not None:
        read, events = entered
        leave_hooks(events)
        if read is not None:
            CURRENT_CONTEXT.reset(read)
